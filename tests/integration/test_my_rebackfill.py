"""
tests/integration/test_my_rebackfill.py: backfill while streaming from
MariaDB (the watermark method, with the watermark table), as
test_pg_rebackfill.py does for PostgreSQL.

- `sluice backfill --table` while the agent streams, under a random
  workload (inserts, updates, deletes, key changes), with kill -9 of the
  agent in the middle of the re-backfill: the restarted agent resumes after
  the last durable chunk, and the rebuilt output equals the source;
- a table added to the stream's `tables` later is backfilled while the
  stream goes on, under a workload on that table;
- a request to a running agent is taken within seconds, its request file
  removed; chunk counts and values exact;
- keys of several columns and types (latin1 text in a case-insensitive
  collation, DATETIME(6), BIGINT UNSIGNED, ENUM) are read chunk after
  chunk in key order, each row once;
- tables swapped in by RENAME (an online schema change; one of them
  empty) are backfilled while streaming, once;
- a re-backfill resumed with no chunk durable skips the table's changes
  up to its first low watermark, a TRUNCATE included; a column added
  between the listing of the tables and the initial backfill's snapshot
  is in the rows (the stream starts again);
- watermark rows never reach the output, and the watermark table is never
  one of the stream's tables, even when `tables` matches it;
- without the watermark table: `sluice check` warns (exit 0), a request to
  a running agent is refused (exit 3) with the DDL and the GRANT, and a
  table marked for backfill is read from a snapshot before streaming;
  with the table but without the grant, `sluice check` exits 3 naming it,
  and with binlog_ignore_db leaving out its database, too.

Each runs with binlog_row_metadata=FULL (RebackfillTest) and the first
three again with MINIMAL (RebackfillMinimalTest: the watermark table's
columns are read by position).  The seed of the workload is printed; rerun
with SLUICE_TEST_SEED=<seed>.
"""

import collections
import os
import random
import unittest
import uuid as uuidlib

from harness import (BackfillUnderLoad, assert_marker_between, backfill_inserts, backfill_requests_left,
                     backfill_running, checkpoint_table, csn, csn_seq, records_for, truncate_markers, wait_until)
from harness_mysql import MyTestCase, SLUICE_USER

WM_DDL = ("CREATE TABLE sluice.watermarks (stream VARBINARY(255) NOT NULL PRIMARY KEY, "
          "watermark VARBINARY(1024) NOT NULL) ENGINE=InnoDB")


def tables_in(recs):
    return {(r["source_metadata"].get("database"), r["source_metadata"].get("table")) for r in recs}


class RebackfillCases(BackfillUnderLoad):
    """The tests each server setting runs (mixed into a MyTestCase)."""
    chunk_rows = 500
    ns = "app"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        my = cls.my
        my.execute("CREATE DATABASE app")
        my.execute("CREATE DATABASE sluice")
        my.execute(WM_DDL)
        my.execute(f"GRANT INSERT, UPDATE ON sluice.watermarks TO '{SLUICE_USER}'@'127.0.0.1'")

    def make_table(self, name, rows):
        self.my.execute(f"DROP TABLE IF EXISTS app.{name}")
        self.my.execute(f"CREATE TABLE app.{name} (id bigint PRIMARY KEY, v varchar(40), counter int NOT NULL, "
                        f"pad varchar(60))")
        if rows:
            self.my.execute(f"INSERT INTO app.{name} SELECT seq, md5(seq), 0, repeat('p', 50) "
                            f"FROM app.seq_1_to_{rows}")

    def agent(self, stream, tables, source=None, **kw):
        extra = {"source": dict({"backfill_chunk_rows": self.chunk_rows}, **(source or {}))}
        return self.sluice(stream=stream, tables=tables, max_file_seconds=1, extra=extra, **kw)

    def kill_after_a_chunk(self, s, table):
        """`sluice backfill --table` of a slow running agent, kill -9 once a
        chunk of 100 rows is durable (the chunks and watermarks after it are
        in the binlog after the checkpoint); the next run reads the rest in
        chunks of 10000 rows.

        The slow agent's reader does not wait for its flushes: it reads the
        1000 chunks in a few seconds (into the queue), and with one flush a
        second a backfill could be checkpointed running for a moment only,
        or go from no chunk durable straight to done, and never be seen
        running by a test that looks late (a loaded machine).  So every
        chunk's rows close a file (max_file_bytes = 1KB), which makes each
        chunk's progress a flush of its own, delayed 1 s: the checkpoint
        has the backfill running for some 1000 s.  The table's initial
        backfill comes first, in a run of its own, not at that pace."""
        self.chunk_rows = 100
        s.extra["source"]["backfill_chunk_rows"] = 100
        s.write_config()
        self.catch_up(s)
        p = self.start_streaming(s, slow=True, max_file_bytes="1KB")
        r = s.run("backfill", "--stream", s.stream, "--table", table, timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        try:
            wait_until(lambda: backfill_running(s, table, "watermark", 1) or not p.alive(), 180, "a durable chunk")
        except TimeoutError:
            p.kill9()
            raise AssertionError("no durable chunk in 180 s; checkpoint entry %r; the agent printed:\n%s"
                                 % (checkpoint_table(s, table), p.stderr_text()[-20000:]))
        p.kill9()
        p.wait_result(30)
        e = checkpoint_table(s, table)
        self.assertEqual((e.get("backfill"), e.get("method")), ("running", "watermark"), p.stderr_text()[-20000:])
        self.assertGreaterEqual(e.get("chunks", 0), 1, e)
        s.extra["source"]["backfill_chunk_rows"] = 10000
        s.write_config()

    def first_watermark_written(self, s):
        return self.my.sql("SELECT watermark FROM sluice.watermarks WHERE stream = %s", (s.stream,))

    def assertNoWatermarks(self, recs):
        self.assertNotIn(("sluice", "watermarks"), tables_in(recs), "watermark rows are never changes")
        for r in recs:
            for v in r["payload"].values() if isinstance(r.get("payload"), dict) else ():
                self.assertFalse(isinstance(v, (str, bytes)) and (v[:7] in ("sluice:", b"sluice:")), r)

    # -- the tests

    def test_rebackfill_under_workload_with_kill(self):
        recs = self.rebackfill_with_kill(150000, log_level=os.environ.get("SLUICE_TEST_LOG", "info"))
        self.assertNoWatermarks(recs)
        self.assertEqual(tables_in(recs), {("app", "rbw")})

    def test_table_added_to_the_config_is_backfilled_while_streaming(self):
        self.assertNoWatermarks(self.table_added_under_load(5000))

    def test_backfill_request_while_running(self):
        # `tables` matches the watermark table too: it is never one of the stream's
        recs = self.backfill_request_while_running(also="sluice.*")
        self.assertNoWatermarks(recs)
        self.assertEqual(tables_in(recs), {("app", "req_a"), ("app", "req_b")})
        # the watermark table holds one row for the stream: the last watermark,
        # the low one of the chunk that found no row left
        rows = self.my.sql("SELECT stream, watermark FROM sluice.watermarks WHERE stream = 'req'")
        self.assertEqual(len(rows), 1)
        self.assertRegex(rows[0][1].decode(), r"^sluice:req:\d+\.\d+:\d+:low$")

    def backfill_again_offline(self, name, rows, **kw):
        """Table app.<name> of rows rows backfilled by stream <name>, then
        `sluice backfill --table` with no agent running and nothing written
        since, and the next run.  Returns the table's records after the
        first run and after the second, and the second run's Result."""
        self.make_table(name, rows)
        s = self.agent(name, f"app.{name}", **kw)
        self.catch_up(s)
        old = records_for(self.read(s), "app", name)
        self.assertEqual(len(old), rows)
        r = s.run("backfill", "--stream", name, "--table", f"app.{name}", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        r = self.catch_up(s)
        return old, records_for(self.read(s), "app", name), r

    def test_request_right_after_the_initial_backfill(self):
        """`sluice backfill --table` with no agent running, nothing written
        since the initial backfill: the stream's position is still the
        snapshot's, the CSN of the rows the marker ends.  The marker sorts
        strictly between the old rows and the chunks."""
        old, recs, r = self.backfill_again_offline("off_a", 1200)
        self.assertIn("backfilled app.off_a while streaming: 1200 rows in 3 chunks", r.stderr)
        self.assertEqual(len(truncate_markers(recs)), 1)
        seen = {r["uuid"] for r in old}
        new = [r for r in backfill_inserts(recs) if r["uuid"] not in seen]
        self.assertEqual(sorted(r["payload"]["id"] for r in new), list(range(1, 1201)))
        assert_marker_between(self, old, truncate_markers(recs)[0], new)
        self.assertTableMatches(recs, "app", "off_a", ["id"])


class RebackfillTest(RebackfillCases, MyTestCase):
    """binlog_row_metadata = FULL (the harness's default)."""

    def _load(self, insert, rows, table):
        """Runs insert for every row in one transaction; returns the rows of table."""
        c = self.my.connect(autocommit=False)
        cur = c.cursor()
        cur.executemany(insert, rows)
        c.commit()
        c.close()
        return self.my.one(f"SELECT COUNT(*) FROM {table}")

    def _chunked_rebackfill(self, table, n):
        """`sluice backfill --table app.TABLE` of a running agent in chunks of
        100 rows (n rows in all): (the records of app.TABLE, the backfill
        rows after the re-backfill marker)."""
        self.chunk_rows = 100
        s = self.agent(table, f"app.{table}")
        p = self.start_streaming(s)
        r = s.run("backfill", "--stream", table, "--table", f"app.{table}", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        chunks = (n + 99) // 100
        wait_until(lambda: f"backfilled app.{table} while streaming: {n} rows in {chunks} chunks" in p.stderr_text()
                   or not p.alive(), 120, "the re-backfill")
        self.stop(p)
        recs = records_for(self.read(s), "app", table)
        ms = truncate_markers(recs)
        self.assertEqual(len(ms), 1)
        return recs, [r for r in backfill_inserts(recs) if csn(r) > csn(ms[0])]

    def test_truncate_skipped_before_the_first_watermark(self):
        self.truncate_skipped_before_the_first_watermark()

    def test_changes_numbered_as_without_the_skip(self):
        """A transaction of two tables, one of them being backfilled again
        with no chunk durable: a restarted run skips that table's rows up to
        its first low watermark, but numbers the other table's changes as
        a run that did not skip them (the run before, killed after it wrote
        the transaction above its checkpoint) numbered them: the same
        records under the same CSNs.  (Numbered anew, a key change's
        UPDATE-DELETE and UPDATE-INSERT took each other's sequence numbers,
        two different records under one uuid; issue 17, property seed 222,
        mariadb/append/s3: 'wa222.wb: the records do not rebuild'.)"""
        my = self.my
        self.make_table("seq_b", 5)
        s, p = self.rebackfill_never_durable("seq_a", 5, also="app.seq_b")
        p.kill9()
        p.wait_result(30)
        c = my.connect(autocommit=False)
        cur = c.cursor()
        cur.execute("UPDATE app.seq_a SET counter = 1 WHERE id IN (1, 2)")
        cur.execute("UPDATE app.seq_b SET id = 10 WHERE id = 1")
        c.commit()
        c.close()
        self.catch_up(s)
        b = [r for r in records_for(self.read(s), "app", "seq_b") if r["read_method"] == "mysql-cdc-binlog"]
        self.assertEqual([(r["source_metadata"]["change_type"], r["payload"]["id"], csn_seq(csn(r))) for r in b],
                         [("UPDATE-DELETE", 1, 3), ("UPDATE-INSERT", 10, 4)])
        self.assertTableMatches(records_for(self.read(s), "app", "seq_a"), "app", "seq_a", ["id"])
        self.assertTableMatches(records_for(self.read(s), "app", "seq_b"), "app", "seq_b", ["id"])

    def test_delete_skipped_before_the_first_watermark(self):
        """A re-backfill that no chunk of has made durable, killed after it
        wrote a change of the table (SLUICE_FAULT_CHUNKS_SPOILED: every
        chunk is read again); then, with no agent running, that row deleted.
        The next run skips the table's changes up to its first low
        watermark (the chunks read the table after it), the delete
        included: its marker must come there, above the row an earlier run
        wrote, or the row stays in the output (issue 17, seed 204 of
        test_property's mariadb/merge/s3 cell: 'wm204.wa extra in output')."""
        my = self.my
        s, p = self.rebackfill_never_durable("skipd", 20)
        my.execute("INSERT INTO app.skipd VALUES (100, 'written, then deleted', 0, 'p')")
        my.execute("UPDATE app.skipd SET v = 'updated, then deleted' WHERE id = 7")
        wait_until(lambda: {100, 7} <= {r["payload"]["id"] for r in records_for(self.read(s), "app", "skipd")
                                        if r["read_method"] == "mysql-cdc-binlog"} or not p.alive(), 30,
                   "the changes to be written")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.kill9()
        p.wait_result(30)
        e = checkpoint_table(s, "app.skipd")
        self.assertEqual((e.get("backfill"), e.get("method"), e.get("resume_key")), ("running", "watermark", None), e)
        my.execute("DELETE FROM app.skipd WHERE id IN (7, 100)")
        r = self.catch_up(s)
        self.assertIn("resuming the backfill of app.skipd while streaming after its last durable chunk (0 rows, "
                      "0 chunks durable)", r.stderr)
        recs = records_for(self.read(s), "app", "skipd")
        self.assertTableMatches(recs, "app", "skipd", ["id"])

    def test_column_added_before_the_first_watermark(self):
        """A re-backfill that no chunk of is durable, killed; the next run
        resumes it, and a column is added and set after that run read the
        catalog and before its first low watermark (held by a lock on the
        watermark table).  The stream skips the table's events up to that
        watermark, the statement included, but the chunks read the table
        after it: with its columns now, or the column never reaches the
        destination (issue 17, soak seed 4620, mariadb/merge/iceberg)."""
        my = self.my
        t = "app.colwm"
        s, p = self.rebackfill_never_durable("colwm", 20)
        p.kill9()
        p.wait_result(30)
        lock = my.connect(autocommit=True)
        cur = lock.cursor()
        cur.execute("LOCK TABLES sluice.watermarks WRITE")
        try:
            p = s.start("run")
            wait_until(lambda: my.one("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "
                                      "INFO LIKE '%%sluice%%watermarks%%' AND STATE LIKE 'Waiting%%'") > 0
                       or not p.alive(), 60, "the first watermark to wait for the lock")
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            my.execute(f"ALTER TABLE {t} ADD COLUMN c3 int")
            my.execute(f"UPDATE {t} SET c3 = id * 10")
        finally:
            cur.execute("UNLOCK TABLES")
            lock.close()
        wait_until(lambda: f"backfilled {t} while streaming" in p.stderr_text() or not p.alive(), 60,
                   "the re-backfill")
        self.stop(p)
        self.assertIn(f"resuming the backfill of {t} while streaming after its last durable chunk (0 rows, "
                      "0 chunks durable)", p.stderr_text())
        recs = records_for(self.read(s), "app", "colwm")
        self.assertEqual(sorted((r["payload"]["id"], r["payload"].get("c3")) for r in backfill_inserts(recs)
                                if "c3" in r["payload"]), [(i, i * 10) for i in range(1, 21)])
        self.assertTableMatches(recs, "app", "colwm", ["id"])

    def test_column_added_before_the_snapshot(self):
        """A column added with a default after the first run listed its
        tables and before its backfill's snapshot (held by the test hook
        SLUICE_FAULT_MY_SNAPSHOT_WAIT): the statement is behind the
        snapshot's position, where the stream never reads it, so the rows
        read with the columns listed before lacked the column (issue 17,
        seed 211).  The columns are read again after the snapshot, and the
        stream starts again with the table as it is."""
        my = self.my
        self.make_table("colsnap", 30)
        s = self.agent("colsnap", "app.colsnap")
        go = os.path.join(s.state_dir, "snapshot-go")
        p = s.start("run", env={"SLUICE_FAULT_MY_SNAPSHOT_WAIT": go})
        wait_until(lambda: "test hook: the snapshot waits" in p.stderr_text() or not p.alive(), 60,
                   "the snapshot to wait")
        my.execute("ALTER TABLE app.colsnap ADD COLUMN c int NOT NULL DEFAULT 7")
        with open(go, "w"):
            pass
        wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.stop(p)
        recs = records_for(self.read(s), "app", "colsnap")
        self.assertEqual(sorted((r["payload"]["id"], r["payload"].get("c")) for r in backfill_inserts(recs)),
                         [(i, 7) for i in range(1, 31)])
        self.assertTableMatches(recs, "app", "colsnap", ["id"])
        self.assertIn("stream \"colsnap\": the columns of table \"app\".\"colsnap\" changed after they were read "
                      "and before the backfill's snapshot (4 columns, now 5); restarting the stream to take it in",
                      p.stderr_text())

    def test_uuid_and_inet6_keys(self):
        """MariaDB's UUID and INET6 as a chunked backfill's key: the resume
        key goes back into SQL as the value's text."""
        my = self.my
        my.execute("DROP TABLE IF EXISTS app.uk")
        my.execute("CREATE TABLE app.uk (u uuid NOT NULL, a inet6 NOT NULL, v int, PRIMARY KEY (u, a))")
        rng = random.Random(11)
        rows = [(str(uuidlib.UUID(int=rng.getrandbits(128), version=rng.choice([1, 4]))),
                 rng.choice(["::1", "2001:db8::1", "::ffff:10.0.0.1", "fe80::abcd"])) for _ in range(450)]
        n = self._load("INSERT IGNORE INTO app.uk (u, a, v) VALUES (%s, %s, 1)", rows, "app.uk")
        recs, after = self._chunked_rebackfill("uk", n)
        self.assertEqual(len(after), n, "each row once")
        self.assertTableMatches(recs, "app", "uk", ["u", "a"])

    def test_composite_keys_of_several_types(self):
        my = self.my
        my.execute("DROP TABLE IF EXISTS app.ck")
        my.execute("CREATE TABLE app.ck (s varchar(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL, "
                   "d datetime(6) NOT NULL, u bigint unsigned NOT NULL, e enum('z', 'a', 'm') NOT NULL, "
                   "v varchar(20), PRIMARY KEY (s, d, u, e))")
        rng = random.Random(7)
        words = ["a", "A ", "b", "\u00e9t\u00e9", "Zed", "zee", "m'x", "back\\slash", "tab\tx", ""]
        rows = set()
        while len(rows) < 1800:
            rows.add((rng.choice(words) + str(rng.randrange(3)), f"2024-0{rng.randrange(1, 4)}-01 00:00:0"
                      f"{rng.randrange(3)}.{rng.randrange(10) * 100000:06d}",
                      rng.choice([0, 1, 2 ** 63, 2 ** 64 - 1]), rng.choice(["z", "a", "m"])))
        # keys equal under the collation are one key: keep the first
        seen, uniq = set(), []
        for r in sorted(rows):
            k = (r[0].lower().rstrip(" "), r[1], r[2], r[3])
            if k not in seen:
                seen.add(k)
                uniq.append(r)
        n = self._load("INSERT INTO app.ck (s, d, u, e, v) VALUES (%s, %s, %s, %s, 'x')", uniq, "app.ck")
        self.assertEqual(n, len(uniq))
        recs, after = self._chunked_rebackfill("ck", n)
        keys = collections.Counter((r["payload"]["s"], r["payload"]["d"], r["payload"]["u"], r["payload"]["e"])
                                   for r in after)
        self.assertEqual(len(after), n, "each row once")
        self.assertEqual(max(keys.values()), 1)
        self.assertTableMatches(recs, "app", "ck", ["s", "d", "u", "e"])

    def test_columns_renamed_and_dropped_during_rebackfill(self):
        """A re-backfill killed after a durable chunk; then, with no agent
        running, a change, a column renamed and one dropped, and another
        change.  The next run resumes the backfill with the table as the
        catalog has it, but reads the first change with the columns its row
        names (the binlog names them), an older view than the table's: the
        next chunk meets the columns renamed and dropped.  It is read again
        once the stream reads the DDL, which describes the table anew
        (before, the stream failed on "Unknown column" and retried from the
        same checkpoint until it gave up: issue 17); the column renamed
        then backfills the table again."""
        my = self.my
        self.make_table("rd", 100000)
        s = self.agent("rd", "app.rd")
        self.kill_after_a_chunk(s, "app.rd")
        my.execute("UPDATE app.rd SET counter = 1 WHERE id = 99000")
        my.execute("ALTER TABLE app.rd RENAME COLUMN v TO w, DROP COLUMN pad")
        my.execute("UPDATE app.rd SET counter = 2 WHERE id = 1")
        r = self.catch_up(s, timeout=120)
        self.assertIn("the backfill of app.rd waits for the stream to reach a DDL of the table", r.stderr)
        self.assertIn("Unknown column", r.stderr)
        self.assertNotIn("restarting the stream", r.stderr)
        self.assertNotIn("retrying", r.stderr)
        self.assertRegex(r.stderr, r"backfilled app\.rd while streaming: 100000 rows in \d+ chunks")
        # The rename is backfilled again, behind a marker of its own: in
        # that run when it takes the request before it is caught up, else
        # at the next start (so the markers are counted after the next run).
        self.assertIn('table "app"."rd": a column was renamed to "w", and the existing rows hold its values under '
                      'the old name without a change: it is backfilled again, behind a marker', r.stderr)
        my.execute("UPDATE app.rd SET counter = counter + 1")
        self.catch_up(s)
        recs = records_for(self.read(s), "app", "rd")
        self.assertEqual(len(truncate_markers(recs)), 2, "the re-backfill's marker and the rename's")
        self.assertTableMatches(recs, "app", "rd", ["id"])

    def test_tables_swapped_in_are_backfilled_while_streaming(self):
        """A table renamed into a followed name (the online schema change's
        swap) holds rows the stream never read: with the watermark table it
        is backfilled while streaming, once, also when it is empty (the
        backfill is complete as of its last watermark, after the RENAME, so
        reading the RENAME again asks for nothing more)."""
        my = self.my
        my.execute("CREATE TABLE app.sw1 (id int PRIMARY KEY, a int)")
        my.execute("INSERT INTO app.sw1 VALUES (1, 1), (2, 2), (3, 3)")
        my.execute("CREATE TABLE app.sw2 (id int PRIMARY KEY, a int)")
        my.execute("INSERT INTO app.sw2 VALUES (1, 1)")
        s = self.agent("swapw", "app.sw1, app.sw2")
        self.catch_up(s)
        my.execute("CREATE TABLE app._sw1_gho (id int PRIMARY KEY, a int, b int DEFAULT 5)")
        my.execute("INSERT INTO app._sw1_gho (id, a) SELECT id, a FROM app.sw1")
        my.execute("UPDATE app._sw1_gho SET a = 20 WHERE id = 2")
        my.execute("RENAME TABLE app.sw1 TO app._sw1_del, app._sw1_gho TO app.sw1")
        my.execute("INSERT INTO app.sw1 VALUES (4, 4, 4)")
        my.execute("CREATE TABLE app._sw2_new (id int PRIMARY KEY, a int)")   # empty
        my.execute("RENAME TABLE app.sw2 TO app._sw2_del, app._sw2_new TO app.sw2")
        r = self.catch_up(s)
        self.assertEqual(r.stderr.count("was given rows without row events: backfilling it again"), 2, r.stderr)
        self.assertIn("backfilled app.sw1 while streaming: 4 rows in 1 chunks", r.stderr)
        self.assertIn("backfilled app.sw2 while streaming: 0 rows in 0 chunks", r.stderr)
        self.assertNotIn("backfilling app.sw1 at", r.stderr, "not from a snapshot")
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "sw1", ["id"])
        self.assertTableMatches(recs, "app", "sw2", ["id"])
        # the next run reads nothing again and backfills nothing again
        n = len(recs)
        r = self.catch_up(s)
        self.assertNotIn("was given rows without row events", r.stderr)
        self.assertEqual(len(self.read(s)), n)
        my.execute("INSERT INTO app.sw2 VALUES (7, 7)")
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "sw1", ["id"])
        self.assertTableMatches(recs, "app", "sw2", ["id"])

    def test_table_swapped_in_while_it_backfills(self):
        """A followed table whose backfill while streaming has chunks durable
        when sluice is killed is swapped for another table (RENAME, the
        online schema change's swap) while it is stopped: the next run reads
        the RENAME, and the backfill starts over behind a new marker rather
        than resuming after its durable chunks, which hold the old table's
        rows."""
        my = self.my
        self.make_table("swr", 3000)
        s = self.agent("swrun", "app.swr")
        self.kill_after_a_chunk(s, "app.swr")
        my.execute("CREATE TABLE app._swr_gho LIKE app.swr")
        my.execute("INSERT INTO app._swr_gho SELECT id, v, counter + 7, pad FROM app.swr")
        my.execute("RENAME TABLE app.swr TO app._swr_del, app._swr_gho TO app.swr")
        r = self.catch_up(s)
        self.assertIn("app.swr was given rows without row events: backfilling it again", r.stderr)
        self.assertIn("the backfill of app.swr starts over", r.stderr)
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "swr", ["id"])
        self.assertEqual(my.sql("SELECT COUNT(*) FROM app.swr WHERE counter = 7"), [(3000,)])

    def test_table_created_again_while_it_backfills(self):
        """A followed table whose backfill while streaming has chunks durable
        when sluice is killed is dropped and created again with other rows:
        the rows of the old table end with a TRUNCATE record at the DROP,
        and the new table's are there whole.  (The DROP was taken as covered
        by the backfill, which resumed in the new table after its chunks:
        the old table's first 100 rows stayed.)"""
        my = self.my
        self.make_table("dcr", 1000)
        s = self.agent("dcrun", "app.dcr")
        self.kill_after_a_chunk(s, "app.dcr")
        my.execute("DROP TABLE app.dcr")
        self.make_table("dcr", 0)
        my.execute("INSERT INTO app.dcr SELECT seq, 'new', 5, 'n' FROM app.seq_2001_to_2100")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "app", "dcr", ["id"])
        self.assertEqual(len(my.sql("SELECT 1 FROM app.dcr")), 100)

    def test_without_the_watermark_table(self):
        my = self.my
        self.make_table("nowm", 1200)
        s = self.agent("nowm", "app.nowm", source={"watermark_table": "sluice.missing"})
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream nowm: source pg: warning: stream \"nowm\": the watermark table `sluice`.`missing` "
                      "(watermark_table of source \"pg\") is missing, or user sluice may not see it: backfill "
                      "while streaming needs it. As an administrator run: CREATE DATABASE IF NOT EXISTS `sluice`; "
                      "CREATE TABLE `sluice`.`missing` (stream VARBINARY(255) NOT NULL PRIMARY KEY, watermark "
                      "VARBINARY(1024) NOT NULL) ENGINE=InnoDB; GRANT INSERT, UPDATE ON `sluice`.`missing` TO "
                      "'sluice'", r.stdout + r.stderr)
        p = self.start_streaming(s)
        r = s.run("backfill", "--stream", "nowm", "--table", "app.nowm", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("the watermark table `sluice`.`missing` (watermark_table of source \"pg\") is missing",
                      r.stderr)
        self.assertIn("Without it, stop the agent and run this command again: the next run reads app.nowm from a "
                      "snapshot before streaming", r.stderr)
        self.assertEqual(backfill_requests_left(s), [])
        # a request that reaches the agent all the same (written as `sluice
        # backfill` writes it): the agent restarts the stream and reads the
        # table from a snapshot before streaming.  A change first, so that
        # the snapshot's position (the CSN of its rows) is not the first one's.
        my.execute("UPDATE app.nowm SET counter = 1 WHERE id = 5")
        tmp = os.path.join(s.state_dir, "nowm.backfill-request.1.1.tmp")
        with open(tmp, "w") as f:
            f.write("app.nowm\n")
        os.rename(tmp, tmp[:-4])
        wait_until(lambda: p.stderr_text().count("backfilled app.nowm: 1200 rows read in") == 2
                   or not p.alive(), 60, "the snapshot backfill after the request")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        err = p.stderr_text()
        self.assertIn("is missing, or user sluice may not see it: backfill while streaming needs it. As an "
                      "administrator run: CREATE DATABASE IF NOT EXISTS `sluice`; ", err)
        self.assertIn("So the backfill of app.nowm requested is read from a snapshot; restarting the stream to "
                      "take it in", err)
        self.assertIn("So 1 table to backfill is read from a snapshot before streaming instead of while streaming",
                      err)
        self.assertEqual(backfill_requests_left(s), [])
        self.stop(p)
        # again with no agent running: marked, then read from a snapshot
        my.execute("UPDATE app.nowm SET counter = 1 WHERE id = 7")
        r = s.run("backfill", "--stream", "nowm", "--table", "app.nowm", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream nowm: app.nowm marked for backfill on the next run", r.stdout)
        r = self.catch_up(s)
        self.assertIn("So 1 table to backfill is read from a snapshot before streaming instead of while "
                      "streaming", r.stderr)
        self.assertIn("backfilled app.nowm: 1200 rows read in", r.stderr)
        recs = records_for(self.read(s), "app", "nowm")
        self.assertEqual(len(truncate_markers(recs)), 2)
        self.assertEqual(len(backfill_inserts(recs)), 3600)
        self.assertTableMatches(recs, "app", "nowm", ["id"])

    def test_snapshot_request_right_after_the_initial_backfill(self):
        """Without the watermark table a requested backfill is read from a
        snapshot, its marker at (P - 1, 0) before its rows at (P, 0).  With
        nothing written since the initial backfill, the new snapshot's
        position is the old one's, the CSN of the old rows, which would sort
        above the marker: they are removed first (as an interrupted
        backfill's are), and the table's records are the marker and the
        new rows, each once."""
        _, recs, r = self.backfill_again_offline("nowm2", 300, source={"watermark_table": "sluice.missing"})
        self.assertIn("backfilled app.nowm2: 300 rows read in", r.stderr)
        self.assertEqual(len(truncate_markers(recs)), 1)
        rows = backfill_inserts(recs)
        self.assertEqual(sorted(r["payload"]["id"] for r in rows), list(range(1, 301)), "each row once")
        self.assertEqual(len(recs), 301)
        assert_marker_between(self, [], truncate_markers(recs)[0], rows)
        self.assertTableMatches(recs, "app", "nowm2", ["id"])
        self.assertIn("nothing was written since the last backfill: replacing the rows of app.nowm2", r.stderr)

    def test_check_without_the_grant(self):
        my = self.my
        my.execute("CREATE TABLE sluice.nogrant (stream VARBINARY(255) NOT NULL PRIMARY KEY, "
                   "watermark VARBINARY(1024) NOT NULL)")
        self.make_table("ng", 10)
        s = self.agent("ng", "app.ng", source={"watermark_table": "sluice.nogrant"})
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("stream \"ng\": user sluice may not write the watermark table `sluice`.`nogrant` (backfill "
                      "while streaming writes its watermarks there); as an administrator run: GRANT INSERT, "
                      "UPDATE ON `sluice`.`nogrant` TO 'sluice'", r.stderr)
        my.execute(f"GRANT INSERT ON sluice.nogrant TO '{SLUICE_USER}'@'127.0.0.1'")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("as an administrator run: GRANT UPDATE ON `sluice`.`nogrant` TO 'sluice'", r.stderr)
        my.execute(f"GRANT UPDATE ON sluice.nogrant TO '{SLUICE_USER}'@'127.0.0.1'")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream ng: watermark table sluice.nogrant: ready for backfill while streaming", r.stdout)
        self.assertEqual(my.one("SELECT COUNT(*) FROM sluice.nogrant"), 0, "check changes nothing")


class FilteredBinlogTest(MyTestCase):
    """binlog_ignore_db leaves out the watermark table's database: its
    watermarks would never reach the stream."""
    my_settings = {"binlog_ignore_db": "sluice"}

    def test_check_refuses_a_filtered_watermark_table(self):
        my = self.my
        my.execute("CREATE DATABASE app")
        my.execute("CREATE DATABASE sluice")
        my.execute(WM_DDL)
        my.execute(f"GRANT INSERT, UPDATE ON sluice.watermarks TO '{SLUICE_USER}'@'127.0.0.1'")
        my.execute("CREATE TABLE app.f (id int PRIMARY KEY)")
        s = self.sluice(stream="f", tables="app.f")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("stream \"f\": the server's binlog leaves out database `sluice` of the watermark table "
                      "`sluice`.`watermarks` (binlog_do_db = \"\", binlog_ignore_db = \"sluice\"), so watermarks "
                      "would never reach the stream", r.stderr)


class RebackfillMinimalTest(RebackfillCases, MyTestCase):
    """binlog_row_metadata = MINIMAL: the binlog does not name the watermark
    table's columns; its watermark is read as the second column."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}

    def test_ddl_on_another_table_behind_a_running_backfill(self):
        """Issue 17: a re-backfill of app.ml_a killed after a durable chunk
        (its later watermarks are in the binlog after the checkpoint), then
        rows of app.ml_b, a column added to it, and rows again.  The next
        run backfills app.ml_b again (its columns changed after the
        checkpoint's position), after app.ml_a's backfill: its rows before
        the DDL, which it cannot read with today's columns, are in that
        backfill up to the first watermark of its own chunks, not up to
        the first watermark the stream reads (app.ml_a's of the run before;
        the stream stopped with exit 3 on them)."""
        my = self.my
        self.make_table("ml_a", 100000)
        self.make_table("ml_b", 20)
        s = self.agent("ml", "app.ml_a, app.ml_b")
        self.kill_after_a_chunk(s, "app.ml_a")
        my.execute("INSERT INTO app.ml_b (id, v, counter) VALUES (100, 'before', 1)")
        my.execute("UPDATE app.ml_b SET counter = 2 WHERE id = 1")
        my.execute("ALTER TABLE app.ml_b ADD COLUMN x int")
        my.execute("INSERT INTO app.ml_b (id, v, counter, x) VALUES (101, 'after', 1, 7)")
        my.execute("UPDATE app.ml_b SET counter = 3, x = 8 WHERE id = 2")
        r = self.catch_up(s)
        self.assertIn("the columns of app.ml_b changed after the checkpoint's position", r.stderr)
        self.assertIn("backfilled app.ml_b while streaming: 22 rows in 1 chunks", r.stderr)
        recs = self.read(s)
        self.assertTableMatches(records_for(recs, "app", "ml_b"), "app", "ml_b", ["id"])
        self.assertTableMatches(records_for(recs, "app", "ml_a"), "app", "ml_a", ["id"])


if __name__ == "__main__":
    unittest.main()
