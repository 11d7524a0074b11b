#!/usr/bin/python3
"""
bench/merge_toast.py: what filling unchanged TOAST values costs in merge
mode (doc/output.md and doc/clickhouse.md, "Unchanged TOAST values").

A throwaway PostgreSQL 15 gets a table of --rows rows, each with a 20 KB
incompressible text value (TOASTed) and a small counter.  It is backfilled
into avro_dir in merge mode (and into ClickHouse in merge mode, when
clickhouse-server is installed).  Then two update runs of --updates rows
each, in transactions of 100 rows, each drained by `sluice run
--until-caught-up`:

  changed    UPDATE ... SET counter = counter + 1, doc = <new 20 KB text>
             (the new value is in the change: nothing to fill)
  unchanged  UPDATE ... SET counter = counter + 1
             (the large value is left out: sluice fills it from the table's
             current files (avro_dir) or current rows (ClickHouse))

The wall times are mostly PostgreSQL's (the changed run writes 20 KB of new
WAL per update); the CPU difference is sluice's cost of the fill: for
avro_dir, reading the table's current files once per flush that needs it.

It prints the wall time and CPU of each run and their difference, the cost
of the fill.  The mirror is checked against the source after the runs.  It
never fails on speed.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/merge_toast.py [--rows N] [--updates N]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402

DDL = "CREATE TABLE toast_t (id int PRIMARY KEY, counter int NOT NULL, doc text NOT NULL)"
# 20 KB of hex from random bytes: incompressible enough that PostgreSQL
# stores it out of line (TOAST), and deflate cannot shrink it much
# (correlated with the row, so that every row gets its own value)
def doc(col):
    return f"(SELECT string_agg(md5(random()::text || {col} || x), '') FROM generate_series(1, 640) x)"


def drain(s, label, n, unit, env=None):
    r = s.run("run", "--until-caught-up", timeout=1800, env=env)
    if r.rc != 0:
        sys.exit(f"merge_toast: sluice failed:\n{r.describe()}")
    print(f"  {label:9}: {r.wall_s:6.2f}s wall  CPU {r.cpu_s:5.2f}s  ({n / r.wall_s:8.0f} {unit}/s)")
    return r


def avro_mib(path):
    n = 0
    for d, _, files in os.walk(path):
        n += sum(os.path.getsize(os.path.join(d, f)) for f in files if f.endswith(".avro"))
    return n / 2**20


def run_case(pg, name, s, updates, env=None):
    print(f"{name}:")
    base = drain(s, "backfill", pg.one("SELECT count(*) FROM toast_t"), "rows", env)
    out = {}
    for case in ("changed", "unchanged"):
        for lo in range(1, updates + 1, 100):
            hi = min(updates, lo + 99)
            if case == "changed":
                pg.execute(f"UPDATE toast_t SET counter = counter + 1, doc = {doc('id')} WHERE id BETWEEN %s AND %s",
                           (lo, hi))
            else:
                pg.execute("UPDATE toast_t SET counter = counter + 1 WHERE id BETWEEN %s AND %s", (lo, hi))
        pg.wait_wal_flushed()
        if s.extra.get("destination", {}).get("type") != "clickhouse":
            print(f"  (the table's current files before this run: {avro_mib(s.out):.0f} MiB of Avro)")
        out[case] = drain(s, case, updates, "updates", env)
    print(f"  the fill: {out['unchanged'].cpu_s - out['changed'].cpu_s:+.2f}s of sluice CPU for {updates} updates "
          f"whose large value was left out")
    return base


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--updates", type=int, default=5000)
    a = ap.parse_args()
    reason = harness.pg_available()
    if reason:
        print(f"merge_toast: skipped: {reason}")
        return 0
    with PgServer() as pg:
        pg.execute(DDL)
        pg.execute("ALTER TABLE toast_t ALTER COLUMN doc SET STORAGE EXTERNAL")
        for lo in range(1, a.rows + 1, 1000):
            pg.execute(f"INSERT INTO toast_t SELECT g, 0, {doc('g')} FROM generate_series(%s, %s) g",
                       (lo, min(a.rows, lo + 999)))
        mb = pg.one("SELECT pg_total_relation_size('toast_t')") / 2**20
        print(f"merge_toast: {a.rows} rows of 20 KB ({mb:.0f} MiB with TOAST), {a.updates} updates per run")
        s = Sluice(pg, stream="toast_avro", tables="public.toast_t", write_mode="merge", log_level="warn")
        try:
            run_case(pg, "avro_dir merge", s, a.updates)
            recs = harness.read_avro_tree(s.out)
            state = harness.rebuild(recs, ["id"], table=("public", "toast_t"))
            diffs = harness.state_diff(pg, "public", "toast_t", ["id"], state)
            if diffs:
                sys.exit("merge_toast: the avro_dir mirror differs from the source:\n  " + "\n  ".join(diffs[:5]))
        finally:
            s.close()
        try:
            import ch_harness
            from ch_harness import CH_PASSWORD, ClickHouseServer
        except ImportError:
            return 0
        if ch_harness.clickhouse_available():
            print(f"ClickHouse: skipped: {ch_harness.clickhouse_available()}")
            return 0
        with ClickHouseServer() as ch:
            extra = {"destination": {"type": "clickhouse", "path": None, "codec": None, "compression_level": None,
                                     "max_file_bytes": None, "max_file_seconds": None, "url": ch.url,
                                     "database": "toast", "user": "sluice",
                                     "password_env": "SLUICE_TEST_CH_PASSWORD"}}
            s = Sluice(pg, stream="toast_ch", tables="public.toast_t", write_mode="merge", extra=extra,
                       log_level="warn")
            try:
                run_case(pg, "ClickHouse merge", s, a.updates, env={"SLUICE_TEST_CH_PASSWORD": CH_PASSWORD})
                n = int(ch.scalar("SELECT count() FROM toast.public_toast_t FINAL WHERE length(doc) = 20480"))
                print(f"  ClickHouse holds {n} current rows with their 20 KB value (source: "
                      f"{pg.one('SELECT count(*) FROM toast_t')})")
            finally:
                s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
