"""
tests/integration/test_pg_network.py: the network between sluice and
PostgreSQL fails under a steady workload, and sluice comes through with
nothing lost.

NetworkFaultTest runs PostgreSQL in its own network namespace
(harness.NetNs, needs root) with wal_sender_timeout = 4s, and breaks the
link while `sluice run` streams and a workload keeps updating the table
(over the Unix socket, which does not cross the link):

  - cut:       the link goes down for 7 s.  The server drops the silent
               walsender (wal_sender_timeout); once the link is back sluice
               sees the connection end and reconnects with backoff.
  - blackhole: every packet is dropped silently for 15 s, longer than
               receive_timeout (5 s): sluice notices the silence by itself,
               while the link is still dead, fails the stream and retries
               with backoff; connects hang until connect_timeout (2 s).
  - latency:   200 ms round trips for the whole run (backfill, catalog
               queries, streaming) with receive_timeout = 3 s: no timeout
               fires by mistake, no reconnect.

SilentServerTest needs no root: it stops the walsender with SIGSTOP, so
the TCP connection stays up but nothing arrives, and sluice must notice the
silence (receive_timeout) rather than wait forever.

In every case the output, rebuilt, equals the source table exactly and no
key's counter skips a value.
"""

import os
import random
import signal
import threading
import time
import unittest

from harness import (NetNs, PgServer, PgTestCase, netns_available, pg_available, records_for, wait_until)

TABLE = "nf"


class Workload:
    """Updates, inserts and deletes on one table from a thread, one small
    transaction at a time, until stop().  Each update adds 1 to counter."""

    def __init__(self, pg, table, first_id, rows=200):
        self.pg, self.table = pg, table
        self.next_id = first_id + rows
        self.ids = list(range(first_id, first_id + rows))
        self.done = threading.Event()
        self.txs = 0
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _run(self):
        rnd = random.Random(7)
        try:
            conn = self.pg.connect()
            with conn.cursor() as cur:
                while not self.done.is_set():
                    r = rnd.random()
                    if r < 0.75 or len(self.ids) < 50:
                        cur.execute(f"UPDATE {self.table} SET counter = counter + 1 WHERE id = %s",
                                    (rnd.choice(self.ids),))
                    elif r < 0.9:
                        cur.execute(f"INSERT INTO {self.table} VALUES (%s, 'w', 0)", (self.next_id,))
                        self.ids.append(self.next_id)
                        self.next_id += 1
                    else:
                        victim = self.ids.pop(rnd.randrange(len(self.ids)))
                        cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (victim,))
                    self.txs += 1
                    time.sleep(0.01)
            conn.close()
        except Exception as e:   # reported by stop()
            self.error = e

    def stop(self):
        self.done.set()
        self.thread.join(30)
        if self.error:
            raise self.error


class FaultMixin:
    """The scenario every test here runs: a table, `sluice run`, a workload,
    a fault in the middle, then a marker row, a drain and the comparison."""

    def start_stream(self, table, first_id, **extra_source):
        pg = self.pg
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text, counter int NOT NULL DEFAULT 0)")
        pg.execute(f"INSERT INTO {table} SELECT g, 'v', 0 FROM generate_series(%s, %s) g",
                   (first_id, first_id + 199))
        s = self.sluice(stream=table, tables=f"public.{table}", max_file_seconds=1,
                        extra={"source": dict(connect_timeout=2, **extra_source)})
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        self.assertTrue(p.alive(), p.stderr_text())
        return s, p

    def finish(self, s, p, table, marker, workload):
        """Stops the workload, writes a marker row, waits for it in the
        output, drains sluice (exit 0), and compares."""
        workload.stop()
        self.pg.execute(f"INSERT INTO {table} VALUES (%s, 'marker', 0)", (marker,))

        def marker_written():
            if not p.alive():
                raise AssertionError(f"sluice exited:\n{p.stderr_text()[-4000:]}")
            return any(r["payload"]["id"] == marker for r in records_for(self.read(s), "public", table))
        wait_until(marker_written, 120, "the marker row in the output", interval=0.5)
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        recs = records_for(self.read(s), "public", table)
        self.assertTableMatches(recs, "public", table, ["id"])
        self.assertNoCounterGaps(recs, "public", table, ["id"])
        self.assertGreater(workload.txs, 100, "the workload hardly ran")
        return r


class NetworkFaultTest(FaultMixin, PgTestCase):
    """PostgreSQL behind a link the test cuts, blackholes and slows down."""

    @classmethod
    def setUpClass(cls):
        reason = pg_available() or netns_available()
        if reason:
            raise unittest.SkipTest(reason)
        cls.ns = NetNs()
        cls.addClassCleanup(cls.ns.close)
        cls.pg = PgServer({"wal_sender_timeout": "4s"}, netns=cls.ns)
        cls.addClassCleanup(cls.pg.close)   # runs before ns.close (cleanups run last-in first-out)
        cls.pg.start()

    def setUp(self):
        self.addCleanup(self.ns.restore)   # whatever happens, the next test gets a working link

    def test_link_cut_then_restored(self):
        s, p = self.start_stream("nf_cut", 1)
        w = Workload(self.pg, "nf_cut", 1).start()
        time.sleep(2)
        self.ns.cut()
        time.sleep(7)                       # past wal_sender_timeout: the server drops the walsender
        self.ns.restore()
        wait_until(lambda: "retrying from the last checkpoint" in p.stderr_text() or not p.alive(), 60,
                   "sluice to notice the dropped connection")
        time.sleep(2)
        self.finish(s, p, "nf_cut", -1, w)
        with open(self.pg.logfile, errors="replace") as f:
            self.assertIn("replication timeout", f.read(), "the server did not drop the walsender")

    def test_blackhole_longer_than_receive_timeout(self):
        s, p = self.start_stream("nf_bh", 100001, receive_timeout=5)
        w = Workload(self.pg, "nf_bh", 100001).start()
        time.sleep(2)
        t0 = time.monotonic()
        self.ns.blackhole()
        # sluice must find out by itself, while the link is still dead
        wait_until(lambda: "not even a keepalive" in p.stderr_text() or not p.alive(), 12,
                   "sluice to notice the silent connection")
        noticed = time.monotonic() - t0
        self.assertTrue(p.alive(), p.stderr_text())
        self.assertGreaterEqual(noticed, 4.5, "the receive timeout fired early")
        wait_until(lambda: time.monotonic() - t0 >= 15, 20, "the end of the blackhole")
        err = p.stderr_text()
        self.assertIn("retrying from the last checkpoint", err)
        self.assertIn("timeout expired", err, "a reconnect during the blackhole did not time out")
        self.ns.restore()
        self.finish(s, p, "nf_bh", -100001, w)
        print(f"    blackhole noticed after {noticed:.1f} s", flush=True)

    def test_latency_200ms_round_trips(self):
        import psycopg2
        self.ns.delay(100)
        c = psycopg2.connect(host=self.ns.ns_addr, port=self.pg.port, user="postgres", dbname="postgres")
        with c.cursor() as cur:
            t0 = time.monotonic()
            for _ in range(3):
                cur.execute("SELECT 1")
            rtt = (time.monotonic() - t0) / 3
        c.close()
        self.assertGreaterEqual(rtt, 0.19, f"the link is not slowed down (round trip {rtt * 1000:.0f} ms)")
        t0 = time.monotonic()
        s, p = self.start_stream("nf_slow", 200001, receive_timeout=3)
        started = time.monotonic() - t0
        w = Workload(self.pg, "nf_slow", 200001).start()
        time.sleep(8)
        r = self.finish(s, p, "nf_slow", -200001, w)
        self.assertNotIn("retrying", r.stderr, "a timeout fired on a slow but live link")
        print(f"    round trip {rtt * 1000:.0f} ms; backfill and start took {started:.1f} s", flush=True)


class SilentServerTest(FaultMixin, PgTestCase):
    """A walsender that stops (SIGSTOP) leaves a connection that is up but
    silent: only sluice's receive timeout can tell.  No root needed."""
    pg_settings = {"wal_sender_timeout": "4s"}

    def test_stopped_walsender(self):
        s, p = self.start_stream("nf_stop", 1, receive_timeout=3)
        w = Workload(self.pg, "nf_stop", 1).start()
        time.sleep(1)
        pid = self.pg.one("SELECT pid FROM pg_stat_replication WHERE application_name = 'sluice'")
        self.assertIsNotNone(pid)
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(lambda: os.kill(pid, signal.SIGCONT) if os.path.exists(f"/proc/{pid}") else None)
        t0 = time.monotonic()
        wait_until(lambda: "not even a keepalive" in p.stderr_text() or not p.alive(), 15,
                   "sluice to notice the silent walsender")
        self.assertGreaterEqual(time.monotonic() - t0, 2.5, "the receive timeout fired early")
        # the stopped walsender still holds the slot; sluice retries meanwhile
        time.sleep(2)
        os.kill(pid, signal.SIGCONT)
        self.finish(s, p, "nf_stop", -1, w)


if __name__ == "__main__":
    unittest.main()
