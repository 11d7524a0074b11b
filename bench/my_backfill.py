#!/usr/bin/python3
"""
bench/my_backfill.py: how fast sluice backfills a MariaDB table, next to the
`mariadb` client reading the same rows into /dev/null.

A throwaway MariaDB gets the 6-column table of bench/my_drain.py with
600,000 rows by default.  Then, alternated A B A B for --pairs pairs
(default 3), both sides over TCP to 127.0.0.1 as sluice's restricted user,
each a whole process timed alike (bench/fair.py):

  mariadb  --quick --batch --skip-column-names -e "SELECT <the columns>
           FROM bench.bench_t" > /dev/null: the query sluice's snapshot
           runs, read row by row as sluice reads it
  sluice   run --until-caught-up on a new stream (backfill = auto, codec
           deflate level 1 unless --codec): from start to exit, so start-up,
           the connection, the snapshot and the fsyncs are counted

It prints, min/median/max over the pairs, each side's wall time, rows/s,
CPU-us per row, voluntary context switches per 1,000 rows and peak RSS,
and the ratio pair by pair.  --wrap runs sluice under a profiler (e.g.
"valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%%p").  It never
fails on speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/my_backfill.py [--rows N] [--pairs N]
      [--codec null|deflate|snappy|zstandard] [--wrap CMD]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness_mysql  # noqa: E402
from harness import Sluice  # noqa: E402
sys.path.insert(0, HERE)
import fair  # noqa: E402
from my_drain import TABLE_DDL  # noqa: E402

COLUMNS = "`id`, `qty`, `name`, `amount`, `updated_at`, `active`"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--codec", default="deflate", choices=("null", "deflate", "snappy", "zstandard"))
    fair.add_run_args(ap)
    a = ap.parse_args()

    client = fair.mariadb_tool("my_backfill", "mariadb")
    if not client:
        return 0
    with harness_mysql.MariaDbServer() as my:
        my.execute("CREATE DATABASE bench")
        my.execute(TABLE_DDL)
        for lo in range(1, a.rows + 1, 50_000):
            hi = min(lo + 50_000 - 1, a.rows)
            my.execute(f"INSERT INTO bench.bench_t SELECT seq, seq % 1000, CONCAT('name-', seq), "
                       f"(seq % 100000) / 100.0, NOW(6), seq % 2 = 0 FROM bench.seq_{lo}_to_{hi}")
        conn = ["--protocol=TCP", "--host=127.0.0.1", f"--port={my.port}",
                f"--user={harness_mysql.SLUICE_USER}", f"--password={harness_mysql.SLUICE_PASSWORD}"]
        cs, rs = [], []
        for i in range(a.pairs):
            s = Sluice(my, stream=f"bench{i}", tables="bench.bench_t", codec=a.codec, compression_level=1,
                       max_file_bytes="64MB", max_file_seconds=60, binary=a.sluice_bin, log_level="warn")
            c = fair.measured([client] + conn + ["--quick", "--batch", "--skip-column-names", "-e",
                                                 f"SELECT {COLUMNS} FROM `bench`.`bench_t`"],
                              s.workdir, f"mariadb{i}", a.timeout, stdout_path="/dev/null")
            if c.rc != 0:
                print(f"my_backfill: mariadb failed:\n{c.describe()}", file=sys.stderr)
                return 1
            cs.append(c)
            s.binary = fair.wrapped(a.sluice_bin, a.wrap, s.workdir)
            r = fair.finish(s.start("run", "--until-caught-up", sample_hwm=True), a.timeout)
            if r.rc != 0:
                print(f"my_backfill: sluice failed:\n{r.describe()}", file=sys.stderr)
                return 1
            rs.append(r)
        print(f"my_backfill: {a.rows} rows; both over TCP to 127.0.0.1 as {harness_mysql.SLUICE_USER!r}; "
              f"whole processes; {a.pairs} pairs, alternated; codec {a.codec}")
        fair.report("mariadb", cs, a.rows, unit="row")
        fair.report("sluice", rs, a.rows, unit="row")
        fair.ratio("sluice/mariadb", rs, cs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
