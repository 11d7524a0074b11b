"""
tests/integration/test_pg_production2.py: PostgreSQL as production runs it,
the second part: publications that users made (publish options, column
lists, row filters, tables dropped from them), unlogged tables, a standby as
the source, locks that a backfill holds, and file limits.
"""

import json
import os
import re
import signal
import threading
import time
import unittest

from harness import (PG_BIN, PgServer, PgTestCase, Sluice, pg_available, records_for, slow_config, sluice_test_bin,
                     tag, wait_for_log, wait_until)
from test_s3 import S3TestCase


def messages(stderr):
    """The log's messages, one a line, with JSON lines unwrapped."""
    out = []
    for line in stderr.splitlines():
        try:
            out.append(json.loads(line)["msg"])
        except (ValueError, KeyError, TypeError):
            out.append(line)
    return "\n".join(out)


def start_streaming(s):
    """`sluice run` in the background, once it streams."""
    p = s.start("run")
    wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
    return p


class UserPublicationTest(PgTestCase):

    def test_publication_without_truncate_is_refused(self):
        """A publication that does not publish TRUNCATE would lose them:
        check and run refuse it with exit 3 and the ALTER PUBLICATION."""
        pg = self.pg
        pg.execute("CREATE TABLE tr1 (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO tr1 SELECT g, 'x' FROM generate_series(1, 5) g")
        pg.execute("CREATE PUBLICATION ptr1 FOR TABLE tr1 WITH (publish = 'insert,update,delete')")
        s = self.sluice(stream="tr1", tables="public.tr1", extra={"stream": {"publication": "ptr1"}})
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd, timeout=90)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('publication "ptr1" does not publish truncates', messages(r.stderr))
            self.assertIn("ALTER PUBLICATION \"ptr1\" SET (publish = 'insert, update, delete, truncate')",
                          messages(r.stderr))
        pg.execute("ALTER PUBLICATION ptr1 SET (publish = 'insert, update, delete, truncate')")
        self.assertEqual(s.run("check", timeout=90).rc, 0)

    def test_column_list_and_row_filter_are_refused(self):
        """A column list or a row filter is obeyed by CDC but not by the
        backfill: check and run refuse it, naming table and publication."""
        pg = self.pg
        pg.execute("CREATE TABLE cl7 (id int PRIMARY KEY, a text, b text)")
        pg.execute("CREATE TABLE rf7 (id int PRIMARY KEY, a text)")
        pg.execute("CREATE PUBLICATION pcl7 FOR TABLE cl7 (id, a)")
        pg.execute("CREATE PUBLICATION prf7 FOR TABLE rf7 WHERE (id > 5)")
        for pub, table, what in (("pcl7", "cl7", "column list"), ("prf7", "rf7", "row filter")):
            s = self.sluice(stream=table, tables=f"public.{table}", extra={"stream": {"publication": pub}})
            for cmd in (("check",), ("run", "--until-caught-up")):
                r = s.run(*cmd, timeout=90)
                self.assertEqual(r.rc, 3, r.describe())
                self.assertIn(f'publication "{pub}" publishes table "public"."{table}" with a {what}',
                              messages(r.stderr))
            self.assertIsNone(pg.slot_info(s.slot))


class PublicationMembershipTest(PgTestCase):

    def test_table_dropped_from_user_publication_stops_the_stream(self):
        """A selected table that leaves the user's publication stops the
        stream with exit 3 (at the periodic catalog check, and again at
        start) with the ALTER PUBLICATION and the backfill to run; done,
        the output holds every row, the missed ones too."""
        pg = self.pg
        pg.execute("CREATE TABLE a5 (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE a5b (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO a5 SELECT g, 'a' FROM generate_series(1, 10) g")
        pg.execute("CREATE PUBLICATION pa5 FOR TABLE a5, a5b")
        s = self.sluice(stream="a5", tables="public.a5, public.a5b", extra={"stream": {"publication": "pa5"}})
        p = start_streaming(s)
        pg.execute("INSERT INTO a5 VALUES (11, 'before')")
        pg.execute("ALTER PUBLICATION pa5 DROP TABLE a5")
        pg.execute("INSERT INTO a5 VALUES (12, 'missed')")
        pg.execute("UPDATE a5 SET v = 'missed too' WHERE id = 1")
        r = p.wait_result(60)
        self.assertEqual(r.rc, 3, r.describe())
        want = ('table "public"."a5" is no longer in publication "pa5"', 'run ALTER PUBLICATION "pa5" ADD TABLE '
                'ONLY "public"."a5", then sluice backfill -c ', " --stream a5 --table public.a5 to read it again")
        for w in want:
            self.assertIn(w, messages(r.stderr))
        pg.execute("ALTER PUBLICATION pa5 SET TABLE a5b")
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd, timeout=90)
            self.assertEqual(r.rc, 3, r.describe())
            for w in want:
                self.assertIn(w, messages(r.stderr))
        self.assertEqual(pg.one("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pa5'"), 1)
        pg.execute("ALTER PUBLICATION pa5 ADD TABLE ONLY a5")
        r = s.run("backfill", "--stream", "a5", "--table", "public.a5", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "a5", ["id"])

    def test_table_dropped_from_sluice_publication_is_backfilled_again(self):
        """A table that left the publication sluice created is added again
        at start and backfilled again behind a marker."""
        pg = self.pg
        pg.execute("CREATE TABLE b5 (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO b5 SELECT g, 'b' FROM generate_series(1, 10) g")
        s = self.sluice(stream="b5", tables="public.b5")
        self.catch_up(s)
        # a change streamed, so the marker's position is past the first backfill's
        pg.execute("INSERT INTO b5 VALUES (100, 'streamed')")
        self.catch_up(s)
        pg.execute(f"ALTER PUBLICATION {s.publication} DROP TABLE b5")
        pg.execute("INSERT INTO b5 VALUES (11, 'missed')")
        pg.execute("DELETE FROM b5 WHERE id = 2")
        r = self.catch_up(s)
        self.assertIn(f'table "public"."b5" left publication "{s.publication}", which sluice created',
                      messages(r.stderr))
        recs = self.read(s)
        self.assertEqual([x["source_metadata"]["change_type"] for x in records_for(recs, "public", "b5")
                          ].count("TRUNCATE"), 1)
        self.assertTableMatches(recs, "public", "b5", ["id"])

    @tag("sanitizers")   # the wait's own code (pg_wait.c) under ASan too
    def test_table_added_again_while_a_transaction_writes_it(self):
        """pgoutput publishes a change by the publication as of its place in
        the WAL: a transaction that changed the table before sluice added it
        back, and commits after, streams only its later changes.  The
        backfill's first chunk must wait for it and see its commit (issue
        17, seed 4840: the deleted row stayed in the output)."""
        pg = self.pg
        pg.execute("CREATE TABLE d5 (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO d5 SELECT g, 'd' FROM generate_series(1, 10) g")
        s = self.sluice(stream="d5", tables="public.d5", max_file_seconds=1)
        self.catch_up(s)
        pg.execute("INSERT INTO d5 VALUES (100, 'streamed')")
        self.catch_up(s)
        pg.execute(f"ALTER PUBLICATION {s.publication} DROP TABLE d5")
        writer = pg.connect(autocommit=False)
        self.addCleanup(writer.close)
        with writer.cursor() as cur:   # before the table is published again
            cur.execute("DELETE FROM d5 WHERE id = 2")
            cur.execute("UPDATE d5 SET v = 'before' WHERE id = 3")
            cur.execute("INSERT INTO d5 VALUES (11, 'before')")
        wpid = writer.get_backend_pid()
        p = s.start("run")
        said = lambda: messages(p.stderr_text())   # noqa: E731
        wait_until(lambda: "added missing tables to publication" in said() or not p.alive(), 60,
                   "the table added back")
        with writer.cursor() as cur:   # after: these are streamed
            cur.execute("UPDATE d5 SET v = 'after' WHERE id = 4")
            cur.execute("INSERT INTO d5 VALUES (12, 'after')")
        line = re.compile(r'stream "d5": the backfill of public\.d5 has waited \d+ s for transactions that were writing '
                          r'the table when it began \(what they wrote before the table was in the publication is not '
                          rf'streamed, so its first chunk must see their commits\): pid {wpid} \(transaction open for ')
        wait_until(lambda: line.search(said()) or "backfilled public.d5 while streaming" in said() or not p.alive(),
                   60, "the backfill waiting for the writer")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        self.assertRegex(said(), line)
        st = json.loads(s.run("status", "--json", timeout=30).stdout)["streams"][0]
        self.assertEqual(st["waiting"]["action"], "backfilling public.d5", st)
        self.assertEqual([b["pid"] for b in st["waiting"]["blocked_by"]], [wpid])
        self.assertEqual(st["waiting"]["blocked_by"][0]["state"], "idle in transaction")
        writer.commit()
        wait_until(lambda: "backfilled public.d5 while streaming" in said() or not p.alive(), 60,
                   "the table backfilled again")
        self.assertIn('stream "d5": the backfill of public.d5 goes on: the transactions it waited for ended', said())
        pg.execute("INSERT INTO d5 VALUES (13, 'later')")
        pg.wait_wal_flushed()
        wait_until(lambda: any(x["payload"]["id"] == 13 for x in records_for(self.read(s), "public", "d5")), 60,
                   "the insert of 13")
        p.signal(signal.SIGTERM)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIsNone(json.loads(s.run("status", "--json", timeout=30).stdout)["streams"][0]["waiting"])
        self.assertEqual(pg.sql("SELECT id, v FROM d5 WHERE id IN (2, 3, 4, 11, 12) ORDER BY id"),
                         [(3, "before"), (4, "after"), (11, "before"), (12, "after")])
        self.assertTableMatches(self.read(s), "public", "d5", ["id"])


    def wait_inserted(self, s, key):
        wait_until(lambda: any(x["payload"]["id"] == key for x in records_for(self.read(s), "public", "c5")
                               if x["source_metadata"]["change_type"] == "INSERT"), 60, f"the insert of {key}")

    def test_table_dropped_from_sluice_publication_while_running(self):
        """Noticed by the periodic catalog check: the stream restarts, adds
        the table back and backfills it again, and goes on streaming."""
        pg = self.pg
        pg.execute("CREATE TABLE c5 (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO c5 SELECT g, 'c' FROM generate_series(1, 10) g")
        s = self.sluice(stream="c5", tables="public.c5", max_file_seconds=1)
        p = start_streaming(s)
        pg.execute("INSERT INTO c5 VALUES (11, 'streamed')")
        pg.wait_wal_flushed()
        # written (so the marker's position is past the first backfill's)
        self.wait_inserted(s, 11)
        pg.execute(f"ALTER PUBLICATION {s.publication} DROP TABLE c5")
        pg.execute("INSERT INTO c5 VALUES (12, 'missed')")
        pg.execute("DELETE FROM c5 WHERE id = 3")
        wait_until(lambda: "backfilled public.c5 while streaming" in p.stderr_text() or not p.alive(), 90,
                   "the table backfilled again")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        pg.execute("INSERT INTO c5 VALUES (13, 'after')")
        pg.wait_wal_flushed()
        self.wait_inserted(s, 13)
        p.signal(signal.SIGTERM)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'table "public"."c5" left publication "{s.publication}", which sluice created',
                      messages(r.stderr))
        self.assertEqual(pg.one("SELECT count(*) FROM pg_publication_tables WHERE pubname = %s",
                                (s.publication,)), 1)
        self.assertTableMatches(self.read(s), "public", "c5", ["id"])


class PreparedWriterTest(PgTestCase):
    pg_settings = {"max_prepared_transactions": "4"}
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def test_partitioned_table_added_again_while_a_prepared_transaction_wrote_it(self):
        """The same with a partitioned table and a prepared transaction that
        wrote one of its partitions: the first chunk waits for COMMIT
        PREPARED, and the log names the transaction by its gid."""
        pg = self.pg
        pg.execute("CREATE TABLE e5 (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
        pg.execute("CREATE TABLE e5_a PARTITION OF e5 FOR VALUES FROM (0) TO (100)")
        pg.execute("CREATE TABLE e5_b PARTITION OF e5 FOR VALUES FROM (100) TO (200)")
        pg.execute("INSERT INTO e5 SELECT g, 'e' FROM generate_series(1, 150, 7) g")
        s = self.sluice(stream="e5", tables="public.e5", max_file_seconds=1)
        self.catch_up(s)
        pg.execute(f"ALTER PUBLICATION {s.publication} DROP TABLE e5")
        writer = pg.connect(autocommit=False)
        self.addCleanup(writer.close)
        with writer.cursor() as cur:   # straight into a partition
            cur.execute("DELETE FROM e5_b WHERE id = 106")
            cur.execute("INSERT INTO e5_a VALUES (2, 'prepared')")
            cur.execute("PREPARE TRANSACTION 'e5_tx'")
        writer.close()
        self.addCleanup(lambda: pg.execute("ROLLBACK PREPARED 'e5_tx'")
                        if pg.one("SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'e5_tx'") else None)
        p = s.start("run")
        said = lambda: messages(p.stderr_text())   # noqa: E731
        line = re.compile(r'stream "e5": the backfill of public\.e5 has waited \d+ s for transactions that were writing '
                          r'the table when it began \(what they wrote before the table was in the publication is not '
                          r'streamed, so its first chunk must see their commits\): prepared transaction "e5_tx" '
                          r'\(transaction open for ')
        wait_until(lambda: line.search(said()) or "backfilled public.e5 while streaming" in said() or not p.alive(),
                   60, "the backfill waiting for the prepared transaction")
        self.assertRegex(said(), line)
        self.assertIn(' s, user "postgres", application ""); it goes on when they end (COMMIT PREPARED or ROLLBACK '
                      'PREPARED ends the first)', said())
        st = json.loads(s.run("status", "--json", timeout=30).stdout)["streams"][0]
        self.assertEqual(st["waiting"]["blocked_by"][0]["state"], 'prepared transaction "e5_tx"', st)
        pg.execute("COMMIT PREPARED 'e5_tx'")
        wait_until(lambda: "backfilled public.e5 while streaming" in said() or not p.alive(), 60,
                   "the table backfilled again")
        p.signal(signal.SIGTERM)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(pg.sql("SELECT id, v FROM e5 WHERE id IN (2, 106) ORDER BY id"), [(2, "prepared")])
        self.assertTableMatches(self.read(s), "public", "e5", ["id"])


class UnloggedTableTest(PgTestCase):

    def test_glob_skips_unlogged_table(self):
        """A glob that matches an unlogged table skips it (logged once, by
        name), and the logged tables stream."""
        pg = self.pg
        pg.execute("CREATE SCHEMA ug")
        pg.execute("CREATE TABLE ug.lg (id int PRIMARY KEY, v text)")
        pg.execute("CREATE UNLOGGED TABLE ug.u (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO ug.lg SELECT g, 'l' FROM generate_series(1, 20) g")
        pg.execute("INSERT INTO ug.u SELECT g, 'u' FROM generate_series(1, 20) g")
        s = self.sluice(stream="ug", tables="ug.*")
        r = s.run("check", timeout=90)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertNotIn("ug.u:", r.stdout)
        r = self.catch_up(s)
        self.assertEqual(messages(r.stderr).count('skipping table "ug"."u": it is unlogged'), 1, r.stderr)
        pg.execute("INSERT INTO ug.lg SELECT g, 'l' FROM generate_series(21, 30) g")
        pg.execute("INSERT INTO ug.u SELECT g, 'u' FROM generate_series(21, 30) g")
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "ug", "lg", ["id"])
        self.assertEqual(records_for(recs, "ug", "u"), [])

    def test_exact_name_of_unlogged_table_is_refused(self):
        pg = self.pg
        pg.execute("CREATE UNLOGGED TABLE ux (id int PRIMARY KEY)")
        s = self.sluice(stream="ux", tables="public.ux")
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd, timeout=90)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('table "public"."ux" is unlogged: its changes are not in the WAL', messages(r.stderr))


class BackfillLockTest(PgTestCase):

    def test_rewrite_of_a_table_yet_to_read_waits(self):
        """ALTER TABLE ... TYPE rewrites a table, which an older snapshot
        then sees empty: run while a large table is being read, it must wait
        for the backfill (which locks every table it will read at the
        start), and the small table's rows must all be in the output."""
        pg = self.pg
        pg.execute("CREATE TABLE aa_big (id int PRIMARY KEY, pad text)")
        pg.execute("INSERT INTO aa_big SELECT g, repeat('p', 100) FROM generate_series(1, 100000) g")
        pg.execute("CREATE TABLE zz_small (id int PRIMARY KEY, v int)")
        pg.execute("INSERT INTO zz_small SELECT g, g FROM generate_series(1, 1000) g")
        pg.execute("ANALYZE")
        s = self.sluice(stream="lk", tables="public.aa_big, public.zz_small", max_file_seconds=1,
                        extra={"agent": {"queue_bytes": "1MB"}, "source": {"backfill_chunk_rows": 2000}})
        block = os.path.join(s.workdir, "sink-down")
        open(block, "w").close()
        p = s.start("run", "--until-caught-up", config=slow_config(s, flush_block_file=block), binary=sluice_test_bin())
        wait_for_log(p, "backfilling public.aa_big", 120, "the backfill of public.aa_big")
        self.assertNotIn("backfilling public.zz_small", p.stderr_text())
        alter = {}

        def run_alter():
            c = pg.connect()
            try:
                with c.cursor() as cur:
                    cur.execute("SET application_name = 'lk_alter'")
                    cur.execute("ALTER TABLE zz_small ALTER COLUMN v TYPE bigint")
                alter["done"] = time.monotonic()
            except Exception as e:  # reported below
                alter["error"] = e
            finally:
                c.close()
        th = threading.Thread(target=run_alter)
        th.start()
        try:
            # the ALTER waits for the backfill's lock
            wait_until(lambda: pg.one("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                      "'lk_alter' AND wait_event_type = 'Lock'") == 1 or "done" in alter
                       or "error" in alter, 60, "the ALTER TABLE to wait or finish")
            self.assertNotIn("done", alter, "the ALTER TABLE did not wait for the backfill")
            self.assertTrue(p.alive())
        finally:
            os.unlink(block)
            r = p.wait_result(180)
            th.join(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("done", alter, alter)
        recs = self.read(s)
        self.assertEqual(len(records_for(recs, "public", "zz_small")), 1000)
        self.assertEqual(len(records_for(recs, "public", "aa_big")), 100000)


class ChunkLockTest(PgTestCase):

    def test_rewrite_during_a_backfill_while_streaming(self):
        """A chunk read while streaming locks its table before its snapshot:
        a rewrite in progress makes it wait and try again, and the rows that
        the rewritten table holds are all read (not none)."""
        pg = self.pg
        pg.execute("CREATE TABLE c4 (id int PRIMARY KEY, v int)")
        pg.execute("INSERT INTO c4 SELECT g, g FROM generate_series(1, 500) g")
        s = self.sluice(stream="c4", tables="public.c4", max_file_seconds=1)
        p = start_streaming(s)
        ddl = pg.connect(autocommit=False)
        self.addCleanup(ddl.close)
        with ddl.cursor() as cur:
            cur.execute("ALTER TABLE c4 ALTER COLUMN v TYPE bigint")   # holds the table until COMMIT
        r = s.run("backfill", "--stream", "c4", "--table", "public.c4", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        wait_until(lambda: "backfill of public.c4 requested" in p.stderr_text() or not p.alive(), 60,
                   "the agent to take the request")
        wait_until(lambda: pg.one("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                                  "WHERE NOT l.granted AND l.relation = 'c4'::regclass AND "
                                  "a.application_name = 'sluice'") > 0 or not p.alive(), 60,
                   "a chunk to wait for the lock")
        ddl.commit()
        wait_until(lambda: "backfilled public.c4 while streaming" in p.stderr_text() or not p.alive(), 120,
                   "the backfill while streaming")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.signal(signal.SIGTERM)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("backfilled public.c4 while streaming: 500 rows", messages(r.stderr))
        self.assertTableMatches(self.read(s), "public", "c4", ["id"])


def limited(s, soft, hard):
    """A wrapper that runs s's sluice with RLIMIT_NOFILE soft:hard."""
    path = os.path.join(s.workdir, f"sluice-nofile-{soft}")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexec prlimit --nofile={soft}:{hard} {s.binary} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def transaction_over_many_tables(tc, s, schema, n=300):
    """One transaction over n tables, streamed under a limit of 256 open
    files; the first run (the backfill) shows the soft limit raised."""
    pg = tc.pg
    pg.execute(f"CREATE SCHEMA {schema}")
    pg.execute(f"DO $$ BEGIN FOR i IN 1..{n} LOOP EXECUTE format("
               f"'CREATE TABLE {schema}.t%s (id int PRIMARY KEY, v text)', i); END LOOP; END $$")
    r = s.start("run", "--until-caught-up", binary=limited(s, 64, 4096)).wait_result(240)
    tc.assertEqual(r.rc, 0, r.describe())
    tc.assertIn("raised the open file limit from 64 to 4096 (RLIMIT_NOFILE)", messages(r.stderr))
    pg.execute(f"DO $$ BEGIN FOR i IN 1..{n} LOOP EXECUTE format("
               f"'INSERT INTO {schema}.t%s SELECT g, ''x'' FROM generate_series(1, 3) g', i); END LOOP; END $$")
    pg.wait_wal_flushed()
    r = s.start("run", "--until-caught-up", binary=limited(s, 256, 256)).wait_result(240)
    tc.assertEqual(r.rc, 0, r.describe())
    tc.assertNotIn("Too many open files", r.stderr)
    recs = s.read(tc)
    for i in (1, 150, n):
        tc.assertTableMatches(recs, schema, f"t{i}", ["id"])
    tc.assertEqual(len([x for x in recs if x["source_metadata"]["change_type"] == "INSERT"]), 3 * n)


class FileLimitTest(PgTestCase):

    def test_transaction_over_more_tables_than_the_file_limit(self):
        """avro_dir keeps fewer files open than the limit, and every row
        arrives."""
        transaction_over_many_tables(self, self.sluice(stream="fl", tables="fl.*", log_level="debug"), "fl")


class FileLimitS3Test(S3TestCase):

    def test_transaction_over_more_tables_than_the_file_limit(self):
        """s3 keeps a small finished file in memory until the flush, not
        its spool file, and every row arrives."""
        s = self.s3sluice(stream="fs", tables="fs.*", log_level="debug")
        transaction_over_many_tables(self, s, "fs")


class StandbyServer(PgServer):
    """A hot standby of primary, made with pg_basebackup -R."""

    def __init__(self, primary):
        self.primary = primary
        super().__init__()

    def _setup(self):
        self.run_cmd([os.path.join(PG_BIN, "pg_basebackup"), "-D", self.datadir, "-h", self.primary.tmpdir,
                      "-p", str(self.primary.port), "-U", "postgres", "-R", "-X", "stream", "--no-sync"])


class StandbySourceTest(unittest.TestCase):

    def test_standby_is_refused(self):
        """PostgreSQL 15 cannot decode on a standby: check and run exit 3
        and say to point sluice at the primary."""
        reason = pg_available()
        if reason:
            raise unittest.SkipTest(reason)
        primary = PgServer()
        self.addCleanup(primary.close)
        primary.start()
        primary.execute("CREATE TABLE sb (id int PRIMARY KEY)")
        standby = StandbyServer(primary)
        self.addCleanup(standby.close)
        standby.start()
        wait_until(lambda: standby.one("SELECT pg_is_in_recovery()"), 30, "the standby to be in recovery")
        s = Sluice(standby, stream="sb", tables="public.sb")
        self.addCleanup(s.close)
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd, timeout=90)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn("is a standby (recovery is in progress), and PostgreSQL 15 cannot decode changes on "
                          "a standby: point sluice at the primary", messages(r.stderr))


if __name__ == "__main__":
    unittest.main()
