#!/usr/bin/python3
"""
bench/pg_backfill.py: how fast sluice backfills a table, next to a
2-connection COPY of the same key ranges into /dev/null.

A throwaway PostgreSQL 15 gets the 6-column table of bench/pg_drain.py with
1,000,000 rows by default (VACUUM ANALYZE'd, as a table that has lived a
while is), and a restricted role (LOGIN REPLICATION, SELECT on the table:
what doc/deploy.md gives sluice).  Then, alternated A B A B for --pairs
pairs (default 3), both sides over TCP to 127.0.0.1 as that role, each a
whole process timed alike (bench/fair.py: wall from spawn to exit, CPU and
voluntary context switches from the reaped process's rusage, children
included):

  COPY  --connections (2) psql processes at once, each `\\copy (SELECT *
        FROM ONLY bench_t WHERE id >= a AND id < b) TO '/dev/null'` over
        its share of the key range (sluice too reads the table by key
        ranges: sources/postgres/pg_chunks.c), under one shell: the
        server's side of a backfill and the client's receiving, nothing else
  sluice run --until-caught-up on a new stream (backfill = auto, codec
        deflate level 1 unless --codec, [destination] compression_threads
        as --compression-threads, else the default): from start to exit, so
        start-up, the connections, the slot and its snapshot, and the
        fsyncs are counted; it backfills the table over [source]
        backfill_connections connections, streams the (empty) rest and exits

After the last pair, a re-backfill: `sluice backfill --table public.bench_t`
on that stream, then sluice run --until-caught-up: the table read again in
chunks while streaming (the watermark method), at the figure sluice logs
("backfilled ... while streaming: ... (R rows/s)").

It prints, min/median/max over the pairs, each side's wall time, rows/s,
CPU-us per row, voluntary context switches per 1,000 rows and peak RSS;
the ratio (sluice rows/s over COPY rows/s, pair by pair; the goal is 0.8 or
more); the backfill's own time from sluice's log; and the bound the CPUs
set: the server's CPU for reading the table plus sluice's, spread over
every CPU, is the shortest a backfill can take.  It never fails on speed;
it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/pg_backfill.py [--rows N]
      [--connections N] [--codec null|deflate|snappy] [--compression-threads N]
      [--pairs N]
"""

import argparse
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402
sys.path.insert(0, HERE)
import fair  # noqa: E402

USER = "bench"   # the restricted role both sides connect as

TABLE_DDL = """
CREATE TABLE bench_t (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount numeric(12,2) NOT NULL,
  updated_at timestamptz NOT NULL,
  active bool NOT NULL
)"""


def copy_keys(pg, conns, workdir, timeout):
    """The table read as sluice reads it, by key ranges, into /dev/null:
    conns psql processes at once, each `\\copy (SELECT * FROM ONLY bench_t
    WHERE id >= lo AND id < hi) TO '/dev/null'` over 1/conns of the keys,
    as the restricted role over TCP.  One measured process (a shell that
    waits for them), so its rusage holds every psql's.  Returns
    (fair.finish's Result, the server's CPU seconds)."""
    lo, hi = pg.sql("SELECT min(id), max(id) + 1 FROM bench_t")[0]
    psql = os.path.join(harness.PG_BIN, "psql")
    if not os.access(psql, os.X_OK):
        psql = "psql"
    dsn = f"host=127.0.0.1 port={pg.port} user={USER} dbname=postgres"
    bounds = [lo + (hi - lo) * i // conns for i in range(conns)] + [hi]
    script = []
    for i in range(conns):
        q = (f"\\copy (SELECT * FROM ONLY bench_t WHERE id >= {bounds[i]} AND id < {bounds[i + 1]}) "
             f"TO '/dev/null'")
        script.append(f"{shlex.quote(psql)} -X -q -d {shlex.quote(dsn)} -c {shlex.quote(q)} & p{i}=$!")
    script.append("rc=0; " + " ".join(f"wait $p{i} || rc=1;" for i in range(conns)) + " exit $rc")
    cpu0 = harness.server_cpu_s(pg.postmaster_pid())
    r = fair.measured(["/bin/sh", "-c", "\n".join(script)], workdir, "copy", timeout)
    if r.rc != 0:
        raise RuntimeError(f"psql COPY failed:\n{r.describe()}")
    return r, harness.server_cpu_s(pg.postmaster_pid()) - cpu0


def rebackfill(s, a):
    """`sluice backfill --table` of the bench table, then a run that reads
    it again while streaming.  (chunks, seconds, rows/s) or None."""
    r = s.run("backfill", "--stream", s.stream, "--table", "public.bench_t", timeout=120)
    if r.rc != 0:
        print(f"pg_backfill: sluice backfill failed:\n{r.describe()}", file=sys.stderr)
        return None
    r = s.run("run", "--until-caught-up", timeout=a.timeout)
    m = re.search(r"backfilled public\.bench_t while streaming: (\d+) rows in (\d+) chunks, ([0-9.]+) s "
                  r"\((\d+) rows/s\)", r.stderr)
    if r.rc != 0 or not m or int(m.group(1)) != a.rows:
        print(f"pg_backfill: the re-backfill did not say it read {a.rows} rows:\n{r.describe()}", file=sys.stderr)
        return None
    return int(m.group(2)), float(m.group(3)), float(m.group(4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=2, help="backfill_connections and COPY processes")
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy", "zstandard"))
    ap.add_argument("--compression-threads", type=int, default=None,
                    help="[destination] compression_threads (default: the sink's default)")
    ap.add_argument("--pairs", type=int, default=3, help="runs of each side, alternated (default 3)")
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--legacy", action="store_true",
                    help="do not set backfill_connections (for a sluice that does not know the key)")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    a.sluice_bin = os.path.abspath(a.sluice_bin)

    reason = harness.pg_available()
    if reason:
        print(f"pg_backfill: skipped: {reason}")
        return 0
    if not os.access(a.sluice_bin, os.X_OK):
        print(f"pg_backfill: no sluice binary at {a.sluice_bin} (set SLUICE_BIN)", file=sys.stderr)
        return 2

    with PgServer() as pg:
        pg.execute(TABLE_DDL)
        t0 = time.monotonic()
        pg.execute("INSERT INTO bench_t SELECT g, g %% 1000, 'name-' || g, (g %% 100000) / 100.0, "
                   "now(), g %% 2 = 0 FROM generate_series(1, %s) g", (a.rows,))
        pg.execute("VACUUM ANALYZE bench_t")
        # both sides connect alike: TCP to 127.0.0.1 as a restricted role
        # (LOGIN REPLICATION, SELECT on the table), the role doc/deploy.md gives sluice
        pg.execute(f"CREATE ROLE {USER} LOGIN REPLICATION")
        pg.execute(f"GRANT SELECT ON bench_t TO {USER}")
        size = pg.one("SELECT pg_relation_size('bench_t')")
        print(f"pg_backfill: loaded {a.rows} rows ({size / 2**20:.0f} MiB) in {time.monotonic() - t0:.1f}s")
        workdir = tempfile.mkdtemp(prefix="pg-backfill-")
        copies, copy_srv, rs, logged = [], [], [], []
        rb = None
        out_bytes = 0
        for i in range(a.pairs):   # A B A B ...: the COPYs, then a new stream's backfill
            c, srv = copy_keys(pg, a.connections, workdir, a.timeout)
            copies.append(c)
            copy_srv.append(srv)
            stream = f"bf{i}"
            pg.execute(f"CREATE PUBLICATION sluice_{stream} FOR TABLE bench_t")   # the owner's part
            extra = {"source": {"user": USER}}
            if not a.legacy:
                extra["source"]["backfill_connections"] = a.connections
            if a.compression_threads is not None:
                extra["destination"] = {"compression_threads": a.compression_threads}
            s = Sluice(pg, stream=stream, tables="public.bench_t", codec=a.codec, compression_level=1,
                       max_file_bytes="64MB", max_file_seconds=60, backfill="auto", binary=a.sluice_bin,
                       log_level="info", extra=extra)
            try:
                r = fair.finish(s.start("run", "--until-caught-up", sample_hwm=True), a.timeout)
                if r.rc != 0:
                    print(f"pg_backfill: sluice failed:\n{r.describe()}", file=sys.stderr)
                    return 1
                m = re.search(r"backfilled public\.bench_t: (\d+) rows read in ([0-9.]+) s", r.stderr)
                if not m or int(m.group(1)) != a.rows:
                    print(f"pg_backfill: sluice did not say it backfilled {a.rows} rows:\n{r.describe()}",
                          file=sys.stderr)
                    return 1
                rs.append(r)
                logged.append(float(m.group(2)))
                out_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(s.out)
                                for f in fs if f.endswith(".avro"))
                if not a.legacy and i == a.pairs - 1:
                    rb = rebackfill(s, a)
                    if rb is None:
                        return 1
            finally:
                s.close()
            pg.execute(f"SELECT pg_drop_replication_slot('sluice_{stream}')")
        shutil.rmtree(workdir, ignore_errors=True)
        threads = "default" if a.compression_threads is None else a.compression_threads
        print(f"both over TCP to 127.0.0.1 as {USER!r} (LOGIN REPLICATION, SELECT on the table), {a.connections} "
              f"connections each, reading the table by key ranges; whole processes (sluice from start to exit: "
              f"start-up, connections, slot and snapshot, fsyncs); {a.pairs} pairs, alternated")
        fair.report(f"\\copy x{a.connections}", copies, a.rows, unit="row", rss=False)
        fair.report("sluice backfill", rs, a.rows, unit="row")
        print(f"  ({out_bytes / 2**20:.0f} MiB of Avro, codec {a.codec}, compression_threads {threads}; the "
              f"backfill alone by sluice's log: {fair.mmm(logged)} s)")
        ratios = [c.wall_s / r.wall_s for c, r in zip(copies, rs)]
        print(f"ratio sluice/COPY (rows/s, pair by pair): {fair.mmm(ratios)}  (goal >= 0.8)")
        # What the CPUs allow: the server's work to read the table (as the
        # COPYs measured it) plus sluice's, spread perfectly over every
        # CPU, is the shortest a backfill can take.
        ncpu = os.cpu_count() or 1
        srv = statistics.median(copy_srv)
        cpu = statistics.median(r.cpu_s for r in rs)
        copy_rate = a.rows / statistics.median(c.wall_s for c in copies)
        floor_s = (srv + cpu) / ncpu
        need_us = (ncpu * a.rows / (0.8 * copy_rate) - srv) / a.rows * 1e6
        print(f"CPU bound (medians): the server reads the table in {srv:.2f} CPU-s (the COPYs), sluice used "
              f"{cpu:.2f}; on {ncpu} CPUs a backfill cannot take less than {floor_s:.2f}s: "
              f"{a.rows / floor_s:.0f} rows/s, {a.rows / floor_s / copy_rate:.2f}x COPY.  0.8x COPY needs sluice "
              f"at {need_us:.2f} CPU-us per row or less")
        if rb:
            print(f"sluice re-backfill while streaming (last stream, by its log): {rb[1]:7.2f}s  {rb[2]:10.0f} "
                  f"rows/s  ({rb[0]} chunks; ratio to COPY {rb[2] / copy_rate:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
