"""
tests/integration/test_pg_reconnect.py: the source server restarts under a
running `sluice run`; sluice retries from its checkpoint by itself, and the
output still equals the source with no counter gaps.
"""

import os
import signal
import sys
import unittest

from harness import PG_BIN, PgTestCase, lsn_to_int, records_for, sluice_test_bin, wait_until


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

    def test_drain_while_retrying(self):
        """SIGTERM while the stream waits to retry (the server is down): the
        agent stops at once with exit 0, as a drain does, and the next run
        resumes from the checkpoint with nothing lost."""
        pg = self.pg
        pg.execute("CREATE TABLE dr (id int PRIMARY KEY, v int)")
        pg.execute("INSERT INTO dr SELECT g, 0 FROM generate_series(1, 50) g")
        s = self.sluice(stream="dr", tables="public.dr", max_file_seconds=1)
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        pg.execute("UPDATE dr SET v = 1 WHERE id <= 10")
        pg.stop("fast")
        try:
            wait_until(lambda: "retrying from the last checkpoint" in p.stderr_text() or not p.alive(), 120,
                       "sluice to retry")
            self.assertTrue(p.alive(), p.stderr_text())
            p.signal(signal.SIGTERM)
            r = p.wait_result(30)
            self.assertEqual(r.rc, 0, r.describe())
            self.assertIn("stopped on request while the stream was failing", r.stderr)
        finally:
            pg.resume()
        pg._conn = None
        pg.execute("UPDATE dr SET v = 2 WHERE id > 40")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "dr")
        self.assertTableMatches(recs, "public", "dr", ["id"])


if __name__ == "__main__":
    unittest.main()


class SlowSinkTest(PgTestCase):
    """A sink whose flushes block for longer than wal_sender_timeout (the
    test-only slow_avro_dir sink of tests/tools/sluice_test).  While the sink
    blocks, the reader keeps reading the server's stream into the bounded
    queue, and when the queue is full it keeps sending status updates, so the
    server does not drop the replication connection; memory stays bounded;
    and nothing is acknowledged before the flush completes."""
    pg_settings = {"wal_sender_timeout": "3s"}

    def test_blocked_flush_does_not_time_out(self):
        pg = self.pg
        pg.execute("CREATE TABLE slow (id int PRIMARY KEY, v text)")
        s = self.sluice(stream="slow", tables="public.slow", max_file_seconds=1)
        self.catch_up(s)
        # every flush now blocks for 12 s, well past the 3 s timeout
        secs = s.sections()
        secs["destination.out"]["type"] = "slow_avro_dir"
        secs["destination.out"]["flush_delay"] = "12s"
        slow_config = os.path.join(s.workdir, "slow.ini")
        with open(slow_config, "w") as f:
            for sec, kv in secs.items():
                f.write(f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()))
        p = s.start("run", config=slow_config, binary=sluice_test_bin(), sample_hwm=True)
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        self.assertIn("every flush is delayed by 12 s", p.stderr_text())
        before = pg.slot_info(s.slot)["confirmed_flush_lsn"]
        for i in range(1, 51):
            pg.execute("INSERT INTO slow VALUES (%s, 'v')", (i,))
        first_end = lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))
        wait_until(lambda: "a flush waits 12 s" in p.stderr_text(), 30, "the first flush to block")

        def walsender():
            return pg.sql("SELECT sent_lsn::text, reply_time, client_port FROM pg_stat_replication "
                          "WHERE application_name = 'sluice'")[0]

        def unread(port):   # bytes the kernel holds for sluice's socket that it has not read
            for name in ("/proc/net/tcp", "/proc/net/tcp6"):
                with open(name) as f:
                    for line in list(f)[1:]:
                        fields = line.split()
                        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                            return int(fields[4].split(":")[1], 16)
            raise AssertionError(f"no socket with local port {port}")

        # 5,000 rows (~1.5 MB of WAL, less than the 8 MB queue): the reader
        # takes all of it while the sink is blocked.
        pg.execute("INSERT INTO slow SELECT g, repeat('x', 200) FROM generate_series(51, 5050) g")
        mid = lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))

        def all_read():
            sent, _, port = walsender()
            return lsn_to_int(sent) >= mid and unread(port) < 64 * 1024
        # the server sends it all and sluice reads it all, while the sink blocks
        wait_until(all_read, 8, "sluice to read the stream while the sink blocks")
        _, reply0, _ = walsender()
        self.assertEqual(pg.slot_info(s.slot)["confirmed_flush_lsn"], before, "acknowledged before the flush")
        # 40,000 more (~12 MB, more than the queue holds): the reader fills the
        # queue and waits, and status updates keep going out.
        pg.execute("INSERT INTO slow SELECT g, repeat('y', 200) FROM generate_series(5051, 45050) g")
        end = lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))
        # status updates keep going out (at least every wal_sender_timeout / 3 = 1 s)
        wait_until(lambda: walsender()[1] > reply0, 8, "a status update during the slow flush")
        self.assertEqual(pg.slot_info(s.slot)["confirmed_flush_lsn"], before, "acknowledged before the flush")
        wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] >= first_end, 30,
                   "the first flush to be acknowledged", interval=0.5)
        wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] >= end, 180,
                   "the slot to be acknowledged after the slow flushes", interval=0.5)
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertNotIn("retrying", r.stderr, "the connection was dropped")
        with open(pg.logfile, errors="replace") as f:
            self.assertNotIn("replication timeout", f.read())
        # Memory stayed bounded: the 8 MB queue held the reader back.
        print(f"    peak RSS (VmHWM) {r.hwm_kb / 1024:.1f} MB with the default 8 MB queue", file=sys.stderr)
        self.assertLess(r.hwm_kb, 48 * 1024)
        recs = records_for(self.read(s), "public", "slow")
        self.assertTableMatches(recs, "public", "slow", ["id"])
