"""
tests/integration/test_pg_slot_wait.py: a long transaction open while the
stream's slot is created.

CREATE_REPLICATION_SLOT waits, silently, for every transaction that was open
when it started.  sluice must say so: a log line that names the blocking
backend's pid (first after 2 s, then every 10 s), `sluice status` shows the
wait (text and --json), and SIGTERM ends the agent within a second or two,
exit 0, with no slot left half made; the next run, once the transaction has
ended, starts the stream as if nothing had happened.
"""

import json
import signal
import time
import unittest

from harness import PgTestCase, records_for, wait_until

# Every test of this module also runs in the sanitizer pass (run.py --tag sanitizers).
TAGS = {"sanitizers"}


class SlotWaitTest(PgTestCase):

    def test_long_transaction_at_slot_creation(self):
        pg = self.pg
        pg.execute("CREATE TABLE sw_t (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO sw_t SELECT g, 'v' || g FROM generate_series(1, 30) g")
        # a session that holds an xid and then sits idle in its transaction
        blocker = pg.connect(autocommit=False)
        self.addCleanup(blocker.close)
        with blocker.cursor() as cur:
            cur.execute("SELECT txid_current()")
        bpid = blocker.get_backend_pid()

        s = self.sluice(stream="slotwait", tables="public.sw_t")
        p = s.start("run")
        line = (f'stream "slotwait": creating replication slot "sluice_slotwait" has waited 2 s for transactions '
                f'that were open when it started: pid {bpid} (transaction open for ')
        wait_until(lambda: line in p.stderr_text() or not p.alive(), 30, "the log line naming the blocking pid")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        self.assertIn(f', idle in transaction, user "postgres", application ""); it goes on when they end '
                      f'(SELECT pg_terminate_backend({bpid}) ends the first)', p.stderr_text())

        # status shows the wait, and says "unknown" for the lag of a slot
        # that has no confirmed position yet
        r = s.run("status", "--json", timeout=30)
        st = json.loads(r.stdout)["streams"][0]
        self.assertEqual(st["agent_pid"], p.pid)
        w = st["waiting"]
        self.assertIsNotNone(w, r.stdout)
        self.assertEqual(w["action"], 'creating replication slot "sluice_slotwait"')
        self.assertEqual([b["pid"] for b in w["blocked_by"]], [bpid])
        self.assertEqual(w["blocked_by"][0]["state"], "idle in transaction")
        self.assertGreaterEqual(w["blocked_by"][0]["transaction_seconds"], 2)
        self.assertGreaterEqual(w["waited_seconds"], 2)
        self.assertIn(f"pid {bpid}", w["detail"])
        if st["slot_status"]["exists"]:   # the slot is visible, still being made
            self.assertIsNone(st["slot_status"]["lag_bytes"])
            self.assertIsNone(st["slot_status"]["confirmed_position"])
            self.assertIsNone(st["slot_status"]["postgres"]["confirmed_flush_lsn"])
        r = s.run("status", timeout=30)
        self.assertIn(f"  agent: running (pid {p.pid})\n", r.stdout)
        self.assertRegex(r.stdout, r'  waiting: creating replication slot "sluice_slotwait" for \d+ s, blocked by '
                         rf'pid {bpid} \(transaction open for \d+ s, idle in transaction\)\n')
        self.assertNotIn("-1 bytes", r.stdout)
        if st["slot_status"]["exists"]:
            self.assertIn("lag: unknown", r.stdout)

        # SIGTERM cancels the wait at once; nothing is left half made
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        r = p.wait_result(30)
        took = time.monotonic() - t0
        print(f"\n    SIGTERM during slot creation: exit {r.rc} after {took:.2f}s", end=" ")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertLess(took, 2.0, r.describe())
        self.assertIn('stream "slotwait": stopped by a signal while creating the stream\'s position', r.stderr)
        self.assertIsNone(pg.slot_info("sluice_slotwait"), "no slot left half made")
        r = s.run("status", "--json", timeout=30)
        st = json.loads(r.stdout)["streams"][0]
        self.assertIsNone(st["waiting"])
        self.assertIsNone(st["agent_pid"])

        # once the transaction ends, the next run starts the stream cleanly
        blocker.rollback()
        pg.execute("UPDATE sw_t SET v = 'later' WHERE id <= 3")
        self.catch_up(s)
        self.assertIsNotNone(pg.slot_info("sluice_slotwait"))
        recs = records_for(self.read(s), "public", "sw_t")
        self.assertTableMatches(recs, "public", "sw_t", ["id"])


if __name__ == "__main__":
    unittest.main()
