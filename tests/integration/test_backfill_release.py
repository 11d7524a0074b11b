"""
tests/integration/test_backfill_release.py: once the initial backfill has
read every row, its snapshot goes (PostgreSQL's ACCESS SHARE locks,
MariaDB's consistent-snapshot transaction with its metadata locks) before
sluice waits for those rows to become durable.  An application's TRUNCATE
must not wait on a destination that is slow or down: here a proxy holds
the S3 destination's answer to the first data file's PUT, and the TRUNCATE, run with a
10 s lock timeout, must go through while it does.  Before, the soak found
a MariaDB TRUNCATE waiting 20 minutes on sluice's idle snapshot
transaction.  Then the answer goes through, and the output equals the
source.

Small tables (read as a group, then the backfill's last sync).  A large
table waits for its rows to become durable while it is read, snapshot
and all: that wait is the backfill's own, as with pg_dump writing into a
slow pipe.
"""

import unittest

from ch_harness import HoldingProxy
from harness import PgTestCase, WithS3, read_avro_tree, wait_until
from harness_mysql import MyTestCase


class Release:
    """The test, for a source class that defines create(table, rows),
    truncate(table), insert(table, first, n), qualified(table) and
    matches(records, table)."""

    def held_run(self, stream, tables):
        proxy = HoldingProxy(self.s3.endpoint)
        self.addCleanup(proxy.close)
        proxy.arm_match(lambda method, path, body: method == "PUT" and ".avro" in path)
        s = self.sluice(stream=stream, tables=",".join(self.qualified(t) for t in tables), s3=self.s3,
                        prefix=f"cdc/{stream}", extra={"destination": {"endpoint": proxy.url}})
        p = s.start("run")
        wait_until(lambda: proxy.held.is_set() or not p.alive(), 90, "the destination's answer held")
        if not p.alive():
            self.fail(f"sluice exited:\n{p.result().describe()}")
        try:
            wait_until(lambda: p.stderr_text().count("backfilled ") >= len(tables) or not p.alive(), 60,
                       "every table read")
        except TimeoutError:
            self.fail("not every table read:\n" + p.stderr_text())
        return s, p, proxy

    def check(self, s, p, proxy, tables):
        for t in tables:
            self.truncate(t)          # with a 10 s lock timeout: fails if it waits on sluice
            self.insert(t, 1000, 5)
        proxy.pass_through()
        p.kill9()
        p.wait_result(30)
        s.extra["destination"]["endpoint"] = None
        s.catch_up(self)
        records = read_avro_tree(s.output_tree(), self, codec=s.codec)
        for t in tables:
            self.matches(records, t)

    def test_small_tables(self):
        self.create("rl_a", 50)
        self.create("rl_b", 60)
        s, p, proxy = self.held_run("rlsmall", ["rl_a", "rl_b"])
        self.check(s, p, proxy, ["rl_a", "rl_b"])


class PgBackfillReleaseTest(Release, WithS3, PgTestCase):

    def create(self, t, rows):
        self.pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        self.pg.execute(f"INSERT INTO {t} SELECT g, 'v' || g FROM generate_series(1, {rows}) g")
        self.pg.execute(f"ANALYZE {t}")

    def qualified(self, t):
        return f"public.{t}"

    def truncate(self, t):
        self.pg.execute(f"SET lock_timeout = '10s'; TRUNCATE {t}")

    def insert(self, t, first, n):
        self.pg.execute(f"INSERT INTO {t} SELECT g, 'w' || g FROM generate_series({first}, {first + n - 1}) g")

    def matches(self, records, t):
        self.assertTableMatches(records, "public", t, ["id"])


class MyBackfillReleaseTest(Release, WithS3, MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE rl")

    def create(self, t, rows):
        self.my.execute(f"CREATE TABLE rl.{t} (id int PRIMARY KEY, v varchar(20))")
        self.my.execute(f"INSERT INTO rl.{t} SELECT seq, concat('v', seq) FROM rl.seq_1_to_{rows}")
        self.my.execute(f"ANALYZE TABLE rl.{t}")

    def qualified(self, t):
        return f"rl.{t}"

    def truncate(self, t):
        self.my.execute(f"SET STATEMENT lock_wait_timeout = 10 FOR TRUNCATE TABLE rl.{t}")

    def insert(self, t, first, n):
        self.my.execute(f"INSERT INTO rl.{t} SELECT seq, concat('w', seq) FROM rl.seq_{first}_to_{first + n - 1}")

    def matches(self, records, t):
        self.assertTableMatches(records, "rl", t, ["id"])


if __name__ == "__main__":
    unittest.main()
