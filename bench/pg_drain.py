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
                                                              [--tables N] [--against BIN]

With --tables N the load is spread over N tables (row g in table g % N), so
that every transaction changes each of them in turn: the per-change cost of
finding a change's table.  With --against BIN a second sluice binary drains
the same backlog in each pair (after sluice, and before it in every other
pair), and the ratio of their wall times is printed pair by pair: a tree
against the one before it.
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
CREATE TABLE %s (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount numeric(12,2) NOT NULL,
  updated_at timestamptz NOT NULL,
  active bool NOT NULL
)"""


def table_names(tables):
    """The bench's tables: bench_t alone, or bench_t_001 ... for --tables N."""
    return ["bench_t"] if tables == 1 else [f"bench_t_{k:03d}" for k in range(1, tables + 1)]


def prepare(pg, tables=1):
    """The tables, their publication and the restricted role both sides
    connect as: TCP to 127.0.0.1, LOGIN REPLICATION and SELECT on the tables,
    the role doc/deploy.md gives sluice."""
    names = table_names(tables)
    for t in names:
        pg.execute(TABLE_DDL % t)
    pg.execute(f"CREATE PUBLICATION sluice_bench FOR TABLE {', '.join(names)}")
    pg.execute(f"CREATE ROLE {USER} LOGIN REPLICATION")
    pg.execute(f"GRANT SELECT ON {', '.join(names)} TO {USER}")


def load(pg, changes, batch, tables=1):
    """changes changes, 60% inserts, 30% updates, 10% deletes, in
    transactions of batch rows; over several tables, row g is table
    g % tables's, so that each transaction changes every table in turn."""
    names = table_names(tables)
    n_ins = changes * 6 // 10
    n_upd = changes * 3 // 10
    n_del = changes - n_ins - n_upd

    def each(lo, hi, sql):   # one transaction: sql for each table's rows in [lo, hi]
        pg.execute(";".join(sql.format(t=t, lo=lo + (k - lo) % tables, hi=hi, n=tables)
                            for k, t in enumerate(names)))
    t0 = time.monotonic()
    for lo in range(1, n_ins + 1, batch):
        each(lo, min(lo + batch - 1, n_ins),
             "INSERT INTO {t} SELECT g, g % 1000, 'name-' || g, (g % 100000) / 100.0, now(), g % 2 = 0 "
             "FROM generate_series({lo}, {hi}, {n}) g")
    for lo in range(1, n_upd + 1, batch):
        each(lo, min(lo + batch - 1, n_upd), "UPDATE {t} SET qty = qty + 1, amount = amount + 1, "
             "updated_at = now() WHERE id BETWEEN {lo} AND {hi}")
    # delete from the top so deletes do not hit updated rows only
    for hi in range(n_ins, n_ins - n_del, -batch):
        each(max(hi - batch + 1, n_ins - n_del + 1), hi, "DELETE FROM {t} WHERE id BETWEEN {lo} AND {hi}")
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
    ap.add_argument("--tables", type=int, default=1,
                    help="spread the load over this many tables, each transaction over all of them (default 1)")
    ap.add_argument("--against", metavar="BIN",
                    help="a second sluice binary, run after sluice in each pair (before it in every other), "
                         "and compared with it")
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
        prepare(pg, a.tables)
        for i in range(a.pairs):   # one slot per run, all before the load
            for side in ("sluice", "recv") + (("against",) if a.against else ()):
                pg.execute(f"SELECT pg_create_logical_replication_slot('{side}_{i}', 'pgoutput')")
        n_ins, n_upd, n_del, load_s = load(pg, a.changes, a.batch, a.tables)
        end_lsn = pg.current_lsn()
        pg.wait_wal_flushed()
        changes = n_ins + n_upd + n_del
        wal_bytes = end_lsn - pg.slot_info("recv_0")["restart_lsn"]
        print(f"pg_drain: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
              f"{a.batch} rows per transaction, {a.tables} table(s)) in {load_s:.1f}s; "
              f"{wal_bytes / 2**20:.0f} MiB of WAL")

        port = harness.free_port()
        dsn = f"host=127.0.0.1 port={pg.port} user={USER} dbname=postgres"
        runs, against = [], []
        try:
            for i in range(a.pairs):
                runs.append(sluice_run(pg, a, a.sluice_bin, f"sluice_{i}", port))
                if a.against:
                    against.append(sluice_run(pg, a, a.against, f"against_{i}", None))
            s = runs[0]
            rl_out = os.path.join(s.workdir, "recvlogical.bin")
            rls, rs, ras = [], [], []
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
                if against and i % 2 and not drained(against[i], a, ras):
                    return 1
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
                if against and not i % 2 and not drained(against[i], a, ras):
                    return 1
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
            if ras:
                fair.report("sluice --against", ras, changes)
                fair.ratio("sluice/against", rs, ras)
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
            for s in runs + against:
                s.close()
    return 0


def sluice_run(pg, a, binary, slot, port):
    """A sluice of binary that drains slot (serving /metrics on port with
    --metrics, when port is not None)."""
    extra = {"source": {"user": USER}, "stream": {"slot": slot, "publication": "sluice_bench"}}
    if a.metrics and port is not None:
        extra["agent"] = {"metrics_listen": f"127.0.0.1:{port}"}
    s = Sluice(pg, stream="bench", tables="public.bench_t" if a.tables == 1 else "public.bench_t_*", codec=a.codec,
               compression_level=1, max_file_bytes="64MB", max_file_seconds=60, backfill="none", binary=binary,
               log_level="warn", extra=extra)
    s.binary = fair.wrapped(binary, a.wrap, s.workdir)
    return s


def drained(s, a, results):
    """Runs sluice s until caught up, its figures appended to results; False
    once it has said why it failed."""
    r = fair.finish(s.start("run", "--until-caught-up", sample_hwm=True), a.timeout)
    if r.rc != 0:
        print(f"pg_drain: sluice --against failed:\n{r.describe()}", file=sys.stderr)
        return False
    results.append(r)
    return True


def _op(rec):
    return rec["source_metadata"]["change_type"]


if __name__ == "__main__":
    sys.exit(main())
