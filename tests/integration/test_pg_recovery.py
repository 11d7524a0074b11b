"""
tests/integration/test_pg_recovery.py: the ways back after trouble.

- exit code 4 (slot dropped) -> `sluice backfill` -> `sluice run`: a new slot,
  a new backfill, and the output converges on the source again;
- a backfill interrupted by SIGTERM or kill -9 is redone on the next run with
  no duplicate backfill rows and no leftover temporary files;
- `sluice backfill --table` re-reads one table while its slot keeps its place.
"""

import os
import signal
import unittest

from harness import PgTestCase, csn, records_for, wait_until


def hidden_files(root):
    found = []
    for d, _, names in os.walk(root):
        found += [os.path.join(d, n) for n in names if n.startswith(".")]
    return found


def backfill_records(recs):
    """The backfill rows (INSERTs), without re-backfill markers."""
    return [r for r in recs if r["read_method"] == "postgresql-backfill"
            and r["source_metadata"]["change_type"] == "INSERT"]


def markers(recs):
    """Re-backfill markers: TRUNCATE records with the backfill read method."""
    return [r for r in recs if r["read_method"] == "postgresql-backfill"
            and r["source_metadata"]["change_type"] == "TRUNCATE"]


def csn_before(c):
    """The CSN of the position just before c's position, sequence 0."""
    pos = int(c.split("-")[0], 16)
    return f"{pos - 1:016X}-0000000000"


class RecoveryTest(PgTestCase):

    def test_backfill_after_lost_slot_converges(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_lost (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_lost SELECT g, 'v' || g FROM generate_series(1, 50) g")
        s = self.sluice(stream="reclost", tables="public.rec_lost")
        self.catch_up(s)
        pg.execute("SELECT pg_drop_replication_slot('sluice_reclost')")
        # changes made while no slot exists are lost to the log...
        pg.execute("UPDATE rec_lost SET v = 'changed' WHERE id <= 10")
        pg.execute("DELETE FROM rec_lost WHERE id > 45")
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        r = s.run("backfill", "--stream", "reclost", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("every table marked for backfill", r.stdout)
        # ...and recovered by the new backfill
        self.catch_up(s)
        self.assertIsNotNone(pg.slot_info("sluice_reclost"), "a new slot was created")
        recs = records_for(self.read(s), "public", "rec_lost")
        self.assertTableMatches(recs, "public", "rec_lost", ["id"])
        snapshots = sorted({csn(r) for r in backfill_records(recs)})
        self.assertEqual(len(snapshots), 2, "two backfills: the first run's and the recovery's")
        second = [r for r in backfill_records(recs) if csn(r) == snapshots[1]]
        self.assertEqual(len(second), 45)
        # the recovery's rows are preceded by a marker that drops rows deleted
        # while no slot followed the table (ids 46-50)
        self.assertEqual([csn(r) for r in markers(recs)], [csn_before(snapshots[1])])
        # streaming goes on from the new slot
        pg.execute("INSERT INTO rec_lost VALUES (100, 'after')")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rec_lost")
        self.assertTableMatches(recs, "public", "rec_lost", ["id"])

    def test_slot_ahead_of_checkpoint_is_position_lost(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_ahead (id int PRIMARY KEY)")
        s = self.sluice(stream="recahead", tables="public.rec_ahead")
        self.catch_up(s)
        pg.execute("INSERT INTO rec_ahead VALUES (1)")
        # another reader consumes the slot past what sluice made durable
        pg.execute("SELECT pg_replication_slot_advance('sluice_recahead', pg_current_wal_lsn())")
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        self.assertIn('slot "sluice_recahead" has confirmed position', r.stderr)
        self.assertIn("ahead of", r.stderr)
        self.assertEqual(records_for(self.read(s), "public", "rec_ahead"), [],
                         "nothing was written past the gap")

    def interrupted_backfill(self, how, stream):
        pg = self.pg
        table = f"rec_{stream}"
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text, pad text)")
        pg.execute(f"INSERT INTO {table} SELECT g, 'v' || g, repeat(md5(g::text), 20) FROM generate_series(1, 150000) g")
        s = self.sluice(stream=stream, tables=f"public.{table}", max_file_bytes="1MB")
        p = s.start("run")
        wait_until(lambda: "backfilling public." + table in p.stderr_text() or not p.alive(), 60,
                   "the backfill to start")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        if how == "kill":
            p.kill9()
            p.wait_result(30)
        else:
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
            self.assertEqual(r.rc, 0, f"a drain during backfill exits 0:\n{r.describe()}")
        pg.wait_slot_inactive(s.slot)
        pg.execute(f"UPDATE {table} SET v = 'changed' WHERE id % 1000 = 0")
        r = self.catch_up(s)
        self.assertEqual(hidden_files(s.out), [], "leftover temporary files")
        recs = records_for(self.read(s), "public", table)
        bf = backfill_records(recs)
        self.assertEqual(len(bf), 150000, "every row backfilled exactly once")
        self.assertEqual(len({r["uuid"] for r in bf}), 150000)
        self.assertEqual(len({csn(r) for r in bf}), 1, "one backfill snapshot survives")
        self.assertEqual([csn(r) for r in markers(recs)], [csn_before(csn(bf[0]))],
                         "the redone backfill starts with one marker")
        self.assertTableMatches(recs, "public", table, ["id"])
        return r

    def test_sigterm_during_backfill(self):
        self.interrupted_backfill("term", "recterm")

    def test_kill_during_backfill(self):
        self.interrupted_backfill("kill", "reckill")

    def test_rebackfill_one_table(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_a (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE rec_b (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_a SELECT g, 'a' || g FROM generate_series(1, 30) g")
        pg.execute("INSERT INTO rec_b SELECT g, 'b' || g FROM generate_series(1, 20) g")
        s = self.sluice(stream="recone", tables="public.rec_a, public.rec_b")
        self.catch_up(s)
        pg.execute("UPDATE rec_a SET v = 'new' WHERE id < 5")
        r = s.run("backfill", "--stream", "recone", "--table", "public.rec_a", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        recs = self.read(s)
        a, b = records_for(recs, "public", "rec_a"), records_for(recs, "public", "rec_b")
        self.assertEqual(len({csn(r) for r in backfill_records(a)}), 2, "rec_a was backfilled again")
        self.assertEqual(len(backfill_records(a)), 60)
        self.assertEqual(len(backfill_records(b)), 20, "rec_b was not")
        self.assertEqual(len(markers(a)), 1)
        self.assertEqual(markers(b), [])
        self.assertTableMatches(a, "public", "rec_a", ["id"])
        self.assertTableMatches(b, "public", "rec_b", ["id"])
        r = s.run("status", "--json", timeout=60)
        self.assertIn('"backfill": "done"', r.stdout)


if __name__ == "__main__":
    unittest.main()
