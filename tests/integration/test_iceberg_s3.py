"""
tests/integration/test_iceberg_s3.py: the iceberg destination in an S3
bucket (the local S3 server, s3rver), read back by ClickHouse 26.7 (npm chdb)
with icebergS3(url, access_key_id, secret_access_key), and by python3-avro
for the manifest lists and manifests (downloaded with boto3).  The tests of
test_iceberg.py that matter for a bucket run again against it:

- PostgreSQL, append mode: backfill, random inserts, updates, deletes and key
  changes (rebuilt by _csn per key, equal to the source), then a TRUNCATE;
  kill -9 right after a commit, before its checkpoint (no change committed
  twice); a column added mid-stream (a new schema, read by ClickHouse);
- PostgreSQL, merge mode: random changes, a TRUNCATE, kill -9 after a commit
  and at random points; the TOAST rule, which reads committed data files back
  from the bucket;
- MariaDB, append and merge mode, with a TRUNCATE; kill -9 after a commit,
  before its checkpoint, and at random points (test_iceberg.MyIcebergTest's
  test_kill_*); sluice compact beside two running agents, against a server
  that honours If-None-Match: * (MyIcebergS3MaintTest);
- the commit rule: s3rver ignores If-None-Match on a PUT (shown here with
  boto3), and against a server that honours it (AWS S3, or s3server.js with
  --conditional-put) a metadata file that another writer committed first
  stops the stream instead of being replaced;
- sluice verify (a good table in both modes, a data file missing, a
  manifest's wrong record count, a snapshot missing from the chain) and
  sluice compact of a merge table (the compaction losing the race for a
  metadata version to the agent's commit included), against that server;
- orphan objects removed by their LastModified once older than
  orphan_grace, and incomplete multipart uploads under data/ begun before
  it aborted (s3server.js reports an upload's Initiated).

Skips, saying why, without node, chdb or s3rver.
"""

import json
import os
import shutil
import tempfile
import unittest

import botocore.exceptions

import harness
import test_iceberg
from harness import PgTestCase, WithS3
from test_iceberg import ch_query, churn, fill, pg_state, rebuild


def put_if_none_match(s3, key, body):
    """PutObject with If-None-Match: * (Debian's botocore has no IfNoneMatch
    parameter: the header is added before the request is signed)."""
    def add(request, **_kw):
        request.headers["If-None-Match"] = "*"
    c = s3.client()
    c.meta.events.register_first("before-sign.s3.PutObject", add)
    try:
        c.put_object(Bucket=s3.bucket, Key=key, Body=body)
    finally:
        c.meta.events.unregister("before-sign.s3.PutObject", add)


class S3Tables(test_iceberg.LocalTables):
    """The tables in the class's bucket (WithS3), under the prefix
    "wh/<stream>", read with icebergS3."""

    def isluice(self, stream, tables, **kw):
        s = self.sluice(stream=stream, tables=tables, max_file_seconds=1, s3=self.s3, prefix=f"wh/{stream}", **kw)
        s.extra.setdefault("destination", {}).update(type="iceberg")
        s.write_config()
        return s

    def table_dir(self, s, obj):
        return f"s3://{self.s3.bucket}/{s.prefix}/{s.stream}/{obj}"

    def table_fn(self, s, obj):
        return (f"icebergS3('{self.s3.endpoint}/{self.s3.bucket}/{s.prefix}/{s.stream}/{obj}/', "
                f"'{self.s3.key_id}', '{self.s3.secret}')")

    def key_of(self, location):
        root = f"s3://{self.s3.bucket}/"
        self.assertTrue(location.startswith(root), location)
        return location[len(root):]

    def local_file(self, location):
        d = getattr(self, "_downloads", None)
        if d is None:
            d = self._downloads = tempfile.mkdtemp(prefix="sluice-ice-s3-")
            self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, self.key_of(location).replace("/", "_"))
        with open(path, "wb") as f:
            f.write(self.s3.get(self.key_of(location)))
        return path

    def file_size(self, location):
        return self.s3.client().head_object(Bucket=self.s3.bucket, Key=self.key_of(location))["ContentLength"]

    def plant(self, location, body):
        self.s3.client().put_object(Bucket=self.s3.bucket, Key=self.key_of(location), Body=body)

    def read_text(self, location):
        try:
            return self.s3.get(self.key_of(location)).decode()
        except self.s3.client().exceptions.NoSuchKey:
            return None

    store_words = "in bucket"

    def take(self, location):
        body = self.s3.get(self.key_of(location))
        self.s3.client().delete_object(Bucket=self.s3.bucket, Key=self.key_of(location))
        return body


class IcebergS3Test(S3Tables, WithS3, test_iceberg.IcebergTest):
    """PostgreSQL into Iceberg tables in a bucket."""

    # run again against the bucket: test_kill_after_commit_before_checkpoint,
    # test_added_column_and_dropped_column, test_merge_changes_truncate_kill,
    # test_merge_unchanged_toast; the others test nothing a bucket changes
    test_changes_read_by_clickhouse = None
    test_stats_exact_filters = None
    test_merge_stats_exact_filters = None
    test_column_added_with_default = None
    test_merge_without_key_refused = None
    test_metadata_never_replaced = None     # s3rver replaces: IcebergS3ConditionalTest
    # maintenance in a bucket: IcebergS3MaintTest; the other compaction
    # tests exercise nothing the store changes
    test_verify = None
    test_compact_merge = None
    test_compact_append = None
    test_compact_added_column = None
    test_compact_beside_agent = None
    test_compact_sequence_numbers = None
    test_compact_automatic = None
    test_expire_and_orphans = None
    # widening in a bucket: test_widen_merge (its compaction included)
    test_widen_append = None
    test_old_metadata_removed = None

    def test_append_changes_truncate(self):
        """Append mode: backfill and random changes read by ClickHouse from
        the bucket, the metadata as the spec has it; then a TRUNCATE and more
        changes: the rows rebuilt by _csn (a TRUNCATE clearing what came
        before it) equal the source's."""
        pg = self.pg
        s = self.backfilled("ices3a", "ices3a", 200)
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'bucket "{self.s3.bucket}" at {self.s3.endpoint}', r.stdout)
        changes = 200 + churn(pg, "ices3a", 10000, 25)
        self.catch_up(s)
        obj = "public_ices3a"
        rows = self.read_table(s, obj)
        self.assertEqual(test_iceberg.rebuild(rows), pg_state(pg, "ices3a"))
        self.assertEqual(len(rows), changes)
        self.assertEqual(len({r["_uuid"] for r in rows}), changes)
        self.check_metadata(s, obj, changes)
        pg.execute("TRUNCATE ices3a")
        fill(pg, "ices3a", 1, 30)
        churn(pg, "ices3a", 20000, 10)
        self.catch_up(s)
        rows = ch_query(test_iceberg.SELECT.format(src=self.table_fn(s, obj)))
        last = {}
        for r in sorted(rows, key=lambda r: r["_csn"]):
            if r["_change_type"] == "TRUNCATE":
                last = {}
            else:
                last[r["id"]] = r
        self.assertEqual(test_iceberg.rebuild([r for r in last.values()]), pg_state(pg, "ices3a"))
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows))

    def test_put_if_none_match_ignored_by_s3rver(self):
        """What the commit rule rests on, shown: s3rver answers a PutObject
        with If-None-Match: * over an existing key with 200 and replaces it
        (AWS S3 answers 412), so on s3rver only the stream's lock keeps
        sluice the only writer of a table (doc/iceberg.md)."""
        c = self.s3.client()
        c.put_object(Bucket=self.s3.bucket, Key="inm/probe", Body=b"first")
        put_if_none_match(self.s3, "inm/probe", b"second")
        self.assertEqual(self.s3.get("inm/probe"), b"second")


class IcebergS3ConditionalTest(S3Tables, WithS3, PgTestCase):
    """Against a server that honours If-None-Match: * (as AWS S3 does)."""
    s3_kw = {"conditional_put": True}

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(test_iceberg.chdb_reason())
        super().setUpClass()

    def test_server_answers_412(self):
        """s3server.js with --conditional-put answers as AWS S3 does."""
        c = self.s3.client()
        c.put_object(Bucket=self.s3.bucket, Key="inm/probe", Body=b"first")
        with self.assertRaises(botocore.exceptions.ClientError) as cm:
            put_if_none_match(self.s3, "inm/probe", b"second")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 412)
        self.assertEqual(self.s3.get("inm/probe"), b"first")

    # the commit rule, as in a folder: exit 3, the other writer's file kept
    test_metadata_never_replaced = test_iceberg.IcebergTest.test_metadata_never_replaced


class IcebergS3MaintTest(S3Tables, WithS3, test_iceberg.IcebergTest):
    """sluice verify and sluice compact of tables in a bucket, against a
    server that honours If-None-Match: * (a compaction that loses the race
    for a metadata version must not replace the agent's, as on s3rver):
    IcebergTest's test_verify and test_compact_merge, and no other; orphan
    objects and incomplete uploads removed by their age in the bucket."""
    s3_kw = {"conditional_put": True}

    def test_orphans_and_uploads_in_bucket(self):
        """sluice compact in a bucket goes by the objects' LastModified and
        the uploads' Initiated: unreferenced objects older than orphan_grace
        go, a younger one stays, every file a snapshot names stays; an
        incomplete multipart upload under data/ begun before the grace is
        aborted, a younger one is left to its writer; ClickHouse reads the
        table equal to the source."""
        pg = self.pg
        s = self.churned("icexs", 60, 3, 3)
        obj = "public_icexs"
        base = f"{s.prefix}/{s.stream}/{obj}"
        before = self.read_table(s, obj)
        self.assertEqual(rebuild(before), pg_state(pg, "icexs"))
        old = [f"{base}/data/old-orphan.avro", f"{base}/metadata/old-orphan-m0.avro"]
        young = [f"{base}/data/young-orphan.avro"]
        c = self.s3.client()
        for k in old + young:
            c.put_object(Bucket=self.s3.bucket, Key=k, Body=b"Obj\x01")
        for k in old:
            self.s3.age(k, 7200)
        ups = {}
        for name in ("old-upload", "young-upload"):
            k = f"{base}/data/{name}.avro"
            uid = c.create_multipart_upload(Bucket=self.s3.bucket, Key=k)["UploadId"]
            c.upload_part(Bucket=self.s3.bucket, Key=k, UploadId=uid, PartNumber=1, Body=b"x" * 1024)
            ups[name] = (k, uid)
        self.s3.age_upload(ups["old-upload"][1], 7200)
        self.assertEqual(sorted(self.s3.uploads(base)), sorted(ups.values()))
        s.extra["destination"].update(orphan_grace="1h")
        s.write_config()
        out = self.compact(s, f"stream icexs: {obj}: ")
        self.assertIn("; 2 unreferenced files removed, ", out)
        self.assertIn("; 1 incomplete uploads aborted\n", out)
        self.assertEqual(self.s3.uploads(base), [ups["young-upload"]])
        objects = self.s3.objects(base + "/")
        for k in old:
            self.assertNotIn(k, objects)
        for k in young:
            self.assertIn(k, objects)
        _, meta = self.current_metadata(s, obj)
        for sn in meta["snapshots"]:
            self.assertIn(self.key_of(sn["manifest-list"]), objects)
            for m in self.read_avro_at(sn["manifest-list"])[1]:
                self.assertIn(self.key_of(m["manifest_path"]), objects)
                for e in self.read_avro_at(m["manifest_path"])[1]:
                    self.assertIn(self.key_of(e["data_file"]["file_path"]), objects)
        after = self.read_table(s, obj)
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in after),
                         sorted(json.dumps(r, sort_keys=True) for r in before))
        self.assertEqual(rebuild(after), pg_state(pg, "icexs"))
        self.verify(s, 0)


for _name in dir(test_iceberg.IcebergTest):
    if _name.startswith("test_") and _name not in ("test_verify", "test_compact_merge"):
        setattr(IcebergS3MaintTest, _name, None)


class MyIcebergS3Test(S3Tables, WithS3, test_iceberg.MyIcebergTest):
    """MariaDB into Iceberg tables in a bucket, append and merge mode, with
    kill -9 after a commit and at random points."""

    # widening: IcebergS3Test.test_widen_merge
    test_widen_merge = None
    test_widen_append = None
    # beside a running agent, a compaction needs a server that honours
    # If-None-Match: * (doc/iceberg.md): MyIcebergS3MaintTest
    test_compact_beside_agent = None


class MyIcebergS3MaintTest(S3Tables, WithS3, test_iceberg.MyIcebergTest):
    """MariaDB: sluice compact beside two running agents (append and merge)
    in a bucket of a server that honours If-None-Match: *, and no other test."""
    s3_kw = {"conditional_put": True}


for _name in dir(test_iceberg.MyIcebergTest):
    if _name.startswith("test_") and _name != "test_compact_beside_agent":
        setattr(MyIcebergS3MaintTest, _name, None)


if __name__ == "__main__":
    unittest.main()
