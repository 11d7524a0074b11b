"""
tests/integration/test_pg_reconnect.py: the source server restarts under a
running `sluice run`; sluice retries from its checkpoint by itself, and the
output still equals the source with no counter gaps.
"""

import os
import signal
import unittest

from harness import PG_BIN, PgTestCase, lsn_to_int, records_for, wait_until


class ReconnectTest(PgTestCase):

    def test_server_restart_under_load(self):
        pg = self.pg
        pg.execute("CREATE TABLE rc (id int PRIMARY KEY, v text, counter int NOT NULL DEFAULT 0)")
        pg.execute("INSERT INTO rc SELECT g, 'v', 0 FROM generate_series(1, 200) g")
        s = self.sluice(stream="rc", tables="public.rc", max_file_seconds=1)
        p = s.start("run")
        for i in range(1, 101):
            pg.execute("UPDATE rc SET counter = counter + 1 WHERE id = %s", (i,))
        # restart the server on the same port while sluice streams
        pg._conn.close()
        r = pg.run_cmd([os.path.join(PG_BIN, "pg_ctl"), "-D", pg.datadir, "-l", pg.logfile, "-m", "fast", "-w", "-t", "60",
                        "restart"], check=False)
        self.assertEqual(r.returncode, 0, r.stdout)
        pg._conn = None
        wait_until(lambda: pg.one("SELECT 1") == 1, 30, "the server to accept connections")
        for i in range(101, 201):
            pg.execute("UPDATE rc SET counter = counter + 1 WHERE id = %s", (i,))
        pg.execute("INSERT INTO rc VALUES (-1, 'marker', 0)")
        wait_until(lambda: "retrying from the last checkpoint" in p.stderr_text() or not p.alive(), 60,
                   "sluice to notice the restart")
        self.assertTrue(p.alive(), f"sluice gave up:\n{p.stderr_text()}")

        def marker_written():
            recs = records_for(self.read(s), "public", "rc")
            return any(r["payload"]["id"] == -1 for r in recs)
        wait_until(marker_written, 120, "the agent to stream again after the restart", interval=0.5)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        recs = records_for(self.read(s), "public", "rc")
        self.assertTableMatches(recs, "public", "rc", ["id"])
        self.assertNoCounterGaps(recs, "public", "rc", ["id"])


if __name__ == "__main__":
    unittest.main()


class SlowSinkTest(PgTestCase):
    """A sink that blocks for longer than wal_sender_timeout: the heartbeat
    thread keeps sending status updates, so the server does not drop the
    replication connection, and nothing is acknowledged early."""
    pg_settings = {"wal_sender_timeout": "3s"}

    def test_blocked_flush_does_not_time_out(self):
        pg = self.pg
        pg.execute("CREATE TABLE slow (id int PRIMARY KEY, v text)")
        s = self.sluice(stream="slow", tables="public.slow", max_file_seconds=1)
        self.catch_up(s)
        # every flush now blocks for 8 s, well past the 3 s timeout
        p = s.start("run", env={"SLUICE_FAULT_FLUSH_DELAY_MS": "8000"})
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        before = pg.slot_info(s.slot)["confirmed_flush_lsn"]
        for i in range(1, 51):
            pg.execute("INSERT INTO slow VALUES (%s, 'v')", (i,))
        end = lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))
        # while the first flush blocks, nothing new is acknowledged
        wait_until(lambda: "every flush is delayed" in p.stderr_text(), 10, "the hook")
        self.assertEqual(pg.slot_info(s.slot)["confirmed_flush_lsn"], before)
        wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] >= end, 60,
                   "the slot to be acknowledged after the slow flush", interval=0.5)
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertNotIn("retrying", r.stderr, "the connection was dropped")
        with open(pg.logfile, errors="replace") as f:
            self.assertNotIn("replication timeout", f.read())
        recs = records_for(self.read(s), "public", "slow")
        self.assertTableMatches(recs, "public", "slow", ["id"])
