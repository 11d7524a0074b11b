#!/usr/bin/python3
"""
bench/pg_big_value.py: sluice's peak memory for one large bytea value.

A throwaway PostgreSQL 15 gets a table (id int primary key, b bytea) with
one row whose bytea is --mb MiB (random bytes, so that no codec shrinks it
and TOAST stores it as it is).  Then sluice run --until-caught-up on a new
stream backfills it, and, on the same stream, a second run streams an
update that writes a new value of the same size.  For each run the script
prints sluice's peak RSS (VmHWM, sampled by the test harness) and its ratio
to the value's size; the goal is at most 2x the value plus 32 MiB (what a
value costs now, and why: doc/operations.md, "Memory for a large value").  The destination is
an avro_dir folder (codec null), or with --dest clickhouse a throwaway
ClickHouse server (tests/integration/ch_harness.py; SLUICE_CH_ENGINE=26 for
ClickHouse 26).

It never fails on memory; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/pg_big_value.py [--mb N] [--dest clickhouse]
"""

import argparse
import contextlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
from harness import PgServer, Sluice  # noqa: E402

# gen_random_bytes needs pgcrypto; md5 of a series, decoded, is random enough
# and needs nothing.
FILL = ("SELECT decode(string_agg(md5(g::text || '%s'), ''), 'hex') "
        "FROM generate_series(1, %s) g")


def report(what, r, mb):
    value = mb * 2**20
    hwm = r.hwm_kb * 1024
    goal = 2 * value + 32 * 2**20
    print(f"{what:10s} peak RSS {hwm / 2**20:8.1f} MiB = {hwm / value:4.2f}x the value "
          f"(goal <= {goal / 2**20:.0f} MiB); wall {r.wall_s:.1f}s, CPU {r.cpu_s:.1f}s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=300, help="the value's size in MiB")
    ap.add_argument("--sluice-bin", default=harness.sluice_bin())
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--dest", choices=("avro_dir", "clickhouse"), default="avro_dir")
    a = ap.parse_args()
    a.sluice_bin = os.path.abspath(a.sluice_bin)

    reason = harness.pg_available()
    if reason:
        print(f"pg_big_value: skipped: {reason}")
        return 0
    if not os.access(a.sluice_bin, os.X_OK):
        print(f"pg_big_value: no sluice binary at {a.sluice_bin} (set SLUICE_BIN)", file=sys.stderr)
        return 2
    if a.dest == "clickhouse":
        import ch_harness  # noqa: E402
        reason = ch_harness.clickhouse_available()
        if reason:
            print(f"pg_big_value: skipped: {reason}")
            return 0
    chunks = a.mb * 2**20 // 16   # md5 gives 16 bytes
    with PgServer() as pg, contextlib.ExitStack() as stack:
        pg.execute("CREATE TABLE big (id int PRIMARY KEY, b bytea)")
        pg.execute("ALTER TABLE big ALTER COLUMN b SET STORAGE EXTERNAL")
        pg.execute(f"INSERT INTO big SELECT 1, ({FILL % ('a', chunks)})")
        env = None
        extra = None
        if a.dest == "clickhouse":
            ch = ch_harness.new_clickhouse_server()
            stack.callback(ch.close)
            ch.start()
            env = {"SLUICE_TEST_CH_PASSWORD": ch_harness.CH_PASSWORD}
            extra = {"destination": {"type": "clickhouse", "path": None, "codec": None,
                                     "compression_level": None, "max_file_bytes": None,
                                     "max_file_seconds": None, "url": ch.url, "database": "replica",
                                     "user": "sluice", "password_env": "SLUICE_TEST_CH_PASSWORD"}}
        s = Sluice(pg, stream="big", tables="public.big", binary=a.sluice_bin, codec="null",
                   max_file_bytes="1GB", extra=extra)
        try:
            r = s.run("run", "--until-caught-up", timeout=a.timeout, env=env, sample_hwm=True)
            if r.rc != 0:
                print(f"pg_big_value: the backfill failed:\n{r.describe()}", file=sys.stderr)
                return 1
            report("backfill", r, a.mb)
            pg.execute(f"UPDATE big SET b = ({FILL % ('b', chunks)}) WHERE id = 1")
            r = s.run("run", "--until-caught-up", timeout=a.timeout, env=env, sample_hwm=True)
            if r.rc != 0:
                print(f"pg_big_value: streaming the update failed:\n{r.describe()}", file=sys.stderr)
                return 1
            report("streaming", r, a.mb)
        finally:
            s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
