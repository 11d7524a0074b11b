"""
tests/integration/test_pg_big_value.py: one large bytea value (48 MiB), first
backfilled, then streamed as an update, arrives byte-exact, and sluice's peak
memory stays within a bound of the value's size on both paths.

The bounds are what a large value costs now (doc/operations.md, "Memory for
a large value").  A backfill reads a binary COPY: libpq holds the value in
its input buffer and hands sluice a copy of it, and the queue holds it once:
3x the value, plus sluice's baseline; the bound leaves half a value of
margin.  When the backfill read COPY's text (hex: twice the value, in both
of libpq's buffers) it was 5x, which the bound fails.  A streamed value is
pgoutput's text, hex: 5x.
"""

import hashlib
import sys

from harness import PgTestCase

MIB = 2**20
VALUE_MIB = 48
# md5 gives 16 bytes; decoded from hex, as bench/pg_big_value.py fills it
FILL = ("SELECT decode(string_agg(md5(g::text || '%s'), ''), 'hex') "
        "FROM generate_series(1, %s) g")
BACKFILL_BOUND_KB = int((3.5 * VALUE_MIB + 32) * 1024)
STREAM_BOUND_KB = (5 * VALUE_MIB + 32) * 1024


def _keep(rec):
    sm = rec["source_metadata"]
    b = rec["payload"].get("b")
    return (sm["change_type"], rec["read_method"], rec["payload"].get("id"),
            None if b is None else len(b), None if b is None else hashlib.md5(b).hexdigest())


class BigValueTest(PgTestCase):

    def check_peak(self, what, r, bound_kb):
        print(f"\n    {what}: {VALUE_MIB} MiB bytea, peak RSS (VmHWM) {r.hwm_kb / 1024:.1f} MiB "
              f"= {r.hwm_kb / 1024 / VALUE_MIB:.2f}x (bound {bound_kb / 1024:.0f} MiB)", file=sys.stderr)
        self.assertGreater(r.hwm_kb, 0, "VmHWM was sampled")
        self.assertLessEqual(r.hwm_kb, bound_kb, f"{what}: peak RSS {r.hwm_kb} kB for a {VALUE_MIB} MiB value")

    def source_value(self):
        """(length, md5) of the value as PostgreSQL has it."""
        return tuple(self.pg.sql("SELECT length(b), md5(b) FROM big WHERE id = 1")[0])

    def test_backfill_and_update(self):
        pg = self.pg
        chunks = VALUE_MIB * MIB // 16
        pg.execute("CREATE TABLE big (id int PRIMARY KEY, b bytea)")
        pg.execute("ALTER TABLE big ALTER COLUMN b SET STORAGE EXTERNAL")
        pg.execute(f"INSERT INTO big SELECT 1, ({FILL % ('a', chunks)})")
        first = self.source_value()
        self.assertEqual(first[0], VALUE_MIB * MIB)
        s = self.sluice(stream="big", tables="public.big", codec="null", max_file_bytes="1GB")
        self.check_peak("backfill", self.catch_up(s, sample_hwm=True), BACKFILL_BOUND_KB)

        pg.execute(f"UPDATE big SET b = ({FILL % ('b', chunks)}) WHERE id = 1")
        second = self.source_value()
        self.assertNotEqual(second, first)
        self.check_peak("streaming", self.catch_up(s, sample_hwm=True), STREAM_BOUND_KB)

        rows = [r for r in self.read(s, keep=_keep) if r[0] != "TRUNCATE" and r[2] is not None]
        self.assertEqual(rows, [("INSERT", "postgresql-backfill", 1) + first,
                                ("UPDATE-INSERT", "postgresql-cdc-wal", 1) + second])


if __name__ == "__main__":
    import unittest
    unittest.main()
