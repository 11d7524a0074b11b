"""
tests/integration/test_pg_restart.py: sluice resumes from its checkpoint
(nothing lost, repeats identical), drains and exits 0 on SIGTERM, and
answers `status` and `version`.
"""

import json
import signal
import unittest

from harness import PgTestCase, csn, records_for, wait_until, read_avro_tree

# Every test of this module also runs in the sanitizer pass (run.py --tag sanitizers).
TAGS = {"sanitizers"}


def workload_step(pg, base, n=20):
    """Inserts n rows with keys base.., updates half of them twice, deletes a quarter."""
    pg.execute("INSERT INTO rs SELECT g, 'v' || g, 0 FROM generate_series(%s, %s) g", (base, base + n - 1))
    for _ in range(2):
        pg.execute("UPDATE rs SET counter = counter + 1, v = v || '+' WHERE id BETWEEN %s AND %s",
                   (base, base + n // 2 - 1))
    pg.execute("DELETE FROM rs WHERE id BETWEEN %s AND %s", (base + n - n // 4, base + n - 1))
    # and touch older rows, one transaction per row
    for k in range(1, 6):
        pg.execute("UPDATE rs SET counter = counter + 1 WHERE id = %s", (k,))
    # a marker row last; returns the WAL position just before its transaction
    lsn = pg.current_lsn()
    pg.execute("INSERT INTO rs VALUES (%s, 'marker', 0)", (-base,))
    return lsn


class RestartTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute("CREATE TABLE rs (id int PRIMARY KEY, v text, counter int NOT NULL)")
        cls.pg.execute("INSERT INTO rs SELECT g, 'v' || g, 0 FROM generate_series(1, 100) g")

    def test_restart_from_checkpoint(self):
        pg = self.pg
        s = self.sluice(stream="restart", tables="public.rs", max_file_seconds=1)
        self.catch_up(s)
        first = records_for(self.read(s), "public", "rs")
        nbackfill = pg.one("SELECT count(*) FROM rs")
        self.assertEqual(len(first), nbackfill)
        self.assertTableMatches(first, "public", "rs", ["id"])
        slot = pg.slot_info(s.slot)
        self.assertIsNotNone(slot, "the stream's slot exists after a run")
        self.assertFalse(slot["active"])

        for round_ in range(3):
            last_tx = workload_step(pg, 1000 * (round_ + 1))
            self.catch_up(s)
            recs = records_for(self.read(s), "public", "rs")
            self.assertTableMatches(recs, "public", "rs", ["id"])
            self.assertNoCounterGaps(recs, "public", "rs", ["id"])
            # caught up means acknowledged: the slot has confirmed what we wrote
            slot = pg.slot_info(s.slot)
            self.assertGreater(slot["confirmed_flush_lsn"], last_tx,
                               "confirmed_flush_lsn is not past the last transaction made before the run")
        # the manifests account for every file and record, with no gap
        v = s.run("verify", "--stream", "restart")
        self.assertEqual(v.rc, 0, v.describe())
        self.assertIn("complete, nothing missing, nothing twice", v.stdout)
        # one backfill only: a restart resumes, it does not backfill again
        bf = [r for r in recs if r["read_method"] == "postgresql-backfill"]
        self.assertEqual(len(bf), nbackfill)
        self.assertEqual(len({csn(r) for r in bf}), 1)
        # a run with nothing new writes nothing new
        before = len(read_avro_tree(s.out, self, keep=lambda r: 0))
        self.catch_up(s)
        self.assertEqual(len(read_avro_tree(s.out, self, keep=lambda r: 0)), before)

    def test_sigterm_drains(self):
        pg = self.pg
        s = self.sluice(stream="drain", tables="public.rs", max_file_seconds=1)
        self.catch_up(s)
        p = s.start("run")
        workload_step(pg, 50000)
        target_rows = pg.one("SELECT count(*) FROM rs")

        def streamed():
            # the marker row, written last, reached the output of the running agent
            if not p.alive():
                raise AssertionError(f"sluice run exited early:\n{p.result().describe()}")
            ids = read_avro_tree(s.out, self, keep=lambda r: r["payload"].get("id"))
            return -50000 in ids
        wait_until(streamed, 60, "the running agent to write the changes")
        # more changes, and SIGTERM while they may still be in flight
        workload_step(pg, 60000)
        target_rows = pg.one("SELECT count(*) FROM rs")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, f"SIGTERM must drain and exit 0:\n{r.describe()}")
        pg.wait_slot_inactive(s.slot)
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rs")
        self.assertTableMatches(recs, "public", "rs", ["id"])
        self.assertNoCounterGaps(recs, "public", "rs", ["id"])
        self.assertEqual(target_rows, pg.one("SELECT count(*) FROM rs"))

    def test_status_and_version(self):
        s = self.sluice(stream="st_probe", tables="public.rs")
        r = s.run("version")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("sluice", r.stdout.lower())
        self.catch_up(s)
        r = s.run("status")
        self.assertEqual(r.rc, 6, r.describe())   # 6: no agent runs the stream
        self.assertIn("st_probe", r.stdout)
        r = s.run("status", "--json")
        self.assertEqual(r.rc, 6, r.describe())
        doc = json.dumps(json.loads(r.stdout))
        # it names the stream and its slot, and shows the slot's confirmed position as the server has it
        self.assertIn('"st_probe"', doc)
        self.assertIn('"sluice_st_probe"', doc)
        confirmed = self.pg.one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                "WHERE slot_name = 'sluice_st_probe'")
        self.assertIn(f'"{confirmed}"', doc)
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())

if __name__ == "__main__":
    unittest.main()
