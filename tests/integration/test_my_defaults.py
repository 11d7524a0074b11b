"""
tests/integration/test_my_defaults.py: ADD COLUMN with a default at a
MariaDB source (issue 17, defect 2).

MariaDB gives a column added with a default (constant, NOT NULL with the
type's implicit default, or an expression such as RAND() or
CURRENT_TIMESTAMP) to every existing row without a row event, whether the
ADD is instant or rebuilds the table.  The stream reads the statement live
(binlog_row_metadata FULL or MINIMAL), so no lagging-path re-backfill
happens: sluice backfills the table again behind a marker, saying why.
Every existing row must read the default exactly, with no later update of
those rows: in avro_dir merge files (the state rebuilt from the records)
and in ClickHouse 18.16's merge view.
"""

import re
import signal

from ch_harness import MyChTestCase
from harness import after_request, rebuild, records_for, running_chunks, wait_until
from harness_mysql import SLUICE_USER, MyTestCase, my_state_diff
from test_my_rebackfill import WM_DDL

# table: the ADD COLUMN statement
DDL = {
    "k": "ALTER TABLE ad.k ADD COLUMN c INT DEFAULT 7",
    "n": "ALTER TABLE ad.n ADD COLUMN c varchar(10) NOT NULL DEFAULT 'x', ADD COLUMN z INT NOT NULL",
    "r": "ALTER TABLE ad.r ADD COLUMN c DOUBLE DEFAULT (RAND())",
    "t": "ALTER TABLE ad.t ADD COLUMN c DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
}
ROWS = 30


def watermark_table(my):
    """The table is backfilled again while streaming (doc/mysql.md)."""
    my.execute("CREATE DATABASE IF NOT EXISTS sluice")
    my.execute(WM_DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    my.execute(f"GRANT INSERT, UPDATE ON sluice.watermarks TO '{SLUICE_USER}'@'127.0.0.1'")


def setup(my):
    watermark_table(my)
    my.execute("DROP DATABASE IF EXISTS ad")
    my.execute("CREATE DATABASE ad")
    for t in DDL:
        my.execute(f"CREATE TABLE ad.{t} (id int PRIMARY KEY, v int)")
        my.execute(f"INSERT INTO ad.{t} SELECT seq, seq * 10 FROM mysql.seq_1_to_{ROWS}")


def add_columns(my, only=None):
    """The DDL, then one new row per table (only that table's, with only):
    the old rows are not touched."""
    for t, ddl in DDL.items():
        if only is not None and t != only:
            continue
        my.execute(ddl)
        if t == "n":
            my.execute("INSERT INTO ad.n (id, v, z) VALUES (100, 1000, 5)")
        else:
            my.execute(f"INSERT INTO ad.{t} (id, v) VALUES (100, 1000)")


def why(t):
    if t in ("r", "t"):   # an expression, a function: the log says the default is not a constant
        return (f'table "ad"."{t}": column "c" was added with a default that is not a constant (an expression, '
                'or a function such as CURRENT_TIMESTAMP), which gave the existing rows values that no change '
                'carries: it is backfilled again, behind a marker')
    return (f'table "ad"."{t}": column "c" was added with a default, which the existing rows have without a '
            'change: it is backfilled again, behind a marker')


def state_diffs(testcase, s, db, tables):
    """The differences between the source's tables db.t (keyed on id) and
    the state the output of s rebuilds."""
    recs = testcase.read(s)
    out = []
    for t in tables:
        state = rebuild(records_for(recs, db, t), ["id"])
        out += my_state_diff(testcase.my, db, t, ["id"], state)
    return out


def run_until_equal(testcase, s, act, diffs):
    """Runs s; once it streams, act(p); then waits for diffs() to be empty
    and stops s with SIGTERM, which must end it with exit 0.  Returns the
    run's Result."""
    p = s.start("run")
    d = []

    def equal():
        nonlocal d
        testcase.assertTrue(p.alive(), p.stderr_text())
        d = diffs()
        return not d
    try:
        wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
        act(p)
        try:
            wait_until(equal, 120, "the output to equal the source")
        except TimeoutError:
            testcase.fail("output differs from the source: %s\n%s" % (d[:10], p.stderr_text()))
    finally:
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
    testcase.assertEqual(r.rc, 0, r.describe())
    return r


class AddDefaultCases:
    """Mixed into a MyTestCase: avro_dir, merge mode."""

    def why_re(self, t):
        return re.escape(why(t))

    def diffs(self, s):
        return state_diffs(self, s, "ad", DDL)

    def add_columns_live(self, my, p):
        add_columns(my)

    def test_add_default_while_streaming(self):
        my = self.my
        setup(my)
        s = self.sluice(stream="live", tables="ad.*", write_mode="merge", max_file_seconds=1)
        self.catch_up(s)
        r = run_until_equal(self, s, lambda p: self.add_columns_live(my, p), lambda: self.diffs(s))
        for t in DDL:
            self.assertRegex(r.stderr, self.why_re(t))
        # the next run has nothing more to do
        r = self.catch_up(s)
        self.assertNotIn("backfilled again", r.stderr)
        self.assertEqual(self.diffs(s), [])

    def test_add_default_while_stopped(self):
        """The DDL read at the next start (the stream behind the server)."""
        my = self.my
        setup(my)
        s = self.sluice(stream="lag", tables="ad.*", write_mode="merge")
        self.catch_up(s)
        add_columns(my)
        self.catch_up(s)
        self.assertEqual(self.diffs(s), [])


class MyAddDefaultTest(AddDefaultCases, MyTestCase):
    """binlog_row_metadata = FULL (the harness's default)."""

    def test_ddl_while_backfilling_again(self):
        """A second ADD COLUMN ... DEFAULT while the table is backfilled
        again for the first one: it is backfilled again once that backfill
        is done (the rows of its chunks so far lack the second column's
        value), and the output ends equal to the source, with no later
        update of the old rows."""
        my = self.my
        watermark_table(my)
        my.execute("DROP DATABASE IF EXISTS bb")
        my.execute("CREATE DATABASE bb")
        my.execute("CREATE TABLE bb.t (id int PRIMARY KEY, v int)")
        my.execute("INSERT INTO bb.t SELECT seq, seq FROM mysql.seq_1_to_20000")
        s = self.sluice(stream="bb", tables="bb.*", write_mode="merge", max_file_seconds=1,
                        extra={"source": {"backfill_chunk_rows": 100}})
        self.catch_up(s)
        p = s.start("run")
        try:
            wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
            my.execute("ALTER TABLE bb.t ADD COLUMN n int DEFAULT 7")
            wait_until(lambda: running_chunks(s, "bb.t") >= 1 or "backfilled" in p.stderr_text()
                       or not p.alive(), 60, "a durable chunk of the re-backfill")
            self.assertTrue(p.alive(), p.stderr_text())
            self.assertNotIn("backfilled bb.t while streaming", p.stderr_text())
            my.execute("ALTER TABLE bb.t ADD COLUMN m varchar(3) NOT NULL DEFAULT 'm'")
            # the backfill requested after the second DDL, to its end
            wait_until(lambda: "backfilled bb.t while streaming: 20000 rows" in
                       after_request(p.stderr_text(), '"bb"."t": column "m"', "bb.t") or not p.alive(), 120,
                       "the backfill again, to its end")
        finally:
            p.signal(signal.SIGTERM)
            p.wait_result(60)
        state = rebuild(records_for(self.read(s), "bb", "t"), ["id"])
        self.assertEqual(my_state_diff(my, "bb", "t", ["id"], state)[:10], [], p.stderr_text())
        err = p.stderr_text()
        self.assertIn('table "bb"."t": column "m" was added with a default, which the existing rows have '
                      'without a change: it is backfilled again, behind a marker', err)
        # the first backfill ended, then the one the second DDL asked for ran
        self.assertEqual(err.count("backfill of bb.t requested"), 2, err)
        self.assertEqual(err.count("backfilled bb.t while streaming"), 2, err)


class MyAddDefaultMinimalTest(AddDefaultCases, MyTestCase):
    """binlog_row_metadata = MINIMAL: a DDL read live is the case above; one
    read while the stream is behind the server (the next DDL came first)
    takes the lagging path (test_my_shape.py's), which backfills it again
    too."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}
    test_add_default_while_stopped = None   # the lagging path

    def why_re(self, t):
        return re.escape(why(t)) + "|" + r"backfilled ad\.%s\b" % t


class MyImplicitFillTest(MyTestCase):
    """Other DDL that gives existing rows values without row events (issue
    17): MODIFY ... NOT NULL on a column holding NULLs (outside strict mode
    MariaDB turns them into the type's implicit default, 0 or ''), and a
    TIMESTAMP added without NULL or DEFAULT under
    explicit_defaults_for_timestamp = OFF (the table's first one is NOT
    NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP).  Each
    table is backfilled again behind a marker, saying why."""
    my_settings = {"explicit_defaults_for_timestamp": "OFF"}

    def test_not_null_and_first_timestamp(self):
        my = self.my
        watermark_table(my)
        my.execute("DROP DATABASE IF EXISTS fi")
        my.execute("CREATE DATABASE fi")
        my.execute("CREATE TABLE fi.nn (id int PRIMARY KEY, c int, s varchar(10))")
        my.execute("INSERT INTO fi.nn SELECT seq, IF(seq % 3 = 0, NULL, seq), IF(seq % 4 = 0, NULL, 'x') "
                   "FROM mysql.seq_1_to_30")
        my.execute("CREATE TABLE fi.ts (id int PRIMARY KEY, v int)")
        my.execute("INSERT INTO fi.ts SELECT seq, seq FROM mysql.seq_1_to_30")
        s = self.sluice(stream="fi", tables="fi.*", write_mode="merge", max_file_seconds=1)
        self.catch_up(s)

        def ddl(p):
            c = my.connect()
            cur = c.cursor()
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute("ALTER TABLE fi.nn MODIFY c int NOT NULL, CHANGE s s varchar(10) NOT NULL")
            cur.execute("ALTER TABLE fi.ts ADD COLUMN t TIMESTAMP")
            c.close()
        r = run_until_equal(self, s, ddl, lambda: state_diffs(self, s, "fi", ("nn", "ts")))
        self.assertEqual(my.one("SELECT COUNT(*) FROM fi.nn WHERE c = 0"), 10)
        self.assertIn('table "fi"."nn": column "c" was made NOT NULL, which turned its NULLs into the type\'s '
                      'implicit default without a change: it is backfilled again, behind a marker', r.stderr)
        self.assertIn('table "fi"."ts": column "t" was added as a TIMESTAMP under explicit_defaults_for_timestamp '
                      '= OFF, which gave the existing rows a value (CURRENT_TIMESTAMP for the table\'s first '
                      'TIMESTAMP) without a change: it is backfilled again, behind a marker', r.stderr)


class MyChAddDefaultTest(MyChTestCase):
    """ClickHouse 18.16, merge mode: `_current` has the default in every
    existing row."""

    def test_add_default_while_streaming(self):
        my = self.my
        setup(my)
        s = self.sluice(stream="chd", tables="ad.*", database="chd", write_mode="merge")
        self.catch_up(s)
        p = s.start("run", env=self.env())
        d = []

        def equal():
            nonlocal d
            self.assertTrue(p.alive(), p.stderr_text())
            d = []
            for t in DDL:
                try:
                    self.assertChMatches(s, "ad", t, ["id"])
                except AssertionError as e:
                    d.append(str(e))
            return not d
        try:
            wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
            add_columns(my)
            try:
                wait_until(equal, 120, "ClickHouse to equal the source")
            except TimeoutError:
                self.fail("ClickHouse differs from the source: %s\n%s" % (d[:4], p.stderr_text()))
        finally:
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        for t in DDL:
            self.assertIn(why(t), r.stderr)
