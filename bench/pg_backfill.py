#!/usr/bin/python3
"""
bench/pg_backfill.py: how fast sluice backfills a table, next to a
2-connection COPY of the same table into /dev/null.

A throwaway PostgreSQL 15 gets the 6-column table of bench/pg_drain.py with
1,000,000 rows by default (VACUUM ANALYZE'd, as a table that has lived a
while is).  Then, one after the other:

  COPY  two psql processes at once, each `COPY (SELECT * FROM ONLY bench_t
        WHERE ctid >= ... AND ctid < ...) TO STDOUT` over half of the
        table's blocks, into /dev/null: the server's side of a backfill and
        nothing else
  sluice run --until-caught-up on a new stream (backfill = auto, codec
        deflate level 1 unless --codec, [destination] compression_threads
        as --compression-threads, else the default): creates the slot, backfills the
        table over [source] backfill_connections connections, streams the
        (empty) rest and exits
  re-backfill  `sluice backfill --table public.bench_t` on that stream, then
        sluice run --until-caught-up: the table read again in chunks while
        streaming (the watermark method), at the figure sluice logs
        ("backfilled ... while streaming: ... (R rows/s)")

It prints rows/s of each (and of the re-backfill), the ratio (sluice rows/s over COPY rows/s; the goal
is 0.8 or more), sluice's CPU-µs per row (user+sys of the whole run) and its
peak RSS; the server's CPU for the COPY (all PostgreSQL processes); and the
bound the CPUs set: the server's CPU for reading the table plus sluice's,
spread over every CPU, is the shortest a backfill can take.  The backfill's own time is taken from sluice's log ("backfilled
... in X s"); the whole run's wall time is printed too.  It never fails on
speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/pg_backfill.py [--rows N]
      [--connections N] [--codec null|deflate|snappy] [--compression-threads N]
      [--repeat N]
"""

import argparse
import os
import resource
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402

TABLE_DDL = """
CREATE TABLE bench_t (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount numeric(12,2) NOT NULL,
  updated_at timestamptz NOT NULL,
  active bool NOT NULL
)"""


def copy_two(pg, conns):
    """COPY the table over conns psql processes (block ranges), into
    /dev/null.  Returns (the wall time of the slowest, the server's CPU
    seconds, the psql processes' CPU seconds)."""
    blocks = pg.one("SELECT pg_relation_size('bench_t') / current_setting('block_size')::int")
    step = blocks // conns + 1
    procs = []
    psql = os.path.join(harness.PG_BIN, "psql")
    if not os.access(psql, os.X_OK):
        psql = "psql"
    cpu0 = harness.server_cpu_s(pg.postmaster_pid())
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    for i in range(conns):
        lo, hi = i * step, (i + 1) * step
        q = (f"COPY (SELECT * FROM ONLY bench_t WHERE ctid >= '({lo},0)'::tid AND ctid < '({hi},0)'::tid) "
             f"TO STDOUT")
        procs.append(subprocess.Popen([psql, "-X", "-q", "-d", pg.dsn, "-c", q], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"psql COPY failed: {err.decode(errors='replace')}")
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (wall, harness.server_cpu_s(pg.postmaster_pid()) - cpu0,
            ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)


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
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy"))
    ap.add_argument("--compression-threads", type=int, default=None,
                    help="[destination] compression_threads (default: the sink's default)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (the best is printed)")
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
        size = pg.one("SELECT pg_relation_size('bench_t')")
        print(f"pg_backfill: loaded {a.rows} rows ({size / 2**20:.0f} MiB) in {time.monotonic() - t0:.1f}s")

        best_copy, copy_srv, copy_psql = min(copy_two(pg, a.connections) for _ in range(a.repeat))
        best = None
        for i in range(a.repeat):
            stream = f"bf{i}"
            extra = {} if a.legacy else {"source": {"backfill_connections": a.connections}}
            if a.compression_threads is not None:
                extra["destination"] = {"compression_threads": a.compression_threads}
            s = Sluice(pg, stream=stream, tables="public.bench_t", codec=a.codec, compression_level=1,
                       max_file_bytes="64MB", max_file_seconds=60, backfill="auto", binary=a.sluice_bin,
                       log_level="info", extra=extra)
            try:
                r = s.run("run", "--until-caught-up", timeout=a.timeout, sample_hwm=True)
                if r.rc != 0:
                    print(f"pg_backfill: sluice failed:\n{r.describe()}", file=sys.stderr)
                    return 1
                m = re.search(r"backfilled public\.bench_t: (\d+) rows read in ([0-9.]+) s", r.stderr)
                if not m or int(m.group(1)) != a.rows:
                    print(f"pg_backfill: sluice did not say it backfilled {a.rows} rows:\n{r.describe()}",
                          file=sys.stderr)
                    return 1
                bf_s = float(m.group(2))
                out_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(s.out)
                                for f in fs if f.endswith(".avro"))
                rb = None
                if not a.legacy:
                    rb = rebackfill(s, a)
                    if rb is None:
                        return 1
                if best is None or bf_s < best[0]:
                    best = (bf_s, r, out_bytes, rb)
            finally:
                s.close()
            pg.execute(f"SELECT pg_drop_replication_slot('sluice_{stream}')")
        bf_s, r, out_bytes, rb = best
        threads = "default" if a.compression_threads is None else a.compression_threads
        copy_rate = a.rows / best_copy
        bf_rate = a.rows / bf_s
        print(f"COPY x{a.connections} into /dev/null: {best_copy:7.2f}s  {copy_rate:10.0f} rows/s  "
              f"(server CPU {copy_srv:.2f}s, psql CPU {copy_psql:.2f}s)")
        print(f"sluice backfill:           {bf_s:7.2f}s  {bf_rate:10.0f} rows/s  "
              f"(whole run {r.wall_s:.2f}s; {out_bytes / 2**20:.0f} MiB of Avro, codec {a.codec}, "
              f"compression_threads {threads})")
        print(f"ratio sluice/COPY (rows/s): {bf_rate / copy_rate:.2f}  (goal >= 0.8)")
        print(f"sluice CPU (user+sys, whole run): {r.cpu_s:.2f}s = {r.cpu_s / a.rows * 1e6:.2f} CPU-us per row")
        print(f"sluice peak RSS: {r.hwm_kb / 1024:.1f} MiB (VmHWM)")
        # What the CPUs allow: the server's work to read the table (as the
        # COPY above measured it) plus sluice's, spread perfectly over every
        # CPU, is the shortest a backfill can take.
        ncpu = os.cpu_count() or 1
        floor_s = (copy_srv + r.cpu_s) / ncpu
        need_us = (ncpu * a.rows / (0.8 * copy_rate) - copy_srv) / a.rows * 1e6
        print(f"CPU bound: the server reads the table in {copy_srv:.2f} CPU-s (the COPY above), sluice used "
              f"{r.cpu_s:.2f}; on {ncpu} CPUs a backfill cannot take less than {floor_s:.2f}s: "
              f"{a.rows / floor_s:.0f} rows/s, {a.rows / floor_s / copy_rate:.2f}x COPY.  0.8x COPY needs sluice "
              f"at {need_us:.2f} CPU-us per row or less")
        if rb:
            print(f"sluice re-backfill while streaming: {rb[1]:7.2f}s  {rb[2]:10.0f} rows/s  "
                  f"({rb[0]} chunks; ratio to COPY {rb[2] / copy_rate:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
