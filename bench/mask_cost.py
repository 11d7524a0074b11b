#!/usr/bin/python3
"""
bench/mask_cost.py: what masking a column costs sluice, per masked value.

The workload of bench/pg_drain.py (a 6-column table, 60% inserts, 30%
updates, 10% deletes, in transactions of --batch rows) is loaded once into
a throwaway PostgreSQL 15, with one pgoutput slot per run created before
the load.  Then, alternated A B A B for --pairs pairs, the same sluice
binary drains the identical backlog (sluice run --until-caught-up,
backfill = none, codec deflate level 1, as the role doc/deploy.md gives
sluice, over TCP to 127.0.0.1):

  A  no rule
  B  mask_columns = public.bench_t.name:METHOD   (--method, default hash,
     with a key file for hash)

Every insert and update carries a `name` value, so B masks n_ins + n_upd
values.  It prints each side's figures (bench/fair.py: wall, changes/s,
CPU-us per change, context switches, peak RSS; min/median/max) and, pair by
pair, the extra CPU of B over A divided by the masked values: the CPU cost
per masked value.  It never fails on speed; it exits non-zero only if
something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/mask_cost.py [--changes N] [--batch N]
                                                [--method hash|null|redact|truncate(8)] [--pairs N]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, HERE)

from harness import PgServer, Sluice  # noqa: E402
import fair  # noqa: E402
from pg_drain import USER, load, prepare  # noqa: E402


def main():
    a, rc = fair.pg_bench_args("mask_cost", __doc__, 300_000, (("--method", {"default": "hash"}),))
    if a is None:
        return rc

    with PgServer() as pg:
        prepare(pg)
        for i in range(a.pairs):
            for side in ("plain", "mask"):
                pg.execute(f"SELECT pg_create_logical_replication_slot('{side}_{i}', 'pgoutput')")
        n_ins, n_upd, n_del, load_s = load(pg, a.changes, a.batch)
        pg.wait_wal_flushed()
        changes, masked = n_ins + n_upd + n_del, n_ins + n_upd
        print(f"mask_cost: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
              f"{a.batch} rows per transaction) in {load_s:.1f}s; {masked} values of name to mask")

        runs = {"plain": [], "mask": []}
        try:
            for i in range(a.pairs):
                for side in ("plain", "mask"):
                    stream = {"slot": f"{side}_{i}", "publication": "sluice_bench"}
                    s = Sluice(pg, stream="bench", tables="public.bench_t", codec="deflate",
                               compression_level=1, max_file_bytes="64MB", max_file_seconds=60,
                               backfill="none", binary=a.sluice_bin, log_level="warn",
                               extra={"source": {"user": USER}, "stream": stream})
                    if side == "mask":
                        stream["mask_columns"] = f"public.bench_t.name:{a.method}"
                        if a.method == "hash":
                            key = os.path.join(s.workdir, "mask.key")
                            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                            with os.fdopen(fd, "w") as f:
                                f.write("a bench key\n")
                            stream["mask_key_file"] = key
                        s.extra["stream"] = stream
                        s.write_config()
                    runs[side].append(s)
            rs = {"plain": [], "mask": []}
            for i in range(a.pairs):   # A B A B ...
                for side in ("plain", "mask"):
                    r = fair.finish(runs[side][i].start("run", "--until-caught-up", sample_hwm=True), a.timeout)
                    if r.rc != 0:
                        print(f"mask_cost: sluice ({side}) failed:\n{r.describe()}", file=sys.stderr)
                        return 1
                    rs[side].append(r)
            print(f"the same binary, backlog and role; whole processes; {a.pairs} pairs, alternated")
            fair.report("no rule", rs["plain"], changes)
            fair.report(f"name:{a.method}", rs["mask"], changes)
            extra = [(m.cpu_s - p.cpu_s) / masked * 1e6 for p, m in zip(rs["plain"], rs["mask"])]
            print(f"CPU per masked value ({a.method}), pair by pair: {fair.mmm(extra, '{:.3f}')} us "
                  f"(min/median/max of {len(extra)})")
        finally:
            for side in runs.values():
                for s in side:
                    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
