#!/usr/bin/python3
"""
bench/pg_resume_tables.py: how much work sluice does to resume a stream of
many tables that all changed while it was stopped.

A throwaway PostgreSQL 15 gets --tables one-row tables (as
bench/pg_many_tables.py makes them), and one stream backfills them all.
Then, --repeat times, one transaction updates the row of every table and
sluice run --until-caught-up streams it: the first change of each table
comes after its first Relation message of the run, at which the source asks
the agent how far the table's backfill holds its changes (the covered hook,
which reads the checkpoint).  The script prints min/median/max, over the
runs, of the seconds each run took and, with --callgrind, of the
instructions it executed (valgrind --tool=callgrind, every thread).

--against BIN adds a second binary: each round runs both, one after the
other, on the same stream (the checkpoint is the same format).

It never fails on speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/pg_resume_tables.py
      [--tables N] [--repeat N] [--against BIN] [--callgrind]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# (pg_many_tables puts tests/integration on the path, for harness)
from pg_many_tables import CREATE, not_ready
import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402

UPDATE = """
DO $$
BEGIN
  FOR i IN 1..%s LOOP
    EXECUTE format('UPDATE %%I SET v = %%L', 't_' || lpad(i::text, 5, '0'), 'round %s');
  END LOOP;
END $$"""


def callgrind_total(path):
    """The instructions executed, from a callgrind output file."""
    with open(path) as f:
        for line in f:
            m = re.match(r"(?:summary|totals): (\d+)", line)
            if m:
                return int(m.group(1))
    raise ValueError(f"no summary line in {path}")


def one_run(a, s, binary, figures, tmp, n):
    """Streams the tables' changes with binary; its figures go into
    figures.  False when it did not work."""
    argv = s.argv("run", "--until-caught-up")
    argv[0] = binary
    out = os.path.join(tmp, f"callgrind.{n}")
    if a.callgrind:
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv
    s.pg.wait_wal_flushed()
    t0 = time.monotonic()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=a.timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        tail = "\n".join(p.stderr.decode(errors="replace").splitlines()[-20:])
        print(f"pg_resume_tables: {binary}: exit {p.returncode}:\n{tail}", file=sys.stderr)
        return False
    figures["seconds"].append(wall)
    if a.callgrind:
        figures["instructions"].append(callgrind_total(out))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--against", metavar="BIN", help="a second sluice binary, run in turn with the first")
    ap.add_argument("--callgrind", action="store_true", help="run sluice under valgrind --tool=callgrind")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    bins = [os.path.abspath(a.sluice_bin)] + ([os.path.abspath(a.against)] if a.against else [])

    rc = not_ready("pg_resume_tables", bins)
    if rc is not None:
        return rc
    if a.callgrind and not shutil.which("valgrind"):
        print("pg_resume_tables: --callgrind needs valgrind", file=sys.stderr)
        return 2

    tmp = tempfile.mkdtemp(prefix="sluice-bench-")
    try:
        with PgServer(settings={"max_locks_per_transaction": "1024"}) as pg:
            pg.execute(CREATE % a.tables)
            s = Sluice(pg, stream="resume", tables="public.t_*", binary=bins[0])
            try:
                s.catch_up()
                figures = {b: {"seconds": [], "instructions": []} for b in bins}
                n = 0
                for i in range(a.repeat):
                    for b in bins:
                        pg.execute(UPDATE % (a.tables, n))
                        if not one_run(a, s, b, figures[b], tmp, n):
                            return 1
                        n += 1
            finally:
                s.close()
            pg.execute("SELECT pg_drop_replication_slot('sluice_resume')")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for b, f in figures.items():
        print(f"{b}: {a.tables} tables, {a.repeat} runs: min / median / max")
        for k, v in f.items():
            fmt = "{:15,.0f}" if k == "instructions" else "{:15.2f}"
            if v:
                print(f"  {k:13s}", " ".join(fmt.format(x) for x in (min(v), statistics.median(v), max(v))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
