#!/usr/bin/python3
"""
bench/my_drain.py: how fast sluice drains a MariaDB binlog backlog, next to
mariadb-binlog decoding the identical binlog.

A throwaway MariaDB gets the 6-column table of bench/pg_drain.py; sluice
takes its position first (backfill = none), then the load runs: 1,000,000
changes by default, 60% inserts, 30% updates, 10% deletes, in transactions of
--batch rows.  Then, over the same binlog range, alternated A B A B for
--pairs pairs (default 3), each side a whole process timed alike
(bench/fair.py: wall from spawn to exit, CPU and voluntary context switches
from the reaped process's rusage), both over TCP to 127.0.0.1 as sluice's
restricted user (REPLICATION SLAVE, BINLOG MONITOR, SELECT):

  mariadb-binlog --read-from-remote-server --protocol=TCP --user=sluice -v
                 --base64-output=decode-rows --start-position=<sluice's>
                 <first file> --to-last-log > FILE
  sluice run -c FILE --until-caught-up     (a fresh stream at the same
                 position each time, codec deflate, level 1; its start-up,
                 connection and fsyncs are counted)

It prints, min/median/max over the pairs, each side's wall time, changes/s,
CPU-us per change, voluntary context switches per 1,000 changes and peak
RSS; the ratio pair by pair; the server's CPU; the bound the CPUs set (the
server's CPU plus sluice's, spread over every CPU, is the shortest the drain
can take); and the server's dump rate alone (mariadb-binlog --raw copying
the same range without decoding), the floor for any client.  It never fails
on speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/my_drain.py [--changes N] [--batch N] [--pairs N] [--verify]
                                                           [--codec C] [--wrap CMD]
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
import harness_mysql  # noqa: E402
from harness import Sluice  # noqa: E402
sys.path.insert(0, HERE)
import fair  # noqa: E402

TABLE_DDL = """
CREATE TABLE bench.bench_t (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  amount decimal(12,2) NOT NULL,
  updated_at timestamp(6) NOT NULL,
  active bool NOT NULL
)"""


def thread_cpu_text(r):
    """A measured run's CPU by thread name, busiest first."""
    return ", ".join(f"{n} {c:.2f}s" for n, c in sorted(r.thread_cpu.items(), key=lambda x: -x[1])) or "not sampled"


def load(my, changes, batch):
    n_ins = changes * 6 // 10
    n_upd = changes * 3 // 10
    n_del = changes - n_ins - n_upd
    t0 = time.monotonic()
    for lo in range(1, n_ins + 1, batch):
        hi = min(lo + batch - 1, n_ins)
        my.execute(f"INSERT INTO bench.bench_t SELECT seq, seq % 1000, CONCAT('name-', seq), (seq % 100000) / 100.0, "
                   f"NOW(6), seq % 2 = 0 FROM bench.seq_{lo}_to_{hi}")
    for lo in range(1, n_upd + 1, batch):
        hi = min(lo + batch - 1, n_upd)
        my.execute("UPDATE bench.bench_t SET qty = qty + 1, amount = amount + 1, updated_at = NOW(6) "
                   "WHERE id BETWEEN %s AND %s", (lo, hi))
    for hi in range(n_ins, n_ins - n_del, -batch):
        lo = max(hi - batch + 1, n_ins - n_del + 1)
        my.execute("DELETE FROM bench.bench_t WHERE id BETWEEN %s AND %s", (lo, hi))
    return n_ins, n_upd, n_del, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=5000, help="rows per transaction (default 5000)")
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy", "zstandard"))
    ap.add_argument("--compression-threads", type=int, default=1,
                    help="[destination] compression_threads (default 1, the config's default)")
    ap.add_argument("--verify", action="store_true", help="read sluice's output back and count the changes (slow)")
    fair.add_run_args(ap)
    a = ap.parse_args()

    mbl = fair.mariadb_tool("my_drain", "mariadb-binlog")
    if not mbl:
        return 0
    with harness_mysql.MariaDbServer({"max_binlog_size": "1G"}) as my:
        my.execute("CREATE DATABASE bench")
        my.execute(TABLE_DDL)
        runs = []   # one stream per pair, each at the position before the load
        try:
            for i in range(a.pairs):
                runs.append(Sluice(my, stream="bench", tables="bench.bench_t", codec=a.codec, compression_level=1,
                                   max_file_bytes="64MB", max_file_seconds=60, backfill="none",
                                   binary=a.sluice_bin, log_level="warn",
                                   extra={"destination": {"compression_threads": a.compression_threads}}))
                s = runs[-1]
                r0 = s.run("run", "--until-caught-up", timeout=120)   # takes the position before the load
                if r0.rc != 0:
                    print(f"my_drain: sluice failed:\n{r0.describe()}", file=sys.stderr)
                    return 1
                s.binary = fair.wrapped(a.sluice_bin, a.wrap, s.workdir)
            with open(os.path.join(s.state_dir, "bench.checkpoint.json")) as f:
                start = json.load(f)["durable"]
            start_file, start_pos = start.split(" ")[0].rsplit(":", 1)
            n_ins, n_upd, n_del, load_s = load(my, a.changes, a.batch)
            changes = n_ins + n_upd + n_del
            end_file, end_pos = my.master_status()
            size = sum(int(r[1]) for r in my.sql("SHOW BINARY LOGS"))
            print(f"my_drain: loaded {changes} changes ({n_ins} inserts, {n_upd} updates, {n_del} deletes; "
                  f"{a.batch} rows per transaction) in {load_s:.1f}s; {size / 2**20:.0f} MiB of binlog "
                  f"({start_file}:{start_pos} to {end_file}:{end_pos})")

            # mariadb-binlog as sluice connects: TCP to 127.0.0.1, as sluice's
            # restricted user (REPLICATION SLAVE is all a binlog dump needs)
            conn = ["--protocol=TCP", "--host=127.0.0.1", f"--port={my.port}",
                    f"--user={harness_mysql.SLUICE_USER}", f"--password={harness_mysql.SLUICE_PASSWORD}"]
            mb_out = os.path.join(s.workdir, "mariadb-binlog.txt")
            mbs, rs, mb_srv, srv = [], [], [], []
            for i in range(a.pairs):   # A B A B ...: mariadb-binlog, then a fresh sluice at the same position
                srv0 = harness.server_cpu_s(my.pid())
                mb = fair.measured([mbl, "--read-from-remote-server"] + conn + [
                                   "-v", "--base64-output=decode-rows", f"--start-position={start_pos}",
                                   "--to-last-log", start_file], s.workdir, f"mariadb-binlog{i}", a.timeout,
                                   stdout_path=mb_out)
                mb_srv.append(harness.server_cpu_s(my.pid()) - srv0)
                if mb.rc != 0:
                    print(f"my_drain: mariadb-binlog failed:\n{mb.describe()}", file=sys.stderr)
                    return 1
                mbs.append(mb)
                srv0 = harness.server_cpu_s(my.pid())
                r = fair.finish(runs[i].start("run", "--until-caught-up", sample_hwm=True), a.timeout)
                srv.append(harness.server_cpu_s(my.pid()) - srv0)
                if r.rc != 0:
                    print(f"my_drain: sluice failed:\n{r.describe()}", file=sys.stderr)
                    return 1
                rs.append(r)
            # the server's dump rate alone: the same binlog copied raw, no decoding
            raw_dir = os.path.join(s.workdir, "raw")
            os.mkdir(raw_dir)
            raw = fair.measured([mbl, "--read-from-remote-server"] + conn + [
                                 "--raw", f"--result-file={raw_dir}/", f"--start-position={start_pos}",
                                 "--to-last-log", start_file], s.workdir, "mariadb-binlog-raw", a.timeout)
            s = runs[-1]
            out_bytes = nfiles = 0
            for d, _, files in os.walk(s.out):
                for f in files:
                    if f.endswith(".avro"):
                        nfiles += 1
                        out_bytes += os.path.getsize(os.path.join(d, f))
            print(f"both over TCP to 127.0.0.1 as {harness_mysql.SLUICE_USER!r}; whole processes (sluice from "
                  f"start to exit, start-up and fsyncs included); {a.pairs} pairs, alternated")
            fair.report("mariadb-binlog", mbs, changes)
            fair.report("sluice", rs, changes)
            print(f"  ({os.path.getsize(mb_out) / 2**20:.0f} MiB of text from mariadb-binlog; {nfiles} files, "
                  f"{out_bytes / 2**20:.0f} MiB of Avro from sluice, codec {a.codec}, "
                  f"compression_threads {a.compression_threads})")
            fair.ratio("sluice/mariadb-binlog", rs, mbs)
            print(f"the server's CPU (mariadbd, sending the binlog): {fair.mmm(srv)} s with sluice, "
                  f"{fair.mmm(mb_srv)} s with mariadb-binlog")
            # What the CPUs allow: the server's work plus sluice's, spread
            # perfectly over every CPU, is the shortest the drain can take.
            ncpu = os.cpu_count() or 1
            mb_wall = statistics.median(x.wall_s for x in mbs)
            floor_s = (statistics.median(srv) + statistics.median(x.cpu_s for x in rs)) / ncpu
            need_us = (ncpu * mb_wall / 2 - statistics.median(srv)) / changes * 1e6
            print(f"CPU bound (medians): on {ncpu} CPUs sluice's drain cannot take less than {floor_s:.2f}s "
                  f"({mb_wall / floor_s:.2f}x as fast as mariadb-binlog); 2x needs sluice at "
                  f"{need_us:.2f} CPU-us per change or less")
            if rs[-1].thread_cpu:
                print(f"sluice CPU by thread (last run, sampled every 10 ms): {thread_cpu_text(rs[-1])}")
            if raw.rc == 0:
                print(f"server dump alone (mariadb-binlog --raw, no decoding): {raw.wall_s:.2f}s  "
                      f"{changes / raw.wall_s:10.0f} changes/s  cpu {raw.cpu_s:.2f}s: the floor for any "
                      f"client; sluice takes {statistics.median(x.wall_s for x in rs) / raw.wall_s:.2f}x it "
                      f"(median), mariadb-binlog -v {mb_wall / raw.wall_s:.2f}x")
            else:
                print(f"server dump alone: mariadb-binlog --raw failed:\n{raw.describe()}")
            if a.verify:
                recs = harness.read_avro_tree(s.out, codec=a.codec, keep=_op, workers=2)
                counts = {}
                for op in recs:
                    counts[op] = counts.get(op, 0) + 1
                want = {"INSERT": n_ins, "UPDATE-INSERT": n_upd, "DELETE": n_del}
                print(f"verify: {counts} (want {want})")
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
