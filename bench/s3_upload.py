#!/usr/bin/python3
"""
bench/s3_upload.py: sluice writing the Avro output of 1,000,000 changes to a
local S3 server (s3rver behind tests/integration/s3server/s3server.js), and
curl --aws-sigv4 uploading the very same files to the same server, one
after the other in the same run.

A throwaway PostgreSQL 15 gets a 6-column table and sluice's slot; then
--changes rows are inserted (one change each, in transactions of --batch
rows) and `sluice run --until-caught-up` drains them into the bucket
(codec deflate level 1, part_size 16MB, max_file_bytes --file-bytes).  The
objects sluice wrote are downloaded, and curl PUTs each of them (one
PutObject per file, as `curl --aws-sigv4 aws:amz:us-east-1:s3 -T FILE`),
sequentially, as sluice does.

It prints:
  - sluice end to end: wall time, changes/s, MB/s of Avro written (this
    includes reading and decoding the changes from PostgreSQL);
  - upload throughput of both clients measured the same way, on the
    server: bytes of the data requests (PutObject, UploadPart) divided by
    the time the server spent on them (first byte to answer), and the
    ratio sluice/curl (the goal: at least 0.8);
  - curl's wall time for its uploads;
  - sluice's S3 client alone (bench/s3_put: the destination's own upload
    code, a PUT per file, multipart in 16 MB parts above that) uploading the
    same files after curl, with no pipeline running, the fair comparison
    of the two clients (during the end-to-end run the uploads share the CPU
    with PostgreSQL's decoding and sluice's encoding);
  - sluice's peak RSS (VmHWM, sampled; the goal: under 64 MB).
It never fails on speed; it exits non-zero only if something does not work.

  SLUICE_BIN=_build/sluice /usr/bin/python3 bench/s3_upload.py [--changes N] [--batch N] [--file-bytes SIZE]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from harness import PgServer, S3Server, Sluice, s3_available  # noqa: E402

DDL = """
CREATE TABLE bench_s3 (
  id bigint PRIMARY KEY,
  qty int NOT NULL,
  name text NOT NULL,
  price numeric(12,2),
  at timestamptz NOT NULL,
  note text
)"""


S3_PUT = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("SLUICE_BIN", os.path.join(REPO, "_build", "sluice")))),
                      "bench", "s3_put")


def data_requests(reqs, prefix):
    """(bytes, seconds) of the PutObject and UploadPart requests under prefix."""
    nbytes, ms = 0, 0.0
    for method, target, status, t, size in reqs:
        if method == "PUT" and target.startswith(prefix) and target.split("?")[0].endswith(".avro") \
                and status.startswith("2"):
            nbytes += size
            ms += t
    return nbytes, ms / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changes", type=int, default=1000000)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--file-bytes", default="64MB")
    a = ap.parse_args()
    why = s3_available()
    if why:
        sys.exit(f"s3_upload: {why}")

    with PgServer() as pg, S3Server() as s3:
        pg.execute(DDL)
        s = Sluice(pg, stream="bench", tables="public.bench_s3", backfill="none", s3=s3, prefix="sluice",
                   max_file_bytes=a.file_bytes, max_file_seconds=3600)
        try:
            s.catch_up()  # creates the slot: the load below is streamed
            print(f"s3_upload: loading {a.changes} changes in transactions of {a.batch} rows ...", flush=True)
            for lo in range(1, a.changes + 1, a.batch):
                hi = min(a.changes, lo + a.batch - 1)
                pg.execute("INSERT INTO bench_s3 SELECT g, g %% 1000, 'name-' || g, (g %% 100000) / 100.0, "
                           "'2024-01-31 13:45:10+00'::timestamptz + g * interval '1 ms', "
                           "CASE WHEN g %% 3 = 0 THEN NULL ELSE md5(g::text) END "
                           "FROM generate_series(%s, %s) g", (lo, hi))
            pg.wait_wal_flushed()
            t0 = time.monotonic()
            r = s.run("run", "--until-caught-up", timeout=1800, sample_hwm=True)
            wall = time.monotonic() - t0
            if r.rc != 0:
                sys.exit(f"s3_upload: sluice failed:\n{r.describe()}")
            objs = {k: v for k, v in s3.objects("sluice/").items() if k.endswith(".avro")}
            total = sum(objs.values())
            sl_bytes, sl_secs = data_requests(s3.requests(timing=True), "/lake/sluice/")

            # curl uploads the same files, one PutObject each.
            tmp = tempfile.mkdtemp(prefix="s3bench-")
            files = []
            for i, k in enumerate(sorted(objs)):
                p = os.path.join(tmp, f"{i:05d}.avro")
                with open(p, "wb") as f:
                    f.write(s3.get(k))
                files.append((p, k.replace("sluice/", "curl/", 1)))
            t1 = time.monotonic()
            for p, k in files:
                sha = subprocess.run(["sha256sum", p], capture_output=True, text=True, check=True).stdout.split()[0]
                subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "--aws-sigv4", f"aws:amz:{s3.region}:s3",
                                "--user", f"{s3.key_id}:{s3.secret}", "-H", f"x-amz-content-sha256: {sha}",
                                "-T", p, f"{s3.endpoint}/{s3.bucket}/{k}"], check=True)
            curl_wall = time.monotonic() - t1
            cu_bytes, cu_secs = data_requests(s3.requests(timing=True), "/lake/curl/")

            # sluice's S3 client alone (bench/s3_put, the destination's own
            # code: a PUT each, multipart in 16 MB parts above that), on the
            # same files, sequentially, with no pipeline running, as curl
            cl_bytes, cl_secs, cl_wall = 0, 0.0, 0.0
            if os.access(S3_PUT, os.X_OK):
                env = dict(os.environ, S3_KEY_ID=s3.key_id, S3_SECRET=s3.secret)
                t2 = time.monotonic()
                subprocess.run([S3_PUT, s3.endpoint, s3.bucket, s3.region, "client/", str(16 * 1024 * 1024)]
                               + [p for p, _ in files], env=env, check=True, capture_output=True)
                cl_wall = time.monotonic() - t2
                cl_bytes, cl_secs = data_requests(s3.requests(timing=True), "/lake/client/")
            for p, _ in files:
                os.unlink(p)
            os.rmdir(tmp)
        finally:
            s.close()

    mb = 1024 * 1024
    sl_rate = sl_bytes / mb / sl_secs if sl_secs else 0.0
    cu_rate = cu_bytes / mb / cu_secs if cu_secs else 0.0
    print(f"s3_upload: {a.changes} changes -> {len(objs)} objects, {total / mb:.1f} MB of Avro (deflate 1)")
    print(f"s3_upload: sluice end to end (PostgreSQL -> Avro -> S3): {wall:.2f} s, "
          f"{a.changes / wall:,.0f} changes/s, {total / mb / wall:.1f} MB/s")
    print(f"s3_upload: upload throughput on the server: sluice {sl_rate:.1f} MB/s "
          f"({sl_bytes / mb:.1f} MB in {sl_secs:.2f} s of requests), curl {cu_rate:.1f} MB/s "
          f"({cu_bytes / mb:.1f} MB in {cu_secs:.2f} s); sluice/curl = "
          f"{(sl_rate / cu_rate) if cu_rate else 0:.2f} (goal >= 0.8)")
    print(f"s3_upload: curl wall time for its {len(files)} uploads: {curl_wall:.2f} s "
          f"({cu_bytes / mb / curl_wall:.1f} MB/s, one process per file)")
    if cl_secs:
        cl_rate = cl_bytes / mb / cl_secs
        print(f"s3_upload: sluice's S3 client alone (bench/s3_put, same files, no pipeline running): "
              f"{cl_rate:.1f} MB/s on the server ({cl_bytes / mb:.1f} MB in {cl_secs:.2f} s of requests), "
              f"client/curl = {cl_rate / cu_rate if cu_rate else 0:.2f} (goal >= 0.8); wall {cl_wall:.2f} s "
              f"({cl_bytes / mb / cl_wall:.1f} MB/s, one process)")
    else:
        print(f"s3_upload: {S3_PUT} not built: no figure for sluice's client alone")
    print(f"s3_upload: sluice peak RSS {r.hwm_kb / 1024:.1f} MB (VmHWM; goal < 64 MB), "
          f"CPU {r.cpu_s:.2f} s")


if __name__ == "__main__":
    main()
