#!/usr/bin/python3
"""
bench/clickhouse_ingest.py: how fast sluice writes PostgreSQL changes into
ClickHouse, and how soon a commit becomes visible there.

A throwaway PostgreSQL 15 and a throwaway ClickHouse (Debian 12: 18.16) from
the test harness.  Three measurements, printed; it never fails on speed, and
exits non-zero only if something does not work:

 1. Throughput.  --changes changes (default 1,000,000: 60% inserts, 30%
    updates, 10% deletes, in transactions of --batch rows) are loaded after
    two slots were created, then drained with `sluice run --until-caught-up`
    (backfill = none) into an append-mode and a merge-mode database, one
    after the other.  Changes per second, sluice's CPU and peak RSS.  Then
    the table itself by the initial backfill in both modes: the sink's rate
    without logical decoding in front of it (which bounds the change rate).
 2. The reference.  The rows sluice wrote in each mode (in 1c when it
    ran, else in 1) are read back in CSN order (the order sluice sends them
    in) as RowBinary files of batch_rows rows (--batch-rows, default
    100,000), and uploaded with a plain `curl --data-binary`, one insert per
    file over one connection (the shape of sluice's own inserts), into an
    empty table of the same layout: what the server takes with no source and
    no encoding in front of it.  A reference, not a ceiling: sluice's
    inserts can beat it.  With 1c, each of its --pairs pairs runs sluice and
    then the reference, alternated; rows are counted by ClickHouse on both
    sides (the InsertedRows event around each run), and sluice/reference
    compares rows/s with rows/s.  Then, once each, other shapes: one insert
    of RowBinary, gzip'd, and (append mode) JSONEachRow.  Every timed run,
    sluice's and curl's, is a whole process timed alike (bench/fair.py:
    wall from spawn to exit, CPU and voluntary context switches from the
    reaped process's rusage), and starts once ClickHouse has no background
    merge left to run.
 3. Latency.  A steady --rate transactions per second (default 2,000; one
    single-row INSERT each) for --seconds seconds while `sluice run` streams
    in merge mode and in append mode with the default batch settings; a
    poller reads new rows from ClickHouse every 10 ms.  Commit-to-visible
    latency is the time a row was first seen minus its commit time
    (clock_timestamp() at the insert; one clock, one machine): p50, p99, max.

 1c. The same, from a MariaDB binlog (when MariaDB is installed; --no-mysql
    skips it): the same load into the same table drained into ClickHouse in
    both modes, by a fresh stream per pair (--pairs, default 3), each at the
    position before the load.  sluice decodes a binlog several times faster
    than PostgreSQL's walsender decodes WAL (bench/my_drain.py,
    bench/pg_drain.py), so this is the run whose rate is the sink's own, to
    hold against the reference.

With SLUICE_CH_ENGINE=26 the ClickHouse is tests/tools/clickhouse26 (the
engine of npm chdb, ClickHouse 26; sluice makes its tables in the modern
layout there), as for the integration tests.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/clickhouse_ingest.py [--changes N] [--rate N] [--seconds S]
      [--compression auto|gzip|none] [--no-latency] [--no-mysql] [--pairs N]
"""

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402
import ch_harness  # noqa: E402
import harness_mysql  # noqa: E402
sys.path.insert(0, HERE)
import my_drain  # noqa: E402  (the MariaDB table and load)
import fair  # noqa: E402
from ch_harness import CH_PASSWORD, new_clickhouse_server, rowbinary_rows  # noqa: E402

TABLE_DDL = """
CREATE TABLE bench_t (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount numeric(12,2) NOT NULL,
  updated_at timestamptz NOT NULL,
  active bool NOT NULL
)"""


def load(pg, changes, batch):
    n_ins = changes * 6 // 10
    n_upd = changes * 3 // 10
    n_del = changes - n_ins - n_upd
    t0 = time.monotonic()
    for lo in range(1, n_ins + 1, batch):
        hi = min(lo + batch - 1, n_ins)
        pg.execute("INSERT INTO bench_t SELECT g, g %% 1000, 'name-' || g, (g %% 100000) / 100.0, "
                   "now(), g %% 2 = 0 FROM generate_series(%s, %s) g", (lo, hi))
    for lo in range(1, n_upd + 1, batch):
        hi = min(lo + batch - 1, n_upd)
        pg.execute("UPDATE bench_t SET qty = qty + 1, amount = amount + 1, updated_at = now() "
                   "WHERE id BETWEEN %s AND %s", (lo, hi))
    for hi in range(n_ins, n_ins - n_del, -batch):
        lo = max(hi - batch + 1, n_ins - n_del + 1)
        pg.execute("DELETE FROM bench_t WHERE id BETWEEN %s AND %s", (lo, hi))
    return n_ins, n_upd, n_del, time.monotonic() - t0


def ch_sluice(pg, ch, stream, database, mode, binary, tables, slot=None, publication=None, dest=None,
              backfill="none"):
    extra = {"destination": {"type": "clickhouse", "path": None, "codec": None, "compression_level": None,
                             "max_file_bytes": None, "max_file_seconds": None, "url": ch.url,
                             "database": database, "user": "sluice", "password_env": "SLUICE_TEST_CH_PASSWORD"}}
    extra["destination"].update(dest or {})
    if slot:
        extra["stream"] = {"slot": slot, "publication": publication}
    return Sluice(pg, stream=stream, tables=tables, backfill=backfill, write_mode=mode, extra=extra,
                  binary=binary, log_level="warn")


def inserted_rows(ch):
    """The rows ClickHouse has taken in inserts since it started (the
    InsertedRows event): the difference around a run counts the rows sluice
    or curl sent, in the same unit on both sides."""
    return int(ch.scalar("SELECT value FROM system.events WHERE event = 'InsertedRows'") or 0)


def mysql_throughput(a, ch, env):
    """1c: the load from a MariaDB binlog into ClickHouse, both modes, then
    the reference (section 2) of each mode; --pairs times, alternated:
    sluice, reference, sluice, reference ...  Returns 0, or 1 when
    something does not work."""
    with harness_mysql.MariaDbServer({"max_binlog_size": "1G"}) as my:
        my.execute("CREATE DATABASE bench")
        my.execute(my_drain.TABLE_DDL)
        streams = {}
        try:
            for i in range(a.pairs):
                for mode in ("append", "merge"):
                    db = f"my_{mode}_{i}"
                    s = ch_sluice(my, ch, db, db, mode, a.sluice_bin, "bench.bench_t", dest=dest_keys(a))
                    streams[(mode, i)] = s
                    r = s.run("run", "--until-caught-up", env=env, timeout=120)   # the position, before the load
                    if r.rc != 0:
                        print(f"clickhouse_ingest: sluice failed:\n{r.describe()}", file=sys.stderr)
                        return 1
            n_ins, n_upd, n_del, _ = my_drain.load(my, a.changes, a.batch)
            changes = n_ins + n_upd + n_del
            want = int(my.sql("SELECT count(*) FROM bench.bench_t")[0][0])
            runs = {mode: ([], [], []) for mode in ("append", "merge")}   # sluice, rows sent, reference
            refs = {}
            for i in range(a.pairs):
                for mode in ("append", "merge"):
                    db = f"my_{mode}_{i}"
                    rows0 = inserted_rows(ch)
                    r = measured_run(streams[(mode, i)], ch, env, a)
                    if not r:
                        return 1
                    sent = inserted_rows(ch) - rows0
                    rows = int(ch.scalar(f"SELECT count() FROM {db}.bench_bench_t"))
                    live = int(ch.scalar(f"SELECT count() FROM {db}.bench_bench_t FINAL WHERE _is_deleted = 0"))
                    if (mode == "append" and rows < changes) or (mode == "merge" and live != want):
                        print(f"clickhouse_ingest: MariaDB {mode}: {rows} rows, {live} live in ClickHouse for "
                              f"{changes} changes, {want} rows at the source", file=sys.stderr)
                        return 1
                    if i == 0:
                        refs[mode] = reference_files(ch, f"{db}.bench_bench_t", mode, a)
                    runs[mode][0].append(r)
                    runs[mode][1].append(sent)
                    runs[mode][2].append(timed_reference(ch, f"{db}.bench_bench_t", refs[mode][0]))
            print(f"1c/2: sluice from MariaDB, then the reference (curl, the rows of sluice's first run as "
                  f"RowBinary in inserts of {refs['append'][1]} rows in CSN order, as sluice sends them); "
                  f"{a.pairs} pairs, alternated; rows counted by ClickHouse (InsertedRows) on both sides")
            for mode, (rs, sent, ref) in runs.items():
                fair.report(f"sluice {mode}", rs, changes)
                fair.report(f"reference {mode}", ref, ref[0].rows, unit="row", rss=False)
                srate = [n / r.wall_s for n, r in zip(sent, rs)]
                rrate = [r.rows / r.wall_s for r in ref]
                print(f"  sluice {mode}: {fair.mmm(sent, '{:.0f}')} rows sent for {changes} changes "
                      f"(the reference: {ref[0].rows} rows), "
                      f"{fair.mmm(srate, '{:.0f}')} rows/s, CPU {fair.mmm([r.cpu_s / n * 1e6 for n, r in zip(sent, rs)])} "
                      f"us/row; the reference {fair.mmm(rrate, '{:.0f}')} rows/s; sluice/reference (rows/s, pair "
                      f"by pair) {fair.mmm([x / y for x, y in zip(srate, rrate)])}")
                print(f"    CPU by thread (last run): {my_drain.thread_cpu_text(rs[-1])}")
        finally:
            for s in streams.values():
                s.close()
    return 0


BATCH_ROWS = 100000   # the reference's inserts: batch_rows' default, unless --batch-rows


def dest_keys(a):
    """The destination keys the command line sets for the throughput runs."""
    d = {"compression": a.compression}
    if a.batch_bytes:
        d["batch_bytes"] = a.batch_bytes
    if a.batch_rows:
        d["batch_rows"] = a.batch_rows
    return d


def settle(ch, limit=300):
    """Waits until ClickHouse runs no background merge (up to limit
    seconds), so that a timed run does not share the CPU with the merges of
    the parts an earlier run wrote.  Both sluice's runs and curl's get it."""
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        quiet = quiet + 1 if int(ch.scalar("SELECT count() FROM system.merges")) == 0 else 0
        time.sleep(0.1)


def measured_run(s, ch, env, a, close=False):
    """`sluice run --until-caught-up` on s, measured, once ClickHouse has
    settled; with close, s is closed afterwards.  The result, or None when it
    failed (said on stderr)."""
    settle(ch)
    try:
        r = fair.finish(s.start("run", "--until-caught-up", env=env, sample_hwm=True), a.timeout)
    finally:
        if close:
            s.close()
    if r.rc != 0:
        print(f"clickhouse_ingest: sluice failed:\n{r.describe()}", file=sys.stderr)
        return None
    return r


def timed_curl(ch, query, paths, gz=False):
    """One curl uploading each file of paths as its own INSERT, one after the
    other over one connection, measured as a whole process (bench/fair.py).
    Returns its Result."""
    argv = ["curl", "-sS", "--fail-with-body"]
    for i, path in enumerate([paths] if isinstance(paths, str) else paths):
        argv += (["--next"] if i else []) + ["-o", "/dev/null", "-H", "Expect:", "-u", f"sluice:{CH_PASSWORD}"]
        argv += (["-H", "Content-Encoding: gzip"] if gz else []) + ["--data-binary", f"@{path}", f"{ch.url}/?query={query}"]
    r = fair.measured(argv, ch.tmpdir, "curl", 600)
    if r.rc != 0:
        raise RuntimeError(f"curl failed: {r.describe()}")
    return r


def reference_files(ch, src, mode, a):
    """The rows of src (a table sluice wrote) as RowBinary files of
    batch_rows rows each, in CSN order (the order sluice sends them in).
    Returns (the files, rows per file)."""
    per = int(a.batch_rows or BATCH_ROWS)
    n = int(ch.scalar(f"SELECT count() FROM {src}"))
    files = []
    for i in range(0, n, per):
        files.append(os.path.join(ch.tmpdir, f"{mode}.{len(files)}.rowbinary"))
        with open(files[-1], "wb") as f:
            f.write(ch.query(f"SELECT * FROM {src} ORDER BY _csn, _uuid LIMIT {i}, {per} FORMAT RowBinary"))
    return files, per


def timed_reference(ch, src, files):
    """curl inserting files into an empty table of src's layout, once
    ClickHouse has settled.  Returns timed_curl's Result, with .rows the rows
    ClickHouse took."""
    db = src.split(".")[0]
    ch.query(f"DROP TABLE IF EXISTS {db}.reference")
    ch.query(f"CREATE TABLE {db}.reference AS {src}")
    settle(ch)
    rows0 = inserted_rows(ch)
    r = timed_curl(ch, f"INSERT%20INTO%20{db}.reference%20FORMAT%20RowBinary", files)
    r.rows = inserted_rows(ch) - rows0
    return r


class Driver(threading.Thread):
    """Single-row INSERT transactions at a steady rate."""

    def __init__(self, pg, rate, seconds, first_id, step):
        super().__init__(daemon=True)
        self.pg, self.rate, self.seconds = pg, rate, seconds
        self.next_id, self.step = first_id, step
        self.done = 0
        self.behind = 0.0
        self.error = None

    def run(self):
        try:
            conn = self.pg.connect()
            cur = conn.cursor()
            t0 = time.monotonic()
            n = int(self.rate * self.seconds)
            for i in range(n):
                due = t0 + i / self.rate
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                else:
                    self.behind = max(self.behind, now - due)
                cur.execute("INSERT INTO lat_t VALUES (%s, (extract(epoch FROM clock_timestamp()) * 1e6)::bigint)",
                            (self.next_id,))
                self.next_id += self.step
                self.done += 1
            conn.close()
        except Exception as e:
            self.error = e


def latency_run(pg, ch, binary, mode, rate, seconds):
    """Streams lat_t with `sluice run` while rate tx/s commit; returns
    (latencies in ms, transactions, sluice stderr tail)."""
    db = f"lat_{mode}"
    s = ch_sluice(pg, ch, f"lat_{mode}", db, mode, binary, "public.lat_t")
    env = {"SLUICE_TEST_CH_PASSWORD": CH_PASSWORD}
    try:
        r = s.run("run", "--until-caught-up", env=env, timeout=120)   # slot, tables
        if r.rc != 0:
            raise RuntimeError(r.describe())
        p = s.start("run", env=env)
        time.sleep(1.0)
        seen = {}
        stop = threading.Event()

        def poll():
            # by CSN: batches arrive in commit order, ids need not
            last = ""
            obj = "public_lat_t"
            types = None
            while not stop.is_set():
                try:
                    if types is None:   # the table appears with the first row
                        cols = {n: t for n, t, _ in ch.columns(db, obj)}
                        if not cols:
                            time.sleep(0.01)
                            continue
                        types = [cols["id"], cols["committed_us"], cols["_csn"]]
                    out = ch.query(f"SELECT id, committed_us, _csn FROM `{db}`.`{obj}` WHERE _csn > '{last}' "
                                   f"FORMAT RowBinary")
                except Exception:
                    time.sleep(0.01)
                    continue
                now_us = time.time() * 1e6
                for rid, cus, csn in rowbinary_rows(out, types):
                    if rid not in seen:
                        seen[rid] = (now_us - cus) / 1000.0
                    last = max(last, csn.decode())
                time.sleep(0.01)
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        base = pg.one("SELECT coalesce(max(id), 0) FROM lat_t") + 1
        drivers = [Driver(pg, rate / 2, seconds, base + k, 2) for k in range(2)]
        for d in drivers:
            d.start()
        for d in drivers:
            d.join()
            if d.error:
                raise d.error
        total = sum(d.done for d in drivers)
        deadline = time.monotonic() + 60
        while len([k for k in seen if k >= base]) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        poller.join(5)
        p.signal(15)
        r = p.wait_result(60)
        lat = [v for k, v in seen.items() if k >= base]
        behind = max(d.behind for d in drivers)
        return lat, total, behind, r
    finally:
        s.close()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=5000, help="rows per transaction of the load (default 5000)")
    ap.add_argument("--rate", type=int, default=2000, help="transactions per second for the latency run")
    ap.add_argument("--seconds", type=float, default=20, help="length of each latency run")
    ap.add_argument("--compression", default="auto", choices=("auto", "gzip", "none"),
                    help="the destination's compression key (auto: none on loopback)")
    ap.add_argument("--batch-bytes", help="the destination's batch_bytes for the throughput runs (default: the config's)")
    ap.add_argument("--batch-rows", help="the destination's batch_rows for the throughput runs (default: the config's)")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency runs")
    ap.add_argument("--no-mysql", action="store_true", help="skip the run from a MariaDB binlog")
    ap.add_argument("--no-pg", action="store_true", help="skip the PostgreSQL runs (1, 1b, 3)")
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--pairs", type=int, default=3,
                    help="1c: runs of sluice and of the reference, alternated (default 3)")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()

    reason = harness.pg_available() or ch_harness.clickhouse_available()
    if reason:
        print(f"clickhouse_ingest: skipped: {reason}")
        return 0
    if not os.access(a.sluice_bin, os.X_OK):
        print(f"clickhouse_ingest: no sluice binary at {a.sluice_bin} (set SLUICE_BIN)", file=sys.stderr)
        return 2
    env = {"SLUICE_TEST_CH_PASSWORD": CH_PASSWORD}

    with PgServer() as pg, new_clickhouse_server() as ch:
        version = ch.scalar("SELECT version()")
        server = ("tests/tools/clickhouse26, modern layout" if ch_harness.CH_ENGINE == "26"
                  else "clickhouse-server, legacy layout")
        print(f"clickhouse_ingest: PostgreSQL 15, ClickHouse {version} ({server}), {os.cpu_count()} CPUs")
        if not a.no_pg:
            # 1. throughput
            pg.execute(TABLE_DDL)
            pg.execute("CREATE PUBLICATION sluice_bench FOR TABLE bench_t")
            for mode in ("append", "merge"):
                pg.execute(f"SELECT pg_create_logical_replication_slot('bench_{mode}', 'pgoutput')")
            n_ins, n_upd, n_del, load_s = load(pg, a.changes, a.batch)
            pg.wait_wal_flushed()
            changes = n_ins + n_upd + n_del
            print(f"load: {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; {a.batch} rows per "
                  f"transaction) in {load_s:.1f}s")
            for mode in ("append", "merge"):
                s = ch_sluice(pg, ch, f"bench_{mode}", f"bench_{mode}", mode, a.sluice_bin, "public.bench_t",
                              slot=f"bench_{mode}", publication="sluice_bench", dest=dest_keys(a))
                r = measured_run(s, ch, env, a, close=True)
                if not r:
                    return 1
                rows = int(ch.scalar(f"SELECT count() FROM bench_{mode}.public_bench_t"))
                if mode == "append" and rows < changes:
                    print(f"clickhouse_ingest: append mode wrote {rows} rows for {changes} changes", file=sys.stderr)
                    return 1
                live = int(ch.scalar(f"SELECT count() FROM bench_{mode}.public_bench_t FINAL WHERE _is_deleted = 0"))
                want = pg.one("SELECT count(*) FROM bench_t")
                if live != want and mode == "merge":
                    print(f"clickhouse_ingest: merge mode holds {live} live rows, the source {want}", file=sys.stderr)
                    return 1
                print(f"sluice {mode:6} (compression {a.compression}): {r.wall_s:6.2f}s  {changes / r.wall_s:9.0f} changes/s  "
                      f"CPU {r.cpu_s / changes * 1e6:.2f} us/change  vol. ctx switches "
                      f"{r.nvcsw / changes * 1000:.1f} per 1,000 changes  peak RSS {r.hwm_kb / 1024:.0f} MiB  "
                      f"({rows} rows in ClickHouse, {live} live)")

            # 1b. the sink without logical decoding in front of it: the table's
            # rows by the initial backfill (COPY over 2 connections)
            nrows = pg.one("SELECT count(*) FROM bench_t")
            for mode in ("append", "merge"):
                s = ch_sluice(pg, ch, f"bf_{mode}", f"bf_{mode}", mode, a.sluice_bin, "public.bench_t",
                              dest=dest_keys(a), backfill="auto")
                r = measured_run(s, ch, env, a, close=True)
                if not r:
                    return 1
                rows = int(ch.scalar(f"SELECT count() FROM bf_{mode}.public_bench_t"))
                if rows != nrows:
                    print(f"clickhouse_ingest: the backfill wrote {rows} rows of {nrows}", file=sys.stderr)
                    return 1
                print(f"sluice {mode:6} backfill of {nrows} rows: {r.wall_s:6.2f}s  {nrows / r.wall_s:9.0f} rows/s  "
                      f"CPU {r.cpu_s:.2f}s  peak RSS {r.hwm_kb / 1024:.0f} MiB")

        # 1c. the same load from a MariaDB binlog: the sink's own rate
        my_rows = False
        if not a.no_mysql:
            reason = harness_mysql.mariadb_available()
            if reason:
                print(f"MariaDB source: skipped: {reason}")
            elif mysql_throughput(a, ch, env):
                return 1
            else:
                my_rows = True
        if a.no_pg and not my_rows:
            return 0

        # 2. the reference (without 1c, from the PostgreSQL runs' rows; with
        # it, its pairs ran there): the same rows, pre-built, through curl,
        # into an empty table of each mode's layout, also in other shapes
        tmp = ch.tmpdir
        for mode in ("append", "merge"):
            src = f"my_{mode}_0.bench_bench_t" if my_rows else f"bench_{mode}.public_bench_t"
            rb = os.path.join(tmp, f"{mode}.rowbinary")
            js = os.path.join(tmp, f"{mode}.json")
            with open(rb, "wb") as f:
                f.write(ch.query(f"SELECT * FROM {src} ORDER BY _csn, _uuid FORMAT RowBinary"))
            kinds = [("RowBinary", rb, "RowBinary", False), ("RowBinary gzip", rb + ".gz", "RowBinary", True)]
            if not my_rows:
                files, per = reference_files(ch, src, mode, a)
                kinds.append((f"RowBinary by {per}", files, "RowBinary", False))
            if mode == "append":
                with open(js, "wb") as f:
                    f.write(ch.query(f"SELECT * FROM {src} ORDER BY _csn, _uuid FORMAT JSONEachRow",
                                     params={"output_format_json_quote_64bit_integers": "0"}))
                kinds += [("JSONEachRow", js, "JSONEachRow", False), ("JSONEachRow gzip", js + ".gz", "JSONEachRow", True)]
            for _, path, _, gz in kinds:
                if gz and isinstance(path, str):
                    with open(path[:-3], "rb") as fi, gzip.open(path, "wb", compresslevel=1) as fo:
                        fo.write(fi.read())
            n = int(ch.scalar(f"SELECT count() FROM {src}"))
            print(f"reference ({mode} layout, other shapes, once each): {n} rows as RowBinary "
                  f"{os.path.getsize(rb) / 2**20:.0f} MiB (gzip {os.path.getsize(rb + '.gz') / 2**20:.0f} MiB)" +
                  (f", as JSONEachRow {os.path.getsize(js) / 2**20:.0f} MiB (gzip "
                   f"{os.path.getsize(js + '.gz') / 2**20:.0f} MiB)" if mode == "append" else ""))
            for label, path, fmt, gz in kinds:
                db = src.split(".")[0]
                ch.query(f"DROP TABLE IF EXISTS {db}.reference")
                ch.query(f"CREATE TABLE {db}.reference AS {src}")
                settle(ch)
                r = timed_curl(ch, f"INSERT%20INTO%20{db}.reference%20FORMAT%20{fmt}", path, gz)
                got = int(ch.scalar(f"SELECT count() FROM {db}.reference"))
                print(f"curl {mode:6} {label:20}: {r.wall_s:6.2f}s  {got / r.wall_s:9.0f} rows/s  "
                      f"CPU {r.cpu_s / got * 1e6:.2f} us/row  vol. ctx switches {r.nvcsw / got * 1000:.1f} "
                      f"per 1,000 rows")

        # 3. latency at a steady rate
        if a.no_pg:
            return 0
        pg.execute("CREATE TABLE lat_t (id bigint PRIMARY KEY, committed_us bigint)")
        for mode in () if a.no_latency else ("merge", "append"):
            lat, total, behind, r = latency_run(pg, ch, a.sluice_bin, mode, a.rate, a.seconds)
            if len(lat) < total:
                print(f"clickhouse_ingest: latency ({mode}): only {len(lat)} of {total} rows seen", file=sys.stderr)
                return 1
            print(f"latency {mode:6} at {a.rate} tx/s for {a.seconds:.0f}s ({total} transactions; driver at most "
                  f"{behind * 1000:.0f} ms behind): p50 {statistics.median(lat):.0f} ms, p99 {pct(lat, 0.99):.0f} ms, "
                  f"max {max(lat):.0f} ms; sluice CPU {r.cpu_s:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
