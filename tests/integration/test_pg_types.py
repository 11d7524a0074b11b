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


def change_of(r):
    return r["source_metadata"]["change_type"]


if __name__ == "__main__":
    import unittest
    unittest.main()
