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
"""

import os
import signal
import subprocess
import unittest

from harness import PgTestCase, read_avro_tree, wait_until


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

    def test_unwritable_stdout_fails(self):
        s = self.sluice(stream="opfull", tables="public.op_t")
        self.catch_up(s)
        for args in (("version",), ("status",), ("status", "--json"), ("check",)):
            with self.subTest(args=args):
                rc, err = run_to_full(s, *args)
                self.assertEqual(rc, 1, f"sluice {' '.join(args)} > /dev/full: exit {rc}\n{err}")
                self.assertIn("sluice: could not write to standard output: No space left on device", err)
        # and the same commands do exit 0 when stdout works
        for args in (("version",), ("status",), ("check",)):
            r = s.run(*args, timeout=60)
            self.assertEqual(r.rc, 0, r.describe())



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


if __name__ == "__main__":
    unittest.main()
