"""
tests/integration/test_my_ddl.py: MariaDB table identity under DDL while
the agent streams (issue 17): a table dropped, or renamed away, ends with
a TRUNCATE marker and the stream goes on, without a restart; a table
created again under its name is read from its CREATE on; a table renamed
to a selected name is backfilled; a copying ALTER TABLE, which hides the
table from information_schema for a moment, is never taken for a drop
(neither at a start nor at a DDL statement); a SIGTERM that comes while
the stream restarts to take in a new table drains and exits 0.
"""

import os
import signal
import threading
import time
import unittest

import harness  # noqa: E402
from harness import assert_marker_between, records_for, wait_until
from harness_mysql import MyTestCase


def ct(r):
    return r["source_metadata"]["change_type"]


RESTART = "restarting the stream to take it in"


class MyTableIdentityTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE ident")

    def streaming(self, p, since=0):
        wait_until(lambda: "streaming from" in p.stderr_text()[since:] or not p.alive(), 90, "sluice to stream",
                   interval=0.1)
        self.assertTrue(p.alive(), p.stderr_text())

    def start_on(self, statements, **kw):
        """Runs statements, then an agent (kw: the stream) until it streams."""
        for q in statements:
            self.my.execute(q)
        s = self.sluice(max_file_seconds=1, **kw)
        p = s.start("run")
        self.streaming(p)
        return s, p

    def assert_one_marker(self, recs):
        """One TRUNCATE marker, strictly between the records of the rows with
        v 'old' and those with v 'new'."""
        marks = [x for x in recs if ct(x) == "TRUNCATE"]
        self.assertEqual(len(marks), 1, recs)
        assert_marker_between(self, [x for x in recs if x["payload"].get("v") == "old"], marks[0],
                              [x for x in recs if x["payload"].get("v") == "new"])

    def drain(self, p):
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        return r

    def test_dropped_and_created_again_while_streaming(self):
        """DROP TABLE of a followed table while the agent streams, then the
        table created again and filled: one TRUNCATE marker strictly between
        the old table's records and the new one's, no stream restart, and
        the output equals the source."""
        my = self.my
        s, p = self.start_on(["CREATE TABLE ident.dr (id int PRIMARY KEY, v varchar(10))",
                              "INSERT INTO ident.dr VALUES (1, 'old'), (2, 'old'), (3, 'old')",
                              "CREATE TABLE ident.keep (id int PRIMARY KEY)"],
                             stream="dr", tables="ident.dr, ident.keep")
        my.execute("UPDATE ident.dr SET v = 'old' WHERE id = 2")
        my.execute("DROP TABLE ident.dr")
        my.execute("INSERT INTO ident.keep VALUES (1)")
        wait_until(lambda: "its rows end with a TRUNCATE marker" in p.stderr_text() or not p.alive(), 60,
                   "the marker of the dropped table")
        # a database statement lists the catalog, which lacks the dropped table
        my.execute("CREATE DATABASE ident_other")
        my.execute("DROP DATABASE ident_other")
        my.execute("CREATE TABLE ident.dr (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO ident.dr VALUES (2, 'new'), (5, 'new')")
        my.execute("UPDATE ident.dr SET v = 'new' WHERE id = 5")
        my.execute("INSERT INTO ident.keep VALUES (2)")
        wait_until(lambda: any(r["payload"].get("id") == 2 for r in records_for(self.read(s), "ident", "keep")),
                   60, "the last change written")
        r = self.drain(p)
        self.assertNotIn(RESTART, r.stderr)
        recs = records_for(self.read(s), "ident", "dr")
        self.assert_one_marker(recs)
        self.assertTableMatches(recs, "ident", "dr", ["id"])
        # the next run writes no second marker
        my.execute("UPDATE ident.dr SET v = 'newer' WHERE id = 2")
        self.catch_up(s)
        recs = records_for(self.read(s), "ident", "dr")
        self.assertEqual(len([x for x in recs if ct(x) == "TRUNCATE"]), 1, recs)
        self.assertTableMatches(recs, "ident", "dr", ["id"])

    def test_database_dropped_while_streaming(self):
        """DROP DATABASE while the agent streams, then the database and its
        table created again and filled: the old rows end with one marker,
        no restart, and the output equals the source."""
        my = self.my
        s, p = self.start_on(["CREATE DATABASE ddw", "CREATE TABLE ddw.t (id int PRIMARY KEY, v varchar(10))",
                              "INSERT INTO ddw.t VALUES (1, 'old'), (2, 'old')"], stream="ddw", tables="ddw.*")
        my.execute("INSERT INTO ddw.t VALUES (3, 'old')")
        my.execute("DROP DATABASE ddw")
        wait_until(lambda: "TRUNCATE" in [ct(x) for x in records_for(self.read(s), "ddw", "t")] or not p.alive(),
                   60, "the marker of the dropped database's table")
        my.execute("CREATE DATABASE ddw")
        my.execute("CREATE TABLE ddw.t (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO ddw.t VALUES (2, 'new'), (5, 'new')")
        wait_until(lambda: any(x["payload"].get("id") == 5 for x in records_for(self.read(s), "ddw", "t")), 60,
                   "the new table's rows written")
        r = self.drain(p)
        self.assertNotIn(RESTART, r.stderr)
        recs = records_for(self.read(s), "ddw", "t")
        self.assert_one_marker(recs)
        self.assertTableMatches(recs, "ddw", "t", ["id"])

    def test_renamed_away_while_streaming(self):
        """RENAME TABLE of a followed table to a selected name, and the old
        name created again, while the agent streams: the old name's rows end
        with a marker, the new name is backfilled (with the rows the table
        had), the old name is read from its CREATE on; both equal the
        source."""
        my = self.my
        s, p = self.start_on(["CREATE TABLE ident.rn (id int PRIMARY KEY, v varchar(10))",
                              "INSERT INTO ident.rn VALUES (1, 'old'), (2, 'old')"], stream="rn", tables="ident.rn*")
        my.execute("INSERT INTO ident.rn VALUES (3, 'old')")
        my.execute("RENAME TABLE ident.rn TO ident.rn_old")
        my.execute("CREATE TABLE ident.rn (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO ident.rn VALUES (7, 'new')")
        my.execute("UPDATE ident.rn_old SET v = 'bb' WHERE id = 2")
        self.drain(p)
        self.catch_up(s)
        recs = self.read(s)
        rn = records_for(recs, "ident", "rn")
        self.assert_one_marker(rn)
        self.assertTableMatches(rn, "ident", "rn", ["id"])
        self.assertTableMatches(records_for(recs, "ident", "rn_old"), "ident", "rn_old", ["id"])

    def test_drain_while_restarting(self):
        """A SIGTERM that comes while the stream ends to take in a new table
        (the agent stopped, the CREATE TABLE and the SIGTERM both waiting for
        it): the drain stops the agent with exit 0, and the next run
        resumes from the checkpoint with nothing lost."""
        my = self.my
        s, p = self.start_on(["CREATE TABLE ident.ds (id int PRIMARY KEY, v int)",
                              "INSERT INTO ident.ds VALUES (1, 0), (2, 0)"], stream="ds", tables="ident.ds*")
        my.execute("UPDATE ident.ds SET v = 1 WHERE id = 1")
        os.kill(p.pid, signal.SIGSTOP)
        try:
            my.execute("CREATE TABLE ident.ds_new (id int PRIMARY KEY)")
            my.execute("INSERT INTO ident.ds_new VALUES (1), (2)")
            my.execute("UPDATE ident.ds SET v = 2 WHERE id = 2")
            # the server sent them all to the stopped agent's socket
            wait_until(lambda: any("has sent all binlog" in (row[0] or "") for row in my.sql(
                "SELECT STATE FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")), 30,
                "the binlog sent")
            p.signal(signal.SIGTERM)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(records_for(recs, "ident", "ds"), "ident", "ds", ["id"])
        self.assertTableMatches(records_for(recs, "ident", "ds_new"), "ident", "ds_new", ["id"])

    def test_copying_alter_is_no_drop(self):
        """Copying ALTER TABLEs one after another (each renames the table's
        file away and the new one in) while the agent streams, reads DDL
        statements (each lists the catalog) and starts again: the table is
        never taken for dropped: no marker, no restart, and the output
        equals the source."""
        my = self.my
        s, p = self.start_on(["CREATE TABLE ident.ca (id int PRIMARY KEY, v int)",
                              "INSERT INTO ident.ca SELECT seq, seq FROM ident.seq_1_to_500"], stream="ca",
                             tables="ident.ca")
        stop = threading.Event()
        errors, logs = [], []

        def alters():
            c = self.my.connect()
            try:
                while not stop.is_set():
                    c.cursor().execute("ALTER TABLE ident.ca FORCE, ALGORITHM=COPY")
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
            finally:
                c.close()

        th = threading.Thread(target=alters)
        th.start()
        try:
            deadline = time.monotonic() + 25
            n = 0
            while time.monotonic() < deadline:
                # each statement makes the agent list the catalog
                my.execute(f"CREATE DATABASE IF NOT EXISTS ca_{n % 3}")
                my.execute(f"DROP DATABASE IF EXISTS ca_{(n + 1) % 3}")
                my.execute("UPDATE ident.ca SET v = v + 1 WHERE id = %s", (n % 500 + 1,))
                n += 1
                if n % 40 == 0:
                    # a start lists the catalog too
                    logs.append(self.drain(p).stderr)
                    p = s.start("run")
                    self.streaming(p)
        finally:
            stop.set()
            th.join()
        self.assertEqual(errors, [])
        logs.append(self.drain(p).stderr)
        logs.append(self.catch_up(s).stderr)
        out = "".join(logs)
        self.assertNotIn("no longer one of the stream's tables", out)
        self.assertNotIn(RESTART, out)
        recs = records_for(self.read(s), "ident", "ca")
        self.assertEqual([x for x in recs if ct(x) == "TRUNCATE"], [])
        self.assertTableMatches(recs, "ident", "ca", ["id"])


if __name__ == "__main__":
    unittest.main()
