"""
tests/integration/test_property.py: the property harness of issue 17, one
module for the matrix {PostgreSQL, MariaDB} x {append, merge} x {avro_dir,
s3, ClickHouse, Iceberg tables in a folder, Iceberg tables in a bucket}.

For each seed of a cell: a seeded workload (workload.py: inserts, updates,
deletes, key changes, multi-table and rolled-back transactions, TRUNCATE,
also inside long transactions, large values that updates leave unchanged,
a nullable unique column, and DDL: columns added with and without
defaults, dropped, renamed and widened, tables dropped and created again
or renamed away) runs in rounds while faults strike at random
points (drawn from the seed too): kill -9 of sluice; kill -9 while a
destination's answer is held by a proxy after the destination has the data
(ClickHouse and S3: between the acknowledgement and the checkpoint); the
destination down for a while (ClickHouse paused, S3 stopped); the source
restarted under a running agent.  Then a drain (SIGTERM, exit 0) and a
catch-up, and the oracle (oracle.py) rebuilds every table of the
destination by the documented reader rules and compares it with the source,
value by value.  A failure names its seed, its cell and the first differing
row.

SLUICE_TEST_SEED=a,b runs those seeds in every selected cell instead of the
fixed lists, SLUICE_PROPERTY_DDL=kind,... (or none) those DDL kinds instead
of the cell's DDL_CI; tests/soak.sh runs new seeds until a time is up.
"""

import os
import random
import signal
import sys
import time
import unittest

from avro.datafile import DataFileReader
from avro.io import DatumReader

from ch_harness import HoldingProxy, MyChTestCase, ChTestCase
import harness
from harness import PgTestCase, WithS3, wait_until
from harness_mysql import MyTestCase
from test_iceberg import LocalTables, chdb_reason
from test_iceberg_s3 import S3Tables
from check_output import object_name
from oracle import check, current_files, diff_avro, diff_clickhouse, diff_iceberg, source_tables
from test_my_defaults import watermark_table
from workload import DDL_KINDS, Workload

TAGS = {"property"}

# The seeds CI runs, per cell (source, write mode, destination).  A seed
# that finds a defect leaves this list with a comment naming its issue.
SEEDS = {
    # seed 311 (merge, 2 runs of 3 before the fix): ADD COLUMN ... DEFAULT 7
    # with no change after it, a TRUNCATE before it (its new file node made
    # it look like a rewrite: backfilled again); the next run replayed the
    # table's older version, and the re-backfill's chunk read with it, so
    # the rows lacked the column ('wm311.wa (185,): payload fields [...]
    # are not the columns [..., 'c2', ...]'); the version at the run's start
    # now goes to the sink once the stream passes it
    ("pg", "append", "avro_dir"): [101], ("pg", "merge", "avro_dir"): [102, 311],
    ("pg", "append", "s3"): [103], ("pg", "merge", "s3"): [104],
    ("pg", "append", "clickhouse"): [105], ("pg", "merge", "clickhouse"): [106],
    ("mariadb", "append", "avro_dir"): [201], ("mariadb", "merge", "avro_dir"): [202],
    ("mariadb", "append", "s3"): [203], ("mariadb", "merge", "s3"): [204],
    ("mariadb", "append", "clickhouse"): [205], ("mariadb", "merge", "clickhouse"): [206],
    ("pg", "append", "iceberg"): [107], ("pg", "merge", "iceberg"): [108],
    # seed 2292 ends its binlog with ALTER TABLE wa ADD COLUMN c1 and no
    # change after it, which the Iceberg table takes as a schema alone
    # (test_iceberg's test_ddl_alone_*; before, the table lacked c1: 'wa2292.wa
    # (152,): payload fields [...] are not the columns [..., 'c1', ...]').
    # Seed 209 found it with the DDL kinds before 2a4de3e; with MY_DDL its
    # workload no longer ends with that statement.
    ("mariadb", "append", "iceberg"): [207, 2292], ("mariadb", "merge", "iceberg"): [208],
    ("pg", "append", "iceberg_s3"): [1101, 109], ("pg", "merge", "iceberg_s3"): [110, 109],
    # seed 211 ends its binlog with an added column and no change after it,
    # as seed 2292 above
    ("mariadb", "append", "iceberg_s3"): [2101, 211], ("mariadb", "merge", "iceberg_s3"): [210],
}

ROUNDS = int(os.environ.get("SLUICE_PROPERTY_ROUNDS", "3"))

# The DDL kinds (workload.DDL_KINDS) the workload mixes in, per cell.  A kind
# that finds a defect leaves a cell's tuple with a comment naming it.
DDL_CI = {cell: DDL_KINDS for cell in SEEDS}
# MariaDB runs the DDL kinds of MY_DDL, every one.  (Seed 206 found a table dropped or renamed
# away restarting the stream, and a SIGTERM in that restart exiting 1: it now
# ends with a marker at its statement and the stream goes on; test_my_ddl.py.
# Seed 204 found a column added with a default, which backfills the table
# again while streaming, leaving a deleted row in the merge files: its marker
# came before rows an earlier run wrote, whose deletes the next run skipped up
# to its first watermark; test_my_rebackfill's
# test_delete_skipped_before_the_first_watermark.
# Seed 205 found a column added with a default, which backfills the table
# again while streaming, interrupted by kill -9, leaving rows missing: the
# next run's first chunk read the rows after a TRUNCATE that the stream
# then applied to it, while it skipped the inserts after it up to the
# chunk's low watermark ('wa205.wa missing in ClickHouse: (187,)'; soak seed
# 4102 in the file cells); test_my_rebackfill's
# test_truncate_skipped_before_the_first_watermark.  Seed 211 found a column
# added between the listing of the tables and the initial backfill's
# snapshot lost; test_column_added_before_the_snapshot.)
MY_DDL = DDL_KINDS
DDL_CI.update({cell: MY_DDL for cell in SEEDS if cell[0] == "mariadb"})
# Iceberg: every kind (doc/iceberg.md "Schema evolution": columns added,
# dropped, renamed (a drop and an add) and widened, a dropped table's marker
# with no schema change, older table versions from a replay); MariaDB the
# kinds of MY_DDL.
DDL_CI.update({cell: DDL_KINDS if cell[0] == "pg" else MY_DDL for cell in SEEDS if cell[2] == "iceberg"})
# Iceberg in a bucket: the DDL of the same cell in a folder
for _src in ("pg", "mariadb"):
    for _mode in ("append", "merge"):
        DDL_CI[(_src, _mode, "iceberg_s3")] = DDL_CI[(_src, _mode, "iceberg")]


def ddl_for(cell):
    """SLUICE_PROPERTY_DDL=kind,... (or "none") in every selected cell,
    else the cell's DDL_CI."""
    env = os.environ.get("SLUICE_PROPERTY_DDL")
    if env is None:
        return DDL_CI[cell]
    return tuple(x for x in env.split(",") if x and x != "none")


def writer_schema(path):
    """The writer schema a container file carries, as its JSON text."""
    with open(path, "rb") as f:
        return DataFileReader(f, DatumReader()).meta["avro.schema"]


def seeds_for(cell):
    env = os.environ.get("SLUICE_TEST_SEED")
    return [int(x) for x in env.split(",")] if env else SEEDS[cell]


def log(msg):
    print(f"    {msg}", file=sys.stderr, flush=True)


class PropertyCells:
    """The two cells (append, merge) of one source and one destination.  A
    class sets source ("pg" or "mariadb") and dest ("avro_dir", "s3",
    "clickhouse"), and inherits the test case of its servers."""
    source = None
    dest = None
    s3 = None

    @property
    def src(self):
        return self.my if self.source == "mariadb" else self.pg

    def run_env(self):
        return self.env() if self.dest == "clickhouse" else None

    def test_append(self):
        self.run_cell("append")

    def test_merge(self):
        self.run_cell("merge")

    def run_cell(self, mode):
        cell = (self.source, mode, self.dest)
        for seed in seeds_for(cell):
            with self.subTest(seed=seed):
                t0 = time.monotonic()
                self.run_seed(seed, mode)
                dt = time.monotonic() - t0
                log(f"cell {'/'.join(cell)} seed {seed}: {dt:.1f}s")

    # ---- the agent on this cell's destination

    def make_sluice(self, ns, mode, proxy):
        kw = dict(stream=ns, tables=f"{ns}.*", write_mode=mode)
        if self.dest == "clickhouse":
            dest = {"batch_seconds": "0.1", "batch_rows": "300"}
            if proxy is not None:
                dest["url"] = proxy.url
            return self.sluice(database=ns, dest=dest, **kw)
        extra = {"destination": {"compact_after_files": "5"} if mode == "merge" else {}}
        if self.dest == "s3":
            kw.update(s3=self.s3, prefix=f"cdc/{ns}")
            if proxy is not None:
                extra["destination"]["endpoint"] = proxy.url
        return self.sluice(max_file_seconds=1, max_file_bytes=65536, extra=extra, **kw)

    def dest_url(self):
        return self.ch.url if self.dest == "clickhouse" else self.s3.endpoint if self.s3 is not None else None

    def start(self, s):
        if self.source == "pg":
            self.pg.wait_slot_inactive(s.slot)
        return s.start("run", env=self.run_env())

    def dest_outage(self, s, wl, rng):
        """The destination down while the workload goes on, then back."""
        if self.dest == "clickhouse":
            self.ch.pause()
        else:
            self.s3.stop()
        try:
            wl.apply(self.src, wl.transactions(rng.randint(5, 20)))
            time.sleep(rng.uniform(0.3, 1.0))
        finally:
            if self.dest == "clickhouse":
                self.ch.resume()
            else:
                self.s3.start()

    def wait_streaming(self, p, since=0):
        """Waits until the agent p logged that it streams (after offset
        `since` of its stderr), or exited."""
        wait_until(lambda: "streaming from" in p.stderr_text()[since:] or not p.alive(), 90,
                   "sluice to stream", interval=0.1)

    def fault(self, s, p, wl, rng, proxy):
        """One fault at a random point; returns the running agent."""
        kinds = ["kill", "kill", "source_restart"]
        if proxy is not None:
            kinds += ["held", "held"]
        if self.dest not in ("avro_dir", "iceberg"):
            kinds.append("outage")
        kind = rng.choice(kinds)
        time.sleep(rng.uniform(0.05, 1.5))
        if not p.alive():
            self.fail(f"sluice exited on its own before a fault:\n{p.result().describe()}")
        if kind == "held":
            if self.dest == "clickhouse":
                proxy.arm(b"")
            elif self.dest == "iceberg_s3":
                # the commit: the table's new metadata file is in the bucket
                proxy.arm_match(lambda method, path, body: method == "PUT" and path.endswith(".metadata.json"))
            else:
                proxy.arm_match(lambda method, path, body: method == "PUT")
            wl.apply(self.src, wl.transactions(rng.randint(2, 8)))
            held = True
            try:
                wait_until(lambda: proxy.held.is_set() or not p.alive(), 30, "a held answer")
            except AssertionError:
                held = False
            p.kill9()
            p.wait_result(30)
            proxy.pass_through()
            log(f"kill -9 with the destination's answer held ({'held' if held else 'nothing held'})")
            return self.start(s)
        if kind == "outage":
            self.dest_outage(s, wl, rng)
            log("destination down and back")
            return p
        if kind == "source_restart":
            self.wait_streaming(p)
            before = len(p.stderr_text())
            self.src.stop("fast")
            self.src.resume()
            log("source restarted")
            # back to streaming before the next fault (a drain in a retry's
            # backoff ends with the retry's error, exit 1)
            self.wait_streaming(p, before)
            if not p.alive():
                self.fail(f"sluice exited after the source restart:\n{p.result().describe()}")
            return p
        p.kill9()
        p.wait_result(30)
        log("kill -9")
        return self.start(s)

    def run_seed(self, seed, mode):
        cell = f"{self.source}/{mode}/{self.dest}"
        log(f"property seed {seed} cell {cell} (SLUICE_TEST_SEED={seed} -k {type(self).__name__}.test_{mode})")
        rng = random.Random(f"faults-{seed}")
        ns = f"w{mode[0]}{seed}"
        ddl = ddl_for((self.source, mode, self.dest))
        wl = Workload(seed, self.source, ns, ddl=ddl)
        if self.source == "mariadb" and ddl:
            watermark_table(self.my)    # DDL that changed existing rows: a backfill while streaming
        wl.setup(self.src)
        proxy = None
        if self.dest not in ("avro_dir", "iceberg"):
            proxy = HoldingProxy(self.dest_url())
            self.addCleanup(proxy.close)
        s = self.make_sluice(ns, mode, proxy)
        p = self.start(s)
        for _ in range(ROUNDS):
            wl.apply(self.src, wl.transactions(rng.randint(8, 25)))
            p = self.fault(s, p, wl, rng, proxy)
        wl.apply(self.src, wl.transactions(rng.randint(5, 20)))
        # a drain once the agent streams (a SIGTERM before its handler is set would kill it)
        self.wait_streaming(p)
        if not p.alive():
            self.fail(f"seed {seed} cell {cell}: sluice exited on its own:\n{p.result().describe()}")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, f"seed {seed} cell {cell}: SIGTERM must drain and exit 0:\n{r.describe()}")
        if self.source == "pg":
            self.pg.wait_slot_inactive(s.slot)
        self.catch_up(s)
        log(f"workload {wl.counts}")
        check(self.diff(s, ns, mode), seed, cell)
        if self.dest in ("avro_dir", "s3") and mode == "merge":
            # compacted: one file per table and schema version (doc/output.md),
            # the same mirror, and verify passes
            r = s.run("compact", "--stream", s.stream)
            self.assertEqual(r.rc, 0, f"seed {seed} cell {cell}: compact:\n{r.describe()}")
            tree = s.output_tree()
            for table, _keys in source_tables(self.source, self.src, ns):
                files = current_files(tree, s.stream, object_name(ns, table))
                schemas = [writer_schema(f) for f in files]
                self.assertEqual(len(files), len(set(schemas)),
                                 f"seed {seed} cell {cell}: {table} after compact: {files}")
                if not ddl:
                    self.assertLessEqual(len(files), 1, f"seed {seed} cell {cell}: {table} after compact")
            check(self.diff(s, ns, mode), seed, cell + " (compacted)")
            r = s.run("verify", "--stream", s.stream)
            self.assertEqual(r.rc, 0, f"seed {seed} cell {cell}: verify:\n{r.describe()}")
        elif self.dest in ("iceberg", "iceberg_s3"):
            self.check_compacted(s, ns, mode, seed, cell)
        if self.source == "pg":
            self.pg.execute("SELECT pg_drop_replication_slot(%s)", (s.slot,))

    def diff(self, s, ns, mode):
        """The oracle's differences between the source's tables of ns and
        the destination."""
        if self.dest == "clickhouse":
            return diff_clickhouse(self.source, self.src, ns, self.ch, ns, mode, self.modern)
        return diff_avro(self.source, self.src, ns, s.output_tree(), s.stream, mode, codec=s.codec)

    def test_oracle_sees_a_difference(self):
        """The oracle itself: equal after a catch-up; one source row changed
        behind sluice's back is the first differing row, named with the seed."""
        mode = self.oracle_mode
        ns = f"o{mode[0]}"
        wl = Workload(7, self.source, ns)
        wl.setup(self.src)
        s = self.make_sluice(ns, mode, None)
        self.catch_up(s)
        self.assertEqual(self.diff(s, ns, mode), [])
        for sql in wl.render(("update", "wa", (1,), {"small": "changed behind sluice"})):
            self.src.execute(*sql)
        diffs = self.diff(s, ns, mode)
        self.assertEqual(len(diffs), 1, diffs)
        self.assertIn(f"{ns}.wa (1,).small: source ", diffs[0])
        self.assertIn("changed behind sluice", diffs[0])
        with self.assertRaises(AssertionError) as cm:
            check(diffs, 7, "a/b/c")
        self.assertIn("seed 7 cell a/b/c", str(cm.exception))
        self.assertIn("first differing row: " + diffs[0], str(cm.exception))
        if self.source == "pg":
            self.pg.wait_slot_inactive(s.slot)
            self.pg.execute("SELECT pg_drop_replication_slot(%s)", (s.slot,))


class S3Cells(WithS3, PropertyCells):
    dest = "s3"


class IcebergCells(LocalTables, PropertyCells):
    """Iceberg tables in a warehouse folder, read by ClickHouse 26 (chdb)
    with icebergLocal (LocalTables; IcebergS3Cells: a bucket)."""
    dest = "iceberg"

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()

    def make_sluice(self, ns, mode, proxy):
        s = self.isluice(ns, f"{ns}.*", write_mode=mode, max_file_bytes=65536)
        if mode == "merge":
            s.extra["destination"]["compact_after_files"] = "5"
        if proxy is not None:
            s.extra["destination"]["endpoint"] = proxy.url
        s.write_config()
        return s

    def check_compacted(self, s, ns, mode, seed, cell):
        """sluice compact (a replace snapshot per table, both modes) keeps
        the same content, and verify passes."""
        r = s.run("compact", "--stream", s.stream)
        self.assertEqual(r.rc, 0, f"seed {seed} cell {cell}: compact:\n{r.describe()}")
        check(self.diff(s, ns, mode), seed, cell + " (compacted)")
        r = s.run("verify", "--stream", s.stream)
        self.assertEqual(r.rc, 0, f"seed {seed} cell {cell}: verify:\n{r.describe()}")

    def diff(self, s, ns, mode):
        def table_fn(table):
            obj = object_name(ns, table)
            return self.table_fn(s, obj) if self.version(s, obj) else None
        return diff_iceberg(self.source, self.src, ns, mode, table_fn)


class IcebergS3Cells(S3Tables, WithS3, IcebergCells):
    """Iceberg tables in a bucket of the class's S3 server, read with
    icebergS3; the faults of the s3 cells (a held answer is the commit's:
    the PUT of the new metadata file)."""
    dest = "iceberg_s3"


class PgAvroDirProperty(PropertyCells, PgTestCase):
    source, dest = "pg", "avro_dir"
    oracle_mode = "merge"


class PgS3Property(S3Cells, PgTestCase):
    source = "pg"
    oracle_mode = "append"


class PgClickHouseProperty(PropertyCells, ChTestCase):
    source, dest = "pg", "clickhouse"
    oracle_mode = "merge"


class PgIcebergProperty(IcebergCells, PgTestCase):
    source = "pg"
    oracle_mode = "append"


class PgIcebergS3Property(IcebergS3Cells, PgTestCase):
    source = "pg"
    oracle_mode = "merge"


class MyAvroDirProperty(PropertyCells, MyTestCase):
    source, dest = "mariadb", "avro_dir"
    oracle_mode = "append"


class MyS3Property(S3Cells, MyTestCase):
    source = "mariadb"
    oracle_mode = "merge"


class MyClickHouseProperty(PropertyCells, MyChTestCase):
    source, dest = "mariadb", "clickhouse"
    oracle_mode = "append"


class MyIcebergProperty(IcebergCells, MyTestCase):
    source = "mariadb"
    oracle_mode = "merge"


class MyIcebergS3Property(IcebergS3Cells, MyTestCase):
    source = "mariadb"
    oracle_mode = "append"


if __name__ == "__main__":
    unittest.main()
