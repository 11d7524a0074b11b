#!/usr/bin/python3
"""
bench/iceberg_append.py: how fast sluice drains a PostgreSQL backlog into
an Iceberg table in append mode (type = iceberg), next to avro_dir draining
the identical backlog.

The source, the load and the measuring are bench/pg_drain.py's: a
throwaway PostgreSQL 15, a 6-column table, the restricted role, and
--changes changes (default 1,000,000: 60% inserts, 30% updates, 10% deletes
in transactions of --batch rows), loaded once after one pgoutput slot per
run was created, so every run drains the same WAL.  Then, alternated A B A B
for --pairs pairs (default 3), each a whole process timed alike
(bench/fair.py):

  sluice run --until-caught-up   destination avro_dir   (slot avro_<i>)
  sluice run --until-caught-up   destination iceberg    (slot ice_<i>)

both with backfill = none, codec deflate level 1, max_file_bytes 64MB,
max_file_seconds 60, their start-up, fsyncs and commits counted.  It prints
min/median/max of wall time, changes/s, CPU-us per change and peak RSS for
each side, and the throughput ratio iceberg/avro_dir pair by pair (the goal:
at least 0.9).  It exits non-zero only if something does not work.  --wrap
runs both sides' sluice under a profiler (e.g. "perf record -g -o FILE", or
valgrind's callgrind with %p in its output file's name, which then tells the
sides apart by process id: avro_dir's run is first in each pair).

  SLUICE_BIN=/tmp/build/sluice /usr/bin/python3 bench/iceberg_append.py [--changes N] [--batch N] [--pairs N]
                                                                  [--wrap CMD]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
sys.path.insert(0, HERE)

from harness import PgServer, Sluice  # noqa: E402
import fair  # noqa: E402
import pg_drain  # noqa: E402


def records(out):
    """The records the iceberg tables' current snapshots hold, from their
    snapshot summaries (added-records of every snapshot)."""
    n = 0
    for d, _, files in os.walk(out):
        if "version-hint.text" not in files:
            continue
        with open(os.path.join(d, "version-hint.text")) as f:
            v = int(f.read())
        with open(os.path.join(d, f"v{v}.metadata.json")) as f:
            meta = json.load(f)
        n += sum(int(sn["summary"].get("added-records", 0)) for sn in meta["snapshots"]
                 if sn["summary"]["operation"] != "replace")
    return n


def main():
    a, rc = fair.pg_bench_args("iceberg_append", __doc__, 1_000_000,
                               (("--wrap", {"default": "", "metavar": "CMD", "help": fair.WRAP_HELP}),))
    if a is None:
        return rc

    with PgServer() as pg:
        pg_drain.prepare(pg)
        for i in range(a.pairs):   # one slot per run, all before the load
            for side in ("avro", "ice"):
                pg.execute(f"SELECT pg_create_logical_replication_slot('{side}_{i}', 'pgoutput')")
        n_ins, n_upd, n_del, load_s = pg_drain.load(pg, a.changes, a.batch)
        pg.wait_wal_flushed()
        changes = n_ins + n_upd + n_del
        print(f"iceberg_append: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
              f"{a.batch} rows per transaction) in {load_s:.1f}s")
        runs = {"avro": [], "ice": []}
        res = {"avro": [], "ice": []}
        try:
            for i in range(a.pairs):
                for side in ("avro", "ice"):
                    extra = {"source": {"user": pg_drain.USER},
                             "stream": {"slot": f"{side}_{i}", "publication": "sluice_bench"}}
                    s = Sluice(pg, stream="bench", tables="public.bench_t", codec="deflate", compression_level=1,
                               max_file_bytes="64MB", max_file_seconds=60, backfill="none",
                               binary=a.sluice_bin, log_level="warn", extra=extra)
                    if side == "ice":
                        s.extra.setdefault("destination", {}).update(type="iceberg", path=s.out)
                        s.write_config()
                    s.binary = fair.wrapped(a.sluice_bin, a.wrap, s.workdir)
                    runs[side].append(s)
            for i in range(a.pairs):   # A B A B ...: avro_dir, then iceberg, over the same WAL
                for side in ("avro", "ice"):
                    r = fair.finish(runs[side][i].start("run", "--until-caught-up", sample_hwm=True), a.timeout)
                    if r.rc != 0:
                        print(f"iceberg_append: sluice ({side}) failed:\n{r.describe()}", file=sys.stderr)
                        return 1
                    res[side].append(r)
            got = records(runs["ice"][-1].out)
            print(f"whole processes (start-up, fsyncs and commits included); {a.pairs} pairs, alternated")
            fair.report("avro_dir", res["avro"], changes)
            fair.report("iceberg", res["ice"], changes)
            fair.ratio("iceberg/avro_dir", res["ice"], res["avro"])
            thr = [y.wall_s / x.wall_s for x, y in zip(res["ice"], res["avro"])]
            print(f"throughput iceberg/avro_dir (pair by pair): {fair.mmm(thr)} (goal >= 0.9)")
            print(f"iceberg table: {got} records in its snapshots (want {changes})")
            if got != changes:
                return 1
        finally:
            for side in runs:
                for s in runs[side]:
                    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
