"""
tests/integration/test_pg_rebackfill.py: the chunked backfill.

- `sluice backfill --table` while the agent streams, under a random
  workload (inserts, updates, deletes, key changes), with kill -9 of the
  agent in the middle of the re-backfill: the restarted agent resumes after
  the last durable chunk, and the rebuilt output equals the source;
- a table added to the stream's `tables` later is backfilled while the
  stream goes on (the watermark method), under a workload on that table;
- the initial backfill killed with kill -9 resumes after its last durable
  chunk instead of starting over: every key once, the rows of the first run
  exactly those the checkpoint said were durable;
- `sluice backfill --table` of a running agent is taken within seconds, its
  request file removed; without --table it is still refused;
- a table without a key is read in ranges of pages over two connections,
  and a request to backfill it restarts the stream to read it from a
  snapshot;
- a re-backfill whose chunks meet a column renamed and one dropped after
  the stream's position (issue 17) waits for the stream to reach them,
  and the output equals the table;
- a column renamed and one dropped while the agent streams, committed
  while a chunk of a backfill waits for the table's lock: the chunk meets
  columns the stream has not read yet, and waits for it to reach the DDL
  (logged), with a change after the DDL (the stream reads its description,
  and the rename backfills the table again) and without (the stream
  restarts); the output equals the table (issue 17);
- a backfill while streaming killed once a chunk is durable, then a
  column renamed with no agent running: the next run starts the backfill
  over behind a new marker (it resumed after the durable chunks, whose
  rows held the old name: issue 17);
- a re-backfill killed with no chunk durable, then the table truncated
  with no agent running: the next run skips the TRUNCATE before its first
  chunk's low watermark, and the chunk's rows stay (issue 17, seed 329).

The seed of the workload is printed; rerun with SLUICE_TEST_SEED=<seed>.
"""

import collections
import json
import os
import re
import unittest

from harness import (BackfillUnderLoad, PgTestCase, assert_marker_between, backfill_inserts, backfill_requests_left,
                     backfill_running, checkpoint, checkpoint_table, csn, pick_seed, records_for, truncate_markers,
                     wait_until)
from workload import CounterWorkload, Runner


class CounterOnly(CounterWorkload):
    """CounterWorkload's inserts and updates (no delete, no key change),
    naming only id and counter, which a rename or a drop of the table's
    other columns leaves."""

    def __init__(self, ns, table, ids):
        super().__init__(pick_seed(), "pg", ns, [table], ids, mix=(0.3, 0.7, 0, 0))

    def counter_op(self, t):
        op = super().counter_op(t)
        (op[2] if op[0] == "insert" else op[3]).pop("v")
        return op


class RebackfillTest(BackfillUnderLoad, PgTestCase):
    ns = "public"
    chunk_rows = 500

    def make_table(self, name, rows):
        self.pg.execute(f"DROP TABLE IF EXISTS {name}")
        self.pg.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, v text, counter int NOT NULL, "
                        f"pad text)")
        self.pg.execute(f"INSERT INTO {name} SELECT g, md5(g::text), 0, repeat('p', 50) "
                        f"FROM generate_series(1, {rows}) g")

    def agent(self, stream, tables, **kw):
        extra = {"source": {"backfill_chunk_rows": self.chunk_rows, "backfill_connections": 2}}
        return self.sluice(stream=stream, tables=tables, max_file_seconds=1, extra=extra, **kw)

    def test_rebackfill_under_workload_with_kill(self):
        self.rebackfill_with_kill(60000)

    def test_table_added_to_the_config_is_backfilled_while_streaming(self):
        self.table_added_under_load(20000)

    def test_redone_backfill_keeps_toast_values(self):
        """Merge mode: a snapshot backfill redone after an interruption takes
        a new snapshot, while the stream resumes from where the first one
        began, so it reads again the changes the new snapshot holds.  A key
        change there (1 to 2, the large value left unchanged), and after
        the snapshot another (2 to 3): the value of key 3 comes from the
        snapshot's row of key 2, not through key 1, whose row the marker
        cleared.  It was written as null (the property harness's seed 322)."""
        from oracle import diff_avro
        pg = self.pg
        pg.execute("CREATE TABLE rdt (id int PRIMARY KEY, n int NOT NULL, body text)")
        pg.execute("ALTER TABLE rdt ALTER body SET STORAGE EXTERNAL")
        pg.execute("INSERT INTO rdt SELECT g, 0, repeat(md5(g::text), 200) FROM unnest('{1,5,6}'::int[]) g")
        s = self.sluice(stream="rdt", tables="public.rdt", write_mode="merge")
        self.catch_up(s)
        pg.execute("UPDATE rdt SET id = 2, n = n + 1 WHERE id = 1")
        pg.execute("UPDATE rdt SET n = n + 1 WHERE id = 2")
        pg.execute("DELETE FROM rdt WHERE id = 6")
        # the backfill interrupted (as a kill before its rows were durable
        # leaves it): the next run redoes it at a new snapshot
        path = os.path.join(s.state_dir, "rdt.checkpoint.json")
        ck = checkpoint(s)
        ck["tables"]["public.rdt"]["backfill"] = "running"
        with open(path, "w") as f:
            json.dump(ck, f)
        first = ck["tables"]["public.rdt"]["snapshot"]
        p = s.start("run")
        def redone():
            e = checkpoint_table(s, "public.rdt")
            return e.get("backfill") == "done" and e.get("snapshot") != first
        wait_until(lambda: redone() or not p.alive(), 60, "the redone backfill durable")
        self.assertIn("redoing the interrupted backfill of public.rdt", p.stderr_text())
        # killed before it wrote a change: the next run reads them all again,
        # with these, into one batch
        p.kill9()
        p.wait_result(30)
        pg.wait_slot_inactive(s.slot)
        self.assertEqual(checkpoint(s)["durable"], ck["durable"])
        pg.execute("UPDATE rdt SET id = 3, n = n + 1 WHERE id = 2")
        pg.execute("UPDATE rdt SET n = n + 1 WHERE id = 5")
        r = self.catch_up(s)
        self.assertEqual(pg.sql("SELECT id, n, length(body) FROM rdt ORDER BY id"),
                         [(3, 3, 6400), (5, 1, 6400)])
        # only rdt: the class's other tests leave their tables in public
        self.assertEqual(diff_avro("pg", pg, "public", s.out, s.stream, "merge", tables=["rdt"]), [])
        self.assertNotIn("written as null", p.stderr_text() + r.stderr)

    def test_initial_backfill_resumes_after_kill(self):
        pg = self.pg
        self.make_table("ini", 300000)
        s = self.agent("ini", "public.ini", max_file_bytes="1MB")
        p = self.start_slow(s)
        wait_until(lambda: backfill_running(s, "public.ini", "snapshot", 3) or not p.alive(), 120,
                   "durable chunks of the initial backfill")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.kill9()
        p.wait_result(30)
        e = checkpoint_table(s, "public.ini")
        self.assertEqual((e["backfill"], e["method"]), ("running", "snapshot"), e)
        durable_rows, durable_chunks = e["rows"], e["chunks"]
        self.assertLess(durable_rows, 300000, "killed before the end")
        self.assertEqual(e["resume_key"], str(durable_rows), "chunks end at keys 1..N: the key of the last row")
        pg.wait_slot_inactive(s.slot)
        pg.execute("UPDATE ini SET counter = 1 WHERE id % 997 = 0")
        r = self.catch_up(s)
        self.assertIn(f"backfilling public.ini at ", r.stderr)
        self.assertIn(f", resuming after its last durable chunk ({durable_rows} rows, {durable_chunks} chunks "
                      f"durable)", r.stderr)
        self.assertNotIn("redoing the interrupted backfill", r.stderr)
        self.assertIn(f"backfilled public.ini: {300000 - durable_rows} rows read in", r.stderr)
        recs = records_for(self.read(s), "public", "ini")
        bf = backfill_inserts(recs)
        ids = collections.Counter(r["payload"]["id"] for r in bf)
        self.assertEqual(len(bf), 300000, "every row backfilled once")
        self.assertEqual(set(ids), set(range(1, 300001)))
        by_csn = collections.Counter(csn(r) for r in bf)
        self.assertEqual(len(by_csn), 2, "the first run's snapshot and the resumed one")
        first = min(by_csn)
        self.assertEqual(by_csn[first], durable_rows, "the first run's rows are exactly the durable chunks")
        self.assertEqual(max(r["payload"]["id"] for r in bf if csn(r) == first), durable_rows)
        self.assertEqual(truncate_markers(recs), [])
        self.assertTableMatches(recs, "public", "ini", ["id"])
        e = checkpoint_table(s, "public.ini")
        self.assertEqual((e["backfill"], e["rows"]), ("done", 300000))

    def test_partitioned_table_while_streaming(self):
        """A partitioned table backfilled while streaming after a change of
        it reached the stream: its rows are its partitions' (read without
        ONLY), not none (the stream's version of the table lacked what the
        catalog knows, and the backfill read 0 rows: test_property found
        its rows missing after an attached partition)."""
        pg = self.pg
        pg.execute("CREATE TABLE pt (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
        # gone afterwards: the class's other tests compare every table of public
        self.addCleanup(pg.execute, "DROP TABLE IF EXISTS pt")
        for lo, hi in ((1, 100), (100, 1000)):
            pg.execute(f"CREATE TABLE pt_{hi} PARTITION OF pt FOR VALUES FROM ({lo}) TO ({hi})")
        pg.execute("INSERT INTO pt SELECT g, 'old' FROM generate_series(1, 300) g")
        s = self.agent("ptw", "public.pt")
        p = self.start_streaming(s)
        pg.execute("UPDATE pt SET v = 'new' WHERE id <= 10")
        pg.wait_wal_flushed()
        r = s.run("backfill", "--stream", "ptw", "--table", "public.pt", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        wait_until(lambda: "backfilled public.pt while streaming" in p.stderr_text() or not p.alive(), 60,
                   "the re-backfill")
        self.assertIn("backfilled public.pt while streaming: 300 rows", p.stderr_text())
        self.stop(p)
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "pt", ["id"])

    def test_backfill_request_while_running(self):
        self.backfill_request_while_running()

    def ddl_during_rebackfill(self, name, later_change):
        """A re-backfill of table name (requested with no agent running),
        a column renamed and one dropped after the stream's position, the
        stream replaying a change of the table as it was before the DDL;
        later_change: a change of the table after the DDL.  The backfill
        keeps the columns the run started with (the catalog's): the older
        description the replay gives does not take it back to the columns
        of then, which its chunks would no longer find (it waited for the
        stream to reach the DDL, and without a later change restarted the
        stream; before that, the stream stopped after 5 retries, each from
        the same checkpoint: issue 17).  The output equals the table."""
        pg = self.pg
        self.make_table(name, 3000)
        s = self.agent(name, f"public.{name}")
        self.catch_up(s)
        r = s.run("backfill", "--stream", name, "--table", f"public.{name}", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        # the stream reads this change (and the table as it was) after the
        # re-backfill's first chunk, and the DDL after it
        pg.execute(f"UPDATE {name} SET counter = 1 WHERE id = 2900")
        pg.execute(f"ALTER TABLE {name} RENAME COLUMN v TO w")
        pg.execute(f"ALTER TABLE {name} DROP COLUMN pad")
        if later_change:
            pg.execute(f"UPDATE {name} SET counter = 2 WHERE id = 1")
        r = self.catch_up(s, timeout=120)
        self.assertNotIn(f"the backfill of public.{name} waits for the stream", r.stderr)
        self.assertNotIn("restarting the stream", r.stderr)
        self.assertIn(f"backfilled public.{name} while streaming: 3000 rows in 6 chunks", r.stderr)
        recs = records_for(self.read(s), "public", name)
        # the backfill keeps the catalog's columns at the run's start, which
        # the stream hands on once it passes the run's start position: the
        # stream goes on without a restart
        self.assertEqual(len(truncate_markers(recs)), 1)
        self.assertTableMatches(recs, "public", name, ["id"])
        return r

    def test_columns_renamed_and_dropped_during_rebackfill(self):
        self.ddl_during_rebackfill("ddl_a", True)

    def test_columns_renamed_and_dropped_during_rebackfill_no_change_after(self):
        r = self.ddl_during_rebackfill("ddl_b", False)
        self.assertIn('table "public"."ddl_b": its columns at the run\'s start go to the destination', r.stderr)

    def chunk_waits_for_lock(self, name):
        """A chunk of a backfill while streaming has waited less than 300 ms
        for the lock on table name (its lock_timeout is a second, then it
        is tried again: the stream reads on meanwhile)."""
        return self.pg.one("SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND mode = 'AccessShareLock' "
                           "AND NOT granted AND clock_timestamp() - waitstart < interval '300 ms'", (name,)) > 0

    def ddl_while_backfilling(self, name, change_after):
        """While the agent streams, under inserts and updates of table name,
        a column renamed and one dropped in a transaction that holds the
        table, then `sluice backfill --table` of it: the transaction
        commits while the backfill's first chunk waits for the table's
        lock, with change_after an update and an insert of the table in it
        (else no change of the table until the agent has restarted the
        stream).  That chunk's snapshot sees the DDL, and its query names
        the columns the stream has read so far, which it cannot be past (the
        chunk runs on the stream's thread): it waits for the stream to
        reach the DDL (no test drove it since a backfill queued at a run's
        start keeps the catalog's columns: issue 17).  Returns the agent's
        log and the table's records."""
        pg = self.pg
        table = f"public.{name}"
        self.make_table(name, 3000)
        self.chunk_rows = 100
        s = self.agent(name, table)
        p = self.start_streaming(s)
        w = Runner(pg, CounterOnly("public", name, range(1, 3001)))
        w.start()
        ddl = pg.connect(autocommit=False)
        try:
            wait_until(lambda: w.tx > 20, 60, "the writes to run")
            if not change_after:
                w.finish()   # a write the DDL holds up would follow it
            with ddl.cursor() as cur:
                cur.execute(f"ALTER TABLE {name} RENAME COLUMN v TO w")
                cur.execute(f"ALTER TABLE {name} DROP COLUMN pad")
                r = s.run("backfill", "--stream", name, "--table", table, timeout=60)
                self.assertEqual(r.rc, 0, r.describe())
                wait_until(lambda: self.chunk_waits_for_lock(name) or not p.alive(), 60, "a chunk to wait for the lock")
                self.assertIn(f"backfilling {table} while streaming", p.stderr_text())
                if change_after:
                    cur.execute(f"UPDATE {name} SET counter = counter + 1, w = 'after' WHERE id = 2")
                    cur.execute(f"INSERT INTO {name} (id, w, counter) VALUES (0, 'after', 0)")
            ddl.commit()
            wait_until(lambda: f"the backfill of {table} waits for the stream to reach a DDL" in p.stderr_text()
                       or not p.alive(), 60, "the chunk to wait for the DDL")
            if change_after:
                # the stream reads the DDL's description before the chunk's
                # probe; the rename backfills the table again once the
                # backfill the DDL met is done
                wait_until(lambda: p.stderr_text().count(f"backfilled {table} while streaming") == 2
                           or not p.alive(), 120, "the backfill, and the rename's")
            else:
                # the stream reads the probe with no description of the
                # table since: it restarts, and takes the table as it is
                wait_until(lambda: "restarting the stream" in p.stderr_text() or not p.alive(), 60, "a restart")
                w = Runner(pg, w.workload)
                w.start()
                wait_until(lambda: f"backfilled {table} while streaming" in p.stderr_text() or not p.alive(), 120,
                           "the backfill after the restart")
            n = w.tx
            wait_until(lambda: w.tx > n + 20, 60, "the writes to run after the backfill")
        finally:
            ddl.close()
            w.finish()
        self.stop(p)
        err = p.stderr_text()
        # the chunk finds the column renamed (w is new to the stream) or
        # dropped (its query names pad)
        self.assertRegex(err, f'the backfill of {table} waits for the stream to reach a DDL of the table: .*'
                         '(column "(v|pad)" does not exist|has a column "w" that the stream has not read)')
        self.assertEqual(backfill_requests_left(s), [])
        self.catch_up(s)
        recs = records_for(self.read(s), "public", name)
        self.assertTableMatches(recs, "public", name, ["id"])
        return err, recs

    def test_ddl_while_a_backfill_runs(self):
        err, recs = self.ddl_while_backfilling("dwr", True)
        self.assertNotIn("restarting the stream", err)
        self.assertIn('table "public"."dwr": column "v" was renamed to "w": the existing rows hold its values under '
                      'the new name without a change: it is backfilled again, behind a marker', err)
        self.assertEqual(len(truncate_markers(recs)), 2, "the request's marker and the rename's")

    def test_ddl_while_a_backfill_runs_no_change_after(self):
        err, recs = self.ddl_while_backfilling("dwn", False)
        self.assertIn("the backfill of public.dwn met a DDL that no change of the table followed", err)

    def test_rename_while_a_backfill_is_stopped(self):
        """A backfill while streaming killed once a chunk is durable (a slow
        agent: each chunk's rows close a file, whose flush waits a second),
        then a column renamed with no agent running: the next run backfills
        the table again from the start, behind a marker of its own.  It
        resumed after the durable chunks, with the new columns: the rows of
        those chunks held the column under its old name, and read NULL
        under the new one (issue 17).  The output equals the table."""
        pg = self.pg
        self.make_table("rks", 3000)
        self.chunk_rows = 100
        s = self.agent("rks", "public.rks")
        self.catch_up(s)
        p = self.start_streaming(s, slow=True, max_file_bytes="1KB")
        try:
            r = s.run("backfill", "--stream", "rks", "--table", "public.rks", timeout=60)
            self.assertEqual(r.rc, 0, r.describe())
            wait_until(lambda: backfill_running(s, "public.rks", "watermark", 1) or not p.alive(), 120,
                       "a durable chunk")
        finally:
            p.kill9()
            p.wait_result(30)
        e = checkpoint_table(s, "public.rks")
        self.assertEqual((e["backfill"], e["method"]), ("running", "watermark"), e)
        self.assertLess(e["rows"], 3000, e)
        pg.wait_slot_inactive(s.slot)
        pg.execute("ALTER TABLE rks RENAME COLUMN v TO w")
        r = self.catch_up(s)
        self.assertIn('table "public"."rks": column "v" was renamed to "w": the existing rows hold its values under '
                      'the new name without a change: it is backfilled again, behind a marker', r.stderr)
        self.assertIn("the backfill of public.rks starts over: the chunks read so far hold its rows as they were",
                      r.stderr)
        self.assertIn("backfilled public.rks while streaming: 3000 rows in 30 chunks", r.stderr)
        recs = records_for(self.read(s), "public", "rks")
        self.assertEqual(len(truncate_markers(recs)), 2, "the request's marker and the rename's")
        self.assertTableMatches(recs, "public", "rks", ["id"])

    def test_truncate_skipped_before_the_first_watermark(self):
        self.truncate_skipped_before_the_first_watermark()

    def test_request_when_no_agent_runs(self):
        self.make_table("off_a", 1200)
        s = self.agent("off", "public.off_a")
        self.catch_up(s)
        # nothing is written between: the stream's position is still the
        # snapshot's, the CSN of the rows the marker ends
        old = records_for(self.read(s), "public", "off_a")
        r = s.run("backfill", "--stream", "off", "--table", "public.off_a", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream off: public.off_a marked for backfill on the next run", r.stdout)
        r = self.catch_up(s)
        self.assertIn("backfilled public.off_a while streaming: 1200 rows in 3 chunks", r.stderr)
        recs = records_for(self.read(s), "public", "off_a")
        self.assertEqual(len(truncate_markers(recs)), 1)
        self.assertEqual(len(backfill_inserts(recs)), 2400)
        seen = {r["uuid"] for r in old}
        assert_marker_between(self, old, truncate_markers(recs)[0],
                              [r for r in backfill_inserts(recs) if r["uuid"] not in seen])
        self.assertTableMatches(recs, "public", "off_a", ["id"])

    def test_keyless_table_in_page_ranges(self):
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS nokey")
        pg.execute("CREATE TABLE nokey (a int, b text)")
        pg.execute("ALTER TABLE nokey REPLICA IDENTITY FULL")
        # 3000 distinct rows, and 1000 that repeat one row
        pg.execute("INSERT INTO nokey SELECT g, 'r' || g FROM generate_series(1, 3000) g")
        pg.execute("INSERT INTO nokey SELECT 0, 'same' FROM generate_series(1, 1000)")
        pg.execute("ANALYZE nokey")
        s = self.agent("nokey", "public.nokey", log_level="debug")
        p = self.start_streaming(s)
        err = p.stderr_text()
        m = re.search(r'table "public"\."nokey": (\d+) chunks over 2 connections', err)
        self.assertIsNotNone(m, err)
        self.assertGreater(int(m.group(1)), 1, "several page ranges")
        self.assertIn("backfilled public.nokey: 4000 rows read in", err)
        r = s.run("backfill", "--stream", "nokey", "--table", "public.nokey", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        wait_until(lambda: "which has no key to read it in chunks while streaming: it is read from a snapshot; "
                   "restarting the stream" in p.stderr_text() or not p.alive(), 30, "the restart")
        wait_until(lambda: p.stderr_text().count("backfilled public.nokey: 4000 rows read in") == 2
                   or not p.alive(), 60, "the snapshot re-backfill")
        self.assertEqual(backfill_requests_left(s), [])
        self.stop(p)
        recs = records_for(self.read(s), "public", "nokey")
        ms = truncate_markers(recs)
        self.assertEqual(len(ms), 1)
        for rows in ([r for r in backfill_inserts(recs) if csn(r) < csn(ms[0])],
                     [r for r in backfill_inserts(recs) if csn(r) > csn(ms[0])]):
            got = collections.Counter((r["payload"]["a"], r["payload"]["b"]) for r in rows)
            want = collections.Counter({(g, f"r{g}"): 1 for g in range(1, 3001)})
            want[(0, "same")] = 1000
            self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main()
