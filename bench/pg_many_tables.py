#!/usr/bin/python3
"""
bench/pg_many_tables.py: how long sluice takes to start on a stream of many
small tables.

A throwaway PostgreSQL 15 gets --tables one-row tables (t_00001, ...: an
integer key and a text column).  Then, --repeat times, sluice run
--until-caught-up on a new stream (backfill = auto) that selects them all:
it reads the catalog, creates the publication and the slot, backfills every
table and streams the (empty) rest.  Each of sluice's log lines is stamped
as it arrives, and the script prints, over the runs, min/median/max of:

  to first backfill  the start until the first "backfilling" line (catalog
                     reads, publication, slot)
  to streaming       the start until "streaming from slot" (every table
                     backfilled)
  to caught up       the start until sluice exited, caught up

Small tables are backfilled in groups of up to 100, each made durable by one
flush and checkpointed by one save, and read over backfill_connections at
once (doc/operations.md, "Scale"); what is left per table is its COPY and
its own files.  To see where a run's time goes, --log-level
debug adds the "backfilling a group" and "flushed in" lines, and --lines
PREFIX writes each run's stamped lines to PREFIX-<run>.txt.

To compare trees or settings on one server, in the same minutes: --against
BIN adds a second binary, and --sync takes a list (fsync,syncfs); each of
the --repeat rounds then runs every binary with every sync, one after
another, and the figures are printed for each pair.

It never fails on speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/pg_many_tables.py
      [--tables N] [--connections N] [--sync fsync|syncfs[,...]] [--repeat N] [--log-level L]
      [--lines PREFIX] [--against BIN]
"""

import argparse
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

CREATE = """
DO $$
BEGIN
  FOR i IN 1..%s LOOP
    EXECUTE format('CREATE TABLE %%I (id int PRIMARY KEY, v text NOT NULL)', 't_' || lpad(i::text, 5, '0'));
    EXECUTE format('INSERT INTO %%I VALUES (%%s, %%L)', 't_' || lpad(i::text, 5, '0'), i, 'row ' || i);
  END LOOP;
END $$"""


def timed_run(s, timeout):
    """Runs sluice run --until-caught-up, stamping each stderr line.
    Returns (rc, [(seconds since start, line)], wall seconds)."""
    argv = s.argv("run", "--until-caught-up")
    lines = []
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def reader():
        for raw in p.stderr:
            lines.append((time.monotonic() - t0, raw.decode(errors="replace").rstrip("\n")))
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    wall = time.monotonic() - t0
    th.join(10)
    return rc, lines, wall


def first(lines, needle):
    for t, line in lines:
        if needle in line:
            return t
    return None


def one_run(a, pg, i, binary, sync, figures):
    """Run i of binary with sync; its figures go into figures.  False when
    it did not work."""
    extra = {} if a.connections is None else {"source": {"backfill_connections": a.connections}}
    if sync:
        extra["destination"] = {"sync": sync}
    s = Sluice(pg, stream=f"many{i}", tables="public.t_*", binary=binary, extra=extra, log_level=a.log_level)
    try:
        rc, lines, wall = timed_run(s, a.timeout)
        if a.lines:
            with open(f"{a.lines}-{i}.txt", "w") as f:
                f.writelines(f"{t:9.3f} {line}\n" for t, line in lines)
        done = sum(1 for _, line in lines if "backfilled public.t_" in line)
        if rc != 0 or done != a.tables:
            tail = "\n".join(line for _, line in lines[-20:])
            print(f"pg_many_tables: run {i}: exit {rc}, {done} tables backfilled of {a.tables}:\n{tail}",
                  file=sys.stderr)
            return False
        figures["to first backfill"].append(first(lines, "backfilling public.t_"))
        figures["to streaming"].append(first(lines, "streaming from slot"))
        figures["to caught up"].append(wall)
    finally:
        s.close()
    pg.execute(f"SELECT pg_drop_replication_slot('sluice_many{i}')")
    return True


def not_ready(name, bins):
    """None when PostgreSQL and each binary of bins are there, else the exit
    code of the bench called name: 0 skipped (it says why), 2 no binary."""
    reason = harness.pg_available()
    if reason:
        print(f"{name}: skipped: {reason}")
        return 0
    for b in bins:
        if not os.access(b, os.X_OK):
            print(f"{name}: no sluice binary at {b} (set SLUICE_BIN)", file=sys.stderr)
            return 2
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=None,
                    help="[source] backfill_connections (default: sluice's default)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sync", default=None,
                    help="[destination] sync of the avro_dir, fsync or syncfs, or a comma list of both "
                         "(default: sluice's default, fsync)")
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--against", metavar="BIN", help="a second sluice binary, run in turn with the first")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--log-level", default="info", help="sluice's log level (debug: groups and flushes)")
    ap.add_argument("--lines", metavar="PREFIX", help="write each run's stamped log lines to PREFIX-<run>.txt")
    a = ap.parse_args()
    a.sluice_bin = os.path.abspath(a.sluice_bin)
    bins = [a.sluice_bin] + ([os.path.abspath(a.against)] if a.against else [])
    syncs = a.sync.split(",") if a.sync else [None]
    if any(x not in ("fsync", "syncfs") for x in syncs if x):
        ap.error(f"--sync: fsync or syncfs, not {a.sync}")

    rc = not_ready("pg_many_tables", bins)
    if rc is not None:
        return rc

    with PgServer(settings={"max_locks_per_transaction": "1024"}) as pg:
        t0 = time.monotonic()
        pg.execute(CREATE % a.tables)
        pg.execute("ANALYZE")
        print(f"pg_many_tables: created {a.tables} one-row tables in {time.monotonic() - t0:.1f}s")
        figures = {}
        run = 0
        for i in range(a.repeat):
            for b in bins:
                for sync in syncs:
                    f = figures.setdefault((b, sync), {"to first backfill": [], "to streaming": [],
                                                       "to caught up": []})
                    if not one_run(a, pg, run, b, sync, f):
                        return 1
                    run += 1
        for (b, sync), f in figures.items():
            label = f"{b}, sync = {sync or 'default'}: " if len(figures) > 1 else ""
            print(f"{label}{a.tables} tables, {a.repeat} runs: seconds, min / median / max")
            for k, v in f.items():
                print(f"  {k:18s} {min(v):7.2f} {statistics.median(v):7.2f} {max(v):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
