#!/usr/bin/python3
"""
bench/pg_drain.py: how fast sluice drains a PostgreSQL backlog, next to
pg_recvlogical draining the identical backlog.

A throwaway PostgreSQL 15 gets a 6-column table, a publication, a
restricted role (LOGIN REPLICATION, SELECT on the table: what
doc/deploy.md gives sluice) and one pgoutput slot per run, all created
before the load so every slot captures it.  The load is 1,000,000 changes
by default: 60% inserts, 30% updates, 10% deletes, in transactions of
--batch rows.  Then, alternated A B A B for --pairs pairs (default 3), both
over TCP to 127.0.0.1 as that role, each a whole process timed alike
(bench/fair.py: wall from spawn to exit, CPU and voluntary context switches
from the reaped process's rusage):

  pg_recvlogical --start --slot recv_<i> -o proto_version=1
                 -o publication_names=sluice_bench --endpos <LSN after load> --no-loop -f FILE
  sluice run -c FILE --until-caught-up     (slot sluice_<i>, backfill = none,
                 codec deflate, level 1; its start-up and fsyncs are counted)

It prints, min/median/max over the pairs, each side's wall time,
changes/s, CPU-us per change, voluntary context switches per 1,000 changes
and peak RSS, and the ratio sluice/pg_recvlogical pair by pair.  It never
fails on speed; it exits non-zero only if something does not work.

With --metrics, sluice serves /metrics on a free port and the benchmark
scrapes it every --scrape-every seconds while sluice drains, so the figures
include the endpoint's cost; the last scrape's change counters are checked
against the load.

  SLUICE_BIN=/tmp/build/sluice /usr/bin/python3 bench/pg_drain.py [--changes N] [--batch N] [--verify]
                                                              [--metrics] [--scrape-every S] [--skip-recvlogical] [--pairs N]
                                                              [--codec C] [--wrap CMD]
"""

import argparse
import os
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice, int_to_lsn  # noqa: E402
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


def prepare(pg):
    """The table, its publication and the restricted role both sides connect
    as: TCP to 127.0.0.1, LOGIN REPLICATION and SELECT on the table, the role
    doc/deploy.md gives sluice."""
    pg.execute(TABLE_DDL)
    pg.execute("CREATE PUBLICATION sluice_bench FOR TABLE bench_t")
    pg.execute(f"CREATE ROLE {USER} LOGIN REPLICATION")
    pg.execute(f"GRANT SELECT ON bench_t TO {USER}")


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
    # delete from the top so deletes do not hit updated rows only
    for hi in range(n_ins, n_ins - n_del, -batch):
        lo = max(hi - batch + 1, n_ins - n_del + 1)
        pg.execute("DELETE FROM bench_t WHERE id BETWEEN %s AND %s", (lo, hi))
    return n_ins, n_upd, n_del, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=5000, help="rows per transaction (default 5000)")
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy", "zstandard"))
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--verify", action="store_true",
                    help="read sluice's output back with python avro and count the changes (slow)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--wrap", default="", metavar="CMD",
                    help='run sluice under this command line, e.g. "valgrind --tool=callgrind '
                         '--callgrind-out-file=/tmp/cg.%%p" or "perf record -g -o /tmp/perf.data"')
    ap.add_argument("--metrics", action="store_true", help="serve /metrics and scrape it while draining")
    ap.add_argument("--scrape-every", type=float, default=1.0)
    ap.add_argument("--skip-recvlogical", action="store_true", help="measure sluice only")
    ap.add_argument("--pairs", type=int, default=3, help="runs of each side, alternated (default 3)")
    a = ap.parse_args()

    reason = harness.pg_available()
    if reason:
        print(f"pg_drain: skipped: {reason}")
        return 0
    recvlogical = os.path.join(harness.PG_BIN, "pg_recvlogical")
    if not os.access(a.sluice_bin, os.X_OK):
        print(f"pg_drain: no sluice binary at {a.sluice_bin} (set SLUICE_BIN)", file=sys.stderr)
        return 2

    with PgServer() as pg:
        prepare(pg)
        for i in range(a.pairs):   # one slot per run, all before the load
            pg.execute(f"SELECT pg_create_logical_replication_slot('sluice_{i}', 'pgoutput')")
            pg.execute(f"SELECT pg_create_logical_replication_slot('recv_{i}', 'pgoutput')")
        n_ins, n_upd, n_del, load_s = load(pg, a.changes, a.batch)
        end_lsn = pg.current_lsn()
        pg.wait_wal_flushed()
        changes = n_ins + n_upd + n_del
        wal_bytes = end_lsn - pg.slot_info("recv_0")["restart_lsn"]
        print(f"pg_drain: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
              f"{a.batch} rows per transaction) in {load_s:.1f}s; {wal_bytes / 2**20:.0f} MiB of WAL")

        port = harness.free_port()
        dsn = f"host=127.0.0.1 port={pg.port} user={USER} dbname=postgres"
        runs = []
        try:
            for i in range(a.pairs):
                extra = {"source": {"user": USER}, "stream": {"slot": f"sluice_{i}", "publication": "sluice_bench"}}
                if a.metrics:
                    extra["agent"] = {"metrics_listen": f"127.0.0.1:{port}"}
                runs.append(Sluice(pg, stream="bench", tables="public.bench_t", codec=a.codec, compression_level=1,
                                   max_file_bytes="64MB", max_file_seconds=60, backfill="none",
                                   binary=a.sluice_bin, log_level="warn", extra=extra))
                runs[-1].binary = fair.wrapped(a.sluice_bin, a.wrap, runs[-1].workdir)
            s = runs[0]
            rl_out = os.path.join(s.workdir, "recvlogical.bin")
            rls, rs = [], []
            scrapes, last = [0], [""]
            for i in range(a.pairs):   # A B A B ...: pg_recvlogical, then sluice, over the same WAL
                if not a.skip_recvlogical:
                    rl = fair.measured([recvlogical, "-d", dsn, "--slot", f"recv_{i}", "--start",
                                        "-o", "proto_version=1", "-o", "publication_names=sluice_bench",
                                        "--endpos", int_to_lsn(end_lsn), "--no-loop", "-f", rl_out],
                                       s.workdir, f"recvlogical{i}", a.timeout)
                    if rl.rc != 0:
                        print(f"pg_drain: pg_recvlogical failed:\n{rl.describe()}", file=sys.stderr)
                        return 1
                    rls.append(rl)
                done = threading.Event()

                def scraper():
                    while not done.wait(a.scrape_every):
                        try:
                            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                                last[0] = resp.read().decode()
                                scrapes[0] += 1
                        except OSError:
                            pass
                th = threading.Thread(target=scraper, daemon=True)
                if a.metrics:
                    th.start()
                r = fair.finish(runs[i].start("run", "--until-caught-up", sample_hwm=True), a.timeout)
                done.set()
                if a.metrics:
                    th.join()
                if r.rc != 0:
                    print(f"pg_drain: sluice failed:\n{r.describe()}", file=sys.stderr)
                    return 1
                rs.append(r)
            s = runs[-1]
            out_bytes = nfiles = 0
            for d, _, files in os.walk(s.out):
                for f in files:
                    if f.endswith(".avro"):
                        nfiles += 1
                        out_bytes += os.path.getsize(os.path.join(d, f))
            slot = pg.slot_info(f"sluice_{a.pairs - 1}")
            print(f"both over TCP to 127.0.0.1 as {USER!r} (LOGIN REPLICATION, SELECT on the table); whole "
                  f"processes (sluice from start to exit, start-up and fsyncs included); {a.pairs} pairs, alternated")
            if rls:
                fair.report("pg_recvlogical", rls, changes)
            fair.report("sluice", rs, changes)
            print(f"  ({os.path.getsize(rl_out) / 2**20 if rls else 0:.0f} MiB of pgoutput from pg_recvlogical; "
                  f"{nfiles} files, {out_bytes / 2**20:.0f} MiB of Avro from sluice, codec {a.codec})")
            if rls:
                fair.ratio("sluice/pg_recvlogical", rs, rls)
            if a.metrics:
                counted = {}
                for line in last[0].splitlines():
                    if line.startswith("sluice_changes_total{"):
                        op = line.split('op="')[1].split('"')[0]
                        counted[op] = counted.get(op, 0) + int(line.rsplit(" ", 1)[1])
                print(f"metrics: {scrapes[0]} scrapes of /metrics while draining; last one counted "
                      f"{counted.get('insert', 0)} inserts, {counted.get('update', 0)} updates, "
                      f"{counted.get('delete', 0)} deletes")
            print(f"sluice peak RSS is VmHWM (wait4 ru_maxrss {rs[-1].maxrss_kb / 1024:.1f} MiB, which on Linux "
                  f"starts at the parent's RSS)")
            print(f"sluice slot confirmed_flush_lsn {int_to_lsn(slot['confirmed_flush_lsn'])} "
                  f"(end of load {int_to_lsn(end_lsn)})")
            if a.verify:
                t0 = time.monotonic()
                recs = harness.read_avro_tree(s.out, codec=a.codec, keep=_op, workers=2)
                counts = {}
                for op in recs:
                    counts[op] = counts.get(op, 0) + 1
                want = {"INSERT": n_ins, "UPDATE-INSERT": n_upd, "DELETE": n_del}
                print(f"verify: {counts} (want {want}) in {time.monotonic() - t0:.0f}s")
                if counts != want:
                    return 1
        finally:
            for s in runs:
                s.close()
    return 0


def _op(rec):
    return rec["source_metadata"]["change_type"]


if __name__ == "__main__":
    sys.exit(main())
