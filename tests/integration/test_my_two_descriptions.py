"""
tests/integration/test_my_two_descriptions.py: one MariaDB table version
described two ways, from the catalog (information_schema) and from a
binlog TABLE_MAP under binlog_row_metadata=FULL, must come out as the same
version: the same schema_key, the same Avro schema of the payload, the same
values.

A run writes changes with the catalog's description (the map matches it);
its checkpoint is then lost (as a kill -9 before the save loses it), and
while sluice is stopped a column is added: the replay starts with the
catalog ahead of the binlog, so the rows written before the ALTER are
described from their table map (sl_my_table_from_map, my_redescribe).  The
records the replay writes again, under the same uuid, must be identical to
the first run's (the property soak's seed 4204, mariadb/append/s3, found
two records with one uuid that differed, issue 17).

The table has a column of every type MariaDB 10.11 has, the string types in
latin1, utf8mb3, utf8mb4 and binary, and the cases whose catalog text and
map metadata differ in form: zerofill and unsigned floats, ENUM values that
contain "unsigned", wide CHAR and VARCHAR (their map lengths take two
bytes), BIT(64), generated and invisible columns.
"""

import json
import os

import unittest

import avro.datafile
import avro.io

from harness import records_for
from harness_mysql import MyTestCase
from test_my_type_matrix import TYPES

CHARSETS = ["latin1", "utf8mb3", "utf8mb4", "binary"]
STRINGS = ["char(5)", "varchar(20)", "tinytext", "text", "mediumtext", "longtext", "enum('x','y')", "set('x','y')"]

# (column, type, a value as SQL)
EXTRA = [
    ("f_u", "float unsigned", "1.5"),
    ("d_u", "double unsigned", "2.5"),
    ("dec65", "decimal(65,30)", "'-12345678901234567890123456789012345.123456789012345678901234567890'"),
    ("dec_zf", "decimal(5,0) zerofill", "42"),
    ("int_zf", "int zerofill", "7"),
    ("big_zf", "bigint unsigned zerofill", "8"),
    ("e_unsigned", "enum('unsigned','zerofill')", "'unsigned'"),
    ("s_unsigned", "set('unsigned','b')", "'unsigned,b'"),
    ("e_latin1", "enum('\u00e9t\u00e9','x') CHARACTER SET latin1", "'\u00e9t\u00e9'"),
    ("s_utf8mb4", "set('\u00fc','\U0001F600','z') CHARACTER SET utf8mb4", "'\u00fc,\U0001F600'"),
    ("bit64", "bit(64)", "b'1'"),
    ("dt3", "datetime(3)", "'2024-01-02 03:04:05.678'"),
    ("ts6", "timestamp(6) NULL DEFAULT NULL", "'2024-01-02 03:04:05.678901'"),
    ("t1", "time(1)", "'01:02:03.4'"),
    ("wide_char", "char(255) CHARACTER SET utf8mb4", "'w'"),
    ("wide_bin", "binary(255)", "x'01'"),
    ("wide_vc", "varchar(300) CHARACTER SET utf8mb4", "'wide'"),
    ("vc_ucs2", "varchar(10) CHARACTER SET ucs2", "'u'"),
    ("vc_utf16", "varchar(10) CHARACTER SET utf16", "'u'"),
    ("vc_utf32", "varchar(10) CHARACTER SET utf32", "'u'"),
    ("vc_ascii", "varchar(10) CHARACTER SET ascii", "'a'"),
    ("vc_uca", "varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci", "'u'"),
    ("geo", "point", "ST_GeomFromText('POINT(1 2)')"),
    ("geom", "geometry", "ST_GeomFromText('LINESTRING(0 0, 1 1)')"),
    ("js", "json", "'[1]'"),
    ("inv", "int INVISIBLE", "5"),
    ("gen_v", "int AS (id + 1) VIRTUAL", None),
    ("gen_s", "varchar(30) AS (concat('g', id)) PERSISTENT", None),
]


def columns():
    """[(name, type, value SQL or None)] of the wide table, id first."""
    cols = [("id", "int", None)]
    for name, coltype, v1, _ in TYPES:
        cols.append((f"v_{name}", coltype, v1))
    for cs in CHARSETS:
        for k, st in enumerate(STRINGS):
            value = "'x'" if "enum" in st or "set" in st else "'ab'"
            cols.append((f"s_{cs}_{k}", f"{st} CHARACTER SET {cs}", value))
    cols.extend(EXTRA)
    return cols


def written(root):
    """{uuid: [(schema_key, payload's Avro schema, record)]} of every record
    under root, read with python avro."""
    out = {}
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".avro"):
                continue
            with open(os.path.join(d, f), "rb") as fh:
                reader = avro.datafile.DataFileReader(fh, avro.io.DatumReader())
                schema = json.loads(reader.meta["avro.schema"])
                payload = [x for x in schema["fields"] if x["name"] == "payload"][0]
                for rec in reader:
                    out.setdefault(rec["uuid"], []).append((rec["schema_key"], payload, rec))
    return out


def wide_table():
    """(CREATE TABLE, [two INSERTs], UPDATE, DELETE, column names) of the
    table with every type."""
    cols = columns()
    named = [(n, v) for n, _, v in cols if v is not None]
    create = "CREATE TABLE td.w (" + ", ".join(f"`{n}` {t}" for n, t, _ in cols) + ", PRIMARY KEY (id))"
    inserts = ["INSERT INTO td.w (id, " + ", ".join(f"`{n}`" for n, _ in named) + ") VALUES "
               f"({i}, " + ", ".join(v for _, v in named) + ")" for i in (1, 10, 11)]
    return (create, inserts, "UPDATE td.w SET v_int = v_int + 1 WHERE id = 10", "DELETE FROM td.w WHERE id = 11",
            [n for n, _, _ in cols])


# the workload's wb (tests/integration/workload.py: a two-column key, a
# long text), and a table whose key is a UNIQUE NOT NULL one (no PRIMARY
# KEY: the catalog's COLUMN_KEY says PRI for it, as the map's key may)
OTHER_TABLES = {
    "wb": ("CREATE TABLE td.wb (k1 int, k2 varchar(20), v int NOT NULL, note longtext, PRIMARY KEY (k1, k2))",
           ["INSERT INTO td.wb VALUES (1, 'a', 0, 'n1')", "INSERT INTO td.wb VALUES (2, 'b', 0, REPEAT('n', 5000))"],
           "UPDATE td.wb SET v = v + 1, note = 'm' WHERE k1 = 1", "DELETE FROM td.wb WHERE k1 = 2",
           ["k1", "k2", "v", "note"]),
    "uq": ("CREATE TABLE td.uq (a int NOT NULL, b varchar(10) NOT NULL, v int, UNIQUE KEY (a, b))",
           ["INSERT INTO td.uq VALUES (1, 'a', 0)", "INSERT INTO td.uq VALUES (2, 'b', 0)"],
           "UPDATE td.uq SET v = v + 1 WHERE a = 1", "DELETE FROM td.uq WHERE a = 2",
           ["a", "b", "v"]),
}


# A UNIQUE key on a BLOB or TEXT: MariaDB keeps a hidden hash column for
# each (DB_ROW_HASH_1, ...), which information_schema does not list and the
# table map does (last, with its name): the map has more columns than the
# catalog.  Before the source counted the long unique keys, every run
# described the table from its first map, and the stream's records carried
# the hash columns, which the catalog's description (a backfill's) has not;
# on the replay the map's description must leave them out too.
LONG_UNIQUE = {
    "lu": ("CREATE TABLE td.lu (id int PRIMARY KEY, b blob, t text, UNIQUE KEY (b), UNIQUE KEY (t))",
           ["INSERT INTO td.lu VALUES (1, 'a', 'a')", "INSERT INTO td.lu VALUES (2, 'b', 'b')"],
           "UPDATE td.lu SET b = 'c' WHERE id = 1", "DELETE FROM td.lu WHERE id = 2",
           ["id", "b", "t"]),
}


class TwoDescriptionsTest(MyTestCase):
    my_settings = {"binlog_row_metadata": "FULL"}

    def test_catalog_and_map_give_one_version(self):
        self._replay_compares(dict(OTHER_TABLES, w=wide_table()))

    def test_long_unique_hash_columns(self):
        """The map's hidden hash columns (see LONG_UNIQUE) are read and
        dropped: the records have the catalog's columns."""
        self._replay_compares(LONG_UNIQUE)

    def _replay_compares(self, tables):
        """Writes the changes of tables once, replays them with the catalog
        ahead, and compares each record written twice."""
        my = self.my
        self.assertEqual(my.sql("SELECT @@binlog_row_metadata")[0][0], "FULL")
        my.execute("DROP DATABASE IF EXISTS td")
        my.execute("CREATE DATABASE td")
        for create, inserts, _, _, _ in tables.values():
            my.execute(create)
            if len(inserts) == 3:   # a row for the backfill
                my.execute(inserts.pop(0))
        s = self.sluice(stream="two", tables="td.*")
        self.catch_up(s)
        path = os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")
        with open(path, "rb") as f:
            before = f.read()
        for _, inserts, update, delete, _ in tables.values():
            for q in inserts + [update, delete]:
                my.execute(q)
        self.catch_up(s)
        first = written(s.out)
        # the checkpoint save a kill -9 lost, and a column added while
        # stopped: the replay finds the catalog ahead of the binlog, and
        # describes the rows before the ALTER from their table maps
        with open(path, "wb") as f:
            f.write(before)
        for name in tables:
            my.execute(f"ALTER TABLE td.{name} ADD COLUMN later int")
        r = self.catch_up(s)
        again = written(s.out)
        for name, (_, _, _, _, names) in tables.items():
            repeated = [u for u, w in again.items() if len(w) > 1 and w[0][2]["object"] == f"td_{name}"]
            self.assertEqual(len(repeated), 4, f"the replay wrote the 4 changes of {name} again:\n" + r.describe())
            for u in repeated:
                self.assertEqual(len(first[u]), 1)
                k1, p1, r1 = first[u][0]
                (k2, p2, r2), = [w for w in again[u] if w != first[u][0]]
                self.assertEqual([f["name"] for f in p1["type"]["fields"]], names)
                self.assertEqual(p2, p1, f"{name}: the Avro schema of the payload, catalog then map")
                self.assertEqual(k2, k1, f"{name}: schema_key, catalog then map")
                r1, r2 = dict(r1), dict(r2)
                r1.pop("read_timestamp")
                r2.pop("read_timestamp")
                self.assertEqual(r2, r1)


# A long unique on each kind (BLOB, TEXT, a long VARCHAR, two columns, an
# INT USING HASH), next to a user column named DB_ROW_HASH_1 of the hash
# columns' own type (the catalog lists it: the hidden ones are then
# DB_ROW_HASH_2 ...), and a table with one long unique only.
HASHED = {
    "h": ("CREATE TABLE lu.h (id int PRIMARY KEY, b blob, t text, `DB_ROW_HASH_1` bigint unsigned, "
          "v varchar(2000), UNIQUE KEY (b), UNIQUE KEY (t), UNIQUE KEY (v), UNIQUE KEY (b, t))",
          "INSERT INTO lu.h VALUES ({i}, 'b{i}', 't{i}', {i}, 'v{i}')",
          ["id", "b", "t", "DB_ROW_HASH_1", "v"]),
    "x": ("CREATE TABLE lu.x (id int PRIMARY KEY, x int, note varchar(10), UNIQUE KEY (x) USING HASH)",
          "INSERT INTO lu.x VALUES ({i}, {i}, 'n{i}')",
          ["id", "x", "note"]),
}


class LongUniqueTest(MyTestCase):
    """A table with long unique keys, whose hidden DB_ROW_HASH_n columns
    the table map carries after the catalog's: backfilled and streamed rows
    have the catalog's columns and one schema_key, the table is backfilled
    once, and the output equals the source, in append and merge output;
    then rows, a column and another long unique key added while sluice is
    stopped, and rows (the replay reads the rows before the ALTER from maps
    the catalog no longer describes)."""
    my_settings = {"binlog_row_metadata": "FULL"}

    def test_backfill_and_stream(self):
        for mode in ("append", "merge"):
            with self.subTest(mode=mode):
                self._backfill_and_stream(mode)

    def _backfill_and_stream(self, mode):
        my = self.my
        my.execute("DROP DATABASE IF EXISTS lu")
        my.execute("CREATE DATABASE lu")
        for create, insert, _ in HASHED.values():
            my.execute(create)
            for i in (1, 2, 3):
                my.execute(insert.format(i=i))
        s = self.sluice(stream=f"lu_{mode}", tables="lu.*", write_mode=mode)
        self.catch_up(s)
        for name, (_, insert, _) in HASHED.items():
            for i in (11, 12, 13):
                my.execute(insert.format(i=i))
            my.execute(f"DELETE FROM lu.{name} WHERE id = 2")
        my.execute("UPDATE lu.h SET b = 'changed', t = NULL WHERE id = 1")
        my.execute("UPDATE lu.h SET v = NULL, `DB_ROW_HASH_1` = 18446744073709551615 WHERE id = 11")
        my.execute("UPDATE lu.x SET x = 99 WHERE id = 12")
        my.execute("UPDATE lu.x SET x = NULL WHERE id = 13")
        self.catch_up(s)
        # a second run: its first map of each table is read again
        my.execute("INSERT INTO lu.h VALUES (21, REPEAT('z', 60000), REPEAT('y', 300), NULL, NULL)")
        my.execute("INSERT INTO lu.x VALUES (21, NULL, NULL)")
        r = self.catch_up(s)
        recs = self.read(s)
        for name, (_, _, names) in HASHED.items():
            mine = records_for(recs, "lu", name)
            bf = [x for x in mine if x["read_method"] == "mysql-backfill-fulldump"]
            cdc = [x for x in mine if x["read_method"] == "mysql-cdc-binlog"]
            self.assertEqual(sorted(((x["payload"] or {}).get("id") for x in bf), key=lambda v: (v is None, v or 0)),
                             [1, 2, 3], f"{name}: backfilled once\n" +
                             r.describe())
            self.assertTrue(cdc, name)
            for x in mine:
                self.assertEqual(list(x["payload"]), names, f"{name}: the catalog's columns")
            self.assertEqual({x["schema_key"] for x in cdc}, {bf[0]["schema_key"]},
                             f"{name}: the schema_key of backfill and stream")
            self.assertTableMatches(mine, "lu", name, ["id"])
        # while stopped: rows, a column and another long unique, rows
        my.execute("INSERT INTO lu.h VALUES (31, 'b31', 't31', 31, 'v31')")
        my.execute("ALTER TABLE lu.h ADD COLUMN later int, ADD COLUMN w text, ADD UNIQUE KEY (w)")
        my.execute("INSERT INTO lu.h VALUES (32, 'b32', 't32', 32, 'v32', 32, 'w32')")
        my.execute("UPDATE lu.h SET w = 'w1', later = 1 WHERE id = 1")
        # every row written again with the new columns (with FULL metadata
        # the table is not backfilled again: a row's last record would
        # otherwise lack them)
        my.execute("UPDATE lu.h SET later = id + 100")
        self.catch_up(s)
        recs = self.read(s)
        mine = records_for(recs, "lu", "h")
        self.assertEqual(list(mine[-1]["payload"]), HASHED["h"][2] + ["later", "w"])
        for x in mine:
            self.assertFalse([k for k in x["payload"] if k not in HASHED["h"][2] + ["later", "w"]])
        self.assertTableMatches(mine, "lu", "h", ["id"])


class LongUniqueMinimalTest(LongUniqueTest):
    """binlog_row_metadata=MINIMAL: the map has no names; its trailing
    BIGINT UNSIGNED columns, as many as the long unique keys, are the
    hidden ones."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}


class LongUniqueNoLogTest(LongUniqueTest):
    """binlog_row_metadata=NO_LOG: neither names nor signedness."""
    my_settings = {"binlog_row_metadata": "NO_LOG"}


if __name__ == "__main__":
    unittest.main()
