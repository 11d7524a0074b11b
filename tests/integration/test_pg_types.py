"""
tests/integration/test_pg_types.py: every supported PostgreSQL type, edge
values included, goes through backfill and through CDC and reads back from
the Avro files exactly as the source holds it.  Also every codec.
"""

import datetime
import os
import subprocess
import sys
import uuid as uuidlib

import harness  # noqa: E402
from harness import PgTestCase, csn, csn_position, csn_seq, records_for, HERE

# Every test of this module also runs in the sanitizer pass (run.py --tag sanitizers).
TAGS = {"sanitizers"}

TYPES_DDL = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE types_t (
  id int PRIMARY KEY,
  c_int2 int2, c_int4 int4, c_int8 int8,
  c_num numeric(12,2), c_numfree numeric,
  c_f4 float4, c_f8 float8,
  c_bool bool, c_text text, c_varchar varchar(20), c_char char(5),
  c_bytea bytea, c_date date, c_time time, c_ts timestamp, c_tstz timestamptz,
  c_uuid uuid, c_json json, c_jsonb jsonb, c_enum mood, c_arr int[]
);
"""

COLS = ("id, c_int2, c_int4, c_int8, c_num, c_numfree, c_f4, c_f8, c_bool, c_text, c_varchar, c_char, "
        "c_bytea, c_date, c_time, c_ts, c_tstz, c_uuid, c_json, c_jsonb, c_enum, c_arr")

# One tuple per row, as SQL literals cast by the column types.
ROWS = [
    (1, "1", "42", "1234567890123", "'1234.50'", "'3.14159'", "'3.14'", "'2.718281828459045'", "true",
     "'hello'", "'world'", "'abc'", "'\\x0102feff'", "'2024-02-29'", "'13:45:00.123456'",
     "'2024-02-29 13:45:00.123456'", "'2024-02-29 13:45:00.123456+02'",
     "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", """'{"b": 1,  "a": [1, 2]}'""", """'{"b": 1,  "a": [1, 2]}'""",
     "'ok'", "'{1,2,3}'"),
    (2, "-32768", "-2147483648", "-9223372036854775808", "'-9999999999.99'",
     "'-123456789012345678901234567890.123456789'", "'NaN'", "'Infinity'", "false",
     "E'h\u00e9llo \u2713 \"q\" \\\\ tab\\t newline\\n end'", "''", "'ab'", "'\\x00'", "'1970-01-01'",
     "'00:00:00'", "'1970-01-01 00:00:00'", "'2000-01-01 00:00:00+05:30'",
     "'00000000-0000-0000-0000-000000000000'", "'null'", "'[]'", "'sad'", "'{}'"),
    (3, "32767", "2147483647", "9223372036854775807", "'9999999999.99'", "'0.000000001'", "'-Infinity'",
     "'NaN'", "true", "'x'", "'twenty chars exactly'", "'abcde'", "''", "'2999-12-31'",
     "'23:59:59.999999'", "'2262-04-11 23:47:16.854775'", "'1901-12-13 20:45:52.123456+00'",
     "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'", "'[1, \"two\", {\"3\": null}]'", "'{\"k\": \"v\", \"a\": true}'",
     "'happy'", "'{1,NULL,-3}'"),
    (4, "0", "0", "0", "'-0.01'", "'0'", "'1e-30'", "'-0'", "false", "'trailing  '", "'x y'", "'  a'",
     "'\\x5c27226e'", "'0001-01-01'", "'12:34:56.5'", "'0001-01-01 00:00:00'",
     "'1969-12-31 23:59:59.999999+00'", "'123e4567-e89b-12d3-a456-426614174000'", "'\"str\"'", "'1.50'",
     "'ok'", "'{-2147483648,2147483647}'"),
    (5, "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL",
     "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"),
    (6, "7", "7", "7", "'0.00'", "'1e-5'", "'3.4028235e+38'", "'1.7976931348623157e308'", "true",
     "repeat('long text ', 2000)", "'v'", "'c'", "decode(repeat('ab', 5000), 'hex')", "'2000-02-29'",
     "'00:00:00.000001'", "'2038-01-19 03:14:08'", "'2038-01-19 03:14:08+00'",
     "'00000000-0000-0000-0000-000000000001'", "'{}'", "'{}'", "'sad'", "'{0}'"),
]


def insert_sql(rows, id_offset=0):
    values = []
    for r in rows:
        values.append("(" + ", ".join([str(r[0] + id_offset)] + list(r[1:])) + ")")
    return f"INSERT INTO types_t ({COLS}) VALUES " + ",\n".join(values)


class TypesTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute(TYPES_DDL)
        cls.pg.execute(insert_sql(ROWS))

    @harness.tag("quick")
    def test_backfill_then_cdc_every_type(self):
        s = self.sluice(stream="types", tables="public.types_t")
        lsn_before = self.pg.current_lsn()
        t_before = datetime.datetime.now(datetime.timezone.utc)
        self.catch_up(s)
        lsn_after = self.pg.current_lsn()
        t_after = datetime.datetime.now(datetime.timezone.utc)
        recs = records_for(self.read(s), "public", "types_t")

        # backfill: one record per row, one snapshot CSN with sequence 0, distinct uuids
        self.assertEqual(len(recs), len(ROWS))
        self.assertEqual(sorted(r["payload"]["id"] for r in recs), [r[0] for r in ROWS])
        self.assertEqual({r["read_method"] for r in recs}, {"postgresql-backfill"})
        self.assertEqual({change_of(r) for r in recs}, {"INSERT"})
        csns = {csn(r) for r in recs}
        self.assertEqual(len(csns), 1, csns)
        snap = csns.pop()
        self.assertEqual(csn_seq(snap), 0)
        self.assertTrue(lsn_before <= csn_position(snap) <= lsn_after,
                        f"snapshot position {snap} outside [{lsn_before:X}, {lsn_after:X}]")
        self.assertEqual(len({r["uuid"] for r in recs}), len(recs))
        for r in recs:
            sm = r["source_metadata"]
            self.assertEqual((sm["schema"], sm["table"], sm["primary_keys"], sm["is_deleted"]),
                             ("public", "types_t", ["id"], False))
            self.assertEqual(r["object"], "public_types_t")
            self.assertEqual(r["stream_name"], "types")
            self.assertEqual(uuidlib.UUID(r["uuid"]).version, 5)
            self.assertTrue(t_before - datetime.timedelta(seconds=5) <= r["source_timestamp"]
                            <= t_after + datetime.timedelta(seconds=5), r["source_timestamp"])
            self.assertTrue(r["read_timestamp"] >= t_before - datetime.timedelta(seconds=5))
        self.assertTableMatches(recs, "public", "types_t", ["id"])

        # CDC: the same values again under new keys, one transaction
        lsn_before = self.pg.current_lsn()
        with self.pg.connect(autocommit=False) as conn, conn.cursor() as cur:
            cur.execute(insert_sql(ROWS, id_offset=100))
            cur.execute("SELECT pg_current_xact_id()::text")
            xid = int(cur.fetchone()[0])
        conn.close()
        lsn_after = self.pg.current_lsn()
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "types_t")
        cdc = [r for r in recs if r["read_method"] == "postgresql-cdc-wal"]
        self.assertEqual(sorted(r["payload"]["id"] for r in cdc), [r[0] + 100 for r in ROWS])
        self.assertEqual({change_of(r) for r in cdc}, {"INSERT"})
        self.assertEqual({csn_position(csn(r)) for r in cdc}.__len__(), 1)
        pos = csn_position(csn(cdc[0]))
        self.assertTrue(lsn_before <= pos <= lsn_after)
        self.assertEqual(sorted(csn_seq(csn(r)) for r in cdc),
                         sorted(set(csn_seq(csn(r)) for r in cdc)))
        self.assertEqual(min(csn_seq(csn(r)) for r in cdc) >= 1, True)
        for r in cdc:
            self.assertEqual(r["source_metadata"]["tx_id"], xid)
        # the order inside the transaction is the statement's row order
        by_seq = sorted(cdc, key=lambda r: csn_seq(csn(r)))
        self.assertEqual([r["payload"]["id"] for r in by_seq], [r[0] + 100 for r in ROWS])
        self.assertTableMatches(recs, "public", "types_t", ["id"])

        # the project's checker, as a command, passes on the tree
        p = subprocess.run([sys.executable, os.path.join(HERE, "check_output.py"), s.out, "--codec", "deflate"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_codecs(self):
        for codec in ("null", "snappy", "zstandard"):
            with self.subTest(codec=codec):
                s = self.sluice(stream=f"codec_{codec}", tables="public.types_t", codec=codec)
                self.catch_up(s)
                recs = self.read(s)  # checks every file's codec
                self.assertEqual(len(records_for(recs, "public", "types_t")),
                                 self.pg.one("SELECT count(*) FROM types_t"))
                self.assertTableMatches(recs, "public", "types_t", ["id"])
                # sluice's own reader (verify) reads every codec back
                v = s.run("verify", "--stream", f"codec_{codec}")
                self.assertEqual(v.rc, 0, v.describe())


# Types read as their text output in a binary COPY (sources/postgres/pg_binary.h:
# arrays, composites, ranges, domains, network and geometric types, ...), and
# the edges of those read in binary: each value must reach the output as the
# source's output function writes it (expected_rows reads it so), in a
# chunked initial backfill and in a re-backfill while streaming.
WIDE_DDL = """
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS citext;
CREATE DOMAIN d_int AS int CHECK (VALUE > -100);
CREATE DOMAIN d_bool AS bool;
CREATE DOMAIN d_char AS char(4);
CREATE DOMAIN d_text AS text;
CREATE DOMAIN d_num AS numeric(5,2);
CREATE TYPE pair AS (a int, b text);
CREATE TYPE hue AS ENUM ('red', 'green');
CREATE TABLE dom_t (id int PRIMARY KEY, c_dint d_int, c_dbool d_bool, c_dchar d_char, c_dtext d_text,
  c_dnum d_num);
CREATE TABLE wide_t (
  id int PRIMARY KEY,
  c_pair pair, c_hue hue, c_inet inet, c_cidr cidr, c_mac macaddr, c_interval interval, c_money money,
  c_bit bit(4), c_varbit varbit, c_point point, c_box box, c_range int4range, c_mrange int4multirange,
  c_tsrange tsrange, c_tsv tsvector, c_hstore hstore, c_citext citext, c_qchar "char", c_name name,
  c_oid oid, c_timetz timetz, c_xml xml, c_tarr text[], c_barr bool[], c_iarr inet[], c_narr numeric[],
  c_num numeric, c_num52 numeric(5,2), c_numneg numeric(3,-2), c_numover numeric(2,4),
  c_date date, c_ts timestamp, c_tstz timestamptz, c_bytea bytea, c_f8 float8, c_i8 int8
);
"""

WIDE_ROWS = [
    "(1, ROW(1, 'one'), 'red', '10.0.0.1', '10.0.0.0/8', '08:00:2b:01:02:03', "
    "'1 year 2 mons 3 days 04:05:06.5', 12.34, B'1010', B'101', '(1.5,-2)', '((0,0),(1,1))', '[1,5)', "
    "'{[1,3), [7,9)}', '[2024-01-01 00:00,2024-02-01 00:00)', 'a fat:1 cat', 'a=>1, b=>NULL', 'MiXeD', 'q', "
    "'pg_class', 4294967295, '13:45:00+05:30', '<a>x</a>', ARRAY['a b', NULL, '\"', ''], ARRAY[true, false], "
    "ARRAY['10.0.0.1'::inet], ARRAY[1.50, 'NaN'], 'NaN', 123.45, 12300, 0.0012, "
    "'infinity', 'infinity', 'infinity', '\\x00ff', 'Infinity', 9223372036854775807)",
    "(2, ROW(NULL, NULL), 'green', '::1', '2001:db8::/32', "
    "'ff:ff:ff:ff:ff:ff', '-1 days -00:00:01', -0.01, B'0000', B'', '(0,0)', '((-1,-1),(1,1))', 'empty', "
    "'{}', '(,)', '', '', '', '', '', 0, '00:00:00-14:59', '', '{}', '{}', '{}', '{}', "
    "'-Infinity', -0.05, -99900, 0.0099, '-infinity', '-infinity', '-infinity', '', '-Infinity', "
    "-9223372036854775808)",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(4, ROW(0, ''), 'red', '192.168.1.5/24', '192.168.1.0/24', '00:00:00:00:00:00', "
    "'0', 0, B'1111', B'1', '(1e300,-1e-300)', '((1,2),(3,4))', '(,5]', '{(,3), [4,)}', "
    "'[1999-12-31 23:59:59.999999,)', 'x:1A,2B', '\"k k\"=>\"v\\\\v\"', '\u00e9t\u00e9', '\u00e9', "
    "repeat('n', 63), 0, '24:00:00+00', '<r/>', ARRAY['{', '}', ',', 'NULL', '\\'], ARRAY[NULL]::bool[], "
    "ARRAY[NULL, '::ffff:1.2.3.4']::inet[], ARRAY[-1e-20, 1e20], "
    "(repeat('9', 1000) || '.' || repeat('1', 20))::numeric, 0, -100, -0.0001, "
    "'0001-01-01', '0001-01-01 00:00:00', '1900-01-01 12:00:00.000001+00', "
    "'\\x00', "
    "-0, -1)",
]


class TextOutputTypesTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute(WIDE_DDL)
        cls.pg.execute("INSERT INTO wide_t VALUES " + ",\n".join(WIDE_ROWS))
        cls.pg.execute("INSERT INTO dom_t VALUES (1, 5, true, 'ab', 'x', 1.5), (2, -99, false, 'abcd', '', -999.99), "
                       "(3, NULL, NULL, NULL, NULL, NULL)")
        # every byte 0x00-0xff, and more rows than a chunk, so that chunks
        # run side by side and rows are held
        cls.pg.execute("UPDATE wide_t SET c_bytea = (SELECT decode(string_agg(lpad(to_hex(g), 2, '0'), ''), "
                       "'hex') FROM generate_series(0, 255) g) WHERE id = 4")
        cls.pg.execute("INSERT INTO wide_t SELECT g + 10, "
                       "ROW(g, g::text)::pair, 'green', ('10.0.' || g % 256 || '.1')::inet, NULL, NULL, "
                       "make_interval(secs => g), g, B'0101', NULL, point(g, -g), NULL, int4range(g, g + 2), "
                       "NULL, NULL, NULL, hstore('k', g::text), 'C' || g, NULL, NULL, g, NULL, NULL, "
                       "ARRAY[g::text], NULL, NULL, ARRAY[g / 7.0], g / 3.0, g % 999 / 10.0, g * 100, NULL, "
                       "DATE '2000-01-01' + g, TIMESTAMP '1999-12-31 23:59:59' + make_interval(secs => g), "
                       "TIMESTAMPTZ '1970-01-01 00:00:00+00' - make_interval(days => g), "
                       "decode(md5(g::text), 'hex'), g / 3.0, g FROM generate_series(1, 600) g")

    def test_chunked_backfill_and_rebackfill(self):
        extra = {"source": {"backfill_chunk_rows": 100, "backfill_connections": 2}}
        s = self.sluice(stream="wide", tables="public.wide_t", extra=extra)
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "wide_t")
        n = self.pg.one("SELECT count(*) FROM wide_t")
        self.assertEqual(len(recs), n)
        self.assertTableMatches(recs, "public", "wide_t", ["id"])
        # the same rows again, read in chunks while streaming
        r = s.run("backfill", "--stream", "wide", "--table", "public.wide_t", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        r = self.catch_up(s)
        self.assertIn(f"backfilled public.wide_t while streaming: {n} rows", r.stderr)
        recs = records_for(self.read(s), "public", "wide_t")
        self.assertEqual(len(recs), 2 * n + 1)   # and the marker
        self.assertTableMatches(recs, "public", "wide_t", ["id"])
        rebackfilled = {}
        for rec in recs[n:]:
            if rec["source_metadata"]["change_type"] == "INSERT":
                rebackfilled[rec["payload"]["id"]] = rec["payload"]
        first = {rec["payload"]["id"]: rec["payload"] for rec in recs[:n]}
        self.assertEqual(rebackfilled, first)

    def test_domains(self):
        # A domain is written as its text output, whatever its base type
        # (doc/types.md): char(4) keeps its padding, bool is t/f.
        s = self.sluice(stream="dom", tables="public.dom_t")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "dom_t")
        self.assertEqual(sorted((tuple(r["payload"].values()) for r in recs), key=lambda p: p[0]), [
            (1, "5", "t", "ab  ", "x", "1.50"),
            (2, "-99", "f", "abcd", "", "-999.99"),
            (3, None, None, None, None, None)])


def change_of(r):
    return r["source_metadata"]["change_type"]


if __name__ == "__main__":
    import unittest
    unittest.main()
