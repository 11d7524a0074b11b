#!/usr/bin/python3
"""
bench/pg_drain.py: how fast sluice drains a PostgreSQL backlog, next to
pg_recvlogical draining the identical backlog.

A throwaway PostgreSQL 15 gets a 6-column table, a publication and two
pgoutput slots (sluice_bench for sluice, recv_bench for pg_recvlogical),
created before the load so both capture it.  The load is 1,000,000 changes
by default: 60% inserts, 30% updates, 10% deletes, in transactions of
--batch rows.  Then, one after the other:

  pg_recvlogical --start --slot recv_bench -o proto_version=1
                 -o publication_names=sluice_bench --endpos <LSN after load> --no-loop -f FILE
  sluice run -c FILE --until-caught-up     (backfill = none, codec deflate, level 1)

It prints both wall times and change rates, the ratio sluice/pg_recvlogical,
sluice's CPU seconds (user+sys) per million changes and its peak RSS.  It
never fails on speed; it exits non-zero only if something does not work.

With --metrics, sluice serves /metrics on a free port and the benchmark
scrapes it every --scrape-every seconds while sluice drains, so the figures
include the endpoint's cost; the last scrape's change counters are checked
against the load.

  SLUICE_BIN=/tmp/build/sluice /usr/bin/python3 bench/pg_drain.py [--changes N] [--batch N] [--verify]
                                                              [--metrics] [--scrape-every S] [--skip-recvlogical]
"""

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice, SluiceProc, int_to_lsn  # noqa: E402

TABLE_DDL = """
CREATE TABLE bench_t (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount numeric(12,2) NOT NULL,
  updated_at timestamptz NOT NULL,
  active bool NOT NULL
)"""


def run_measured(argv, workdir, name, timeout):
    """Runs argv to completion; returns a harness.Result with rusage figures."""
    fo = open(os.path.join(workdir, f"{name}.out"), "wb")
    fe = open(os.path.join(workdir, f"{name}.err"), "wb")
    p = SluiceProc(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=workdir, start_new_session=True)
    p._setup(fo.name, fe.name, argv, (fo, fe))
    try:
        return p.wait_result(timeout)
    finally:
        if p.returncode is None:
            p.kill9()


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
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy"))
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--verify", action="store_true",
                    help="read sluice's output back with python avro and count the changes (slow)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--metrics", action="store_true", help="serve /metrics and scrape it while draining")
    ap.add_argument("--scrape-every", type=float, default=1.0)
    ap.add_argument("--skip-recvlogical", action="store_true", help="measure sluice only")
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
        pg.execute(TABLE_DDL)
        pg.execute("CREATE PUBLICATION sluice_bench FOR TABLE bench_t")
        pg.execute("SELECT pg_create_logical_replication_slot('sluice_bench', 'pgoutput')")
        pg.execute("SELECT pg_create_logical_replication_slot('recv_bench', 'pgoutput')")
        n_ins, n_upd, n_del, load_s = load(pg, a.changes, a.batch)
        end_lsn = pg.current_lsn()
        pg.wait_wal_flushed()
        changes = n_ins + n_upd + n_del
        wal_bytes = end_lsn - pg.slot_info("recv_bench")["restart_lsn"]
        print(f"pg_drain: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
              f"{a.batch} rows per transaction) in {load_s:.1f}s; {wal_bytes / 2**20:.0f} MiB of WAL")

        port = harness.free_port()
        s = Sluice(pg, stream="bench", tables="public.bench_t", codec=a.codec, compression_level=1,
                   max_file_bytes="64MB", max_file_seconds=60, backfill="none", binary=a.sluice_bin,
                   log_level="warn",
                   extra={"agent": {"metrics_listen": f"127.0.0.1:{port}"}} if a.metrics else None)
        try:
            # pg_recvlogical first, then sluice, over the same WAL
            rl_out = os.path.join(s.workdir, "recvlogical.bin")
            rl = None
            if not a.skip_recvlogical:
                rl = run_measured([recvlogical, "-d", pg.dsn, "--slot", "recv_bench", "--start",
                                   "-o", "proto_version=1", "-o", "publication_names=sluice_bench",
                                   "--endpos", int_to_lsn(end_lsn), "--no-loop", "-f", rl_out],
                                  s.workdir, "recvlogical", a.timeout)
                if rl.rc != 0:
                    print(f"pg_drain: pg_recvlogical failed:\n{rl.describe()}", file=sys.stderr)
                    return 1
            scrapes, last = [0], [""]
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
            r = s.run("run", "--until-caught-up", timeout=a.timeout, sample_hwm=True)
            done.set()
            if a.metrics:
                th.join()
            if r.rc != 0:
                print(f"pg_drain: sluice failed:\n{r.describe()}", file=sys.stderr)
                return 1
            out_bytes = nfiles = 0
            for d, _, files in os.walk(s.out):
                for f in files:
                    if f.endswith(".avro"):
                        nfiles += 1
                        out_bytes += os.path.getsize(os.path.join(d, f))
            slot = pg.slot_info("sluice_bench")
            if rl:
                print(f"pg_recvlogical: {rl.wall_s:7.2f}s  {changes / rl.wall_s:10.0f} changes/s  "
                      f"({os.path.getsize(rl_out) / 2**20:.0f} MiB of pgoutput)")
            print(f"sluice:         {r.wall_s:7.2f}s  {changes / r.wall_s:10.0f} changes/s  "
                  f"({nfiles} files, {out_bytes / 2**20:.0f} MiB of Avro, codec {a.codec})")
            if rl:
                print(f"ratio sluice/pg_recvlogical (wall time): {r.wall_s / rl.wall_s:.2f}")
            if a.metrics:
                counted = {}
                for line in last[0].splitlines():
                    if line.startswith("sluice_changes_total{"):
                        op = line.split('op="')[1].split('"')[0]
                        counted[op] = counted.get(op, 0) + int(line.rsplit(" ", 1)[1])
                print(f"metrics: {scrapes[0]} scrapes of /metrics while draining; last one counted "
                      f"{counted.get('insert', 0)} inserts, {counted.get('update', 0)} updates, "
                      f"{counted.get('delete', 0)} deletes")
            print(f"sluice CPU (user+sys): {r.cpu_s:.2f}s = {r.cpu_s / changes * 1e6:.2f}s per million changes")
            print(f"sluice peak RSS: {r.hwm_kb / 1024:.1f} MiB (VmHWM; wait4 ru_maxrss {r.maxrss_kb / 1024:.1f} MiB, "
                  f"which on Linux starts at the parent's RSS)")
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
            s.close()
    return 0


def _op(rec):
    return rec["source_metadata"]["change_type"]


if __name__ == "__main__":
    sys.exit(main())
