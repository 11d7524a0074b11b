"""
tests/integration/test_pg_reconnect.py: the source server restarts under a
running `sluice run`; sluice retries from its checkpoint by itself, and the
output still equals the source with no counter gaps.
"""

import os
import signal
import unittest

from harness import PG_BIN, PgTestCase, records_for, wait_until


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
