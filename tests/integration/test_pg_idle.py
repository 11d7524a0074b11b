"""
tests/integration/test_pg_idle.py: a stream whose tables are quiet while the
server writes plenty of WAL elsewhere must not hold that WAL: sluice
acknowledges the keepalive position when nothing is buffered (RELIABILITY.md
rule 1, "an idle slot holds WAL until the disk fills").
"""

import unittest

from harness import PgTestCase, lsn_to_int, wait_until


class IdleSlotTest(PgTestCase):

    def test_quiet_publication_does_not_hold_wal(self):
        pg = self.pg
        pg.execute("CREATE TABLE idle_pub (id int PRIMARY KEY)")
        pg.execute("CREATE TABLE idle_other (id int, pad text)")
        s = self.sluice(stream="idle", tables="public.idle_pub")
        self.catch_up(s)
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        self.assertTrue(p.alive(), p.stderr_text())
        start = pg.slot_info(s.slot)["confirmed_flush_lsn"]
        # about 40 MB of WAL for a table the stream does not publish
        for _ in range(4):
            pg.execute("INSERT INTO idle_other SELECT g, repeat('x', 1000) FROM generate_series(1, 10000) g")
        end = lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))
        self.assertGreater(end - start, 30 << 20)
        # acknowledged within a few status intervals (10 s each), with no change published
        wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] >= end, 60,
                   "the idle slot's confirmed_flush_lsn to pass the unpublished writes", interval=0.5)
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(15)
        self.assertEqual(p.wait_result(60).rc, 0)


if __name__ == "__main__":
    unittest.main()
