"""
tests/integration/test_my_recovery.py: the MySQL/MariaDB source stops and
starts again without losing or doubling anything: restarts by GTID and by
binlog file and offset (across rotations), SIGTERM, kill -9 at random
moments under a workload (the state rebuilt from the output equals the
source, no counter skips a value); a purged binlog gives exit code 4 in
`check` and `run` with the same words, and the one command the message
gives recovers it.  Also the prerequisites: a missing grant and
binlog_format exit 3.
"""

import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import unittest

import harness
from harness import csn, records_for, wait_until
from harness_mysql import MyTestCase, MariaDbServer, mariadb_available, SLUICE_USER


def follow_recovery(testcase, s, r):
    """Runs, word for word, the one command the exit-4 message of r gives."""
    testcase.assertEqual(r.rc, 4, r.describe())
    commands = re.findall(r"`(sluice [^`]*)`", r.stderr)
    testcase.assertEqual(len(commands), 1, f"one recovery command in the message:\n{r.describe()}")
    argv = shlex.split(commands[0])
    argv[0] = s.binary
    p = subprocess.run(argv, cwd=s.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    testcase.assertEqual(p.returncode, 0, f"$ {commands[0]}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def checkpoint(s):
    with open(os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")) as f:
        return json.load(f)


class RestartTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE rs")

    def _workload(self, table, first, n):
        for i in range(first, first + n):
            self.my.execute(f"INSERT INTO rs.{table} VALUES (%s, 0)", (i,))
            if i % 3 == 0:
                self.my.execute(f"UPDATE rs.{table} SET counter = counter + 1 WHERE id = %s", (i - 1,))

    @harness.tag("sanitizers")
    def test_restart_by_gtid(self):
        my = self.my
        my.execute("CREATE TABLE rs.g (id int PRIMARY KEY, counter int NOT NULL)")
        s = self.sluice(stream="g", tables="rs.g")
        self.catch_up(s)
        for round_ in range(3):
            self._workload("g", round_ * 100 + 1, 30)
            if round_ == 1:
                my.execute("FLUSH BINARY LOGS")
            r = self.catch_up(s)
            ck = checkpoint(s)
            self.assertRegex(ck["durable"], r"^mb\.\d{6}:\d+ 0-1-\d+$")
            self.assertIn("streaming from", r.stderr)
        recs = self.read(s)
        self.assertEqual(len(recs), len({r["uuid"] for r in recs}), "nothing read twice")
        self.assertTableMatches(recs, "rs", "g", ["id"])
        self.assertNoCounterGaps(recs, "rs", "g", ["id"])

    def test_replay_after_a_lost_checkpoint_keeps_the_manifest_chain(self):
        """A crash after a flush's manifest was written and before its
        checkpoint was: the next run reads those changes again (the same
        CSNs), in smaller flushes than the first time.  Each of their
        manifests must not end before it starts: the chain's range stays
        where the earlier manifest left it, and `sluice verify` finds
        nothing wrong with the chain (the soak found `manifest ... ends at
        0-1-44, before it starts (0-1-45)` in mariadb/merge/s3).  The
        records read twice are the one problem verify may report, as
        doc/operations.md says of that window."""
        my = self.my
        my.execute("CREATE TABLE rs.mc (id int PRIMARY KEY, v varchar(300) NOT NULL)")
        s = self.sluice(stream="mc", tables="rs.mc", write_mode="merge", max_file_bytes="1KB")
        self.catch_up(s)
        path = os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")
        with open(path, "rb") as f:
            before = f.read()
        for i in range(1, 41):
            my.execute("INSERT INTO rs.mc VALUES (%s, %s)", (i, "v%d-" % i + "x" * 200))
        self.catch_up(s)
        with open(path, "wb") as f:   # the checkpoint save that the crash lost
            f.write(before)
        r = self.catch_up(s)
        r = s.run("verify", "--stream", s.stream)
        problems = [x for x in r.stdout.splitlines() if x.startswith("problem:")]
        self.assertTrue(problems, "the replay wrote its records again:\n" + r.describe())
        self.assertEqual([x for x in problems if " is also in " not in x and "more than once" not in x], [],
                         r.describe())
        self.assertRegex(r.stdout, r"PROBLEMS FOUND: 0 with the manifests or their "
                         r"chain, 0 with files, [1-9][0-9]* records present twice")
        self.assertTableMatches(self.read(s), "rs", "mc", ["id"])

    def test_skipped_rows_of_another_layout_keep_the_numbering(self):
        """A transaction that changes rs.cx and then rs.cy, written by a run
        whose checkpoint save was lost (a crash), is read again by a run in
        which rs.cx's backfill (requested since) holds its rows, and whose
        columns changed since (ADD COLUMN): the table map of rs.cx there is
        not the catalog's.  Its rows are skipped, but the changes of rs.cy
        after them in the transaction must take the sequence numbers the
        first run gave them, so that each is written again as the same
        record (the same uuid and CSN).  Before, rows under another layout
        were skipped unnumbered, and rs.cy's changes came again one to
        three sequence numbers lower, as other records under those uuids
        (soak seed 4401, mariadb/append/s3: 'two records with uuid ...
        differ')."""
        my = self.my
        for t in ("cx", "cy"):
            my.execute(f"CREATE TABLE rs.{t} (id int PRIMARY KEY, v int NOT NULL)")
            my.execute(f"INSERT INTO rs.{t} VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
        s = self.sluice(stream="cxy", tables="rs.cx, rs.cy")
        self.catch_up(s)
        path = os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")
        with open(path, "rb") as f:
            before = f.read()
        my.execute("BEGIN")
        my.execute("UPDATE rs.cx SET v = v + 10 WHERE id <= 3")
        my.execute("UPDATE rs.cy SET v = v + 100 WHERE id >= 2")
        my.execute("DELETE FROM rs.cy WHERE id = 1")
        my.execute("COMMIT")
        self.catch_up(s)
        with open(path, "wb") as f:   # the checkpoint save that the crash lost
            f.write(before)
        my.execute("ALTER TABLE rs.cx ADD COLUMN c int")
        r = s.run("backfill", "--stream", s.stream, "--table", "rs.cx")
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        records = self.read(s)
        harness.dedup(records)   # each uuid one record; each change one uuid
        # the transaction's changes of rs.cy, from both runs: sequence
        # numbers 4 to 7 (after rs.cx's three), twice each
        ours = sorted((int(r["source_metadata"]["change_sequence_number"].split("-")[1]),
                       r["source_metadata"]["change_type"], r["payload"]["id"]) for r in records
                      if r["object"] == "rs_cy" and r["read_method"] == "mysql-cdc-binlog")
        self.assertEqual(ours, sorted([(4, "UPDATE-INSERT", 2), (5, "UPDATE-INSERT", 3), (6, "UPDATE-INSERT", 4),
                                       (7, "DELETE", 1)] * 2))
        for t in ("cx", "cy"):
            self.assertTableMatches(records, "rs", t, ["id"])

    def test_restart_with_prepared_xa(self):
        """A prepared XA transaction held across restarts: each restart
        reads it again from its start, and what was committed after it (and
        written before the restart) is not written twice."""
        my = self.my
        my.execute("CREATE TABLE rs.xa (id int PRIMARY KEY, v int NOT NULL)")
        s = self.sluice(stream="xa", tables="rs.xa", max_file_seconds=1)
        self.catch_up(s)

        def ids():
            return sorted(r["payload"]["id"] for r in records_for(self.read(s), "rs", "xa"))

        def run_until(want):
            p = s.start("run")
            wait_until(lambda: set(want) <= set(ids()), 60, f"rows {want} in the output")
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
            self.assertEqual(r.rc, 0, r.describe())

        xa = my.connect()
        try:
            cur = xa.cursor()
            cur.execute("XA START 'y1'")
            cur.execute("INSERT INTO rs.xa VALUES (1, 1)")
            cur.execute("XA END 'y1'")
            cur.execute("XA PREPARE 'y1'")
            my.execute("INSERT INTO rs.xa VALUES (2, 2)")
            my.execute("XA START 'y2'")
            my.execute("INSERT INTO rs.xa VALUES (3, 3)")
            my.execute("XA END 'y2'")
            my.execute("XA PREPARE 'y2'")
            my.execute("XA COMMIT 'y2'")
            my.execute("INSERT INTO rs.xa VALUES (4, 4)")
            run_until([2, 3, 4])
            ck = checkpoint(s)
            my.execute("INSERT INTO rs.xa VALUES (5, 5)")
            run_until([5])         # a restart while y1 is held
            cur.execute("XA COMMIT 'y1'")
        finally:
            xa.close()
        run_until([1])             # and another, past the point read before
        self.catch_up(s)
        recs = records_for(self.read(s), "rs", "xa")
        self.assertEqual(ids(), [1, 2, 3, 4, 5], f"each row once (checkpoint while y1 was held: {ck})")
        self.assertEqual(len(recs), len({r["uuid"] for r in recs}))
        self.assertTableMatches(recs, "rs", "xa", ["id"])

    def test_restart_by_file_and_offset(self):
        """A checkpoint without a GTID (a MySQL server without GTIDs) resumes
        from its binlog file and offset, across rotations."""
        my = self.my
        my.execute("CREATE TABLE rs.f (id int PRIMARY KEY, counter int NOT NULL)")
        s = self.sluice(stream="f", tables="rs.f")
        self.catch_up(s)
        for round_ in range(3):
            path = os.path.join(s.state_dir, "f.checkpoint.json")
            ck = checkpoint(s)
            ck["durable"] = ck["durable"].split(" ")[0]   # the GTID left out
            with open(path, "w") as fh:
                json.dump(ck, fh)
            self._workload("f", round_ * 100 + 1, 30)
            my.execute("FLUSH BINARY LOGS")
            self._workload("f", round_ * 100 + 50, 10)
            r = self.catch_up(s)
            self.assertRegex(checkpoint(s)["durable"], r"^mb\.\d{6}:\d+$", "file/offset mode stays so")
        recs = self.read(s)
        self.assertEqual(len(recs), len({r["uuid"] for r in recs}), "nothing read twice")
        self.assertTableMatches(recs, "rs", "f", ["id"])
        self.assertNoCounterGaps(recs, "rs", "f", ["id"])

    def test_sigterm_drains_and_status(self):
        my = self.my
        my.execute("CREATE TABLE rs.t (id int PRIMARY KEY, counter int NOT NULL)")
        s = self.sluice(stream="t", tables="rs.t")
        p = s.start("run")
        self._workload("t", 1, 50)
        time.sleep(1.5)
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        st = s.run("status", "--json")
        self.assertEqual(st.rc, 6, st.describe())   # 6: no agent runs the stream (it drained)
        o = json.loads(st.stdout)["streams"][0]
        self.assertEqual(o["slot_status"]["state"], "kept")
        self.assertEqual(o["slot_status"]["mysql"]["needed_file_status"], "available")
        self.assertEqual(o["binlog"]["needed_file"], o["durable_position"].split(":")[0])
        self.assertGreaterEqual(o["binlog"]["bytes"], 1)
        self.assertEqual(o["alerts"], [])
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "rs", "t", ["id"])



class RestartMinimalTest(MyTestCase):
    """binlog_row_metadata = MINIMAL: the binlog does not name the columns,
    and covered rows under another layout are decoded with the types of
    the map and the names of the catalog's columns by position."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE rs")

    test_skipped_rows_of_another_layout_keep_the_numbering = \
        RestartTest.test_skipped_rows_of_another_layout_keep_the_numbering


class RestartNoLogTest(RestartMinimalTest):
    """The same with binlog_row_metadata = NO_LOG (no signedness either)."""
    my_settings = {"binlog_row_metadata": "NO_LOG"}

class KillTest(MyTestCase):
    """kill -9 at random moments while a workload writes to two tables."""

    def test_kill9_while_streaming(self):
        seed = int(os.environ.get("SLUICE_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\n    kill test seed {seed} (SLUICE_TEST_SEED={seed} to repeat)", file=sys.stderr)
        rng = random.Random(seed)
        my = self.my
        my.execute("CREATE DATABASE k")
        for t in ("k1", "k2"):
            my.execute(f"CREATE TABLE k.{t} (id bigint AUTO_INCREMENT PRIMARY KEY, v varchar(40), "
                       f"counter int NOT NULL, ts datetime(6))")
            my.execute(f"INSERT INTO k.{t} SELECT seq, md5(seq), 0, NOW(6) FROM k.seq_1_to_3000")
        stop = threading.Event()
        txs = [0]
        errors = []

        def workload():
            wrng = random.Random(seed + 1)
            try:
                c = my.connect(autocommit=False)
                cur = c.cursor()
                while not stop.is_set():
                    for _ in range(wrng.randint(1, 4)):
                        t = wrng.choice(("k1", "k2"))
                        x = wrng.random()
                        if x < 0.35:
                            cur.execute(f"INSERT INTO k.{t} (v, counter, ts) VALUES (md5(rand()), 0, NOW(6))")
                        elif x < 0.9:
                            cur.execute(f"UPDATE k.{t} SET counter = counter + 1, v = md5(rand()), ts = NOW(6) "
                                        f"WHERE id = %s", (wrng.randint(1, 3000),))
                        else:
                            cur.execute(f"DELETE FROM k.{t} WHERE id = %s", (wrng.randint(1, 3000),))
                    c.commit()
                    txs[0] += 1
                    time.sleep(0.001)
                c.close()
            except Exception as e:  # noqa
                errors.append(e)
        th = threading.Thread(target=workload, daemon=True)
        th.start()
        self.addCleanup(stop.set)
        s = self.sluice(stream="kill", tables="k.k1, k.k2", max_file_seconds=1, max_file_bytes=65536)
        p = s.start("run")
        for i in range(3):
            delay = rng.uniform(0.05, 1.0) if i == 0 else rng.uniform(0.3, 2.5)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                if not p.alive():
                    self.fail(f"sluice exited before kill {i + 1}:\n{p.result().describe()}")
                time.sleep(0.02)
            p.kill9()
            print(f"    kill -9 #{i + 1} after {delay:.2f}s (workload at {txs[0]} transactions)", file=sys.stderr)
            p = s.start("run")
        time.sleep(rng.uniform(0.5, 1.5))
        stop.set()
        th.join(60)
        self.assertEqual(errors, [])
        self.assertTrue(p.alive(), p.stderr_text()[-3000:])
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, f"SIGTERM must drain and exit 0:\n{r.describe()}")
        self.catch_up(s)
        recs = self.read(s, workers=2)
        for t in ("k1", "k2"):
            self.assertTableMatches(recs, "k", t, ["id"])
            self.assertNoCounterGaps(recs, "k", t, ["id"])
        print(f"    workload: {txs[0]} transactions; {len(recs)} records, "
              f"{len(recs) - len({r['uuid'] for r in recs})} repeats (identical)", file=sys.stderr)


class PurgedTest(MyTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def _purge_everything_but_the_head(self):
        my = self.my
        my.execute("FLUSH BINARY LOGS")
        my.execute("FLUSH BINARY LOGS")
        last = my.binlogs()[-1]

        def purged():
            # the server keeps a file until its binlog checkpoint is written
            my.execute(f"PURGE BINARY LOGS TO '{last}'")
            return my.binlogs() == [last]
        wait_until(purged, 30, "the older binlogs to be purged")

    def _lost_and_recovered(self, s, table):
        my = self.my
        r = s.run("check")
        self.assertEqual(r.rc, 4, r.describe())
        check_words = r.stderr.strip().splitlines()[-1]
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, 4, r.describe())
        self.assertIn("cannot be resumed on source", r.stderr)
        self.assertIn("purged", r.stderr)
        # check and run say the same
        msg = re.sub(r"^(.*?error: |sluice: )", "", check_words)
        self.assertIn(msg, r.stderr)
        follow_recovery(self, s, r)
        my.execute(f"INSERT INTO pg.{table} VALUES (1000, 'after recovery', 0)")
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "pg", table, ["id"])
        markers = [x for x in records_for(recs, "pg", table) if x["read_method"] == "mysql-backfill-fulldump"
                   and x["source_metadata"]["change_type"] == "TRUNCATE"]
        self.assertEqual(len(markers), 1, "the re-backfill starts with one TRUNCATE marker")

    def test_purged_binlog_gtid(self):
        my = self.my
        my.execute("CREATE DATABASE IF NOT EXISTS pg")
        my.execute("CREATE TABLE pg.p1 (id int PRIMARY KEY, v varchar(30), counter int)")
        my.execute("INSERT INTO pg.p1 VALUES (1, 'a', 0), (2, 'b', 0)")
        s = self.sluice(stream="p1", tables="pg.p1")
        self.catch_up(s)
        my.execute("INSERT INTO pg.p1 VALUES (3, 'lost while stopped', 0)")
        my.execute("DELETE FROM pg.p1 WHERE id = 1")
        self._purge_everything_but_the_head()
        self._lost_and_recovered(s, "p1")

    def test_purged_binlog_file_offset(self):
        my = self.my
        my.execute("CREATE DATABASE IF NOT EXISTS pg")
        my.execute("CREATE TABLE pg.p2 (id int PRIMARY KEY, v varchar(30), counter int)")
        my.execute("INSERT INTO pg.p2 VALUES (1, 'a', 0), (2, 'b', 0)")
        s = self.sluice(stream="p2", tables="pg.p2")
        self.catch_up(s)
        path = os.path.join(s.state_dir, "p2.checkpoint.json")
        ck = checkpoint(s)
        ck["durable"] = ck["durable"].split(" ")[0]
        with open(path, "w") as fh:
            json.dump(ck, fh)
        my.execute("UPDATE pg.p2 SET v = 'lost' WHERE id = 2")
        self._purge_everything_but_the_head()
        self._lost_and_recovered(s, "p2")


class PrereqTest(unittest.TestCase):
    """binlog_format and grants: exit 3 in check and run, the same words."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(mariadb_available())
        cls.my = MariaDbServer({"binlog_format": "MIXED"})
        cls.addClassCleanup(cls.my.close)
        cls.my.start()
        cls.my.execute("CREATE DATABASE pq")
        cls.my.execute("CREATE TABLE pq.t (id int PRIMARY KEY)")

    def test_binlog_format_and_grants(self):
        from harness import Sluice
        s = Sluice(self.my, tables="pq.t")
        self.addCleanup(s.close)
        c = s.run("check")
        r = s.run("run", "--until-caught-up")
        self.assertEqual((c.rc, r.rc), (3, 3), c.describe() + r.describe())
        self.assertIn("binlog_format = MIXED", c.stderr)
        self.assertIn("binlog_format = MIXED", r.stderr)
        self.my.execute("SET GLOBAL binlog_format = 'ROW'")
        self.my.execute(f"REVOKE BINLOG MONITOR ON *.* FROM '{SLUICE_USER}'@'127.0.0.1'")
        try:
            c = s.run("check")
            r = s.run("run", "--until-caught-up")
            self.assertEqual((c.rc, r.rc), (3, 3), c.describe() + r.describe())
            want = f"lacks BINLOG MONITOR; as an administrator run: GRANT BINLOG MONITOR ON *.* TO " \
                   f"'{SLUICE_USER}'@'127.0.0.1'"
            self.assertIn(want, c.stderr)
            self.assertIn(want, r.stderr)
        finally:
            self.my.execute(f"GRANT BINLOG MONITOR ON *.* TO '{SLUICE_USER}'@'127.0.0.1'")
        self.my.execute(f"REVOKE SELECT ON *.* FROM '{SLUICE_USER}'@'127.0.0.1'")
        self.my.execute(f"GRANT SELECT ON mysql.* TO '{SLUICE_USER}'@'127.0.0.1'")
        self.my.execute("CREATE USER 'dummy'@'%'")
        try:
            c = s.run("check")
            # pq.t is no longer visible: the user may not read it (it is not missing)
            self.assertEqual(c.rc, 3, c.describe())
            self.assertIn(f"GRANT SELECT ON `pq`.`t` TO '{SLUICE_USER}'", c.stderr)
        finally:
            self.my.execute(f"GRANT SELECT ON *.* TO '{SLUICE_USER}'@'127.0.0.1'")
        c = s.run("check")
        self.assertEqual(c.rc, 0, c.describe())


if __name__ == "__main__":
    unittest.main()
