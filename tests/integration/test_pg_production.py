"""
tests/integration/test_pg_production.py: production schemas and the ways
they used to lose or harm data (the issue "PostgreSQL as production runs
it"): object names that met, partitioned tables, tables dropped and created
again, keyless tables, publications that carry more than the stream
selects, key changes that leave a TOASTed value unchanged, and values at the
edge of every type's range.
"""

import json
import os
import unittest

import avro.datafile
import avro.io
import avro.schema

from harness import PgTestCase, csn, qident, records_for

INT64_MAX = 2**63 - 1


def strip_logical(o):
    if isinstance(o, dict):
        if "logicalType" in o and o.get("logicalType") != "decimal":
            return strip_logical(o["type"])
        return {k: strip_logical(v) for k, v in o.items()}
    if isinstance(o, list):
        return [strip_logical(x) for x in o]
    return o


def read_raw(root):
    """Every record under root, with dates, times and timestamps as the
    plain ints the files hold (Python's datetime cannot hold BC years or
    years after 9999)."""
    out = []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith(".avro"):
                continue
            with open(os.path.join(d, n), "rb") as f:
                r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
                ws = json.loads(r.get_meta("avro.schema"))
                r.datum_reader.writers_schema = avro.schema.parse(json.dumps(strip_logical(ws)))
                out.extend(r)
    return out


def files_of(root, obj):
    found = []
    for d, _, names in os.walk(os.path.join(root, obj)):
        found += [os.path.join(d, n) for n in names if n.endswith(".avro")]
    return sorted(found)


class ObjectNameTest(PgTestCase):

    def test_names_that_used_to_meet(self):
        """a.b_c and a_b.c are two objects (two folders), and re-backfilling
        one leaves the other's files alone."""
        pg = self.pg
        pg.execute("CREATE SCHEMA a")
        pg.execute("CREATE SCHEMA a_b")
        pg.execute("CREATE TABLE a.b_c (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE a_b.c (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO a.b_c SELECT g, 'x' FROM generate_series(1, 10) g")
        pg.execute("INSERT INTO a_b.c SELECT g, 'y' FROM generate_series(1, 7) g")
        s = self.sluice(stream="names", tables="a.b_c, a_b.c")
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual({r["object"] for r in records_for(recs, "a", "b_c")}, {"a_b_c"})
        self.assertEqual({r["object"] for r in records_for(recs, "a_b", "c")}, {"a__b_c"})
        self.assertTableMatches(recs, "a", "b_c", ["id"])
        self.assertTableMatches(recs, "a_b", "c", ["id"])
        other = files_of(os.path.join(s.out, "names"), "a__b_c")
        self.assertTrue(other)
        # re-backfill a.b_c: a_b.c's finished backfill files stay
        r = s.run("backfill", "--stream", "names", "--table", "a.b_c")
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        self.assertEqual(files_of(os.path.join(s.out, "names"), "a__b_c"), other)
        recs = self.read(s)
        self.assertTableMatches(recs, "a", "b_c", ["id"])
        self.assertTableMatches(recs, "a_b", "c", ["id"])


class ToastKeyChangeTest(PgTestCase):

    def test_key_change_keeps_unchanged_toast_value(self):
        """update t set id = 100 where id = 1 on a row with a large
        (TOASTed, incompressible) text: the UPDATE-INSERT lists the text as
        unchanged, and the documented rule rebuilds it from the row the
        UPDATE-DELETE just before it removed."""
        pg = self.pg
        pg.execute("CREATE TABLE tk (id int PRIMARY KEY, doc text, n int)")
        big = "string_agg(md5(g::text || {}), '') FROM generate_series(1, 400) g"
        pg.execute(f"INSERT INTO tk SELECT 1, (SELECT {big.format(1)}), 0")
        pg.execute(f"INSERT INTO tk SELECT 2, (SELECT {big.format(2)}), 0")
        s = self.sluice(stream="tk", tables="public.tk")
        self.catch_up(s)
        pg.execute("UPDATE tk SET id = 100 WHERE id = 1")
        pg.execute("UPDATE tk SET n = n + 1, id = 200 WHERE id = 2")
        pg.execute("UPDATE tk SET n = n + 1 WHERE id = 200")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "tk")
        ins = [r for r in recs if r["source_metadata"]["change_type"] == "UPDATE-INSERT"]
        self.assertTrue(ins and all(r["source_metadata"]["unchanged_columns"] == ["doc"] for r in ins),
                        [r["source_metadata"]["unchanged_columns"] for r in ins])
        self.assertTrue(all(r["payload"]["doc"] is None for r in ins))
        self.assertTableMatches(recs, "public", "tk", ["id"])


# Every type's minimum and maximum as PostgreSQL accepts them, as SQL
# literals; the expected values in the files are computed by the server.
EDGE_DDL = """
CREATE TABLE edge_t (
  id int PRIMARY KEY,
  d date, ts timestamp, tz timestamptz, t time,
  i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n numeric(1000,0), s numeric(1000,1000), b bool, u uuid
)"""
EDGE_ROWS = [
    (1, "'4714-11-24 BC'", "'4714-11-24 00:00:00 BC'", "'4714-11-24 00:00:00+00 BC'", "'00:00:00'",
     "-32768", "-2147483648", "-9223372036854775808", "'-3.4028235e38'", "'-1.7976931348623157e308'",
     "('-' || repeat('9', 1000))::numeric", "('-0.' || repeat('9', 1000))::numeric", "false", "'00000000-0000-0000-0000-000000000000'"),
    (2, "'5874897-12-31'", "'294276-12-31 23:59:59.999999'", "'294276-12-31 23:59:59.999999+00'", "'24:00:00'",
     "32767", "2147483647", "9223372036854775807", "'3.4028235e38'", "'1.7976931348623157e308'",
     "repeat('9', 1000)::numeric", "('0.' || repeat('9', 1000))::numeric", "true", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"),
    (3, "'infinity'", "'infinity'", "'infinity'", "'23:59:59.999999'",
     "0", "0", "0", "'1.4e-45'", "'4.9e-324'", "0", "0", "true", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
    (4, "'-infinity'", "'-infinity'", "'-infinity'", "'00:00:00.000001'",
     "1", "-1", "-1", "'-Infinity'", "'NaN'", "1", "('0.' || repeat('0', 999) || '1')::numeric", "false",
     "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
]


class ValueEdgeTest(PgTestCase):

    def expected(self):
        """Per id: the raw values the files must hold, from the server."""
        rows = self.pg.sql("""
            SELECT id,
              CASE WHEN d = 'infinity' THEN 2932896 WHEN d = '-infinity' THEN -719162
                   ELSE d - date '1970-01-01' END,
              CASE WHEN ts = 'infinity' THEN 253402300799999999 WHEN ts = '-infinity' THEN -62135596800000000
                   ELSE (extract(epoch FROM ts) * 1000000)::numeric END,
              CASE WHEN tz = 'infinity' THEN 253402300799999999 WHEN tz = '-infinity' THEN -62135596800000000
                   ELSE (extract(epoch FROM tz) * 1000000)::numeric END,
              (extract(epoch FROM t) * 1000000)::bigint,
              i2, i4, i8, n::text, s::text, b, u::text
            FROM edge_t""")
        out = {}
        for r in rows:
            i, d, ts, tz, t, i2, i4, i8, n, sc, b, u = r
            # past int64 microseconds: the documented clamp
            out[i] = {"d": int(d), "ts": min(int(ts), INT64_MAX), "tz": min(int(tz), INT64_MAX), "t": t,
                      "i2": i2, "i4": i4, "i8": i8, "n": n, "s": sc, "b": b, "u": u}
        return out

    def check(self, recs, offset):
        import decimal
        mine = (lambda i: i < 100) if offset == 0 else (lambda i: i >= 100)
        want = {i - offset: w for i, w in self.expected().items() if mine(i)}
        got = {r["payload"]["id"] - offset: r["payload"] for r in recs if mine(r["payload"]["id"])}
        self.assertEqual(sorted(got), sorted(want))
        for i, w in want.items():
            g = got[i]
            for k in ("d", "ts", "tz", "t", "i2", "i4", "i8", "b", "u"):
                self.assertEqual(g[k], w[k], f"id {i} column {k}")
            for k in ("n", "s"):
                self.assertEqual(g[k], decimal.Decimal(w[k]), f"id {i} column {k}")
                self.assertEqual(g[k].as_tuple().exponent, decimal.Decimal(w[k]).as_tuple().exponent)
        # floats: exact bits, specials kept
        import math
        import struct
        f = {r["payload"]["id"] - offset: (r["payload"]["f4"], r["payload"]["f8"]) for r in recs
             if mine(r["payload"]["id"])}
        self.assertEqual(struct.pack("<f", f[1][0]), struct.pack("<f", -3.4028235e38))
        self.assertEqual(f[1][1], -1.7976931348623157e308)
        self.assertEqual(f[2][1], 1.7976931348623157e308)
        self.assertEqual(struct.pack("<f", f[3][0]), struct.pack("<f", 1.4e-45))
        self.assertEqual(f[3][1], 5e-324)
        self.assertEqual(f[4][0], float("-inf"))
        self.assertTrue(math.isnan(f[4][1]))

    def test_every_type_at_its_limits(self):
        pg = self.pg
        pg.execute(EDGE_DDL)
        cols = "id, d, ts, tz, t, i2, i4, i8, f4, f8, n, s, b, u"
        values = ",\n".join("(" + ", ".join(str(x) for x in r) + ")" for r in EDGE_ROWS)
        pg.execute(f"INSERT INTO edge_t ({cols}) VALUES {values}")
        s = self.sluice(stream="edge", tables="public.edge_t")
        r = self.catch_up(s)
        self.check(read_raw(s.out), 0)
        # the clamp is not silent
        self.assertIn("is beyond the last instant 64-bit microseconds since 1970 can hold", r.stderr)
        # the same values through CDC
        pg.execute(f"INSERT INTO edge_t ({cols}) SELECT id + 100, d, ts, tz, t, i2, i4, i8, f4, f8, n, s, b, u "
                   "FROM edge_t")
        r = self.catch_up(s)
        self.assertIn("is beyond the last instant", r.stderr)
        self.check(read_raw(s.out), 100)


if __name__ == "__main__":
    unittest.main()
