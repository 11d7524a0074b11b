"""
tests/integration/test_my_types.py: every MySQL/MariaDB type sluice
supports, with edge values, through backfill and through the binlog, read
back from the Avro files exactly as the source holds it; and the same row
stored before the snapshot (backfill, read with the binary protocol) and
after it (the binlog's row image) gives identical Avro values, type for type
and charset for charset.  Run with binlog_row_metadata=FULL (the table map
describes the columns), MINIMAL and NO_LOG (MariaDB's default:
information_schema does).
"""

import os
import subprocess
import sys

from harness import csn, csn_position, csn_seq, rebuild, records_for, HERE
from harness_mysql import MyTestCase, binlog_pos_value

# Every test of this module also runs in the sanitizer pass (run.py --tag sanitizers).
TAGS = {"sanitizers"}

DDL = """
CREATE TABLE types_db.types_t (
  id int PRIMARY KEY,
  c_tiny tinyint, c_utiny tinyint unsigned, c_small smallint, c_usmall smallint unsigned,
  c_medium mediumint, c_umedium mediumint unsigned, c_int int, c_uint int unsigned,
  c_big bigint, c_ubig bigint unsigned,
  c_dec decimal(65,30), c_dec2 decimal(10,2),
  c_float float, c_double double,
  c_bit1 bit(1), c_bit10 bit(10),
  c_date date, c_dt datetime(6), c_dt0 datetime, c_ts timestamp(6) NULL DEFAULT NULL, c_time time(6), c_year year,
  c_char char(5), c_varchar varchar(50), c_text text,
  c_latin1 varchar(30) CHARACTER SET latin1, c_latin1_text text CHARACTER SET latin1,
  c_binary binary(4), c_varbinary varbinary(20), c_blob blob,
  c_enum enum('sad','ok','happy'), c_set set('a','b','c'), c_latin1_enum enum('é','ü') CHARACTER SET latin1,
  c_json json, c_geo point
)"""

COLS = ("id, c_tiny, c_utiny, c_small, c_usmall, c_medium, c_umedium, c_int, c_uint, c_big, c_ubig, c_dec, c_dec2, "
        "c_float, c_double, c_bit1, c_bit10, c_date, c_dt, c_dt0, c_ts, c_time, c_year, c_char, c_varchar, c_text, "
        "c_latin1, c_latin1_text, c_binary, c_varbinary, c_blob, c_enum, c_set, c_latin1_enum, c_json, c_geo")

D65 = "9" * 35 + "." + "9" * 30
ROWS = [
    # lower edges
    (1, "-128", "0", "-32768", "0", "-8388608", "0", "-2147483648", "0", "-9223372036854775808", "0",
     f"'-{D65}'", "-99999999.99", "-3.40282e38", "-1.7976931348623157e308", "b'0'", "b'0000000000'",
     "'0001-01-01'", "'0001-01-01 00:00:00.000000'", "'0001-01-01 00:00:00'", "'1970-01-01 00:00:01.000000'",
     "'00:00:00'", "1901", "''", "''", "''", "''", "''", "x'00000000'", "''", "''", "'sad'", "''", "'é'", "'[]'",
     "POINT(0, 0)"),
    # upper edges
    (2, "127", "255", "32767", "65535", "8388607", "16777215", "2147483647", "4294967295", "9223372036854775807",
     "18446744073709551615", f"'{D65}'", "99999999.99", "3.40282e38", "1.7976931348623157e308", "b'1'",
     "b'1111111111'", "'9999-12-31'", "'9999-12-31 23:59:59.999999'", "'9999-12-31 23:59:59'",
     "'2038-01-19 03:14:07.999999'", "'23:59:59.999999'", "2155", "'abcde'", "'utf8mb4 \U0001F600 \u2713 \u00e9'",
     "REPEAT('long text ', 1000)", "'caf\u00e9 \u20ac \u00df'", "'\u00dcn\u00efc\u00f8d\u00e9 in latin1 \u00bf'",
     "x'01000000'", "x'00ff00'", "REPEAT(x'ab01', 3000)", "'happy'", "'a,b,c'", "'\u00fc'",
     "'{\"k\": [1, 2.5, \"x\"], \"n\": null}'", "POINT(1.5, -2.25)"),
    # small and ordinary values
    (3, "0", "1", "-1", "1", "0", "1", "-1", "1", "-1", "1", "'0.000000000000000000000000000001'", "-0.01",
     "1.5", "0.1", "b'1'", "b'0000000001'", "'2024-02-29'", "'2024-02-29 13:45:00.123456'",
     "'2024-02-29 13:45:00'", "'2024-02-29 13:45:00.5'", "'12:34:56.5'", "0", "'ab  '", "'trailing  '",
     "'multi\nline\ttab \"q\" \\\\'", "'\u00e0'", "'x'", "'ab'", "x'00'", "x''", "'ok'", "'b'", "NULL", "'\"str\"'",
     "POINT(-180, 90)"),
    # every column NULL
    (4,) + ("NULL",) * 35,
]
assert all(len(r) == 36 for r in ROWS), [len(r) for r in ROWS]


# ENUM and SET of the binary charset: their members are bytes.  UTF-8
# characters up to U+FFFF are written as they are; every other byte becomes
# '?', as MariaDB's own catalog (utf8mb3) shows the member
# (doc/types-mysql.md): x'E9' is '?', a 4-byte emoji '????'.
BIN_DDL = """
CREATE TABLE types_db.bin_enum_t (
  id int PRIMARY KEY,
  e enum('first', '', x'E9', x'C3A9', x'41E942', 'last') CHARACTER SET binary,
  st set('a', x'E9', x'F09F9880', x'C3', 'b', 'z') CHARACTER SET binary
)"""
# the members as information_schema shows them, and as sluice writes them
BIN_ENUM = ["first", "", "?", "\u00e9", "A?B", "last"]
BIN_SET = ["a", "?", "????", "?", "b", "z"]
# (id, ENUM as SQL, SET as SQL): each value as a member string, the
# member's index or bitmap, a binary literal, the empty value and NULL
BIN_ROWS = [
    (1, "'first'", "''"),
    (2, "''", "'a'"),
    (3, "_binary 0xE9", "_binary 0xE9"),
    (4, "4", "'a,z'"),
    (5, "_binary 0x41E942", "_binary 0x612CE92CF09F98802CC32C622C7A"),
    (6, "'last'", "42"),
    (7, "NULL", "NULL"),
]
# what each row reads back as: (ENUM, SET)
BIN_EXPECTED = {
    1: ("first", ""),
    2: ("", "a"),
    3: ("?", "?"),
    4: ("\u00e9", "a,z"),
    5: ("A?B", "a,?,????,?,b,z"),
    6: ("last", "?,?,z"),
    7: (None, None),
}


def bin_insert_sql(rows, id_offset=0):
    return "INSERT INTO types_db.bin_enum_t (id, e, st) VALUES " + \
        ", ".join(f"({i + id_offset}, {e}, {st})" for i, e, st in rows)


def insert_sql(rows, id_offset=0):
    vals = ["(" + ", ".join([str(r[0] + id_offset)] + list(r[1:])) + ")" for r in rows]
    return f"INSERT INTO types_db.types_t ({COLS}) VALUES " + ",\n".join(vals)


class TypesTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE types_db")
        cls.my.execute(DDL)
        cls.my.execute(insert_sql(ROWS))

    def test_backfill_then_binlog_every_type(self):
        my = self.my
        s = self.sluice(stream="types", tables="types_db.types_t")
        f0, p0 = my.master_status()
        self.catch_up(s)
        f1, p1 = my.master_status()
        recs = records_for(self.read(s), "types_db", "types_t")
        self.assertEqual(len(recs), len(ROWS))
        self.assertEqual({r["read_method"] for r in recs}, {"mysql-backfill-fulldump"})
        csns = {csn(r) for r in recs}
        self.assertEqual(len(csns), 1)
        snap = csns.pop()
        self.assertEqual(csn_seq(snap), 0)
        self.assertTrue(binlog_pos_value(f0, p0) <= csn_position(snap) <= binlog_pos_value(f1, p1))
        for r in recs:
            sm = r["source_metadata"]
            self.assertEqual((sm["database"], sm["table"], sm["primary_keys"], sm["is_deleted"]),
                             ("types_db", "types_t", ["id"], False))
            self.assertEqual(r["object"], "types__db_types_t")
            self.assertEqual(sm["log_file"], f0)
        self.assertTableMatches(recs, "types_db", "types_t", ["id"])

        # the same values again, through the binlog, in one transaction
        f0, p0 = my.master_status()
        my.execute(insert_sql(ROWS, id_offset=100))
        self.catch_up(s)
        recs = records_for(self.read(s), "types_db", "types_t")
        cdc = sorted((r for r in recs if r["read_method"] == "mysql-cdc-binlog"), key=csn)
        self.assertEqual([r["payload"]["id"] for r in cdc], [r[0] + 100 for r in ROWS])
        self.assertEqual({r["source_metadata"]["change_type"] for r in cdc}, {"INSERT"})
        self.assertEqual(len({csn_position(csn(r)) for r in cdc}), 1)
        self.assertEqual([csn_seq(csn(r)) for r in cdc], list(range(1, len(ROWS) + 1)))
        self.assertEqual(csn_position(csn(cdc[0])), binlog_pos_value(f0, p0),
                         "the CSN's position is the transaction's first event")
        self.assertEqual(cdc[0]["source_metadata"]["log_position"], p0)
        self.assertTrue(cdc[0]["source_metadata"]["gtid"])
        self.assertTableMatches(recs, "types_db", "types_t", ["id"])

        # backfill and binlog decoding agree, value for value
        bf = {r["payload"]["id"]: r for r in recs if r["read_method"] == "mysql-backfill-fulldump"}
        for r in cdc:
            a = dict(bf[r["payload"]["id"] - 100]["payload"])
            b = dict(r["payload"])
            a.pop("id")
            b.pop("id")
            self.assertEqual(a, b, f"row {r['payload']['id'] - 100}: backfill and binlog differ")
            self.assertEqual({k: type(v) for k, v in a.items()}, {k: type(v) for k, v in b.items()})
            self.assertEqual(bf[r["payload"]["id"] - 100]["schema_key"], r["schema_key"])

        p = subprocess.run([sys.executable, os.path.join(HERE, "check_output.py"), s.out, "--codec", "deflate"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)

        # updates and deletes of every type
        my.execute("UPDATE types_db.types_t SET c_text = 'changed', c_int = c_int + 1 WHERE id = 103")
        my.execute("DELETE FROM types_db.types_t WHERE id = 102")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "types_db", "types_t", ["id"])

    def test_binary_enum_and_set(self):
        """ENUM and SET declared CHARACTER SET binary, with members that are
        not UTF-8: the same strings from the backfill and from the binlog
        (once made the stream exit: the charset has no conversion to text)."""
        my = self.my
        my.execute(BIN_DDL)
        ct = dict(my.sql("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                         "WHERE TABLE_SCHEMA = 'types_db' AND TABLE_NAME = 'bin_enum_t'"))
        self.assertEqual(ct["e"], "enum(" + ",".join(f"'{m}'" for m in BIN_ENUM) + ")")
        self.assertEqual(ct["st"], "set(" + ",".join(f"'{m}'" for m in BIN_SET) + ")")
        my.execute(bin_insert_sql(BIN_ROWS))
        self.assertEqual(my.sql("SELECT HEX(e), HEX(st) FROM types_db.bin_enum_t WHERE id IN (3, 5) ORDER BY id"),
                         [("E9", "E9"), ("41E942", "612CE92CF09F98802CC32C622C7A")])
        s = self.sluice(stream="binenum", tables="types_db.bin_enum_t")
        self.catch_up(s)
        my.execute(bin_insert_sql(BIN_ROWS, id_offset=100))
        self.catch_up(s)
        recs = records_for(self.read(s), "types_db", "bin_enum_t")
        got = {}
        for r in recs:
            p = r["payload"]
            got[(r["read_method"], p["id"])] = (p["e"], p["st"])
        want = {("mysql-backfill-fulldump", i): v for i, v in BIN_EXPECTED.items()}
        want.update({("mysql-cdc-binlog", i + 100): v for i, v in BIN_EXPECTED.items()})
        self.assertEqual(got, want)

        # updates and deletes, through the binlog: before and after images
        my.execute("UPDATE types_db.bin_enum_t SET e = _binary 0xE9, st = _binary 0xC3 WHERE id = 1")
        my.execute("UPDATE types_db.bin_enum_t SET e = 'last', st = 'a,b' WHERE id IN (3, 103)")
        my.execute("UPDATE types_db.bin_enum_t SET e = NULL, st = '' WHERE id = 105")
        my.execute("DELETE FROM types_db.bin_enum_t WHERE id IN (4, 104)")
        self.catch_up(s)
        recs = records_for(self.read(s), "types_db", "bin_enum_t")
        final = dict(BIN_EXPECTED)
        final.update({i + 100: v for i, v in BIN_EXPECTED.items()})
        final.update({1: ("?", "?"), 3: ("last", "a,b"), 103: ("last", "a,b"), 105: (None, "")})
        del final[4], final[104]
        state = rebuild(recs, ["id"])
        self.assertEqual({k[0]: (v["e"], v["st"]) for k, v in state.items()}, final)
        cdc = [r for r in recs if r["read_method"] == "mysql-cdc-binlog" and r["payload"]["id"] in (3, 105)]
        self.assertEqual(sorted((r["payload"]["id"], r["source_metadata"]["change_type"], r["payload"]["e"],
                                 r["payload"]["st"]) for r in cdc),
                         [(3, "UPDATE-INSERT", "last", "a,b"), (105, "INSERT", "A?B", BIN_EXPECTED[5][1]),
                          (105, "UPDATE-INSERT", None, "")])


    def test_enum_and_set_members_with_escapes(self):
        """ENUM and SET members with a quote, a backslash, a newline, a
        carriage return, a tab and a control character: information_schema
        writes them escaped (MINIMAL and NO_LOG take the members from
        there), the binlog gives their index, and both the backfill and the
        binlog give the member as declared."""
        my = self.my
        members = ["it's", "back\\slash", "new\nline", "cr\rhere", "tab\there", "ctl\x1az", "plain"]
        my.execute("CREATE TABLE types_db.esc_t (id int PRIMARY KEY, e enum(" +
                   ",".join("'" + m.replace("\\", "\\\\").replace("'", "''") + "'" for m in members) +
                   "), st set('a''b', 'c\\\\d', 'e\\nf'))")
        self.assertIn("'back\\\\slash','new\\nline','cr\\rhere'",
                      my.sql("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'types_db' "
                             "AND TABLE_NAME = 'esc_t' AND COLUMN_NAME = 'e'")[0][0], "escaped there")
        want = members
        rows = [(i + 1, i + 1, (i % 4)) for i in range(len(members))]
        sql = lambda off: ("INSERT INTO types_db.esc_t VALUES " +
                           ", ".join(f"({i + off}, {e}, {st})" for i, e, st in rows))
        my.execute(sql(0))
        self.assertEqual([e for (e,) in my.sql("SELECT e FROM types_db.esc_t ORDER BY id")], want)
        s = self.sluice(stream="escenum", tables="types_db.esc_t")
        self.catch_up(s)
        my.execute(sql(100))
        my.execute("UPDATE types_db.esc_t SET e = 'plain', st = 'c\\\\d' WHERE id IN (2, 102)")
        self.catch_up(s)
        recs = records_for(self.read(s), "types_db", "esc_t")
        self.assertEqual({r["read_method"] for r in recs}, {"mysql-backfill-fulldump", "mysql-cdc-binlog"})
        self.assertTableMatches(recs, "types_db", "esc_t", ["id"])
        state = rebuild(recs, ["id"])
        sets = ["", "a'b", "c\\d", "a'b,c\\d"]
        expect = {i + off: (want[i - 1], sets[st]) for off in (0, 100) for i, _, st in rows}
        expect.update({2: ("plain", "c\\d"), 102: ("plain", "c\\d")})
        self.assertEqual({k[0]: (v["e"], v["st"]) for k, v in state.items()}, expect)


    def test_enum_and_set_in_charsets_not_converted(self):
        """ENUM and SET in a charset that sluice does not convert to text
        (dec8, hp8, swe7, keybcs2, macce, geostd8; once made the stream
        exit): their members as text, ASCII as it is and '?' for any other
        character, from the backfill and from the binlog alike."""
        my = self.my
        cs = ("dec8", "hp8", "swe7", "keybcs2", "macce", "geostd8")
        eight = [c for c in cs if c != "swe7"]   # swe7 has no byte past 0x7F
        my.execute("CREATE TABLE types_db.cs_t (id int PRIMARY KEY, " +
                   ", ".join(f"e_{c} enum('one','two'{', x' + chr(39) + 'E9' + chr(39) if c in eight else ''}) "
                             f"CHARACTER SET {c}, s_{c} set('x','y'{', x' + chr(39) + 'E9' + chr(39) if c in eight else ''}) "
                             f"CHARACTER SET {c}" for c in cs) + ")")

        def ins(i, e, st, e8=None, st8=None):
            return (f"INSERT INTO types_db.cs_t VALUES ({i}, " +
                    ", ".join(f"{e8 if e8 and c in eight else e}, {st8 if st8 and c in eight else st}" for c in cs) + ")")
        my.execute(ins(1, 1, 3))
        my.execute(ins(2, "NULL", 0))
        my.execute(ins(3, 2, 1, 3, 5))
        s = self.sluice(stream="csenum", tables="types_db.cs_t")
        self.catch_up(s)
        my.execute(ins(101, 2, 2))
        my.execute(ins(103, 2, 1, 3, 5))
        my.execute("UPDATE types_db.cs_t SET " + ", ".join(f"e_{c} = 'two', s_{c} = 'x'" for c in cs) +
                   " WHERE id = 1")
        self.catch_up(s)
        recs = records_for(self.read(s), "types_db", "cs_t")
        self.assertEqual({r["read_method"] for r in recs}, {"mysql-backfill-fulldump", "mysql-cdc-binlog"})
        state = rebuild(recs, ["id"])
        for c in cs:
            want = {1: ("two", "x"), 2: (None, ""), 101: ("two", "y")}
            want[3] = want[103] = ("?", "x,?") if c in eight else ("two", "x")
            self.assertEqual({k[0]: (v[f"e_{c}"], v[f"s_{c}"]) for k, v in state.items()}, want, c)


class TypesNoMetadataTest(TypesTest):
    """The same with binlog_row_metadata=NO_LOG: signedness, charsets, ENUM
    and SET strings and JSON come from information_schema."""
    my_settings = {"binlog_row_metadata": "NO_LOG"}


class TypesMinimalMetadataTest(TypesTest):
    """The same with binlog_row_metadata=MINIMAL: the table map carries
    signedness and charsets (binary for an ENUM or SET in binary), the
    ENUM and SET strings come from information_schema."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}


if __name__ == "__main__":
    import unittest
    unittest.main()
