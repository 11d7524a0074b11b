"""
tests/integration/test_avro_merge.py: merge mode for Avro file destinations
(write_mode = merge with avro_dir): one record per key per flushed file, the
reader's rule (doc/output.md: the base plus the later files, the highest CSN
per key, deleted rows dropped, nothing older than the latest TRUNCATE),
`sluice compact` (also while an agent runs), `sluice verify` after
compaction, unchanged TOAST values filled in, tables without a key refused
(exit 3), and a unique key on nullable columns refused for MariaDB.  The
property test (random workloads, kill -9, the compacted mirror equal to the
source) is test_property.py's merge cells for avro_dir and s3.

Every expected value is read from the source database, never from sluice.
"""

import json
import os
import random
import re
import signal
import time
import unittest

import avro.datafile
import avro.io

from harness import PgTestCase, WithS3, wait_until
from harness_mysql import MyTestCase
from ch_harness import HoldingProxy
from test_pg_changes import silent_ddl_run, silent_ddl_setup
from oracle import current_files, mirror, read_file


def assert_one_record_per_key(testcase, root, stream, obj, key_columns):
    for path in current_files(root, stream, obj):
        keys = [tuple(r["payload"][c] for c in key_columns) for r in read_file(path)
                if r["source_metadata"]["change_type"] != "TRUNCATE"]
        testcase.assertEqual(len(keys), len(set(keys)), f"{path} holds a key twice")


class PgMergeTest(PgTestCase):

    def merge_sluice(self, **kw):
        extra = kw.pop("extra", {})
        extra.setdefault("destination", {})
        return self.sluice(write_mode="merge", extra=extra, **kw)

    def expect_pg(self, table, key_columns, columns):
        rows = self.pg.sql(f"SELECT {', '.join(columns)} FROM {table}")
        return {tuple(r[columns.index(c)] for c in key_columns): dict(zip(columns, r)) for r in rows}

    def assert_mirror(self, s, obj, table, key_columns, columns):
        got, files = mirror(s.out, s.stream, obj, key_columns)
        want = self.expect_pg(table, key_columns, columns)
        self.assertEqual(set(got), set(want), f"keys differ for {table} (files {files})")
        for k, row in want.items():
            payload, unchanged = got[k]
            self.assertEqual(unchanged, [], f"{table} {k}: values left unchanged")
            for c in columns:
                self.assertEqual(payload[c], row[c], f"{table} {k} column {c}")

    def compact_and_assert_mirror(self, s, obj, table):
        """`sluice compact` of s's stream, then table (id, v, t) against obj."""
        r = s.run("compact", "--stream", s.stream)
        self.assertEqual(r.rc, 0, r.describe())
        self.assert_mirror(s, obj, table, ["id"], ["id", "v", "t"])

    def test_silent_ddl(self):
        """After ALTER COLUMN TYPE ... USING and a column dropped and added
        again, every existing key's record is the source's row (the table
        is backfilled again behind a marker), with no later update of
        those rows."""
        kinds = ("dt", "dd")
        names = silent_ddl_setup(self.pg, "m_", kinds=kinds)
        s = self.merge_sluice(stream="msd", tables=", ".join(f"public.{t}" for t in names))
        s.catch_up(self)
        silent_ddl_run(self.pg, "m_", kinds=kinds)
        s.catch_up(self)
        for t in names:
            self.assert_mirror(s, f"public_{t}", t, ["id"], ["id", "a"])

    def test_one_record_per_key_and_deletes(self):
        pg = self.pg
        pg.execute("CREATE TABLE m1 (id int PRIMARY KEY, v int, t text)")
        pg.execute("INSERT INTO m1 SELECT g, 0, 'x' FROM generate_series(1, 20) g")
        s = self.merge_sluice(stream="m1", tables="public.m1")
        s.catch_up(self)
        c = pg.connect(autocommit=False)
        cur = c.cursor()
        for i in range(5):
            cur.execute("UPDATE m1 SET v = v + 1 WHERE id <= 10")
        cur.execute("DELETE FROM m1 WHERE id IN (3, 4)")
        cur.execute("UPDATE m1 SET id = 100 WHERE id = 5")
        cur.execute("INSERT INTO m1 VALUES (3, 42, 'back')")
        c.commit()
        c.close()
        s.catch_up(self)
        assert_one_record_per_key(self, s.out, "m1", "public_m1", ["id"])
        recs = [r for p in current_files(s.out, "m1", "public_m1") for r in read_file(p)]
        deleted = {r["payload"]["id"] for r in recs if r["source_metadata"]["is_deleted"]}
        self.assertEqual(deleted, {4, 5})
        self.assert_mirror(s, "public_m1", "m1", ["id"], ["id", "v", "t"])
        # TRUNCATE: a marker the reader applies
        pg.execute("BEGIN; TRUNCATE m1; INSERT INTO m1 VALUES (7, 7, 'after'); COMMIT")
        s.catch_up(self)
        self.assert_mirror(s, "public_m1", "m1", ["id"], ["id", "v", "t"])
        r = s.run("compact", "--stream", "m1")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("public_m1", r.stdout)
        self.assertEqual(len(current_files(s.out, "m1", "public_m1")), 1)
        self.assert_mirror(s, "public_m1", "m1", ["id"], ["id", "v", "t"])
        v = s.run("verify", "--stream", "m1")
        self.assertEqual(v.rc, 0, v.describe())
        from check_output import check_tree
        _, errors = check_tree(s.out)
        self.assertEqual(errors, [], errors[:10])

    def test_created_again_between_runs(self):
        """A table dropped and created again right after the initial
        backfill (the stream's position still the snapshot's, the old rows'
        CSN): the reader's rule gives the new table, before and after a
        compaction, and the base keeps no old row."""
        pg = self.pg
        pg.execute("CREATE TABLE mre (id int PRIMARY KEY, v int, t text)")
        pg.execute("INSERT INTO mre SELECT g, 0, 'old' FROM generate_series(1, 20) g")
        s = self.merge_sluice(stream="mre", tables="public.mre")
        s.catch_up(self)
        self.assert_mirror(s, "public_mre", "mre", ["id"], ["id", "v", "t"])
        pg.execute("DROP TABLE mre")
        pg.execute("CREATE TABLE mre (id int PRIMARY KEY, v int, t text)")
        pg.execute("INSERT INTO mre SELECT g, 1, 'new' FROM generate_series(15, 24) g")
        s.catch_up(self)
        self.assert_mirror(s, "public_mre", "mre", ["id"], ["id", "v", "t"])
        self.compact_and_assert_mirror(s, "public_mre", "mre")
        base = [r for p in current_files(s.out, "mre", "public_mre") for r in read_file(p)]
        self.assertEqual(sorted((r["payload"]["id"], r["payload"]["t"]) for r in base
                                if r["source_metadata"]["change_type"] != "TRUNCATE"),
                         [(i, "new") for i in range(15, 25)])
        v = s.run("verify", "--stream", "mre")
        self.assertEqual(v.rc, 0, v.describe())

    def test_files_left_by_a_stopped_compaction(self):
        """A compaction killed after .base.json moved, before it deleted
        the files it replaced: the next compaction replaces them too, so
        that a key deleted since does not come back with its old insert
        (issue 17, found by the property test's kill -9 with S3's answer
        held)."""
        pg = self.pg
        pg.execute("CREATE TABLE mleft (id int PRIMARY KEY, v int, t text)")
        pg.execute("INSERT INTO mleft SELECT g, 0, 'x' FROM generate_series(1, 10) g")
        s = self.merge_sluice(stream="mleft", tables="public.mleft")
        s.catch_up(self)
        before = {}
        for p in current_files(s.out, "mleft", "public_mleft"):
            with open(p, "rb") as f:
                before[p] = f.read()
        self.assertTrue(before)
        r = s.run("compact", "--stream", "mleft")
        self.assertEqual(r.rc, 0, r.describe())
        # the state a kill -9 before the deletions leaves: the replaced files are there
        for p, data in before.items():
            self.assertFalse(os.path.exists(p), f"{p} was not replaced")
            with open(p, "wb") as f:
                f.write(data)
        self.assert_mirror(s, "public_mleft", "mleft", ["id"], ["id", "v", "t"])
        pg.execute("DELETE FROM mleft WHERE id IN (2, 3)")
        pg.execute("UPDATE mleft SET v = 5 WHERE id = 4")
        s.catch_up(self)
        self.assert_mirror(s, "public_mleft", "mleft", ["id"], ["id", "v", "t"])
        self.compact_and_assert_mirror(s, "public_mleft", "mleft")
        for p in before:
            self.assertFalse(os.path.exists(p), f"{p}, replaced twice, is still there")
        v = s.run("verify", "--stream", "mleft")
        self.assertEqual(v.rc, 0, v.describe())

    def toast_table(self, name, columns, seed):
        """Creates table name (id int PRIMARY KEY, n int, body text stored
        EXTERNAL, then columns); returns a maker of 20 KB random values."""
        rnd = random.Random(seed)
        self.pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, n int, body text{columns})")
        self.pg.execute(f"ALTER TABLE {name} ALTER body SET STORAGE EXTERNAL")
        return lambda: "".join(rnd.choice("0123456789abcdef") for _ in range(20000))

    def test_unchanged_toast_values(self):
        pg = self.pg
        big = self.toast_table("toast", ", other text", 5)
        for i in range(1, 7):
            pg.execute("INSERT INTO toast VALUES (%s, 0, %s, %s)", (i, big(), big()))
        s = self.merge_sluice(stream="toast", tables="public.toast")
        s.catch_up(self)
        # a batch without the key's row: filled from the files written before
        pg.execute("UPDATE toast SET n = n + 1 WHERE id IN (1, 2)")
        s.catch_up(self)
        # in one batch: the key's row is in the batch; a key change; then compaction and more
        pg.execute("BEGIN; UPDATE toast SET n = 5 WHERE id = 3; UPDATE toast SET n = 6 WHERE id = 3; "
                   "UPDATE toast SET id = 30 WHERE id = 4; UPDATE toast SET other = 'small' WHERE id = 5; COMMIT")
        s.catch_up(self)
        r = s.run("compact", "--stream", "toast", "--table", "public.toast")
        self.assertEqual(r.rc, 0, r.describe())
        pg.execute("UPDATE toast SET n = n + 10")
        pg.execute("UPDATE toast SET id = 60 WHERE id = 6")
        s.catch_up(self)
        self.assert_mirror(s, "public_toast", "toast", ["id"], ["id", "n", "body", "other"])
        self.assertNotIn("left", s.procs[-1].stderr_text())

    def test_unchanged_toast_values_after_a_new_version(self):
        """Rows inserted, a column added, then updates that leave their
        TOASTed value out (one of them a key change), all in one flush: the
        rows are in a file of the old table version that waits for that
        flush, where the mirror does not see them yet, so the values come
        from that batch (issue 17, seed 4104: the value was written null)."""
        pg = self.pg
        big = self.toast_table("toastv", "", 6)
        pg.execute("INSERT INTO toastv VALUES (1, 0, %s)", (big(),))
        s = self.merge_sluice(stream="toastv", tables="public.toastv")
        s.catch_up(self)
        pg.execute("BEGIN; INSERT INTO toastv VALUES (2, 0, %s), (3, 0, %s); "
                   "ALTER TABLE toastv ADD COLUMN c int; "
                   "UPDATE toastv SET n = n + 1, c = id; UPDATE toastv SET id = 4 WHERE id = 3; COMMIT",
                   (big(), big()))
        s.catch_up(self)
        self.assert_mirror(s, "public_toastv", "toastv", ["id"], ["id", "n", "body", "c"])
        self.assertNotIn("left", s.procs[-1].stderr_text())

    def test_keyless_table_exits_3(self):
        self.pg.execute("CREATE TABLE nokey (a int, b text)")
        s = self.merge_sluice(stream="nokey", tables="public.nokey")
        r = s.run("run", "--until-caught-up")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('"public"."nokey"', r.stderr)
        self.assertIn("primary key", r.stderr)

    def test_null_key_goes_to_the_dead_letter_file(self):
        """A key_columns column made nullable while the agent runs: the row
        with a NULL key goes to <state_dir>/<stream>.dead-letter.jsonl and
        the stream goes on."""
        pg = self.pg
        pg.execute("CREATE TABLE nn (id int, u int NOT NULL UNIQUE, v text)")
        pg.execute("ALTER TABLE nn REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO nn VALUES (1, 10, 'a'), (2, 20, 'b')")
        s = self.merge_sluice(stream="nn", tables="public.nn", max_file_seconds=1,
                              extra={"stream": {"key_columns": "public.nn.u"}})
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        pg.execute("ALTER TABLE nn ALTER COLUMN u DROP NOT NULL")
        pg.execute("INSERT INTO nn VALUES (5, NULL, 'x')")
        pg.execute("INSERT INTO nn VALUES (6, 60, 'y')")
        wait_until(lambda: not p.alive() or (60,) in mirror(s.out, "nn", "public_nn", ["u"])[0], 60, "the row after")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        got, _files = mirror(s.out, "nn", "public_nn", ["u"])
        self.assertEqual({(pl["id"], k[0], pl["v"]) for k, (pl, _u) in got.items()},
                         set(pg.sql("SELECT id, u, v FROM nn WHERE u IS NOT NULL")))
        with open(os.path.join(s.state_dir, "nn.dead-letter.jsonl")) as f:
            lines = [json.loads(x) for x in f]
        self.assertEqual([(x["table"], x["code"], x["change_type"], x["row"]) for x in lines],
                         [("public_nn", 0, "INSERT", {"id": 5, "u": None, "v": "x"})])
        self.assertIn('key column "u" has no value in merge mode', lines[0]["reason"])

    def test_start_leaves_a_running_compaction_files(self):
        """An agent that starts while `sluice compact` works (its lock
        held) does not remove the compaction's temporary files as a crashed
        run's leftovers; the next start without the lock does."""
        import fcntl
        pg = self.pg
        pg.execute("CREATE TABLE lo (id int PRIMARY KEY)")
        s = self.merge_sluice(stream="lo", tables="public.lo")
        s.catch_up(self)
        folder = os.path.join(s.out, "lo", "public_lo")
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, ".0000000001000000-0000000000_0badc0de.avro.tmp")
        with open(tmp, "wb") as f:
            f.write(b"being written")
        with open(os.path.join(s.state_dir, "lo.compact.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            s.catch_up(self)
            self.assertTrue(os.path.exists(tmp), "the running compaction's file was removed")
        r = s.catch_up(self)
        self.assertFalse(os.path.exists(tmp))
        self.assertIn("removed 1 leftover temporary file", r.stderr)

    def test_compact_while_running(self):
        pg = self.pg
        pg.execute("CREATE TABLE busy (id int PRIMARY KEY, v int)")
        pg.execute("INSERT INTO busy SELECT g, 0 FROM generate_series(1, 200) g")
        s = self.merge_sluice(stream="busy", tables="public.busy", max_file_seconds=1,
                              extra={"destination": {"compact_after_files": 0}})
        s.catch_up(self)
        p = s.start("run")
        try:
            rnd = random.Random(3)
            deadline = time.time() + 12
            ncompact = 0
            while time.time() < deadline:
                for _ in range(20):
                    i = rnd.randint(1, 300)
                    op = rnd.random()
                    if op < 0.5:
                        pg.execute("INSERT INTO busy VALUES (%s, 1) ON CONFLICT (id) DO UPDATE SET v = busy.v + 1",
                                   (i,))
                    else:
                        pg.execute("DELETE FROM busy WHERE id = %s", (i,))
                r = s.run("compact", "--stream", "busy")
                self.assertEqual(r.rc, 0, r.describe())
                ncompact += 1
                self.assertTrue(p.alive(), p.stderr_text())
        finally:
            p.signal(15)
            res = p.wait_result(60)
        self.assertEqual(res.rc, 0, res.describe())
        s.catch_up(self)
        self.assert_mirror(s, "public_busy", "busy", ["id"], ["id", "v"])
        v = s.run("verify", "--stream", "busy")
        self.assertEqual(v.rc, 0, v.describe())
        self.assertGreater(ncompact, 2)


class S3MergeTest(WithS3, PgTestCase):
    """The same tree in S3: merge mode, compaction and verify, with codec
    zstandard (the unchanged TOAST values are filled from zstandard files,
    which avro-c cannot read: sluice's own block reader does)."""

    def test_s3_merge_and_compact(self):
        pg = self.pg
        pg.execute("CREATE TABLE s3m (id int PRIMARY KEY, v int, body text)")
        pg.execute("ALTER TABLE s3m ALTER body SET STORAGE EXTERNAL")
        rnd = random.Random(9)
        pg.execute("INSERT INTO s3m SELECT g, 0, %s FROM generate_series(1, 30) g",
                   ("".join(rnd.choice("0123456789abcdef") for _ in range(9000)),))
        s = self.sluice(stream="s3m", tables="public.s3m", write_mode="merge", s3=self.s3, prefix="cdc",
                       codec="zstandard")
        s.catch_up(self)
        pg.execute("UPDATE s3m SET v = v + 1 WHERE id <= 10")
        pg.execute("DELETE FROM s3m WHERE id > 25")
        s.catch_up(self)
        pg.execute("BEGIN; UPDATE s3m SET id = 100 WHERE id = 1; UPDATE s3m SET v = 7 WHERE id = 2; COMMIT")
        s.catch_up(self)
        r = s.run("compact", "--stream", "s3m")
        self.assertEqual(r.rc, 0, r.describe())
        tree = s.output_tree()
        got, files = mirror(tree, "s3m", "public_s3m", ["id"])
        self.assertEqual(len(files), 1, files)
        with open(files[0], "rb") as f, avro.datafile.DataFileReader(f, avro.io.DatumReader()) as rd:
            self.assertEqual(rd.meta["avro.codec"], b"zstandard")
        rows = pg.sql("SELECT id, v, body FROM s3m")
        self.assertEqual(set(got), {(r[0],) for r in rows})
        for i, v, body in rows:
            self.assertEqual((got[(i,)][0]["v"], got[(i,)][0]["body"]), (v, body), i)
        vr = s.run("verify", "--stream", "s3m")
        self.assertEqual(vr.rc, 0, vr.describe())

    def toast_rows_behind_proxy(self, t, seed, **kw):
        """Table t (id, v, body) with rows 1 to 5, each body a 9000-byte
        TOAST value stored out of line, and a merge stream of it to S3
        through a HoldingProxy (kw: the Sluice's file limits), caught up:
        (the bodies' common prefix, the proxy, the Sluice)."""
        pg = self.pg
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int, body text)")
        pg.execute(f"ALTER TABLE {t} ALTER body SET STORAGE EXTERNAL")
        rnd = random.Random(seed)
        body = "".join(rnd.choice("0123456789abcdef") for _ in range(9000))
        pg.execute(f"INSERT INTO {t} SELECT g, 0, %s || g FROM generate_series(1, 5) g", (body,))
        proxy = HoldingProxy(self.s3.endpoint)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=t, tables=f"public.{t}", write_mode="merge", s3=self.s3, prefix="cdc",
                        codec="null", **kw)
        s.extra.setdefault("destination", {})["endpoint"] = proxy.url
        s.write_config()
        s.catch_up(self)
        return body, proxy, s

    def test_replayed_key_change_keeps_toast_value(self):
        """A key change whose merge file reached S3 but whose checkpoint did
        not move (the PUT's answer held by a proxy, then kill -9) is written
        again on restart: the new key's row must keep the TOAST value the
        update left out, not turn it into a null of the same CSN."""
        pg = self.pg
        body, proxy, s = self.toast_rows_behind_proxy("s3r", 5, max_file_seconds=1)
        # the next data file of the table
        proxy.arm_match(lambda method, path, body: method == "PUT" and
                        re.search(r"/cdc/s3r/public_s3r/.*\.avro$", path))
        p = s.start("run")
        pg.execute("UPDATE s3r SET id = 100 + id WHERE id <= 2")
        wait_until(proxy.held.is_set, 120, "the PUT of the merge file")
        p.kill9()
        proxy.pass_through()
        s.catch_up(self)

        tree = s.output_tree()
        rows = pg.sql("SELECT id, v, body FROM s3r")
        got, files = mirror(tree, "s3r", "public_s3r", ["id"])
        self.assertEqual(set(got), {(r[0],) for r in rows}, files)
        for i, v, b in rows:
            self.assertEqual(got[(i,)], ({"id": i, "v": v, "body": b}, []), i)
        # Both writings of a moved key (the first attempt's and the replay's)
        # have the same CSN, so a reader may take either: both must be whole.
        seen = 0
        for path in files:
            for r in read_file(path):
                k = r["payload"]["id"]
                if k in (101, 102):
                    seen += 1
                    self.assertEqual((r["payload"]["body"], r["source_metadata"]["unchanged_columns"]),
                                     (body + str(k - 100), []), f"{path}: {r['source_metadata']}")
        self.assertGreaterEqual(seen, 4, "the first attempt's file and the replay's should both be there")

    def test_key_change_cut_between_published_files_keeps_toast_value(self):
        """One batch whose files rotate (max_file_bytes): the first file,
        with the old key's tombstone, reached S3 (its PUT's answer held,
        then kill -9); the second, with the new key's row, never did.  The
        replay's lookup finds the old key deleted and the new key absent:
        the values the key change left unchanged come from the old key's
        last live row before the key change (property seed 4966,
        pg/merge/s3)."""
        pg = self.pg
        body, proxy, s = self.toast_rows_behind_proxy("s3cut", 9, max_file_seconds=5, max_file_bytes=16384)
        proxy.arm_match(lambda method, path, b: method == "PUT" and
                        re.search(r"/cdc/s3cut/public_s3cut/.*\.avro$", path))
        p = s.start("run")
        # in CSN order: 1's tombstone, 3 and 4 (the first file is full),
        # then 5 and 101 (the key change folded with the update after it)
        pg.execute("BEGIN; UPDATE s3cut SET id = 101 WHERE id = 1; "
                   "UPDATE s3cut SET body = body || 'x' WHERE id IN (3, 4, 5); "
                   "UPDATE s3cut SET v = 7 WHERE id = 101; COMMIT")
        wait_until(proxy.held.is_set, 120, "the PUT of the first merge file")
        p.kill9()
        proxy.pass_through()
        # what landed: the first file's tombstone of 1, nothing of 101
        cut = [r for root, _, names in os.walk(s.output_tree()) for n in names if n.endswith(".avro")
               for r in read_file(os.path.join(root, n))]
        self.assertEqual(sorted((r["payload"]["id"], r["source_metadata"]["change_type"]) for r in cut
                                if r["payload"]["id"] in (1, 101)), [(1, "INSERT"), (1, "UPDATE-DELETE")])
        s.catch_up(self)

        tree = s.output_tree()
        rows = pg.sql("SELECT id, v, body FROM s3cut ORDER BY id")
        self.assertEqual(rows, [(i, 0, body + str(i)) for i in (2,)] +
                         [(i, 0, body + str(i) + "x") for i in (3, 4, 5)] + [(101, 7, body + "1")])
        got, files = mirror(tree, "s3cut", "public_s3cut", ["id"])
        self.assertEqual(set(got), {(r[0],) for r in rows}, files)
        for i, v, b in rows:
            self.assertEqual(got[(i,)], ({"id": i, "v": v, "body": b}, []), i)

    def test_replayed_key_change_then_update_keeps_toast_value(self):
        """As above, but the replay's batch also holds a later transaction
        that updates the moved keys leaving the TOAST value unchanged: the
        batch's row of the new key is that later change, whose CSN is not
        the first attempt's writing's, and the old key's row is a tombstone
        by then; the value is the one the first attempt wrote at the key
        change (property seed 4401, pg/merge/avro_dir)."""
        pg = self.pg
        body, proxy, s = self.toast_rows_behind_proxy("s3u", 7, max_file_seconds=1)
        proxy.arm_match(lambda method, path, body: method == "PUT" and
                        re.search(r"/cdc/s3u/public_s3u/.*\.avro$", path))
        p = s.start("run")
        pg.execute("UPDATE s3u SET id = 100 + id WHERE id <= 2")
        wait_until(proxy.held.is_set, 120, "the PUT of the merge file")
        p.kill9()
        proxy.pass_through()
        # while stopped: the moved rows updated, the TOAST value left as it is
        pg.execute("UPDATE s3u SET v = 7 WHERE id > 100")
        s.catch_up(self)

        tree = s.output_tree()
        rows = pg.sql("SELECT id, v, body FROM s3u ORDER BY id")
        self.assertEqual(rows, [(i, 0, body + str(i)) for i in (3, 4, 5)] +
                         [(100 + i, 7, body + str(i)) for i in (1, 2)])
        got, files = mirror(tree, "s3u", "public_s3u", ["id"])
        self.assertEqual(set(got), {(r[0],) for r in rows}, files)
        for i, v, b in rows:
            self.assertEqual(got[(i,)], ({"id": i, "v": v, "body": b}, []), i)
        # the replay's batch held the update, not only the key change
        updates = [r for path in files for r in read_file(path)
                   if r["payload"]["id"] in (101, 102) and r["payload"]["v"] == 7]
        self.assertEqual(len(updates), 2, files)


    def replayed_moves(self, t, while_stopped, want):
        """Rows 1 and 2 of t move to 101 and 102; the first attempt's file
        holds them (1 and 2 tombstones, 101 and 102 whole) when sluice is
        killed before its checkpoint; while_stopped runs; the replay's batch
        holds both. want(body) is the source's rows (id, v, body) after."""
        pg = self.pg
        body, proxy, s = self.toast_rows_behind_proxy(t, 8, max_file_seconds=1)
        proxy.arm_match(lambda method, path, b: method == "PUT" and
                        re.search(rf"/cdc/{t}/public_{t}/.*\.avro$", path))
        p = s.start("run")
        pg.execute(f"UPDATE {t} SET id = 100 + id WHERE id <= 2")
        wait_until(proxy.held.is_set, 120, "the PUT of the merge file")
        p.kill9()
        proxy.pass_through()
        pg.execute(while_stopped)
        s.catch_up(self)

        tree = s.output_tree()
        rows = pg.sql(f"SELECT id, v, body FROM {t} ORDER BY id")
        self.assertEqual(rows, want(body))
        got, files = mirror(tree, t, f"public_{t}", ["id"])
        self.assertEqual(set(got), {(r[0],) for r in rows}, files)
        for i, v, b in rows:
            self.assertEqual(got[(i,)], ({"id": i, "v": v, "body": b}, []), i)
        # the first attempt's file holds 101 and 102 whole
        first = [r for path in files for r in read_file(path) if r["payload"]["id"] in (101, 102)
                 and r["source_metadata"]["change_type"] == "UPDATE-INSERT"]
        self.assertEqual(sorted((r["payload"]["id"], r["payload"]["body"]) for r in first),
                         [(101, body + "1"), (102, body + "2")], files)

    def test_replayed_key_changes_chained_keep_toast_value(self):
        """As above, but the update while stopped moves the moved keys again
        (101 to 201): the replay's batch holds 1 to 101 and 101 to 201, the
        first attempt's files 1's tombstone and 101's whole row, which
        fills 201 (101 held the row from the first key change until the
        second)."""
        self.replayed_moves("s3c", "UPDATE s3c SET id = id + 100, v = 7 WHERE id > 100",
                            lambda body: [(i, 0, body + str(i)) for i in (3, 4, 5)] +
                            [(200 + i, 7, body + str(i)) for i in (1, 2)])

    def test_replayed_key_changes_back_keep_toast_value(self):
        """As above, but the rows move back (101 to 1): the replay's batch
        holds 1 to 101 and 101 to 1, whose row names its own key, a
        tombstone in the first attempt's files: 101 fills it."""
        self.replayed_moves("s3b", "UPDATE s3b SET id = id - 100, v = 7 WHERE id > 100",
                            lambda body: [(i, 7 if i <= 2 else 0, body + str(i)) for i in (1, 2, 3, 4, 5)])


class MyMergeTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE app")

    def test_keyless_table_exits_3(self):
        self.my.execute("CREATE TABLE app.nokey (a int, b text)")
        s = self.sluice(stream="mynokey", tables="app.nokey", write_mode="merge")
        r = s.run("run", "--until-caught-up")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("nokey", r.stderr)

    def test_unique_key_must_be_not_null(self):
        """A unique key on nullable columns is no key for merge mode (check
        and run exit 3 with the fixes); one on NOT NULL columns is."""
        my = self.my
        my.execute("CREATE TABLE app.unull (id int, u int UNIQUE, v text)")
        my.execute("INSERT INTO app.unull VALUES (1, 10, 'a'), (1, NULL, 'dup'), (1, NULL, 'dup')")
        s = self.sluice(stream="myunull", tables="app.unull", write_mode="merge")
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('table "app"."unull" has no primary key and no unique key on NOT NULL columns', r.stderr)
            self.assertIn("add a primary key", r.stderr)
        my.execute("CREATE TABLE app.unn (id int, u int NOT NULL UNIQUE, v text)")
        my.execute("INSERT INTO app.unn VALUES (1, 10, 'a'), (1, 20, 'b'), (2, 30, 'c')")
        s = self.sluice(stream="myunn", tables="app.unn", write_mode="merge")
        s.catch_up(self)
        my.execute("DELETE FROM app.unn WHERE u = 20")
        my.execute("UPDATE app.unn SET u = 31 WHERE u = 30")
        s.catch_up(self)
        got, _files = mirror(s.out, "myunn", "app_unn", ["u"])
        self.assertEqual({k: (p["id"], p["v"]) for k, (p, _unchanged) in got.items()},
                         {(u,): (i, v) for i, u, v in my.sql("SELECT id, u, v FROM app.unn")})


if __name__ == "__main__":
    unittest.main()
