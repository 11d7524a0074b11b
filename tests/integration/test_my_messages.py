"""
tests/integration/test_my_messages.py: what sluice says when a MariaDB
source fails it.  A snapshot read cut off in the middle of its rows names
the server's error (not "unknown error (error 0)"); a change logged as a
statement is quoted as its text alone (not followed by the event's checksum
bytes); a snapshot taken under FLUSH TABLES WITH READ LOCK
(SLUICE_MYSQL_SNAPSHOT=lock) needs RELOAD, and `check` says so as `run`
does.
"""

import re

from harness import wait_until
from harness_mysql import MyTestCase, SLUICE_USER


class MessagesTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE mm")

    def test_snapshot_read_cut_off_names_the_error(self):
        my = self.my
        my.execute("CREATE TABLE mm.big (id int PRIMARY KEY, filler varchar(200))")
        my.execute("INSERT INTO mm.big SELECT seq, REPEAT('x', 200) FROM mm.seq_1_to_300000")
        s = self.sluice(stream="big", tables="mm.big")
        p = s.start("run")
        killed = []

        def kill_reader():
            rows = my.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO LIKE %s",
                          (SLUICE_USER, "SELECT %`big`%"))
            for (cid,) in rows:
                my.execute(f"KILL CONNECTION {int(cid)}")
                killed.append(cid)
            return bool(rows)
        wait_until(kill_reader, 60, "the backfill's SELECT to run", interval=0.005)

        def failed():
            return "reading table" in p.stderr_text()
        wait_until(failed, 60, "the snapshot read to fail")
        p.kill9()
        line = next(ln for ln in p.stderr_text().splitlines() if "reading table" in ln)
        self.assertNotIn("unknown error", line)
        m = re.search(r'reading table "mm"\."big" in the snapshot: (.+) \(error (\d+)\)', line)
        self.assertIsNotNone(m, line)
        self.assertNotEqual(int(m.group(2)), 0, line)

    def test_statement_quoted_without_checksum(self):
        my = self.my
        my.execute("CREATE TABLE mm.st (id int PRIMARY KEY)")
        s = self.sluice(stream="st", tables="mm.st")
        s.catch_up(self)
        sql = "INSERT INTO mm.st VALUES (42)"
        c = my.connect()
        try:
            cur = c.cursor()
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(sql)
        finally:
            c.close()
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        m = re.search(r'logged as a statement \(binlog_format = STATEMENT or MIXED in that session\): "(.*?)"\. '
                      r'sluice reads ROW', r.stderr, re.S)
        self.assertIsNotNone(m, r.describe())
        self.assertEqual(m.group(1), sql)

    def test_lock_snapshot_needs_reload_in_check(self):
        my = self.my
        my.execute("CREATE TABLE mm.lk (id int PRIMARY KEY)")
        my.execute("INSERT INTO mm.lk VALUES (1)")
        s = self.sluice(stream="lk", tables="mm.lk")
        env = {"SLUICE_MYSQL_SNAPSHOT": "lock"}
        r = s.run("check", timeout=60, env=env)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(f"GRANT RELOAD ON *.* TO '{SLUICE_USER}'@'127.0.0.1'", r.stdout + r.stderr)
        r = s.run("run", "--until-caught-up", timeout=60, env=env)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("RELOAD", r.stderr)
        my.execute(f"GRANT RELOAD ON *.* TO '{SLUICE_USER}'@'127.0.0.1'")
        try:
            r = s.run("check", timeout=60, env=env)
            self.assertEqual(r.rc, 0, r.describe())
            r = s.run("run", "--until-caught-up", timeout=60, env=env)
            self.assertEqual(r.rc, 0, r.describe())
            self.assertIn("FLUSH TABLES WITH READ LOCK", r.stderr)
        finally:
            my.execute(f"REVOKE RELOAD ON *.* FROM '{SLUICE_USER}'@'127.0.0.1'")
        # without the lock, MariaDB needs no RELOAD
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())

    def test_tables_without_select_are_named(self):
        """information_schema hides the tables a user has no privilege on: a
        glob must not leave them out silently, and a named one is not
        "missing"."""
        my = self.my
        my.execute("CREATE DATABASE gdb")
        for t in ("t1", "t2"):
            my.execute(f"CREATE TABLE gdb.{t} (id int PRIMARY KEY)")
            my.execute(f"INSERT INTO gdb.{t} VALUES (1)")
        who = f"'{SLUICE_USER}'@'127.0.0.1'"
        my.execute(f"REVOKE SELECT ON *.* FROM {who}")
        my.execute(f"GRANT SELECT ON gdb.t1 TO {who}")
        try:
            glob = self.sluice(stream="gglob", tables="gdb.*")
            named = self.sluice(stream="gnamed", tables="gdb.t1, gdb.t2")
            for s, want in ((glob, f"GRANT SELECT ON `gdb`.* TO '{SLUICE_USER}'"),
                            (named, f"GRANT SELECT ON `gdb`.`t2` TO '{SLUICE_USER}'")):
                c = s.run("check", timeout=60)
                r = s.run("run", "--until-caught-up", timeout=60)
                self.assertEqual((c.rc, r.rc), (3, 3), c.describe() + r.describe())
                self.assertNotIn("all checks passed", c.stdout)
                self.assertIn(want, c.stderr)
                self.assertIn(want, r.stderr)
            my.execute(f"GRANT SELECT ON gdb.t2 TO {who}")
            c = named.run("check", timeout=60)
            self.assertEqual(c.rc, 0, c.describe())
            my.execute(f"GRANT SELECT ON gdb.* TO {who}")
            c = glob.run("check", timeout=60)
            self.assertEqual(c.rc, 0, c.describe())
            self.assertIn("table gdb.t2", c.stdout)
            # the grants change under a running stream: a table created then
            # is invisible to it, and its changes stop the stream by name
            p = glob.start("run")
            wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
            my.execute(f"REVOKE SELECT ON gdb.* FROM {who}")
            my.execute("CREATE TABLE gdb.t3 (id int PRIMARY KEY)")
            my.execute("INSERT INTO gdb.t3 VALUES (1)")
            r = p.wait_result(60)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn(f"GRANT SELECT ON `gdb`.`t3` TO '{SLUICE_USER}'", r.stderr)
        finally:
            my.execute(f"GRANT SELECT ON *.* TO {who}")


if __name__ == "__main__":
    import unittest
    unittest.main()
