"""
tests/integration/test_s3.py: the s3 destination against a local S3 server
(s3rver behind tests/integration/s3server/s3server.js, which checks SigV4),
with the bucket read back by an independent client (boto3) and the state
rebuilt from the records compared with the source table:

- backfill and CDC land as objects whose keys are the avro_dir paths under
  the prefix, with a manifest per flush and a schema file per object, and
  `sluice verify` and `sluice check` pass;
- kill -9 in the middle of a multipart upload of a large backfill file: no
  partial object is visible, the next start aborts the stale upload, nothing
  is lost;
- the S3 server killed under load and started again: nothing is acknowledged
  while it is down (backpressure), the outage is logged when it starts,
  every outage_log_interval (1 s here) while it lasts and when it ends, then
  sluice catches up; nothing is lost;
- merge mode: columns added with constant defaults are carried by the
  schema file (.schema.avsc) as the fields' defaults, with no backfill;
- a refused key, a wrong secret and a missing bucket are exit 3 with a clear
  message, and no credential appears in any output;
- `sluice verify` catches a deleted object, a deleted manifest and a
  truncated object;
- the test server (s3server.js) and the HoldingProxy in front of it store
  a PUT's whole body or nothing, as S3 does (S3ServerTest).
"""

import hashlib
import json
import os
import re
import socket
import threading
import unittest

import harness
from ch_harness import HoldingProxy
from harness import PgTestCase, WithS3, change_type, records_for, state_diff, wait_until
from oracle import mirror, resolve_check, resolved_state
from test_pg_changes import assert_silent_ddl_logged, silent_ddl_run, silent_ddl_setup

CANARY = "canary-s3-Wq8-secret-d41e"


def make_table(pg, name, rows, pad=0):
    pg.execute(f"DROP TABLE IF EXISTS {name}")
    pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text, counter int NOT NULL DEFAULT 0)")
    if rows:
        pg.execute(f"INSERT INTO {name} SELECT g, repeat(md5(g::text), %s) || g, 0 "
                   f"FROM generate_series(1, %s) g", (max(1, pad // 32), rows))


def churn(pg, name, base, n):
    """n transactions: inserts from base, updates (+1 on counter), deletes."""
    for i in range(n):
        pg.execute(f"INSERT INTO {name} (id, v) VALUES (%s, 'new')", (base + i,))
        pg.execute(f"UPDATE {name} SET counter = counter + 1, v = v || '+' WHERE id = %s", (base + i // 2,))
        if i % 5 == 4:
            pg.execute(f"DELETE FROM {name} WHERE id = %s", (base + i - 3,))


class S3TestCase(WithS3, PgTestCase):

    def s3sluice(self, **kw):
        kw.setdefault("s3", self.s3)
        kw.setdefault("prefix", "cdc/" + kw.get("stream", "s1"))
        return self.sluice(**kw)

    def data_keys(self, s):
        """{key: size} of the stream's data objects."""
        pre = f"{s.prefix}/{s.stream}/"
        return {k: v for k, v in self.s3.objects(pre).items()
                if k.endswith(".avro") and "/_manifests/" not in k}

    def manifests(self, s):
        pre = f"{s.prefix}/{s.stream}/_manifests/"
        out = []
        for k in sorted(self.s3.objects(pre)):
            if re.search(r"/\.\d{10}\.json$", k):
                out.append(json.loads(self.s3.get(k)))
        return out

    def verify(self, s):
        return s.run("verify", "--stream", s.stream)


class S3FlowTest(S3TestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    @harness.tag("quick")
    def test_backfill_and_cdc(self):
        pg, s3 = self.pg, self.s3
        make_table(pg, "flow", 3000)
        s = self.s3sluice(stream="flow", tables="public.flow", max_file_seconds=1)
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn('bucket "lake" at ' + s3.endpoint, r.stdout)
        self.assertRegex(r.stdout, r"wrote and deleted cdc/flow/flow/\.sluice-check-[0-9a-f]{8}")
        self.assertFalse([k for k in s3.objects("cdc/flow/") if "sluice-check" in k],
                         "check leaves its probe object behind")
        self.catch_up(s)
        churn(pg, "flow", 10000, 60)
        self.catch_up(s)
        churn(pg, "flow", 20000, 40)
        self.catch_up(s)

        recs = records_for(s.read(self), "public", "flow")
        self.assertTableMatches(recs, "public", "flow", ["id"])
        self.assertNoCounterGaps(recs, "public", "flow", ["id"])
        # The keys are exactly the avro_dir paths below the prefix.
        keys = self.data_keys(s)
        self.assertTrue(keys)
        for k in keys:
            self.assertRegex(k, r"^cdc/flow/flow/public_flow/\d{4}/\d{2}/\d{2}/\d{2}/\d{2}/"
                                r"[0-9A-F]{16}-\d{10}_[0-9A-F]{16}-\d{10}_[0-9a-f]{8}\.avro$")
        # Every object is in exactly one manifest, as it is; the manifests chain.
        mans = self.manifests(s)
        listed = {}
        prev = None
        for m in mans:
            self.assertEqual(m["stream"], "flow")
            if prev is None:
                self.assertIsNone(m["from"])
                self.assertIsNone(m["previous"])
            else:
                self.assertEqual(m["from"], prev["to"])
                self.assertEqual(m["previous"], f"flow/_manifests/.{prev['sequence']:010d}.json")
                self.assertEqual(m["sequence"], prev["sequence"] + 1)
            for f in m["files"]:
                self.assertNotIn(f["path"], listed)
                listed[f["path"]] = f
            prev = m
        self.assertEqual(sorted("cdc/flow/" + p for p in listed), sorted(keys))
        for p, f in listed.items():
            self.assertEqual(f["bytes"], keys["cdc/flow/" + p])
        self.assertEqual(sum(f["records"] for f in listed.values()), len(recs))
        # The last manifest ends at the slot's confirmed position or before it.
        slot = pg.slot_info(s.slot)
        self.assertLessEqual(int(prev["to"]["csn"], 16), slot["confirmed_flush_lsn"])
        # The schema file is the newest file's schema.
        newest = max(keys, key=lambda k: k.rsplit("/", 1)[1])
        data = s3.get(newest)
        schema = s3.get("cdc/flow/flow/public_flow/.schema.avsc")
        self.assertIn(schema, data[:len(schema) + 64])
        r = self.verify(s)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertRegex(r.stdout, rf"stream flow: {len(mans)} manifests, {len(keys)} files, {len(recs)} records "
                                r"in bucket \"lake\".*: complete, nothing missing, nothing twice")

    def test_constant_default_merge(self):
        """Merge mode: columns added with constant defaults (many types, a
        NOT NULL one, a later SET DEFAULT) are not backfilled again: the
        object's .schema.avsc carries each as its field's default, and a
        reader that reads the current files with it as the reader schema
        has the source's rows; a volatile default is backfilled again."""
        pg = self.pg
        kinds = ("dc", "dv")
        names = silent_ddl_setup(pg, "s3_", kinds=kinds)
        s = self.s3sluice(stream="s3d", tables=", ".join(f"public.{t}" for t in names), write_mode="merge")
        self.catch_up(s)
        silent_ddl_run(pg, "s3_", kinds=kinds)
        r = self.catch_up(s)
        assert_silent_ddl_logged(self, "s3_", r.stderr, kinds=kinds, carried=("dc",))
        for compacted in (False, True):
            if compacted:
                # a base keeps one file per schema version: the old rows still read the default
                r = s.run("compact", "--stream", "s3d")
                self.assertEqual(r.rc, 0, r.describe())
            tree = s.output_tree()
            for t in names:
                got, _files = mirror(tree, "s3d", f"public_{t}", ["id"])
                state = resolved_state({k: p for k, (p, _u) in got.items()}, tree, "s3d", "public", t)
                self.assertEqual(state_diff(pg, "public", t, ["id"], state), [], (t, compacted))
            # the five backfill rows and the insert, each resolved to the newest schema
            self.assertEqual(resolve_check(tree, "s3d", "public_s3_dc"), 6)

    def test_verify_catches_damage(self):
        pg, s3 = self.pg, self.s3
        make_table(pg, "dmg", 500)
        s = self.s3sluice(stream="dmg", tables="public.dmg", max_file_seconds=1)
        self.catch_up(s)
        for k in range(3):
            churn(pg, "dmg", 1000 * (k + 1), 20)
            self.catch_up(s)
        r = self.verify(s)
        self.assertEqual(r.rc, 0, r.describe())
        keys = sorted(self.data_keys(s))
        self.assertGreaterEqual(len(keys), 4)
        c = s3.client()
        # a deleted object
        c.delete_object(Bucket="lake", Key=keys[1])
        r = self.verify(s)
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn(f"problem: {keys[1][len('cdc/dmg/'):]} is missing (listed by manifest ", r.stdout)
        self.assertIn("PROBLEMS FOUND", r.stdout)
        # a truncated object
        body = s3.get(keys[2])
        c.put_object(Bucket="lake", Key=keys[2], Body=body[:len(body) // 2])
        r = self.verify(s)
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn(f"problem: {keys[2][len('cdc/dmg/'):]} has {len(body) // 2} bytes, its manifest says "
                      f"{len(body)}", r.stdout)
        # a deleted manifest
        c.delete_object(Bucket="lake", Key="cdc/dmg/dmg/_manifests/.0000000002.json")
        r = self.verify(s)
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("problem: manifest 2 is missing (the chain goes from 1 to 3)", r.stdout)
        self.assertIn("are in no manifest (a gap before dmg/_manifests/.0000000003.json)", r.stdout)


class S3ServerTest(WithS3, unittest.TestCase):
    """The test server itself (s3server.js) and the HoldingProxy in front
    of it keep S3's rule that a PUT stores its whole body or nothing: a
    client killed in the middle of its body left an empty object before
    (s3rver kept the bytes that came, and the proxy forwarded the short body
    as a whole request), which the property harness's copy of the bucket
    then read ('Read 0 bytes, expected 4 bytes', soak seed 4205,
    mariadb/merge/s3)."""

    def signed_put(self, endpoint, key, body):
        """The raw bytes of a PutObject of body to key at endpoint, signed
        (SigV4, the payload's SHA-256 in x-amz-content-sha256)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        rq = AWSRequest(method="PUT", url=f"{endpoint}/{self.s3.bucket}/{key}", data=body)
        rq.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        SigV4Auth(Credentials(self.s3.key_id, self.s3.secret), "s3", self.s3.region).add_auth(rq)
        head = f"PUT /{self.s3.bucket}/{key} HTTP/1.1\r\nHost: {endpoint[len('http://'):]}\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in rq.headers.items() if k.lower() != "content-length")
        return head.encode() + b"\r\n"

    def send(self, endpoint, raw, cut=None):
        """Sends raw to endpoint, then (cut: after that many bytes) stops
        sending; returns everything answered until the server closed."""
        host, port = endpoint[len("http://"):].split(":")
        with socket.create_connection((host, int(port)), timeout=30) as c:
            c.sendall(raw if cut is None else raw[:cut])
            if cut is not None:
                c.shutdown(socket.SHUT_WR)
            out = b""
            while True:
                x = c.recv(65536)
                if not x:
                    return out
                out += x

    def test_a_put_cut_short_stores_nothing(self):
        proxy = HoldingProxy(self.s3.endpoint)
        self.addCleanup(proxy.close)
        body = os.urandom(3000)
        for via, endpoint in (("server", self.s3.endpoint), ("proxy", proxy.url)):
            for n in (0, 1000):
                with self.subTest(via=via, body_bytes_sent=n):
                    key = f"cut/{via}-{n}.avro"
                    head = self.signed_put(endpoint, key, body)
                    # nothing, or Node's own 400 for a request cut short
                    out = self.send(endpoint, head + body, cut=len(head) + n)
                    self.assertIn(out.split(b"\r\n")[0], (b"", b"HTTP/1.1 400 Bad Request"), out)
                    # a whole PUT after it is stored (the server went on), the cut one never
                    after = f"cut/{via}-{n}-after.avro"
                    self.assertIn(b" 200 OK", self.send(endpoint, self.signed_put(endpoint, after, body) + body))
                    self.assertEqual(self.s3.get(after), body)
                    self.assertNotIn(key, self.s3.objects("cut/"))

    def test_a_body_that_is_not_its_hash_is_refused(self):
        body = os.urandom(3000)
        head = self.signed_put(self.s3.endpoint, "bad/x.avro", body)
        out = self.send(self.s3.endpoint, head + bytes(len(body)))
        self.assertIn(b" 400 ", out.split(b"\r\n")[0])
        self.assertIn(b"<Code>XAmzContentSHA256Mismatch</Code>", out)
        self.assertEqual(self.s3.objects("bad/"), {})


class S3MultipartKillTest(S3TestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass
    # Each part waits 700 ms on the server: time to kill sluice in between.
    s3_kw = {"part_delay_ms": 700}

    def test_kill_mid_multipart(self):
        pg, s3 = self.pg, self.s3
        make_table(pg, "big", 60000, pad=256)   # about 17 MB of Avro without compression
        s = self.s3sluice(stream="big", tables="public.big", codec="null", max_file_seconds=3600,
                          extra={"destination": {"part_size": "5MB"}})
        p = s.start("run")
        # Wait for the first part of the backfill file to be stored, then kill.
        wait_until(lambda: any(m == "PUT" and "partNumber=" in t and st == "200" for m, t, st in s3.requests())
                   or not p.alive(), 120, "a part of the backfill file uploaded")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.kill9()
        stale = s3.uploads("cdc/big/")
        self.assertEqual(len(stale), 1, stale)
        self.assertRegex(stale[0][0], r"^cdc/big/big/public_big/.*\.avro$")
        self.assertEqual(self.data_keys(s), {}, "an object became visible before its upload completed")

        r = self.catch_up(s)
        self.assertIn(f'stream "big": aborted 1 incomplete upload under cdc/big/big/', r.stderr)
        self.assertEqual(s3.uploads("cdc/big/"), [])
        keys = self.data_keys(s)
        self.assertEqual(len(keys), 1)
        self.assertGreater(list(keys.values())[0], 10 << 20)
        # It went up in parts of 5 MB and was completed.
        reqs = s3.requests()
        self.assertTrue(any(m == "POST" and t.endswith("?uploads=") for m, t, st in reqs))
        self.assertTrue(any(m == "POST" and "?uploadId=" in t and st == "200" for m, t, st in reqs))
        recs = records_for(s.read(self), "public", "big")
        # the redone backfill: its TRUNCATE marker, then every row once
        self.assertEqual([change_type(r) for r in recs].count("TRUNCATE"), 1)
        self.assertEqual(len(recs), 60001)
        self.assertTableMatches(recs, "public", "big", ["id"])
        r = self.verify(s)
        self.assertEqual(r.rc, 0, r.describe())


class S3OutageTest(S3TestCase):

    def test_server_down_under_load(self):
        """s3rver killed under load and started again: nothing acknowledged
        while it is down, the outage logged once when it starts, every
        outage_log_interval while it lasts and once when it ends, and the
        data exact afterwards."""
        pg, s3 = self.pg, self.s3
        make_table(pg, "out", 2000)
        s = self.s3sluice(stream="out", tables="public.out", max_file_seconds=1,
                          extra={"agent": {"outage_log_interval": "1"}})
        self.catch_up(s)
        stop = threading.Event()
        errors = []
        started = pg.slot_info(s.slot)["confirmed_flush_lsn"]

        def workload():
            i = 0
            try:
                while not stop.is_set():
                    churn(pg, "out", 100000 + i * 10, 10)
                    i += 1
                    stop.wait(0.05)   # a steady trickle of transactions
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        def outage_for(n):
            """The log has a "still unavailable after N s" line with N >= n."""
            return any(int(m) >= n for m in STILL_RE.findall(p.stderr_text()))

        th = threading.Thread(target=workload, daemon=True)
        p = s.start("run")
        th.start()
        try:
            wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] > started, 60,
                       "the stream to make changes durable")
            s3.stop()                              # killed, as a crash would
            wait_until(lambda: UNAVAILABLE in p.stderr_text(), 60, "the outage's first line")
            wait_until(lambda: outage_for(2), 60, "the outage to last 2 s")
            before = pg.slot_info(s.slot)["confirmed_flush_lsn"]
            wait_until(lambda: outage_for(6), 60, "the outage to last 6 s")
            during = pg.slot_info(s.slot)["confirmed_flush_lsn"]
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            s3.start()
            wait_until(lambda: AVAILABLE in p.stderr_text(), 120, "the outage's last line")
            wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] > during, 60,
                       "the stream to make changes durable again")
        finally:
            stop.set()
            th.join(60)
        self.assertFalse(errors, errors)
        # Nothing was acknowledged while nothing could be made durable.
        self.assertEqual(before, during)
        p.signal(15)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertOutageLogged(r.stderr)
        self.catch_up(s)
        self.assertGreater(pg.slot_info(s.slot)["confirmed_flush_lsn"], during)
        recs = records_for(s.read(self), "public", "out")
        self.assertTableMatches(recs, "public", "out", ["id"])
        self.assertNoCounterGaps(recs, "public", "out", ["id"])
        r = self.verify(s)
        self.assertEqual(r.rc, 0, r.describe())

    def assertOutageLogged(self, log):
        """One start line (a warning with the failed request), at least one
        "still unavailable" line, one end line (info), in that order."""
        lines = log.splitlines()
        first = [i for i, ln in enumerate(lines) if UNAVAILABLE in ln]
        still = [i for i, ln in enumerate(lines) if STILL_RE.search(ln)]
        last = [i for i, ln in enumerate(lines) if AVAILABLE in ln]
        self.assertEqual(len(first), 1, log)
        self.assertEqual(len(last), 1, log)
        self.assertGreaterEqual(len(still), 1, log)
        self.assertTrue(first[0] < still[0] and still[-1] < last[0], log)
        self.assertRegex(lines[first[0]], r' sluice warning: stream "out": destination "out" unavailable: '
                         r'bucket "lake" at http://127\.0\.0\.1:\d+: \w+ \S+: ')
        self.assertRegex(lines[last[0]], r' sluice info: stream "out": destination "out" available again '
                         r'after \d+ s$')
        print("\n  " + "\n  ".join(lines[i] for i in (first[0], still[0], last[0])))


UNAVAILABLE = 'destination "out" unavailable: '
AVAILABLE = 'destination "out" available again after '
STILL_RE = re.compile(r'destination "out" still unavailable after (\d+) s: ')


class S3OperatorErrorTest(S3TestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def assertNoSecrets(self, r, *secrets):
        for text in (r.stdout, r.stderr):
            for sec in secrets:
                self.assertNotIn(sec, text)

    def test_refused_credentials(self):
        make_table(self.pg, "den", 10)
        s = self.s3sluice(stream="den", tables="public.den")
        # A secret that does not match the key.
        env = {"SLUICE_TEST_S3_SECRET": CANARY}
        r = s.run("check", env=env)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("access refused (HTTP 403 SignatureDoesNotMatch", r.stderr)
        self.assertIn("the secret does not match it", r.stderr)
        self.assertNoSecrets(r, CANARY, self.s3.secret)
        r = s.run("run", "--until-caught-up", env=env, timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('bucket "lake" at ' + self.s3.endpoint, r.stderr)
        self.assertIn("access refused (HTTP 403 SignatureDoesNotMatch", r.stderr)
        self.assertNotIn("retrying", r.stderr)
        self.assertNoSecrets(r, CANARY, self.s3.secret)
        # A key the server does not know.
        env = {"SLUICE_TEST_S3_KEY_ID": "AKIDUNKNOWN0000", "SLUICE_TEST_S3_SECRET": CANARY}
        r = s.run("run", "--until-caught-up", env=env, timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("access refused (HTTP 403 InvalidAccessKeyId", r.stderr)
        self.assertIn("it is unknown to the server", r.stderr)
        self.assertNoSecrets(r, CANARY, "AKIDUNKNOWN0000", self.s3.secret)
        # Nothing was written, and the slot confirmed nothing.
        self.assertEqual(self.data_keys(s), {})

    def test_missing_bucket(self):
        make_table(self.pg, "nob", 10)
        s = self.s3sluice(stream="nob", tables="public.nob", extra={"destination": {"bucket": "no-such-bucket"}})
        r = s.run("check")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('bucket "no-such-bucket"', r.stderr)
        self.assertIn("the bucket does not exist (HTTP 404 NoSuchBucket", r.stderr)
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("the bucket does not exist", r.stderr)
        self.assertNoSecrets(r, self.s3.secret)
        r = s.run("verify", "--stream", "nob")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("the bucket does not exist", r.stderr)


if __name__ == "__main__":
    unittest.main()
