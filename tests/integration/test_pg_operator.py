"""
tests/integration/test_pg_operator.py: the operator's edge cases of a
running agent and of the commands around it:

- SIGHUP is logged and ignored (no reload), the agent goes on streaming;
- `status`, `check` and `version` exit 1 and say so when stdout cannot be
  written (/dev/full);
- a second agent on the same state_dir and stream exits at once (exit 2)
  and names the lock file and the pid of the first; `sluice backfill`
  refuses while an agent runs the stream;
- `sluice backfill --table` with a table the stream does not select fails
  (exit 2) and lists the tables it does select;
- an exact name in `tables` (no glob characters) that matches no table is
  an error (exit 2) in check and run, even when other entries match;
- `check` fails (exit 3) when the role could not create the publication, or
  add the tables it lacks, and gives the statement the owner should run;
  run as the owner, that statement makes check pass.
"""

import os
import re
import signal
import subprocess
import unittest

from harness import PgTestCase, read_avro_tree, wait_until

# Every test of this module also runs in the sanitizer pass (run.py --tag sanitizers).
TAGS = {"sanitizers"}


def run_to_full(s, *args):
    """Runs `sluice ARGS` with stdout on /dev/full; returns (rc, stderr)."""
    with open("/dev/full", "w") as full:
        p = subprocess.run(s.argv(*args), stdin=subprocess.DEVNULL, stdout=full, stderr=subprocess.PIPE,
                           cwd=s.workdir, text=True, timeout=60)
    return p.returncode, p.stderr


class SignalsAndOutputTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute("CREATE TABLE op_t (id int PRIMARY KEY, v text)")
        cls.pg.execute("INSERT INTO op_t SELECT g, 'v' || g FROM generate_series(1, 10) g")

    def test_sighup_is_logged_and_ignored(self):
        pg = self.pg
        s = self.sluice(stream="ophup", tables="public.op_t", max_file_seconds=1)
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.signal(signal.SIGHUP)
        wait_until(lambda: "SIGHUP" in p.stderr_text() or not p.alive(), 30, "the SIGHUP log line")
        self.assertTrue(p.alive(), f"SIGHUP ended the agent:\n{p.result().describe() if not p.alive() else ''}")
        self.assertIn("received SIGHUP: configuration reload is not supported; restart sluice to apply a new "
                      "configuration", p.stderr_text())
        # it still streams
        pg.execute("INSERT INTO op_t VALUES (1000, 'after hup')")
        wait_until(lambda: 1000 in read_avro_tree(s.out, self, keep=lambda r: r["payload"].get("id"))
                   or not p.alive(), 60, "the change made after SIGHUP to be written")
        self.assertTrue(p.alive())
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        pg.execute("DELETE FROM op_t WHERE id = 1000")

    def test_threads_are_named(self):
        """top -H and ps -L show what each thread does (doc/operations.md)."""
        s = self.sluice(stream="opthreads", tables="public.op_t", extra={"destination": {"compression_threads": "2"}})
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        names = []
        for tid in os.listdir(f"/proc/{p.pid}/task"):
            with open(f"/proc/{p.pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)
        self.assertEqual(sorted(n for n in names if n != "sl-probe"),
                         ["sl-compress", "sl-compress", "sl-stream", "sl-writer", "sluice"], names)

    def test_unwritable_stdout_fails(self):
        s = self.sluice(stream="opfull", tables="public.op_t")
        self.catch_up(s)
        for args in (("version",), ("status",), ("status", "--json"), ("check",)):
            with self.subTest(args=args):
                rc, err = run_to_full(s, *args)
                self.assertEqual(rc, 1, f"sluice {' '.join(args)} > /dev/full: exit {rc}\n{err}")
                self.assertIn("sluice: could not write to standard output: No space left on device", err)
        # and the same commands exit as they would when stdout works (status: 6, no agent runs)
        for args, rc in ((("version",), 0), (("status",), 6), (("check",), 0)):
            r = s.run(*args, timeout=60)
            self.assertEqual(r.rc, rc, r.describe())



def hidden_files(root):
    found = []
    for d, _, names in os.walk(root):
        found += [os.path.join(d, n) for n in names if n.startswith(".")]
    return found


class LockTest(PgTestCase):

    def test_second_agent_exits_at_once(self):
        pg = self.pg
        pg.execute("CREATE TABLE lock_t (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO lock_t SELECT g, 'v' || g FROM generate_series(1, 10) g")
        # a long max_file_seconds keeps the first agent's file open (hidden, temporary)
        s = self.sluice(stream="oplock", tables="public.lock_t", max_file_seconds=3600)
        first = s.start("run")
        wait_until(lambda: "streaming from slot" in first.stderr_text() or not first.alive(), 60, "streaming")
        pg.execute("INSERT INTO lock_t VALUES (100, 'in an open file')")
        wait_until(lambda: hidden_files(s.out) or not first.alive(), 60, "an open temporary file")
        self.assertTrue(first.alive(), first.result().describe() if not first.alive() else "")
        open_files = hidden_files(s.out)
        lock = os.path.join(s.state_dir, "oplock.lock")

        second = s.start("run")
        r = second.wait_result(10)
        self.assertEqual(r.rc, 2, f"a second agent on the same stream exits 2:\n{r.describe()}")
        self.assertLess(r.wall_s, 5, "it exits at once")
        self.assertIn(f'stream "oplock" is in use by another sluice (pid {first.pid}), which holds the lock '
                      f'"{lock}"; only one agent at a time may run a stream: stop the other one first', r.stderr)
        # it touched nothing of the first one's
        self.assertTrue(first.alive())
        for f in open_files:
            self.assertTrue(os.path.exists(f), f"the second agent removed the first one's open file {f}")
        # and sluice backfill waits its turn too
        r = s.run("backfill", "--stream", "oplock", timeout=30)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn(f'stream "oplock" is in use by another sluice (pid {first.pid}), which holds the lock '
                      f'"{lock}"; stop that agent first', r.stderr)
        with open(lock) as f:
            self.assertEqual(f.read().strip(), str(first.pid), "the lock file holds the holder's pid")

        first.signal(signal.SIGTERM)
        r = first.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        # once the first one is gone, the lock is free again
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "lock_t", ["id"])



class BackfillTableTest(PgTestCase):

    def test_backfill_of_a_table_not_selected(self):
        pg = self.pg
        for t in ("bt_a", "bt_b", "bt_other"):
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY)")
            pg.execute(f"INSERT INTO {t} VALUES (1)")
        s = self.sluice(stream="opbt", tables="public.bt_*", extra={"stream": {"exclude_tables": "public.bt_other"}})
        self.catch_up(s)
        ckpt = os.path.join(s.state_dir, "opbt.checkpoint.json")
        before = open(ckpt).read()
        for table in ("public.bt_nope", "public.bt_other", "bt_a", "other.bt_a"):
            with self.subTest(table=table):
                r = s.run("backfill", "--stream", "opbt", "--table", table, timeout=60)
                self.assertEqual(r.rc, 2, r.describe())
                self.assertIn(f'sluice: stream "opbt": --table {table} names no table the stream selects (it does '
                              f'not exist on source "pg", or tables/exclude_tables leave it out); the stream selects '
                              f'public.bt_a, public.bt_b\n', r.stderr)
                self.assertEqual(r.stdout, "")
        self.assertEqual(open(ckpt).read(), before, "the checkpoint was not changed")
        r = s.run("backfill", "--stream", "opbt", "--table", "public.bt_b", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream opbt: public.bt_b marked for backfill on the next run", r.stdout)



class ExactTablesTest(PgTestCase):

    def test_exact_entry_matching_nothing_is_an_error(self):
        pg = self.pg
        pg.execute("CREATE TABLE ex_a (id int PRIMARY KEY)")
        pg.execute("CREATE TABLE ex_b (id int PRIMARY KEY)")
        cases = [
            ("public.ex_a, public.ex_typo", "public.ex_typo"),
            ("public.ex_*, public.ex_typo", "public.ex_typo"),
            ("public.ex_typo", "public.ex_typo"),
            ("public.ex_a, Public.ex_b", "Public.ex_b"),          # names are case-sensitive
            ("public.ex_a, public.ex_b", "public.ex_b"),          # excluded below
        ]
        for i, (tables, entry) in enumerate(cases):
            with self.subTest(tables=tables):
                extra = {"stream": {"exclude_tables": "public.ex_b"}} if i == 4 else None
                s = self.sluice(stream=f"opex{i}", tables=tables, extra=extra)
                for cmd in (("check",), ("run", "--until-caught-up")):
                    r = s.run(*cmd, timeout=60)
                    self.assertEqual(r.rc, 2, r.describe())
                    self.assertIn(f'stream "opex{i}": tables entry "{entry}" names no table on source "pg" (it does '
                                  f'not exist there, or exclude_tables leaves it out); an entry without *, ? or [ '
                                  f'must name a table', r.stderr)
                self.assertIsNone(pg.slot_info(f"sluice_opex{i}"), "run stopped before making anything")
        # a glob may match nothing
        s = self.sluice(stream="opexok", tables="public.ex_a, public.zz_*")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())



class PublicationPrivilegesTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        pg = cls.pg
        pg.execute("CREATE ROLE pub_limited LOGIN REPLICATION")
        for t in ("pa_a", "pa_b"):
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY)")
            pg.execute(f"INSERT INTO {t} VALUES (1)")
            pg.execute(f"GRANT SELECT ON {t} TO pub_limited")

    def limited(self, stream):
        return self.sluice(stream=stream, tables="public.pa_a, public.pa_b",
                           extra={"source": {"user": "pub_limited"}})

    def statement(self, r):
        m = re.search(r"to run: (.*)$", r.stderr, re.M)
        self.assertIsNotNone(m, r.describe())
        return m.group(1)

    def test_role_may_not_create_the_publication(self):
        pg = self.pg
        s = self.limited("oppriv1")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        want = ('sluice: stream "oppriv1": role "pub_limited" may not create publication "sluice_oppriv1" (it lacks '
                'the CREATE privilege on database "postgres" and it does not own public.pa_a, public.pa_b), so '
                'the stream cannot start; ask a superuser, or the owner of the tables, to run: '
                'CREATE PUBLICATION "sluice_oppriv1" FOR TABLE "public"."pa_a", "public"."pa_b"\n')
        self.assertIn(want, r.stderr)
        pg.execute(self.statement(r))           # the owner runs exactly that
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream oppriv1: publication sluice_oppriv1: exists and publishes every table", r.stdout)
        self.catch_up(s)
        self.assertEqual(len(self.read(s)), 2)

    def test_role_may_not_add_tables(self):
        pg = self.pg
        s = self.limited("oppriv2")
        pg.execute("CREATE PUBLICATION sluice_oppriv2 FOR TABLE pa_a")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('sluice: stream "oppriv2": role "pub_limited" may not add tables to publication "sluice_oppriv2" '
                      '(it does not own the publication and it does not own public.pa_b), so the stream cannot start; '
                      'ask a superuser, or the owner of the tables and of the publication, to run: '
                      'ALTER PUBLICATION "sluice_oppriv2" ADD TABLE "public"."pa_b"\n', r.stderr)
        pg.execute(self.statement(r))
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())

    def test_owner_may(self):
        pg = self.pg
        pg.execute("CREATE ROLE pub_owner LOGIN REPLICATION")
        pg.execute("GRANT CREATE ON DATABASE postgres TO pub_owner")
        pg.execute("CREATE TABLE pa_own (id int PRIMARY KEY)")
        pg.execute("INSERT INTO pa_own VALUES (7)")
        pg.execute("ALTER TABLE pa_own OWNER TO pub_owner")
        s = self.sluice(stream="oppriv3", tables="public.pa_own", extra={"source": {"user": "pub_owner"}})
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream oppriv3: publication sluice_oppriv3: sluice run creates it", r.stdout)
        self.catch_up(s)   # and it does
        self.assertEqual(pg.one("SELECT count(*) FROM pg_publication WHERE pubname = 'sluice_oppriv3'"), 1)
        # a table of another owner added to the stream later: check says who must add it
        pg.execute("CREATE TABLE pa_own2 (id int PRIMARY KEY)")
        pg.execute("GRANT SELECT ON pa_own2 TO pub_owner")
        s.tables = "public.pa_own, public.pa_own2"
        s.write_config()
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("(it does not own public.pa_own2)", r.stderr)
        self.assertIn('to run: ALTER PUBLICATION "sluice_oppriv3" ADD TABLE "public"."pa_own2"\n', r.stderr)


if __name__ == "__main__":
    unittest.main()
