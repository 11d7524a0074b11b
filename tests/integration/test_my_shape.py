"""
tests/integration/test_my_shape.py: a table's shape at every binlog
position, and changes the binlog does not carry as full rows.

Without binlog_row_metadata=FULL the binlog does not name a row's columns:
sluice takes them from the catalog, which describes each table as it is
now.  DDL read while the stream lags (stopped, or behind the server) must
not decode older rows with a newer shape: the table is backfilled again
behind a marker after the DDL.  The scenarios of issue 19 item 2 run under
binlog_row_metadata NO_LOG and MINIMAL, with the stream stopped across the
DDL and running during it, and under FULL (the binlog names the columns).

A change logged as a statement, or as a MINIMAL or NOBLOB image sluice
cannot complete, stops the stream (exit 3) naming `sluice backfill ...
--table`; that command, run exactly as printed, carries the next run past
the event (item 4).
"""

import re
import signal

from harness import rebuild, records_for, wait_for_log, wait_until
from harness_mysql import MyTestCase, my_state_diff
from test_my_defaults import state_diffs, watermark_table

TABLES = ("sw", "sd", "se", "sc")


def ddl_setup(my):
    my.execute("DROP DATABASE IF EXISTS sh")
    my.execute("CREATE DATABASE sh")
    my.execute("CREATE TABLE sh.sw (id int PRIMARY KEY, v int)")
    my.execute("CREATE TABLE sh.sd (id int PRIMARY KEY, a int, b int)")
    my.execute("CREATE TABLE sh.se (id int PRIMARY KEY, e enum('x','y','z'))")
    my.execute("CREATE TABLE sh.sc (id int PRIMARY KEY, s varchar(20) CHARACTER SET utf8mb4)")
    my.execute("INSERT INTO sh.sw VALUES (0, 0)")
    my.execute("INSERT INTO sh.sd VALUES (0, 0, 0)")
    my.execute("INSERT INTO sh.se VALUES (0, 'x')")
    my.execute("INSERT INTO sh.sc VALUES (0, 'zero')")


def ddl_changes(my):
    """Issue 19 item 2: rows, then DDL that keeps the column count and
    types (a column moved, one dropped and one added, an ENUM reordered, a
    charset changed), then more rows."""
    my.execute("INSERT INTO sh.sw VALUES (1, 100)")
    my.execute("INSERT INTO sh.sd VALUES (1, 11, 12)")
    my.execute("UPDATE sh.sd SET b = 2 WHERE id = 0")
    my.execute("INSERT INTO sh.se VALUES (1, 'y'), (2, 'z')")
    my.execute("INSERT INTO sh.sc VALUES (1, 'caf\u00e9')")
    my.execute("ALTER TABLE sh.sw MODIFY v INT FIRST")
    my.execute("ALTER TABLE sh.sd DROP COLUMN a, ADD COLUMN c INT DEFAULT 99")
    my.execute("ALTER TABLE sh.se MODIFY e enum('z','y','x')")
    my.execute("ALTER TABLE sh.sc MODIFY s varchar(20) CHARACTER SET latin1")
    my.execute("INSERT INTO sh.sw (id, v) VALUES (2, 200)")
    my.execute("INSERT INTO sh.sd (id, b) VALUES (2, 22)")
    my.execute("INSERT INTO sh.se VALUES (3, 'x')")
    my.execute("INSERT INTO sh.sc VALUES (2, 'na\u00efve')")


def diffs(testcase, s):
    """The differences between the source and the state the output
    rebuilds.  ADD COLUMN c DEFAULT 99 gives sh.sd's old rows a value that
    no change carries: read live (or with FULL metadata) the table is
    backfilled again for it (test_my_defaults.py)."""
    return state_diffs(testcase, s, "sh", TABLES)


class ShapeNoLogTest(MyTestCase):
    my_settings = {"binlog_row_metadata": "NO_LOG"}
    again = True   # the DDL read while stopped backfills each table again

    def setUp(self):
        self.assertEqual(self.my.one("SELECT @@global.binlog_row_metadata"),
                         self.my_settings["binlog_row_metadata"])
        # sh.sd, read live, is backfilled again while streaming (no restart)
        watermark_table(self.my)

    def test_ddl_while_stopped(self):
        """The stream is stopped across the DDL: each table is backfilled
        again after it, and the rows before it are not decoded with the
        new shape."""
        my = self.my
        ddl_setup(my)
        s = self.sluice(stream="lag", tables="sh.*")
        self.catch_up(s)
        ddl_changes(my)
        r = self.catch_up(s)
        self.assertEqual(diffs(self, s), [])
        for t in TABLES:
            if self.again:
                self.assertRegex(r.stderr, "sh\\.%s.*backfilled again" % t)
        if not self.again:
            # only sh.sd, for its column added with a default
            self.assertIn('table "sh"."sd": column "c" was added with a default, which the existing rows have '
                          'without a change: it is backfilled again, behind a marker', r.stderr)
            self.assertEqual(r.stderr.count("backfilled again"), 1, r.stderr)
        # and it stays so: a restart reads the DDL again and does nothing more
        my.execute("INSERT INTO sh.sw VALUES (3, 300)")
        self.catch_up(s)
        self.assertEqual(diffs(self, s), [])

    def test_killed_while_backfilling_again(self):
        """kill -9 while the tables are backfilled again after the DDL: the
        next run backfills what was not durable and skips the old rows
        again; nothing is lost, and nothing is read with another layout."""
        my = self.my
        # no watermark table: the tables are backfilled again from a
        # snapshot at the start (a backfill while streaming is killed in
        # test_my_defaults and test_my_rebackfill)
        my.execute("DROP TABLE IF EXISTS sluice.watermarks")
        ddl_setup(my)
        s = self.sluice(stream="kill", tables="sh.*")
        self.catch_up(s)
        # rows enough that the kill lands while sh.sd is read again (its
        # log polled every 5 ms: wait_for_log)
        my.execute("INSERT INTO sh.sd SELECT seq + 10, seq, seq FROM sh.seq_1_to_100000")
        ddl_changes(my)
        p = s.start("run", "--until-caught-up")
        wait_for_log(p, "backfilling sh.sd at", 60, "the backfill of sh.sd")
        p.kill9()
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr_text())
        self.assertIn("backfilling sh.sd at", p.stderr_text())
        self.assertNotIn("backfilled sh.sd", p.stderr_text())
        self.catch_up(s)
        self.assertEqual(diffs(self, s), [])

    def test_ddl_while_streaming(self):
        """The same DDL under a running stream."""
        my = self.my
        ddl_setup(my)
        s = self.sluice(stream="live", tables="sh.*", max_file_seconds=1)
        self.catch_up(s)
        p = s.start("run")
        wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
        ddl_changes(my)
        d = []

        def equal():
            nonlocal d
            self.assertTrue(p.alive(), p.stderr_text())
            d = diffs(self, s)
            return not d
        try:
            wait_until(equal, 120, "the output to equal the source")
        except TimeoutError:
            self.fail("output differs from the source: %s\n%s" % (d, p.stderr_text()))
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())


class ShapeMinimalTest(ShapeNoLogTest):
    my_settings = {"binlog_row_metadata": "MINIMAL"}
    test_killed_while_backfilling_again = None   # the same path as NO_LOG's, and the longest test


class ShapeFullTest(ShapeNoLogTest):
    """With FULL metadata the binlog names the columns: no backfill again,
    but for sh.sd's column added with a default."""
    my_settings = {"binlog_row_metadata": "FULL"}
    again = False
    test_killed_while_backfilling_again = None


class RowImageTest(MyTestCase):
    my_settings = {"binlog_row_metadata": "NO_LOG"}

    def recover(self, s, r):
        """Runs the recovery the error message names, exactly as written."""
        m = re.search(r"run `(sluice backfill [^`]*)`", r.stderr)
        self.assertTrue(m, r.describe())
        args = m.group(1).split()
        self.assertEqual(args[:4], ["sluice", "backfill", "-c", s.config_path])
        b = s.run(*args[1:], raw=True)
        self.assertEqual(b.rc, 0, b.describe())

    def test_statement_and_partial_images_recovered(self):
        my = self.my
        my.execute("CREATE DATABASE ri")
        my.execute("CREATE TABLE ri.t (id int PRIMARY KEY, v int, n varchar(10), b blob)")
        my.execute("CREATE TABLE ri.u (id int PRIMARY KEY, v int)")
        my.execute("INSERT INTO ri.t VALUES (1, 1, 'one', 'b1'), (2, 2, 'two', 'b2')")
        my.execute("INSERT INTO ri.u VALUES (1, 1)")
        s = self.sluice(stream="ri", tables="ri.*")
        self.catch_up(s)
        c = my.connect()
        cur = c.cursor()
        steps = [
            ("SET SESSION binlog_format = STATEMENT", "INSERT INTO ri.t VALUES (3, 3, 'three', 'b3')",
             "logged as a statement"),
            ("SET SESSION binlog_row_image = MINIMAL", "INSERT INTO ri.t (id, v) VALUES (4, 4)",
             "lacks column"),
            ("SET SESSION binlog_row_image = NOBLOB", "INSERT INTO ri.t (id, v, n) VALUES (5, 5, 'five')",
             "lacks column"),
            # several tables: the whole stream is backfilled from a new position
            ("SET SESSION binlog_format = STATEMENT",
             "UPDATE ri.t AS a JOIN ri.u AS b ON a.id = b.id SET a.v = a.v + 1, b.v = b.v + 1",
             "logged as a statement"),
        ]
        for setting, change, why in steps:
            cur.execute(setting)
            cur.execute(change)
            cur.execute("UPDATE ri.t SET v = v + 10 WHERE id = 1")
            cur.execute("UPDATE ri.t SET n = 'deux' WHERE id = 2")
            my.execute("UPDATE ri.u SET v = v + 1")
            r = s.run("run", "--until-caught-up")
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn(why, r.stderr)
            self.recover(s, r)
            self.catch_up(s)
            recs = self.read(s)
            for t in ("t", "u"):
                self.assertEqual(my_state_diff(my, "ri", t, ["id"], rebuild(records_for(recs, "ri", t), ["id"])),
                                 [], setting)
            cur.execute("SET SESSION binlog_format = ROW")
            cur.execute("SET SESSION binlog_row_image = FULL")
        c.close()
        # updates with partial images are read (unchanged columns kept)
        for image in ("MINIMAL", "NOBLOB"):
            cur = my.connect().cursor()
            cur.execute("SET SESSION binlog_row_image = %s" % image)
            cur.execute("UPDATE ri.t SET v = v + 100")
            cur.execute("DELETE FROM ri.t WHERE id = 2")
            cur.execute("INSERT INTO ri.t VALUES (2, 2, 'two', 'b2')")
            self.catch_up(s)
        recs = self.read(s)
        self.assertEqual(my_state_diff(my, "ri", "t", ["id"], rebuild(records_for(recs, "ri", "t"), ["id"])), [])


if __name__ == "__main__":
    import unittest
    unittest.main()
