"""
tests/integration/test_iceberg.py: the iceberg destination (append mode into
a local warehouse folder), read back by independent readers: the ClickHouse
26.7 engine (npm chdb, run through node) with icebergLocal(), and Debian's
python3-avro for the manifest lists and manifests:

- backfill, then inserts, updates, deletes and key changes: the rows rebuilt
  from the table by _csn per key (the latest change of each key that is not
  a delete) equal the source table, and the table holds one row per change;
- every manifest list and manifest has the spec's required fields, and each
  snapshot's summary carries the stream and its position;
- kill -9 right after a commit, before the checkpoint: the rerun commits
  nothing twice (no duplicate _uuid);
- a column added mid-stream is a new schema with a new field id, readable;
  a dropped column leaves the current schema (its id is never given
  again: added again under its name, it is a new field), the snapshots
  before it read as they were, and a compaction keeps every row;
- column statistics in the manifests, in both modes: a ClickHouse filter on
  each value of each column finds every row (ClickHouse skips files by their
  bounds), and python3-avro reads value and null counts and bounds that match
  each data file's and equality delete file's records.
- sluice verify: a good table passes in both modes (also a stream of two
  tables with any number of files beside them); a deleted data file, a
  manifest that claims a wrong record count and a snapshot missing from the
  chain are each reported, naming the file.
- sluice compact: an append table's small files and a merge table's files
  with its equality deletes applied are rewritten into one, as a replace
  snapshot, with the same rows before and after (ClickHouse reads them);
  beside running agents that keep writing, both tables end exact (from
  PostgreSQL and MariaDB); the agent compacts on its own after
  compact_after_files commits; a compaction's manifests carry the sequence
  numbers of the specification (python3-avro), also when it lost the race
  to the agent's commit.
- MariaDB, both modes: kill -9 right after a commit, before its checkpoint,
  and at random points: nothing committed twice, the source's rows.
- snapshot expiry keeps the newest snapshot_keep; unreferenced files older
  than orphan_grace go, younger ones stay.
- MariaDB, both modes: a column added and a column dropped with no change
  of the table after them become the current schema at once, with no new
  snapshot, while the agent runs and in a run started after the statement;
  kill -9 right after that commit: the rerun commits nothing more and makes
  no second schema; ClickHouse reads the source's columns and rows.
- widening in place (int to long, float to double, a decimal's precision
  raised), from PostgreSQL and MariaDB, both modes: a new schema with the
  same field ids; old and new files read exactly, also after a compaction
  and through merge mode's lookup of unchanged values; any other change of
  type stops the stream with exit 3.
- merge mode, records below a marker (IcebergMarkerTest): a partition
  detached while sluice is stopped, its rows updated through the root
  before, and the root backfilled again behind another table's backfill
  while the stream replays that update: the root's table holds no row of
  the detached partition; an initial backfill whose commit outran its
  checkpoint (kill -9), done again, resumed after a durable chunk, or
  started over for a partition detached since, with rows deleted
  meanwhile: the table holds none of the rows gone from the source.

Skips, saying why, when node or chdb (tests/integration/ch26/node_modules)
is missing.
"""

import datetime
import decimal
import io
import json
import os
import shutil
import random
import signal
import subprocess
import sys
import unittest
import uuid

import harness
from harness import PgTestCase
from harness_mysql import MyTestCase
from test_my_defaults import watermark_table

CH26_MODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ch26", "node_modules")

# node: runs one query with chdb (a stateless session) and prints JSONEachRow.
QUERY_JS = ("const { query } = require(process.argv[1]);"
            "try { process.stdout.write(query(process.argv[2], 'JSONEachRow')); }"
            "catch (e) { process.stderr.write(String(e)); process.exitCode = 1; }")


def chdb_reason():
    if not shutil.which("node"):
        return "node is not installed"
    if not os.path.isdir(os.path.join(CH26_MODULES, "chdb")):
        return f"chdb is not installed in {CH26_MODULES}"
    return None


def ch_query(sql):
    r = subprocess.run(["node", "-e", QUERY_JS, os.path.join(CH26_MODULES, "chdb"), sql],
                       capture_output=True, text=True, timeout=300, cwd="/")
    if r.returncode != 0:
        raise AssertionError(f"chdb failed: {r.stderr}\nquery: {sql}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def read_avro(path):
    """(header metadata {key: str}, records) of an Avro container file."""
    import avro.datafile
    import avro.io
    import warnings
    # the manifests' maps of int keys are arrays with logicalType "map" (the spec's)
    warnings.filterwarnings("ignore", message="Unknown map")
    with open(path, "rb") as f:
        rd = avro.datafile.DataFileReader(f, avro.io.DatumReader())
        meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in rd.meta.items()}
        recs = list(rd)
        rd.close()
    return meta, recs


TABLE = ("CREATE TABLE {name} (id int PRIMARY KEY, v text, amount numeric(12,2), ts timestamptz, "
         "d date, u uuid, b bytea, j jsonb, flag bool, counter bigint NOT NULL DEFAULT 0, _hidden int)")


def fill(pg, name, lo, hi):
    pg.execute(f"INSERT INTO {name} (id, v, amount, ts, d, u, b, j, flag, _hidden) "
               f"SELECT g, 'row ' || g, g * 1.25 - 100, timestamptz '2024-03-01 12:00:00+00' + g * interval '1 "
               f"minute 1.5 second', date '2024-01-01' + g, md5(g::text)::uuid, "
               f"decode(md5(g::text), 'hex'), jsonb_build_object('g', g), g %% 2 = 0, -g "
               f"FROM generate_series(%s, %s) g", (lo, hi))


def churn(pg, name, base, n):
    """Inserts, updates, deletes and key changes, one transaction each;
    returns the number of change records they make (a key change is two)."""
    changes = 0
    for i in range(n):
        changes += pg.execute(f"INSERT INTO {name} (id, v, amount) VALUES (%s, 'new', 1.5)", (base + i,))
        changes += pg.execute(f"UPDATE {name} SET counter = counter + 1, v = v || '+', ts = now(), "
                              f"amount = -amount WHERE id = %s", (i + 1,))
        if i % 4 == 3:
            changes += pg.execute(f"DELETE FROM {name} WHERE id = %s", (base + i - 2,))
        if i % 7 == 6:
            changes += 2 * pg.execute(f"UPDATE {name} SET id = id + 1000000 WHERE id = %s", (base + i - 1,))
    return changes


SELECT = ("SELECT id, v, toString(amount) AS amount, "
          "formatDateTime(ts, '%Y-%m-%d %H:%i:%S.%f', 'UTC') AS ts, toString(d) AS d, toString(u) AS u, "
          "lower(hex(b)) AS b, j, flag, counter, __hidden, _uuid, _csn, _change_type, _is_deleted, "
          "_source_timestamp, _tx_id, _lsn FROM {src} ")


def pg_state(pg, name):
    rows = pg.sql(f"SELECT id, v, amount::text, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), "
                  f"d::text, u::text, encode(b, 'hex'), j::text, flag, counter, _hidden FROM {name}")
    out = {}
    for r in rows:
        out[r[0]] = (r[1], None if r[2] is None else str(decimal.Decimal(r[2]).normalize()), r[3], r[4], r[5],
                     r[6], None if r[7] is None else json.loads(r[7]), r[8], r[9], r[10])
    return out


def rebuild(rows):
    """The latest change per key by _csn, without the deleted keys."""
    last = {}
    for r in sorted(rows, key=lambda r: r["_csn"]):
        last[r["id"]] = r
    out = {}
    for k, r in last.items():
        if r["_is_deleted"]:
            continue
        amount = None if r["amount"] is None else str(decimal.Decimal(r["amount"]).normalize())
        out[k] = (r["v"], amount, r["ts"], r["d"], r["u"], r["b"],
                  None if r["j"] is None else json.loads(r["j"]), r["flag"], int(r["counter"]) if r["counter"] is not None else None,
                  r["__hidden"])
    return out


class LocalTables:
    """Where a test's tables are, and how they are read: a local warehouse
    folder, read with icebergLocal (test_iceberg_s3.S3Tables: a bucket).
    A location is a path or URL as the tables' metadata names it."""

    def isluice(self, stream, tables, **kw):
        s = self.sluice(stream=stream, tables=tables, max_file_seconds=1, **kw)
        s.extra.setdefault("destination", {}).update(type="iceberg", path=s.out)
        s.write_config()
        return s

    def table_dir(self, s, obj):
        """The table's location."""
        return os.path.join(os.path.realpath(s.out), s.stream, obj)

    def table_fn(self, s, obj):
        """The ClickHouse table function that reads the table."""
        return f"icebergLocal('{self.table_dir(s, obj)}')"

    def local_file(self, location):
        """A local file with the content of the file at location."""
        return location

    def file_size(self, location):
        return os.path.getsize(location)

    def read_text(self, location):
        """The file at location as text, or None when there is none."""
        try:
            with open(location) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def plant(self, location, body):
        """Puts a file at location, as another writer would."""
        os.makedirs(os.path.dirname(location), exist_ok=True)
        with open(location, "wb") as f:
            f.write(body)

    def version(self, s, obj):
        """The table's version-hint.text, or 0."""
        t = self.read_text(self.table_dir(s, obj) + "/metadata/version-hint.text")
        return int(t) if t is not None else 0

    def current_metadata(self, s, obj):
        """(version, the metadata JSON of version-hint.text)."""
        d = self.table_dir(s, obj)
        version = self.version(s, obj)
        return version, json.loads(self.read_text(f"{d}/metadata/v{version}.metadata.json"))

    def read_avro_at(self, location):
        return read_avro(self.local_file(location))

    def replaces(self, s, obj):
        """The replace snapshots (compactions) of the table's current metadata."""
        return sum(sn["summary"]["operation"] == "replace" for sn in self.current_metadata(s, obj)[1]["snapshots"])

    def compact_beside(self, agents, obj, rounds, change):
        """Runs the agents of agents (Sluice instances, each a stream into
        table obj) and, rounds times, change(k), then for each agent, once
        it committed some of those changes, sluice compact of its stream
        while it commits the others.  Stops them (SIGTERM), catches each up,
        and checks that each committed a compaction.  Returns the sum of
        change's results."""
        procs = [s.start("run") for s in agents]
        changes = 0
        try:
            for k in range(rounds):
                v0 = [self.version(s, obj) for s in agents]
                changes += change(k)
                for s, p, v in zip(agents, procs, v0):
                    harness.wait_until(lambda: self.version(s, obj) > v or not p.alive(), 60,
                                       f"a commit of stream {s.stream}")
                    self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
                    r = s.run("compact", "--stream", s.stream)
                    self.assertEqual(r.rc, 0, r.describe())
        finally:
            for p in procs:
                p.signal(signal.SIGTERM)
                p.wait_result(60)
        for s in agents:
            self.catch_up(s)
            self.assertGreater(self.replaces(s, obj), 0, f"stream {s.stream}: no compaction committed")
        return changes

    # where verify says the tables are
    store_words = "in folder"

    def read_bytes(self, location):
        with open(self.local_file(location), "rb") as f:
            return f.read()

    def take(self, location):
        """Removes the file at location; returns its content."""
        body = self.read_bytes(location)
        os.remove(location)
        return body


class IcebergTest(LocalTables, PgTestCase):

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()

    def read_table(self, s, obj):
        return ch_query(SELECT.format(src=self.table_fn(s, obj)))

    def backfilled(self, name, stream, rows, **kw):
        """A new table of TABLE with rows rows, backfilled by a new stream."""
        self.pg.execute(f"DROP TABLE IF EXISTS {name}")
        self.pg.execute(TABLE.format(name=name))
        fill(self.pg, name, 1, rows)
        s = self.isluice(stream, f"public.{name}", **kw)
        self.catch_up(s)
        return s

    def churned(self, name, rows, rounds, n, **kw):
        """backfilled(name, name, rows), then rounds of n churns of it, each
        caught up (a snapshot or more each)."""
        s = self.backfilled(name, name, rows, **kw)
        for k in range(rounds):
            churn(self.pg, name, 10000 + 100 * k, n)
            self.catch_up(s)
        return s

    def test_changes_read_by_clickhouse(self):
        pg = self.pg
        s = self.backfilled("ice1", "ice", 300)
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f"stream ice: destination out: path {s.out} is writable", r.stdout)
        changes = 300 + churn(pg, "ice1", 10000, 30)
        self.catch_up(s)
        rows = self.read_table(s, "public_ice1")
        self.assertEqual(rebuild(rows), pg_state(pg, "ice1"))
        self.assertEqual(len(rows), changes)
        self.assertEqual(len({r["_uuid"] for r in rows}), changes)
        self.check_metadata(s, "public_ice1", changes)

    def check_metadata(self, s, obj, nrows):
        """The metadata, manifest lists and manifests as the spec has them."""
        d = self.table_dir(s, obj)
        version, meta = self.current_metadata(s, obj)
        self.assertEqual(meta["format-version"], 2)
        self.assertEqual(meta["location"], d)
        self.assertEqual(len(meta["snapshots"]), version)
        self.assertEqual(meta["last-sequence-number"], version)
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]]
        self.assertEqual(len(cur), 1)
        self.assertEqual(meta["refs"]["main"], {"snapshot-id": meta["current-snapshot-id"], "type": "branch"})
        self.assertEqual(len(meta["metadata-log"]), version - 1)
        for sn in meta["snapshots"]:
            self.assertEqual(sn["summary"]["operation"], "append")
            self.assertEqual(sn["summary"]["sluice.stream"], s.stream)
            if "sluice.position" in sn["summary"] or sn is cur[0]:
                self.assertRegex(sn["summary"]["sluice.position"], r"^[0-9A-F]+/[0-9A-F]+$")
        lmeta, manifests = self.read_avro_at(cur[0]["manifest-list"])
        self.assertEqual(lmeta["format-version"], "2")
        self.assertEqual(lmeta["snapshot-id"], str(cur[0]["snapshot-id"]))
        self.assertEqual(len(manifests), version)
        total = 0
        for m in manifests:
            for k in ("manifest_path", "manifest_length", "partition_spec_id", "content", "sequence_number",
                      "min_sequence_number", "added_snapshot_id", "added_files_count", "existing_files_count",
                      "deleted_files_count", "added_rows_count", "existing_rows_count", "deleted_rows_count"):
                self.assertIn(k, m)
            self.assertEqual(m["manifest_length"], self.file_size(m["manifest_path"]))
            self.assertEqual((m["partition_spec_id"], m["content"]), (0, 0))
            mmeta, entries = self.read_avro_at(m["manifest_path"])
            self.assertEqual((mmeta["format-version"], mmeta["content"], mmeta["partition-spec"]), ("2", "data", "[]"))
            self.assertEqual(json.loads(mmeta["schema"])["type"], "struct")
            self.assertEqual(len(entries), m["added_files_count"])
            for e in entries:
                self.assertEqual(e["status"], 1)
                self.assertEqual(e["snapshot_id"], m["added_snapshot_id"])
                self.assertEqual(e["sequence_number"], m["sequence_number"])
                df = e["data_file"]
                self.assertEqual((df["content"], df["file_format"], df["partition"]), (0, "AVRO", {}))
                self.assertEqual(df["file_size_in_bytes"], self.file_size(df["file_path"]))
                self.assertTrue(df["file_path"].startswith(d + "/data/"))
                total += df["record_count"]
        self.assertEqual(total, nrows)
        return meta

    def test_kill_after_commit_before_checkpoint(self):
        """kill -9 right after a commit: the rerun skips what the table holds."""
        pg = self.pg
        s = self.backfilled("ice2", "icek", 50)
        changes = 50 + churn(pg, "ice2", 10000, 20)
        pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        self.assertEqual(self.version(s, "public_ice2"), 2, "the killed run committed one snapshot")
        r = self.catch_up(s)
        self.assertIn("last change from the log", r.stderr)
        rows = self.read_table(s, "public_ice2")
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows), "a change was committed twice")
        self.assertEqual(len(rows), changes)
        self.assertEqual(rebuild(rows), pg_state(pg, "ice2"))
        self.check_metadata(s, "public_ice2", changes)

    def test_stats_exact_filters(self):
        self.stats_exact_filters("append")

    def test_merge_stats_exact_filters(self):
        self.stats_exact_filters("merge")

    def stats_exact_filters(self, mode):
        """Column statistics in the manifests: three flushes of disjoint and
        overlapping keys, long strings that share their first 16 bytes, and
        non-ASCII text.  ClickHouse, which skips files by their bounds, finds
        every row through a filter on each of its values (a wrong bound
        would skip its file: a string's upper bound left as its 16-byte cut
        loses rows here; the notes' cut ends in a non-ASCII character), and
        python3-avro reads counts and bounds that
        match the records of each data file and equality delete file:
        column sizes, and for the real and double columns (NaN, -0, null,
        -Infinity among their values) NaN counts and bounds without NaN."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS ices")
        pg.execute("CREATE TABLE ices (id int PRIMARY KEY, v text, amount numeric(12,2), d date, "
                   "note text, big bigint, r real, dp double precision)")
        insert = ("INSERT INTO ices SELECT g, 'a shared prefix longer than sixteen bytes ' || g, g * 1.25 - 10, "
                  "date '2024-01-01' + g, 'cr\u00e8me br\u00fbl\u00e9\u00e9 n\u00b0' || g, g::bigint * 10000000000, "
                  "CASE g %% 4 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' ELSE g * 0.75 END, "
                  "CASE WHEN g %% 3 = 0 THEN 'NaN' WHEN g %% 5 = 0 THEN NULL WHEN g %% 7 = 0 THEN '-Infinity' "
                  "ELSE g * 1.5 - 20 END FROM generate_series(%s, %s) g")
        pg.execute(insert, (1, 20))
        s = self.isluice("ices" + mode, "public.ices", write_mode=mode)
        self.catch_up(s)
        pg.execute(insert, (100, 110))
        self.catch_up(s)
        pg.execute(insert, (-50, -40))
        pg.execute("UPDATE ices SET v = 'zzzzzzzzzzzzzzzz\u00ff tail', note = NULL WHERE id IN (5, 105)")
        pg.execute("DELETE FROM ices WHERE id = 7")
        self.catch_up(s)
        src = self.table_fn(s, "public_ices")
        cols = ("id", "v", "toString(amount)", "toString(d)", "note", "big", "_csn")
        rows = ch_query("SELECT " + ", ".join(f"{c} AS c{i}" for i, c in enumerate(cols)) +
                        f" FROM {src}")
        self.assertEqual(len(rows), 20 + 11 + 11 + 2 + 1 if mode == "append" else 20 + 11 + 11 - 1)
        last = {}
        for r in sorted(rows, key=lambda r: r["c6"]):
            last[r["c0"]] = r
        self.assertEqual({k: (r["c1"], r["c4"]) for k, r in last.items() if k != 7},
                         {r[0]: (r[1], r[2]) for r in pg.sql("SELECT id, v, note FROM ices")})
        # One query: for each column and each value it holds, the changes a
        # filter on that value finds, against those the full read holds.
        want, parts = {}, []
        for i, c in enumerate(cols):
            for val in {r[f"c{i}"] for r in rows if r[f"c{i}"] is not None}:
                lit = "'" + str(val).replace("\\", "\\\\").replace("'", "\\'") + "'"
                want[(i, str(val))] = sum(1 for r in rows if r[f"c{i}"] == val)
                parts.append(f"SELECT {i} AS i, {lit} AS val, count() AS n FROM {src} "
                             f"WHERE {c} = {lit if i not in (0, 5) else val}")
        got = {(g["i"], g["val"]): int(g["n"]) for g in ch_query(" UNION ALL ".join(parts))}
        self.assertEqual({k: (got.get(k), n) for k, n in want.items() if got.get(k) != n}, {},
                         "(column, value): (changes the filter found, changes there are)")
        self.assertEqual(self.check_stats(s, "public_ices"), (3, 0 if mode == "append" else 2))

    def column_sizes(self, location):
        """{field name: bytes} of the data file's records, each field's
        Avro encoding measured by python3-avro as it decodes them."""
        import avro.datafile
        import avro.io
        sizes = {}

        class Sizer(avro.io.DatumReader):
            def read_record(self, writers_schema, readers_schema, decoder):
                out = {}
                for f in writers_schema.fields:
                    p = decoder.reader.tell()
                    out[f.name] = self.read_data(f.type, f.type, decoder)
                    sizes[f.name] = sizes.get(f.name, 0) + decoder.reader.tell() - p
                return out

        with open(self.local_file(location), "rb") as fh:
            rd = avro.datafile.DataFileReader(fh, Sizer())
            for _ in rd:
                pass
            rd.close()
        return sizes

    def check_stats(self, s, obj):
        """Each data file's manifest entry: its value and null counts equal
        its records', its column sizes the bytes python3-avro decodes per
        field, its NaN counts (floats and doubles only) the NaNs, its bounds
        (Iceberg's single-value serialization) its least and greatest values
        (exactly, NaN left out and -0.0 before +0.0 for floats, or for a
        string cut to at most 16 bytes: a prefix of the least, and above the
        greatest); an equality delete file's, of its key column.  Returns
        the number of data files and of delete files."""
        import math
        import struct
        _, meta = self.current_metadata(s, obj)
        schema = [sc for sc in meta["schemas"] if sc["schema-id"] == meta["current-schema-id"]][0]
        fields = {f["id"]: f for f in schema["fields"] if isinstance(f["type"], str)}
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        nfiles = [0, 0]
        for m in self.read_avro_at(cur["manifest-list"])[1]:
            for e in self.read_avro_at(m["manifest_path"])[1]:
                df = e["data_file"]
                recs = self.read_avro_at(df["file_path"])[1]
                nfiles[df["content"] // 2] += 1
                ff = fields if df["content"] == 0 else {fid: fields[fid] for fid in df["equality_ids"]}
                vc = {kv["key"]: kv["value"] for kv in df["value_counts"]}
                nc = {kv["key"]: kv["value"] for kv in df["null_value_counts"]}
                lo = {kv["key"]: kv["value"] for kv in df["lower_bounds"]}
                hi = {kv["key"]: kv["value"] for kv in df["upper_bounds"]}
                self.assertEqual(vc, {fid: len(recs) for fid in ff})
                self.assertEqual(nc, {fid: sum(1 for r in recs if r[f["name"]] is None) for fid, f in ff.items()})
                sizes = self.column_sizes(df["file_path"])
                self.assertEqual({kv["key"]: kv["value"] for kv in df["column_sizes"]},
                                 {fid: sizes[f["name"]] for fid, f in ff.items()})
                floats = {fid: f for fid, f in ff.items() if f["type"] in ("float", "double")}
                self.assertEqual({kv["key"]: kv["value"] for kv in df["nan_value_counts"] or []},
                                 {fid: sum(1 for r in recs if r[f["name"]] is not None and math.isnan(r[f["name"]]))
                                  for fid, f in floats.items()})
                for fid, f in ff.items():
                    vals = [r[f["name"]] for r in recs if r[f["name"]] is not None]
                    t = f["type"]
                    if t in ("float", "double"):
                        vals = [v for v in vals if not math.isnan(v)]
                    if not vals:
                        self.assertNotIn(fid, lo)
                        continue
                    if t in ("float", "double"):
                        fmt, order = ("<f" if t == "float" else "<d"), (lambda v: (v, math.copysign(1, v)))
                        self.assertEqual((lo[fid], hi[fid]), (struct.pack(fmt, min(vals, key=order)),
                                                              struct.pack(fmt, max(vals, key=order))), f["name"])
                        continue
                    if t in ("int", "date"):
                        enc = [struct.pack("<i", v if t == "int" else (v - datetime.date(1970, 1, 1)).days)
                               for v in vals]
                        self.assertEqual((lo[fid], hi[fid]), (min(enc, key=lambda b: struct.unpack("<i", b)),
                                                              max(enc, key=lambda b: struct.unpack("<i", b))))
                    elif t == "long":
                        self.assertEqual((struct.unpack("<q", lo[fid])[0], struct.unpack("<q", hi[fid])[0]),
                                         (min(vals), max(vals)), f["name"])
                    elif t == "boolean":
                        self.assertEqual((lo[fid], hi[fid]), (bytes([min(vals)]), bytes([max(vals)])))
                    elif t.startswith("decimal"):
                        unscaled = [int(v.scaleb(int(t.split(",")[1].strip(" )")))) for v in vals]
                        self.assertEqual((int.from_bytes(lo[fid], "big", signed=True),
                                          int.from_bytes(hi[fid], "big", signed=True)),
                                         (min(unscaled), max(unscaled)), f["name"])
                    elif t == "string":
                        enc = [v.encode() for v in vals]
                        self.assertLessEqual(len(lo[fid]), 16)
                        self.assertTrue(min(enc).startswith(lo[fid]), (f["name"], lo[fid], min(enc)))
                        lo[fid].decode()
                        if fid in hi:
                            self.assertLessEqual(len(hi[fid]), 16)
                            self.assertGreaterEqual(hi[fid], max(enc), f["name"])
                            hi[fid].decode()
        return tuple(nfiles)

    def streamed_table(self, stream, table, columns, rows, value, **kw):
        """Table (id int PRIMARY KEY, columns) made anew with ids 1..rows
        (value: the other column's SQL of g), and a stream of it caught up."""
        pg = self.pg
        pg.execute(f"DROP TABLE IF EXISTS {table}")
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, {columns})")
        pg.execute(f"INSERT INTO {table} SELECT g, {value} FROM generate_series(1, {rows}) g")
        s = self.isluice(stream, f"public.{table}", **kw)
        self.catch_up(s)
        return s

    def table_rows(self, s, obj, columns, mode):
        """The rows of the table as a reader rebuilds them, {id: (columns)}:
        merge mode as it reads (every key once); append mode the latest
        change of each key by _csn, a TRUNCATE (a marker too) clearing
        what came before it."""
        rows = ch_query(f"SELECT id, {', '.join(columns)}, _change_type, _is_deleted, _csn "
                        f"FROM {self.table_fn(s, obj)} ORDER BY _csn")
        if mode == "merge":
            self.assertEqual(len({r["id"] for r in rows}), len(rows), "a key has two rows")
            self.assertFalse([r for r in rows if r["_is_deleted"]])
        state = {}
        for r in rows:
            if r["_change_type"] == "TRUNCATE":
                state.clear()
            elif r["_is_deleted"]:
                state.pop(r["id"], None)
            else:
                state[r["id"]] = tuple(r[c] for c in columns)
        return state

    def pg_rows(self, table, columns):
        return {r[0]: tuple(r[1:]) for r in self.pg.sql(f"SELECT id, {', '.join(columns)} FROM {table}")}

    def test_dropped_column_merge(self):
        """Merge mode: a dropped column leaves the schema, and the key's
        equality deletes still apply (updates, deletes and a key change
        after the drop replace the rows written before it), also after a
        compaction; a dropped key column stops the stream (exit 3),
        naming it."""
        pg = self.pg
        obj = "public_icedm"
        s = self.streamed_table("icedm", "icedm", "a int, b text", 30, "g, 'b' || g", write_mode="merge")
        pg.execute("UPDATE icedm SET b = 'x' WHERE id <= 5")
        self.catch_up(s)
        _, meta = self.current_metadata(s, obj)
        pg.execute("ALTER TABLE icedm DROP COLUMN b")
        pg.execute("UPDATE icedm SET a = -a WHERE id % 3 = 0")
        pg.execute("DELETE FROM icedm WHERE id % 7 = 0")
        pg.execute("UPDATE icedm SET id = id + 100 WHERE id = 4")
        pg.execute("INSERT INTO icedm VALUES (50, 50)")
        self.catch_up(s)
        self.assertEqual(self.table_rows(s, obj, ("a",), "merge"), self.pg_rows("icedm", ("a",)))
        _, meta2 = self.current_metadata(s, obj)
        self.assertEqual(meta2["schemas"][-1]["fields"], [f for f in meta["schemas"][-1]["fields"] if f["name"] != "b"])
        self.assertEqual(meta2["schemas"][-1]["identifier-field-ids"], meta["schemas"][-1]["identifier-field-ids"])
        self.compact(s, "stream icedm: public_icedm: ")
        self.assertEqual(self.table_rows(s, obj, ("a",), "merge"), self.pg_rows("icedm", ("a",)))
        self.verify(s, 0)
        pg.execute("ALTER TABLE icedm DROP COLUMN id")
        pg.execute("ALTER TABLE icedm ADD PRIMARY KEY (a)")
        pg.execute("INSERT INTO icedm VALUES (1000)")
        pg.wait_wal_flushed()
        v = self.version(s, obj)
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('table "public"."icedm": key column "id" was dropped or renamed: the equality deletes of a '
                      'merge table name its key columns, so the stream stops; to go on, remove the table\'s folder '
                      '(or point the destination at a new path) and backfill the table again', r.stderr)
        self.assertNotIn("retrying from the last checkpoint", r.stderr)
        self.assertEqual(self.version(s, obj), v, "nothing was committed after the drop")

    def renamed_column(self, mode):
        """A column renamed at the source: PostgreSQL backfills the table
        again behind a marker (its rows hold the values under the new name
        without a change), and the sink takes the rename as the column
        dropped and another added: the new name is a new field with the
        next id, and the table equals the source."""
        pg = self.pg
        t = f"icern_{mode}"
        obj = f"public_{t}"
        s = self.streamed_table(f"icern{mode}", t, "a int, b text", 10, "g, 'b' || g", write_mode=mode)
        pg.execute(f"UPDATE {t} SET b = 'changed' WHERE id = 1")
        self.catch_up(s)
        _, meta = self.current_metadata(s, obj)
        last = meta["last-column-id"]
        fields = [f for f in meta["schemas"][-1]["fields"] if f["name"] != "b"]
        pg.execute(f"ALTER TABLE {t} RENAME COLUMN b TO c")
        pg.execute(f"INSERT INTO {t} VALUES (11, 11, 'c11')")
        pg.execute(f"UPDATE {t} SET c = 'c2' WHERE id = 2")
        pg.execute(f"DELETE FROM {t} WHERE id = 3")
        self.catch_up(s)
        self.assertEqual(self.table_rows(s, obj, ("a", "c"), mode), self.pg_rows(t, ("a", "c")))
        _, meta = self.current_metadata(s, obj)
        cur = meta["schemas"][-1]
        self.assertEqual(meta["current-schema-id"], cur["schema-id"])
        self.assertEqual([f for f in cur["fields"] if f["name"] != "c"], fields)
        self.assertEqual([f for f in cur["fields"] if f["name"] == "c"],
                         [{"id": last + 1, "name": "c", "required": False, "type": "string"}])
        self.assertEqual(meta["last-column-id"], last + 1)

    def test_renamed_column_append(self):
        self.renamed_column("append")

    def test_renamed_column_merge(self):
        self.renamed_column("merge")

    def dropped_tables(self, mode):
        """Tables dropped at the source between two runs: a TRUNCATE marker
        (a table version without columns) clears each, with no change of
        its schema; one created again under its name gets its rows after
        the marker."""
        pg = self.pg
        again, gone = f"iceag_{mode}", f"icegone_{mode}"
        for t in (again, gone):
            pg.execute(f"DROP TABLE IF EXISTS {t}")
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            pg.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.isluice(f"icedt{mode}", f"public.{again}, public.{gone}", write_mode=mode)
        self.catch_up(s)
        pg.execute(f"UPDATE {gone} SET v = 'updated' WHERE id <= 3")
        self.catch_up(s)
        self.assertEqual(self.table_rows(s, f"public_{gone}", ("v",), mode), self.pg_rows(gone, ("v",)))
        _, before = self.current_metadata(s, f"public_{gone}")
        pg.execute(f"DROP TABLE {again}")
        pg.execute(f"CREATE TABLE {again} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {again} SELECT g, 'new' FROM generate_series(100, 104) g")
        pg.execute(f"DROP TABLE {gone}")
        self.catch_up(s)
        pg.execute(f"INSERT INTO {again} VALUES (105, 'later')")
        self.catch_up(s)
        self.assertEqual(self.table_rows(s, f"public_{again}", ("v",), mode), self.pg_rows(again, ("v",)))
        self.assertEqual(self.table_rows(s, f"public_{gone}", ("v",), mode), {})
        _, after = self.current_metadata(s, f"public_{gone}")
        self.assertEqual((after["schemas"], after["current-schema-id"], after["last-column-id"]),
                         (before["schemas"], before["current-schema-id"], before["last-column-id"]))
        marker = [sn for sn in after["snapshots"] if sn["snapshot-id"] == after["current-snapshot-id"]][0]
        self.assertEqual(marker["schema-id"], before["current-schema-id"])
        if mode == "merge":
            self.assertEqual(marker["summary"]["sluice.truncate"], "true")
            return
        rows = ch_query(f"SELECT id, v, _change_type FROM {self.table_fn(s, 'public_' + gone)} ORDER BY _csn")
        self.assertEqual(len(rows), 24)
        self.assertEqual(rows[-1], {"id": None, "v": None, "_change_type": "TRUNCATE"})

    def test_dropped_table_append(self):
        self.dropped_tables("append")

    def test_dropped_table_merge(self):
        self.dropped_tables("merge")

    def test_added_column_and_dropped_column(self):
        pg = self.pg
        s = self.streamed_table("icea", "ice3", "v text", 20, "'v' || g")
        pg.execute("INSERT INTO ice3 VALUES (21, 'before')")
        pg.execute("ALTER TABLE ice3 ADD COLUMN extra numeric(8,3)")
        pg.execute("INSERT INTO ice3 VALUES (22, 'after', 12.345)")
        pg.execute("UPDATE ice3 SET extra = -0.5 WHERE id = 1")
        self.catch_up(s)
        rows = ch_query(f"SELECT id, v, toString(extra) AS extra, _change_type FROM "
                        f"{self.table_fn(s, 'public_ice3')} ORDER BY _csn, id")
        self.assertEqual(len(rows), 23)
        self.assertEqual([(r["id"], r["v"], r["extra"]) for r in rows[-3:]],
                         [(21, "before", None), (22, "after", "12.345"), (1, "v1", "-0.5")])
        self.assertTrue(all(r["extra"] is None for r in rows[:21]))
        meta = self.check_metadata(s, "public_ice3", 23)
        self.assertEqual(len(meta["schemas"]), 2)
        old, new = meta["schemas"]
        self.assertEqual(meta["current-schema-id"], new["schema-id"])
        self.assertEqual(new["schema-id"], old["schema-id"] + 1)
        ids = {f["name"]: f["id"] for f in old["fields"]}
        old_last = max(list(ids.values()) + [f["type"]["element-id"] for f in old["fields"]
                                             if isinstance(f["type"], dict)])
        self.assertEqual({f["name"]: f["id"] for f in new["fields"] if f["name"] != "extra"}, ids)
        extra = [f for f in new["fields"] if f["name"] == "extra"]
        # the next id after the old schema's last (its list element has one too)
        self.assertEqual(extra, [{"id": old_last + 1, "name": "extra", "required": False,
                                  "type": "decimal(8, 3)"}])
        self.assertEqual(meta["last-column-id"], old_last + 1)
        # A dropped column leaves the current schema: a new schema without
        # it, the other fields keep their ids, last-column-id unchanged
        pg.execute("ALTER TABLE ice3 DROP COLUMN v")
        pg.execute("INSERT INTO ice3 VALUES (23, 1)")
        pg.execute("UPDATE ice3 SET extra = 2 WHERE id = 2")
        self.catch_up(s)
        meta2 = self.check_metadata(s, "public_ice3", 25)
        dropped = meta2["schemas"][-1]
        self.assertEqual(len(meta2["schemas"]), 3)
        self.assertEqual(meta2["current-schema-id"], dropped["schema-id"])
        self.assertEqual(dropped["schema-id"], new["schema-id"] + 1)
        self.assertEqual(dropped["fields"], [f for f in new["fields"] if f["name"] != "v"])
        self.assertEqual(meta2["last-column-id"], old_last + 1)
        # the snapshots before the drop still read with their schema
        before_drop = meta2["snapshots"][len(meta["snapshots"]) - 1]
        self.assertEqual(before_drop["schema-id"], new["schema-id"])
        old_rows = ch_query(f"SELECT id, v FROM {self.table_fn(s, 'public_ice3')} ORDER BY _csn, id "
                            f"SETTINGS iceberg_snapshot_id = {before_drop['snapshot-id']}")
        self.assertEqual([(r["id"], r["v"]) for r in old_rows],
                         [(r["id"], r["v"]) for r in rows])
        # Added again under its name, the column is a new field with the
        # next id: the rows written before read null in it, never the
        # values of the dropped column.
        pg.execute("ALTER TABLE ice3 ADD COLUMN v text")
        pg.execute("INSERT INTO ice3 VALUES (24, 3, 'new v')")
        pg.execute("UPDATE ice3 SET v = 'set' WHERE id = 3")
        self.catch_up(s)
        meta3 = self.check_metadata(s, "public_ice3", 27)
        self.assertEqual(len(meta3["schemas"]), 4)
        again = meta3["schemas"][-1]
        self.assertEqual(meta3["current-schema-id"], again["schema-id"])
        self.assertEqual(again["schema-id"], dropped["schema-id"] + 1)
        self.assertEqual([f for f in again["fields"] if f["name"] != "v"], dropped["fields"])
        self.assertEqual([f for f in again["fields"] if f["name"] == "v"],
                         [{"id": old_last + 2, "name": "v", "required": False, "type": "string"}])
        self.assertEqual(meta3["last-column-id"], old_last + 2)
        want = [(r["id"], None, r["extra"]) for r in rows] + [(23, None, "1"), (2, None, "2"), (24, "new v", "3"),
                                                               (3, "set", None)]
        read = lambda: [(r["id"], r["v"], r["extra"]) for r in
                        ch_query(f"SELECT id, v, toString(extra) AS extra FROM {self.table_fn(s, 'public_ice3')} "
                                 f"ORDER BY _csn, id")]
        self.assertEqual(read(), want)
        # a compaction rewrites the files of every schema into the current
        # one, by field id: the same rows
        self.compact(s, "stream icea: public_ice3: ")
        self.assertEqual(read(), want)
        self.verify(s, 0)

    def read_merged(self, s, obj):
        """The table's rows as a v2 reader (ClickHouse) sees them, by key;
        every key once, none deleted."""
        rows = self.read_table(s, obj)
        self.assertEqual(len({r["id"] for r in rows}), len(rows), "a key has two rows")
        self.assertFalse([r for r in rows if r["_is_deleted"]])
        return rebuild(rows)

    def test_column_added_with_default(self):
        """A column added with a default reaches every existing row: the
        table is backfilled again behind a TRUNCATE marker, so the rows
        rebuilt in _csn order (the marker clearing what came before it)
        equal the source's, with no later update of those rows."""
        pg = self.pg
        s = self.streamed_table("iced", "ice4", "a int", 5, "g")
        pg.execute("ALTER TABLE ice4 ADD COLUMN n int DEFAULT 7, ADD COLUMN t text DEFAULT 'it''s'")
        pg.execute("INSERT INTO ice4 (id, a) VALUES (100, 100)")
        self.catch_up(s)
        rows = ch_query(f"SELECT id, a, n, t, _change_type FROM {self.table_fn(s, 'public_ice4')} "
                        "ORDER BY _csn, id")
        state = {}
        for r in rows:
            if r["_change_type"] == "TRUNCATE":
                state.clear()
            else:
                state[r["id"]] = (r["a"], r["n"], r["t"])
        want = {r[0]: (r[1], r[2], r[3]) for r in pg.sql("SELECT id, a, n, t FROM ice4")}
        self.assertEqual(state, want)

    def test_merge_changes_truncate_kill(self):
        """Merge mode: backfill, inserts, updates, deletes and key changes,
        a TRUNCATE, then kill -9 after a commit (before its checkpoint) and
        at random points: ClickHouse reads the source's rows."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icem1")
        pg.execute(TABLE.format(name="icem1"))
        fill(pg, "icem1", 1, 200)
        s = self.isluice("icemerge", "public.icem1", write_mode="merge")
        self.catch_up(s)
        obj = "public_icem1"
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icem1"))
        churn(pg, "icem1", 10000, 30)
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icem1"))
        # TRUNCATE, with rows before it in the same flush and after it
        pg.execute("INSERT INTO icem1 (id, v) VALUES (500000, 'gone')")
        pg.execute("TRUNCATE icem1")
        fill(pg, "icem1", 1, 40)
        churn(pg, "icem1", 20000, 10)
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icem1"))
        meta = self.check_merge_metadata(s, obj, want_deletes=False)
        self.assertIn("sluice.truncate", [k for sn in meta["snapshots"] for k in sn["summary"]])
        # kill -9 right after a commit, before the checkpoint
        churn(pg, "icem1", 30000, 20)
        pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icem1"))
        # kill -9 at random points while changes stream in: after a first
        # commit, with a random number of further changes, either at once
        # (a batch pending) or once they are committed too
        rnd = random.Random()
        for k in range(3):
            v0 = self.version(s, obj)
            p = s.start("run")
            churn(pg, "icem1", 40000 + 1000 * k, 5)
            harness.wait_until(lambda: self.version(s, obj) > v0, 60, "a commit")
            v1 = self.version(s, obj)
            churn(pg, "icem1", 40500 + 1000 * k, rnd.randint(1, 15))
            if rnd.random() < 0.5:
                harness.wait_until(lambda: self.version(s, obj) > v1, 60, "a second commit")
            p.signal(signal.SIGKILL)
            p.wait_result(60)
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icem1"))
        self.check_merge_metadata(s, obj)

    def test_merge_unchanged_toast(self):
        """Merge mode's TOAST rule: updates that leave a TOASTed value
        unchanged (plain, twice in one flush, with a key change) keep the
        current row's value, taken from the batch or the committed files."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icetoast")
        pg.execute("CREATE TABLE icetoast (id int PRIMARY KEY, v text, body text)")
        pg.execute("ALTER TABLE icetoast ALTER body SET STORAGE EXTERNAL")
        pg.execute("INSERT INTO icetoast SELECT g, 'v' || g, repeat(md5(g::text), 300) FROM generate_series(1, 30) g")
        s = self.isluice("icetoast", "public.icetoast", write_mode="merge")
        self.catch_up(s)
        obj = "public_icetoast"

        def state():
            return {r[0]: (r[1], r[2]) for r in pg.sql("SELECT id, v, md5(body) FROM icetoast")}

        def read():
            rows = ch_query(f"SELECT id, v, lower(hex(MD5(body))) AS h, _unchanged_columns AS u "
                            f"FROM {self.table_fn(s, obj)}")
            self.assertEqual(len({r["id"] for r in rows}), len(rows), "a key has two rows")
            self.assertFalse([r for r in rows if r["u"]], "unchanged values left unfilled")
            return {r["id"]: (r["v"], r["h"]) for r in rows}

        pg.execute("UPDATE icetoast SET v = v || '+' WHERE id <= 10")            # from the committed files
        pg.execute("UPDATE icetoast SET id = id + 1000, v = 'moved' WHERE id = 5")  # a key change
        pg.execute("UPDATE icetoast SET v = v || '!' WHERE id <= 3")              # twice in one flush
        pg.execute("INSERT INTO icetoast VALUES (100, 'new', repeat('x', 9000))")
        pg.execute("UPDATE icetoast SET v = 'changed' WHERE id = 100")
        self.catch_up(s)
        self.assertEqual(read(), state())
        pg.execute("UPDATE icetoast SET v = 'again' WHERE id IN (1, 1005, 100, 20)")
        pg.execute("UPDATE icetoast SET id = 2000, v = 'moved twice' WHERE id = 1005")
        self.catch_up(s)
        self.assertEqual(read(), state())
        # a column added mid-stream: a new schema; values filled from files of the old one
        pg.execute("ALTER TABLE icetoast ADD COLUMN extra int")
        pg.execute("UPDATE icetoast SET extra = id * 2 WHERE id <= 6 OR id = 2000")
        pg.execute("DELETE FROM icetoast WHERE id = 7")
        self.catch_up(s)
        rows = ch_query(f"SELECT id, extra, lower(hex(MD5(body))) AS h "
                        f"FROM {self.table_fn(s, obj)}")
        self.assertEqual({r["id"]: (r["extra"], r["h"]) for r in rows},
                         {r[0]: (r[1], r[2]) for r in pg.sql("SELECT id, extra, md5(body) FROM icetoast")})

    WIDEN_READ = ("SELECT id, i, r, toString(n) AS n, v, lower(hex(MD5(body))) AS h, _csn, _is_deleted, "
                  "_change_type, _unchanged_columns AS u FROM {src}")

    def widen_state(self, t):
        return {r[0]: (r[1], r[2], None if r[3] is None else str(decimal.Decimal(r[3]).normalize()), r[4], r[5])
                for r in self.pg.sql(f"SELECT id, i, r, n::text, v, md5(body) FROM {t}")}

    @staticmethod
    def widen_rows(rows, merge):
        """{id: (i, r, n, v, md5 of body)} of ClickHouse's rows: as they are
        (merge), or rebuilt by _csn (append: a TRUNCATE marker clears, an
        unchanged body keeps the key's last one)."""
        state = {}
        for r in sorted(rows, key=lambda r: r["_csn"]):
            if r["_change_type"] == "TRUNCATE":
                state.clear()
            elif r["_is_deleted"]:
                state.pop(r["id"], None)
            else:
                h = state[r["id"]][4] if "body" in r["u"] and r["id"] in state else r["h"]
                state[r["id"]] = (None if r["i"] is None else int(r["i"]), r["r"],
                                  None if r["n"] is None else str(decimal.Decimal(r["n"]).normalize()), r["v"], h)
        if merge:
            assert len(state) == len(rows), "a key has two rows, or a deleted row is left"
        return state

    def widened(self, mode):
        """Widening in place (PostgreSQL): numeric(10,2) to numeric(14,2)
        (no rewrite: the old data files keep their decimal(10,2)), then int
        to bigint and real to double precision (a rewrite: the table is
        backfilled again behind a marker).  Each is a new schema with the
        same field ids and the wider types; rows before and after each,
        updates of old rows (merge mode: their unchanged TOASTed body taken
        from files of the old schema), a compaction and changes after it:
        ClickHouse reads the source's rows each time, with a filter on the
        widened columns finding the rows of the older files too."""
        pg, merge = self.pg, mode == "merge"
        t, obj = f"icew_{mode}", f"public_icew_{mode}"
        pg.execute(f"DROP TABLE IF EXISTS {t}")
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, i int, r real, n numeric(10,2), v text, body text)")
        pg.execute(f"ALTER TABLE {t} ALTER body SET STORAGE EXTERNAL")
        pg.execute(f"INSERT INTO {t} SELECT g, 2147483647 - g, g + 0.1, g * -1234567.89, 'v' || g, "
                   f"repeat(md5(g::text), 300) FROM generate_series(1, 30) g")
        s = self.isluice(f"icew{mode}", f"public.{t}", write_mode=mode)
        self.catch_up(s)
        pg.execute(f"UPDATE {t} SET v = v || '+' WHERE id <= 3")
        self.catch_up(s)

        def check():
            rows = ch_query(self.WIDEN_READ.format(src=self.table_fn(s, obj)))
            self.assertEqual(self.widen_rows(rows, merge), self.widen_state(t))
            return rows

        def markers():
            """Backfills again behind a marker: TRUNCATE rows (append), or
            snapshots with sluice.truncate (merge)."""
            if merge:
                snaps = self.current_metadata(s, obj)[1]["snapshots"]
                return sum("sluice.truncate" in sn["summary"] for sn in snaps)
            rows = ch_query(self.WIDEN_READ.format(src=self.table_fn(s, obj)))
            return sum(r["_change_type"] == "TRUNCATE" for r in rows)

        check()
        pg.execute(f"ALTER TABLE {t} ALTER n TYPE numeric(14,2)")
        pg.execute(f"INSERT INTO {t} SELECT g, -g, g / 8.0, g * 1234567890.12, 'new' || g, "
                   f"repeat(md5(g::text), 300) FROM generate_series(31, 35) g")
        pg.execute(f"UPDATE {t} SET v = v || '!' WHERE id BETWEEN 2 AND 6")
        pg.execute(f"UPDATE {t} SET n = 999999999999.99 WHERE id = 7")
        self.catch_up(s)
        check()
        self.assertEqual(markers(), 0, "numeric(10,2) to numeric(14,2) rewrote the table")
        pg.execute(f"ALTER TABLE {t} ALTER i TYPE bigint, ALTER r TYPE double precision")
        pg.execute(f"INSERT INTO {t} SELECT g, g * 4294967296, g * 1.0e300, g, 'big' || g, "
                   f"repeat(md5(g::text), 300) FROM generate_series(36, 38) g")
        pg.execute(f"UPDATE {t} SET v = v || '#' WHERE id BETWEEN 5 AND 9")
        pg.execute(f"UPDATE {t} SET i = 9223372036854775807, r = 0.1 WHERE id = 10")
        pg.execute(f"DELETE FROM {t} WHERE id = 11")
        self.catch_up(s)
        pg.execute(f"UPDATE {t} SET v = v || '$' WHERE id IN (1, 12, 31, 36)")
        self.catch_up(s)
        rows = check()
        self.assertEqual(markers(), 1, "int to bigint and real to double precision rewrite the table")
        meta = self.current_metadata(s, obj)[1]
        types = [{f["name"]: (f["id"], f["type"]) for f in sc["fields"] if f["name"] in ("i", "r", "n")}
                 for sc in meta["schemas"]]
        self.assertEqual(types[0], {"i": (2, "int"), "r": (3, "float"), "n": (4, "decimal(10, 2)")})
        self.assertEqual(types[-1], {"i": (2, "long"), "r": (3, "double"), "n": (4, "decimal(14, 2)")})
        self.assertEqual(meta["current-schema-id"], meta["schemas"][-1]["schema-id"])
        ids = [{f["name"]: f["id"] for f in sc["fields"]} for sc in meta["schemas"]]
        self.assertEqual(ids, [ids[0]] * len(ids), "a field id changed")
        # the column statistics of the older files keep their type's
        # serialization: a filter on each widened value still finds its rows
        for col, val, lit in (("i", 2147483647 - 20, "2147483627"), ("i", 2147483647 - 3, "2147483644"),
                              ("n", decimal.Decimal("-24691357.80"), "toDecimal64('-24691357.80', 2)")):
            want = sorted(r["_csn"] for r in rows if r[col] is not None and type(val)(r[col]) == val)
            got = ch_query(f"SELECT _csn FROM {self.table_fn(s, obj)} WHERE {col} = {lit} ORDER BY _csn")
            self.assertEqual([r["_csn"] for r in got], want, f"{col} = {val}")
            self.assertTrue(want)
        before = sorted(json.dumps(r, sort_keys=True) for r in rows)
        self.compact(s, "-> 1 data file")
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in check()), before)
        self.verify(s, 0)
        pg.execute(f"UPDATE {t} SET v = v || '&' WHERE id IN (2, 13, 32, 37)")
        pg.execute(f"INSERT INTO {t} VALUES (39, -9223372036854775807, -1.5e-300, -999999999999.99, 'last', 'x')")
        self.catch_up(s)
        check()
        return s, t, obj

    def test_widen_append(self):
        s, t, obj = self.widened("append")
        # any other change of type stops the stream (exit 3), naming the
        # table, the column and the change
        v = self.version(s, obj)
        self.pg.execute(f"ALTER TABLE {t} ALTER n TYPE text")
        self.pg.execute(f"INSERT INTO {t} (id, n) VALUES (40, '1')")
        self.pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(f'table "public"."{t}": column "n" changed from decimal(14, 2) to string: an Iceberg table '
                      f'takes only added columns and widened types (int to long, float to double, a '
                      f'decimal\'s precision raised), so the stream stops', r.stderr)
        self.assertEqual(self.version(s, obj), v, "nothing was committed after the change")

    def test_widen_merge(self):
        self.widened("merge")

    def check_merge_metadata(self, s, obj, want_deletes=True):
        """Merge mode's metadata: the key as identifier-field-ids; delete
        manifests of equality delete files naming the key's field id."""
        _, meta = self.current_metadata(s, obj)
        schema = [sc for sc in meta["schemas"] if sc["schema-id"] == meta["current-schema-id"]][0]
        idf = [f for f in schema["fields"] if f["name"] == "id"][0]
        self.assertEqual(schema["identifier-field-ids"], [idf["id"]])
        self.assertTrue(idf["required"])
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        lmeta, manifests = self.read_avro_at(cur["manifest-list"])
        self.assertEqual(lmeta["format-version"], "2")
        deletes = 0
        for m in manifests:
            self.assertEqual(m["manifest_length"], self.file_size(m["manifest_path"]))
            mmeta, entries = self.read_avro_at(m["manifest_path"])
            self.assertEqual(mmeta["content"], ("data", "deletes")[m["content"]])
            self.assertEqual(len(entries), m["added_files_count"])
            for e in entries:
                df = e["data_file"]
                self.assertEqual(e["status"], 1)
                data_seq = m["sequence_number"] if e["sequence_number"] is None else e["sequence_number"]
                if "/data/compact-" in df["file_path"]:
                    # the snapshot's the compaction read (check_sequence_numbers)
                    self.assertLess(data_seq, m["sequence_number"])
                else:
                    self.assertEqual(data_seq, m["sequence_number"])
                self.assertEqual(df["content"], 2 * m["content"])
                self.assertEqual(df["file_size_in_bytes"], self.file_size(df["file_path"]))
                if m["content"] == 1:
                    deletes += 1
                    self.assertEqual(df["equality_ids"], [idf["id"]])
                    dmeta, keys = self.read_avro_at(df["file_path"])
                    self.assertEqual(len(keys), df["record_count"])
                    self.assertEqual([f["field-id"] for f in json.loads(dmeta["avro.schema"])["fields"]],
                                     [idf["id"]])
        if want_deletes:
            self.assertGreater(deletes, 0, "no equality delete file is current")
        for sn in meta["snapshots"]:
            self.assertIn(sn["summary"]["operation"], ("append", "overwrite", "delete", "replace"))
        return meta

    def test_metadata_never_replaced(self):
        """The commit rule: a metadata file v<N>.metadata.json that another
        writer put first is never replaced; the stream stops with exit 3,
        naming it, and the other writer's file stays."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icecond")
        pg.execute("CREATE TABLE icecond (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO icecond SELECT g, 'v' || g FROM generate_series(1, 10) g")
        s = self.isluice("icecond", "public.icecond")
        self.catch_up(s)
        obj = "public_icecond"
        self.assertEqual(self.version(s, obj), 1)
        self.assertEqual(len(ch_query(f"SELECT id FROM {self.table_fn(s, obj)}")), 10)
        taken = f"{self.table_dir(s, obj)}/metadata/v2.metadata.json"
        self.plant(taken, b'{"another": "writer"}')
        pg.execute("INSERT INTO icecond VALUES (11, 'after')")
        pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(f'could not publish "{taken}": it exists (another writer committed to the table)', r.stderr)
        self.assertEqual(self.read_text(taken), '{"another": "writer"}')
        self.assertEqual(self.version(s, obj), 1)

    def test_stale_version_hint(self):
        """A crash after a metadata file was published but before
        version-hint.text was replaced leaves the hint one version behind:
        the next run takes the stream's later metadata file as current (it
        does not commit over it), and nothing is committed twice."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icehint")
        pg.execute("CREATE TABLE icehint (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO icehint SELECT g, 'v' || g FROM generate_series(1, 10) g")
        s = self.isluice("icehint", "public.icehint")
        self.catch_up(s)
        obj = "public_icehint"
        pg.execute("UPDATE icehint SET v = 'changed' WHERE id <= 3")
        self.catch_up(s)
        v = self.version(s, obj)
        self.assertGreaterEqual(v, 2)
        self.plant(f"{self.table_dir(s, obj)}/metadata/version-hint.text", str(v - 1).encode())
        pg.execute("INSERT INTO icehint VALUES (11, 'after')")
        r = self.catch_up(s)
        self.assertIn(f"metadata version {v} follows the version {v - 1} of version-hint.text", r.stderr)
        self.assertEqual(self.version(s, obj), v + 1)
        rows = ch_query(f"SELECT id, v, _uuid, _csn, _is_deleted FROM {self.table_fn(s, obj)}")
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows), "a change was committed twice")
        self.assertEqual(len(rows), 10 + 3 + 1)
        last = {}
        for row in sorted(rows, key=lambda row: row["_csn"]):
            last[row["id"]] = row["v"]
        self.assertEqual(last, {r[0]: r[1] for r in pg.sql("SELECT id, v FROM icehint")})

    def test_first_version_without_hint(self):
        """A crash after a new table's first metadata file was published but
        before its version-hint.text was written: the next run takes the
        stream's metadata files as current instead of committing a v1 of its
        own over them (exit 3: it exists), and commits nothing twice."""
        pg = self.pg
        s = self.streamed_table("icehint1", "icehint1", "v text", 10, "'v' || g")
        obj = "public_icehint1"
        v = self.version(s, obj)
        self.take(f"{self.table_dir(s, obj)}/metadata/version-hint.text")
        pg.execute("INSERT INTO icehint1 VALUES (11, 'after')")
        r = self.catch_up(s)
        self.assertIn("metadata version 1 has no version-hint.text yet", r.stderr)
        self.assertEqual(self.version(s, obj), v + 1)
        rows = ch_query(f"SELECT id, v, _uuid FROM {self.table_fn(s, obj)}")
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows), "a change was committed twice")
        self.assertEqual(sorted((r["id"], r["v"]) for r in rows), sorted(pg.sql("SELECT id, v FROM icehint1")))

    def verify(self, s, rc):
        r = s.run("verify", "--stream", s.stream)
        self.assertEqual(r.rc, rc, r.describe())
        return r.stdout

    def current_files(self, s, obj):
        """(snapshots in the metadata, data file paths, their records, delete files) of the current snapshot."""
        _, meta = self.current_metadata(s, obj)
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        data, deletes, records = [], [], 0
        for m in self.read_avro_at(cur["manifest-list"])[1]:
            for e in self.read_avro_at(m["manifest_path"])[1]:
                if e["data_file"]["content"] == 0:
                    data.append(e["data_file"]["file_path"])
                    records += e["data_file"]["record_count"]
                else:
                    deletes.append(e["data_file"]["file_path"])
        return len(meta["snapshots"]), data, records, deletes

    def test_verify_any_number_of_files(self):
        """sluice verify finds each file the metadata names whatever number
        of files lies beside them: it once cut the name of a table's
        version-hint.text key in place in its sorted list while looking keys
        up in it, so that some layouts hid the current manifest list
        ("is missing"; the property cell pg/merge/iceberg, seed 131 with 8
        rounds)."""
        for name in ("icevn_a", "icevn_b"):
            self.pg.execute(TABLE.format(name=name))
            fill(self.pg, name, 1, 20)
        s = self.isluice("icevn", "public.icevn_*")
        self.catch_up(s)
        for k in range(2):
            for name in ("icevn_a", "icevn_b"):
                churn(self.pg, name, 10000 + 100 * k, 3)
            self.catch_up(s)
        # files beside the first table's (data/ sorts before its metadata/)
        # move its keys across the probes of the lookup
        d = self.table_dir(s, "public_icevn_a")
        for n in range(24):
            self.plant(f"{d}/data/orphan-{n:03d}.avro", b"x")
            out = self.verify(s, 0)
            self.assertIn("complete, nothing missing", out, f"{n + 1} files planted")

    def test_verify(self):
        """sluice verify: a good table passes, in both modes, with the
        counts of its current snapshot; a deleted data file, a manifest that
        claims a wrong record count and a snapshot missing from the chain
        are each reported, naming the file."""
        pg = self.pg
        s = self.churned("icev", 100, 3, 5)
        obj = "public_icev"
        nsnaps, data, records, deletes = self.current_files(s, obj)
        self.assertGreaterEqual(nsnaps, 4)
        out = self.verify(s, 0)
        self.assertIn(f"stream icev: 1 tables, {nsnaps} snapshots, {len(data)} data files, 0 delete files, "
                      f"{records} records {self.store_words}", out)
        self.assertIn("complete, nothing missing", out)
        m = self.isluice("icevm", "public.icev", write_mode="merge")
        self.catch_up(m)
        churn(pg, "icev", 20000, 5)
        self.catch_up(m)
        mn, mdata, mrecords, mdeletes = self.current_files(m, obj)
        self.assertGreater(len(mdeletes), 0)
        out = self.verify(m, 0)
        self.assertIn(f"stream icevm: 1 tables, {mn} snapshots, {len(mdata)} data files, {len(mdeletes)} delete "
                      f"files, {mrecords} records {self.store_words}", out)
        d = self.table_dir(s, obj)
        key = lambda p: f"icev/{obj}" + p[len(d):]
        # a data file deleted
        victim = data[1]
        body = self.take(victim)
        out = self.verify(s, 1)
        self.assertIn(f'problem: table "icev/{obj}": data file "{key(victim)}" is missing (manifest "', out)
        self.assertIn("PROBLEMS FOUND: 1\n", out)
        self.plant(victim, body)
        self.verify(s, 0)
        # a manifest that claims one record more for a file, rewritten by python3-avro
        import avro.datafile
        import avro.io
        import avro.schema
        mpath = None
        for mf in self.read_avro_at(self.manifest_list(s, obj))[1]:
            if mf["content"] == 0:
                mpath = mf["manifest_path"]
        meta, entries = self.read_avro_at(mpath)
        orig = self.read_bytes(mpath)
        rmeta = avro.datafile.DataFileReader(io.BytesIO(orig), avro.io.DatumReader()).meta
        entries[0]["data_file"]["record_count"] += 1
        buf = io.BytesIO()
        w = avro.datafile.DataFileWriter(buf, avro.io.DatumWriter(), avro.schema.parse(meta["avro.schema"]))
        for k, v in rmeta.items():
            w.set_meta(k, v)
        for e in entries:
            w.append(e)
        w.flush()
        self.plant(mpath, buf.getvalue())
        fp = entries[0]["data_file"]["file_path"]
        n = entries[0]["data_file"]["record_count"]
        out = self.verify(s, 1)
        self.assertIn(f'problem: table "icev/{obj}": file "{key(fp)}" holds {n - 1} records, manifest '
                      f'"{key(mpath)}" claims {n}\n', out)
        self.plant(mpath, orig)
        self.verify(s, 0)
        # a snapshot missing from the chain: the current metadata file without a middle one
        mfile = f"{d}/metadata/v{self.version(s, obj)}.metadata.json"
        orig = self.read_bytes(mfile)
        meta = json.loads(orig)
        gone = meta["snapshots"].pop(2)
        self.plant(mfile, json.dumps(meta).encode())
        out = self.verify(s, 1)
        self.assertIn(f'problem: table "icev/{obj}": {key(mfile)}: snapshot {meta["snapshots"][2]["snapshot-id"]} '
                      f'(sequence number {gone["sequence-number"] + 1}, position '
                      f'{meta["snapshots"][2]["summary"]["sluice.position"]}) names parent {gone["snapshot-id"]}, '
                      f'which the metadata does not hold, while it holds snapshot '
                      f'{meta["snapshots"][1]["snapshot-id"]} (sequence number {gone["sequence-number"] - 1}', out)
        self.plant(mfile, orig)
        self.verify(s, 0)

    def compact(self, s, want):
        r = s.run("compact", "--stream", s.stream)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(want, r.stdout)
        return r.stdout

    def test_compact_append(self):
        """sluice compact, append mode: the small data files of many flushes
        become one, in a replace snapshot; the rows are the same (every
        _uuid once, the _csn rebuild equals the source) before and after,
        and the agent commits on top of it."""
        pg = self.pg
        s = self.churned("icec", 100, 5, 4)
        obj = "public_icec"
        nsnaps, data, records, _ = self.current_files(s, obj)
        self.assertGreaterEqual(len(data), 6)
        before = self.read_table(s, obj)
        self.assertEqual(rebuild(before), pg_state(pg, "icec"))
        self.compact(s, f"stream icec: {obj}: {len(data)} data files, {records} records, 0 equality deletes -> "
                        f"1 data file, {records} rows; 0 snapshots expired; ")
        n2, data2, records2, _ = self.current_files(s, obj)
        self.assertEqual((n2, len(data2), records2), (nsnaps + 1, 1, records))
        after = self.read_table(s, obj)
        self.assertEqual(sorted(r["_uuid"] for r in after), sorted(r["_uuid"] for r in before))
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in after),
                         sorted(json.dumps(r, sort_keys=True) for r in before))
        with open(os.path.join(self.table_dir(s, obj), "metadata", f"v{self.version(s, obj)}.metadata.json")) as f:
            meta = json.load(f)
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        self.assertEqual(cur["summary"]["operation"], "replace")
        self.assertIn("sluice.last-csn", cur["summary"])
        self.verify(s, 0)
        self.compact(s, f"stream icec: {obj}: nothing to compact; 0 snapshots expired; ")
        changes = churn(pg, "icec", 20000, 5)
        self.catch_up(s)
        rows = self.read_table(s, obj)
        self.assertEqual(len(rows), len(after) + changes)
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows))
        self.assertEqual(rebuild(rows), pg_state(pg, "icec"))
        self.verify(s, 0)

    def test_compact_added_column(self):
        """Compaction of files of two schemas (a column added mid-stream):
        one rewritten file in the current schema, every column of every row the same."""
        pg = self.pg
        s = self.backfilled("icecs", "icecs", 40)
        obj = "public_icecs"
        churn(pg, "icecs", 10000, 3)
        self.catch_up(s)
        pg.execute("ALTER TABLE icecs ADD COLUMN extra int")
        churn(pg, "icecs", 20000, 3)
        pg.execute("UPDATE icecs SET extra = id WHERE id <= 5")
        self.catch_up(s)
        churn(pg, "icecs", 30000, 3)
        self.catch_up(s)
        _, data, records, _ = self.current_files(s, obj)
        read = lambda: sorted(json.dumps(r, sort_keys=True) for r in
                              ch_query(f"SELECT * FROM icebergLocal('{self.table_dir(s, obj)}')"))
        before = read()
        self.assertEqual(len(before), records)
        self.compact(s, f"stream icecs: {obj}: {len(data)} data files, {records} records, 0 equality deletes -> "
                        f"1 data file, {records} rows; ")
        self.assertEqual(read(), before)
        self.verify(s, 0)

    def test_compact_merge(self):
        """sluice compact, merge mode: every data file, with the equality
        deletes applied, becomes one file, and no delete file is left; the
        table equals the source before and after, and after more changes."""
        pg = self.pg
        s = self.churned("icecm", 150, 4, 8, write_mode="merge")
        obj = "public_icecm"
        _, data, records, deletes = self.current_files(s, obj)
        self.assertGreater(len(deletes), 0)
        want = pg_state(pg, "icecm")
        self.assertEqual(self.read_merged(s, obj), want)
        self.compact(s, f"stream icecm: {obj}: {len(data)} data files, {records} records, ")
        _, data2, records2, deletes2 = self.current_files(s, obj)
        self.assertEqual((len(data2), records2, deletes2), (1, len(want), []))
        self.assertEqual(self.read_merged(s, obj), want)
        self.verify(s, 0)
        churn(pg, "icecm", 20000, 8)
        pg.execute("UPDATE icecm SET v = 'after' WHERE id % 3 = 0")
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icecm"))
        self.check_merge_metadata(s, obj)
        # a compaction that loses the race: it reads version K-1 (the hint is
        # behind), finds version K taken when it publishes, and commits on top of it
        churn(pg, "icecm", 30000, 4)
        self.catch_up(s)
        k, meta = self.current_metadata(s, obj)
        last = meta["current-snapshot-id"]
        self.plant(f"{self.table_dir(s, obj)}/metadata/version-hint.text", str(k - 1).encode())
        self.compact(s, f"stream icecm: {obj}: ")
        k1, meta = self.current_metadata(s, obj)
        self.assertEqual(k1, k + 1)
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        self.assertEqual((cur["summary"]["operation"], cur["parent-snapshot-id"]), ("replace", last))
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icecm"))
        self.verify(s, 0)

    def check_sequence_numbers(self, s, obj, read_seq):
        """The sequence numbers of the current snapshot's manifests, read with
        python3-avro, as the specification has them: a manifest's in the
        manifest list is the sequence number of the snapshot that added it;
        an entry's file sequence number (null: the manifest's) is the one of
        the snapshot that added its file; its data sequence number (null:
        the manifest's) is that too, but for the file a compaction rewrote,
        whose data sequence number is read_seq, the snapshot the compaction
        read (the deletes committed after it apply to its rows, those before
        it do not); min_sequence_number is the least data sequence number of
        the manifest's files.  Returns the manifests."""
        _, meta = self.current_metadata(s, obj)
        seqs = {sn["snapshot-id"]: sn["sequence-number"] for sn in meta["snapshots"]}
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        _, manifests = self.read_avro_at(cur["manifest-list"])
        compacted = 0
        for m in manifests:
            where = m["manifest_path"]
            self.assertEqual(m["sequence_number"], seqs[m["added_snapshot_id"]], where)
            data_seqs = []
            for e in self.read_avro_at(where)[1]:
                inherit = lambda v: m["sequence_number"] if v is None else v
                data_seq, file_seq = inherit(e["sequence_number"]), inherit(e["file_sequence_number"])
                added_by = m["added_snapshot_id"] if e["snapshot_id"] is None else e["snapshot_id"]
                self.assertEqual(file_seq, seqs[added_by], where)
                if "/data/compact-" in e["data_file"]["file_path"]:
                    compacted += 1
                    self.assertEqual(data_seq, read_seq, where)
                else:
                    self.assertEqual(data_seq, file_seq, where)
                data_seqs.append(data_seq)
            self.assertEqual(m["min_sequence_number"], min(data_seqs), where)
        self.assertEqual(compacted, 1)
        return manifests

    def test_compact_sequence_numbers(self):
        """The sequence numbers of a compaction's manifests (check_sequence_numbers),
        when it loses the race to the agent's commit (it read version K-1,
        found K taken and committed on top): the delete files of K are kept
        and still apply to the rewritten rows, those it applied are gone;
        then the agent commits on top of the compaction (its manifest list
        carries the compaction's manifest as it is).  ClickHouse reads the
        source's rows each time."""
        pg = self.pg
        s = self.churned("icesq", 100, 3, 6, write_mode="merge")
        obj = "public_icesq"
        churn(pg, "icesq", 20000, 6)
        pg.execute("DELETE FROM icesq WHERE id % 5 = 0 AND id < 100")
        self.catch_up(s)
        # version K: one transaction, a data and a delete manifest (rows of
        # the compacted file updated)
        pg.execute("UPDATE icesq SET v = v || '#' WHERE id <= 10")
        self.catch_up(s)
        k, meta = self.current_metadata(s, obj)
        self.plant(f"{self.table_dir(s, obj)}/metadata/version-hint.text", str(k - 1).encode())
        read_seq = self.current_metadata(s, obj)[1]["last-sequence-number"]
        self.compact(s, f"stream icesq: {obj}: ")
        _, meta = self.current_metadata(s, obj)
        cur = [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]
        self.assertEqual((cur["summary"]["operation"], cur["sequence-number"], read_seq),
                         ("replace", meta["last-sequence-number"], cur["sequence-number"] - 2))
        kept = [m for m in self.check_sequence_numbers(s, obj, read_seq) if m["content"] == 1]
        self.assertEqual([m["sequence_number"] for m in kept], [read_seq + 1], "the deletes of version K")
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icesq"))
        pg.execute("UPDATE icesq SET v = 'after' WHERE id % 3 = 0")
        churn(pg, "icesq", 30000, 4)
        self.catch_up(s)
        self.check_sequence_numbers(s, obj, read_seq)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icesq"))
        self.verify(s, 0)

    def test_compact_beside_agent(self):
        """Compactions while an agent streams changes into the table, in both
        modes, each once its agent committed some of a round's changes
        (compact_beside): every commit of either side lands (the other
        retries on top), and the tables end exact."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icecr")
        pg.execute(TABLE.format(name="icecr"))
        fill(pg, "icecr", 1, 100)
        a = self.isluice("icecra", "public.icecr")
        m = self.isluice("icecrm", "public.icecr", write_mode="merge")
        self.catch_up(a)
        self.catch_up(m)
        obj = "public_icecr"
        changes = 100 + self.compact_beside((a, m), obj, 6, lambda k: churn(pg, "icecr", 10000 + 100 * k, 6))
        want = pg_state(pg, "icecr")
        rows = self.read_table(a, obj)
        self.assertEqual(len(rows), changes)
        self.assertEqual(len({r["_uuid"] for r in rows}), changes)
        self.assertEqual(rebuild(rows), want)
        self.assertEqual(self.read_merged(m, obj), want)
        self.verify(a, 0)
        self.verify(m, 0)

    def test_compact_automatic(self):
        """The agent compacts a table on its own after compact_after_files
        commits to it (merge mode), and goes on committing on top."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS icecauto")
        pg.execute(TABLE.format(name="icecauto"))
        fill(pg, "icecauto", 1, 50)
        s = self.isluice("icecauto", "public.icecauto", write_mode="merge")
        s.extra["destination"].update(compact_after_files=3)
        s.write_config()
        obj = "public_icecauto"
        p = s.start("run")
        try:
            harness.wait_until(lambda: os.path.exists(os.path.join(self.table_dir(s, obj), "metadata",
                                                                   "version-hint.text")), 60, "a first commit")
            for k in range(8):
                v0 = self.version(s, obj)
                churn(pg, "icecauto", 10000 + 100 * k, 3)
                harness.wait_until(lambda: self.version(s, obj) > v0, 60, "a commit")
            harness.wait_until(lambda: self.replaces(s, obj) >= 2, 60, "two automatic compactions")
        finally:
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
        self.assertIn(f'iceberg table "{self.table_dir(s, obj)}": compacted ', r.stderr)
        self.catch_up(s)
        self.assertEqual(self.read_merged(s, obj), pg_state(pg, "icecauto"))
        self.verify(s, 0)

    def test_expire_and_orphans(self):
        """sluice compact expires the snapshots older than
        snapshot_retention but the newest snapshot_keep, and removes the
        files no snapshot left references once older than orphan_grace:
        older ones go, younger ones stay; the table reads the same."""
        pg = self.pg
        s = self.churned("icex", 60, 5, 3)
        obj = "public_icex"
        d = self.table_dir(s, obj)
        before = self.read_table(s, obj)
        nsnaps, data, _, _ = self.current_files(s, obj)
        self.assertGreaterEqual(nsnaps, 6)
        # orphans: files no snapshot references, two old, two young
        old = [os.path.join(d, "data", "old-orphan.avro"), os.path.join(d, "metadata", "old-orphan-m0.avro")]
        young = [os.path.join(d, "data", "young-orphan.avro"), os.path.join(d, "metadata", "snap-1.avro")]
        for p in old + young:
            with open(p, "wb") as f:
                f.write(b"Obj\x01")
        for p in old:
            os.utime(p, (os.path.getmtime(p) - 7200, os.path.getmtime(p) - 7200))
        s.extra["destination"].update(snapshot_retention=0, snapshot_keep=3, orphan_grace="1h")
        s.write_config()
        # the old data files, rewritten, are no longer referenced once their snapshots expire,
        # but they are younger than the grace period too: they stay
        out = self.compact(s, f"stream icex: {obj}: {len(data)} data files")
        self.assertIn("; " + str(nsnaps + 1 - 3) + " snapshots expired; 2 unreferenced files removed", out)
        with open(os.path.join(d, "metadata", f"v{self.version(s, obj)}.metadata.json")) as f:
            meta = json.load(f)
        self.assertEqual(len(meta["snapshots"]), 3)
        self.assertEqual({e["snapshot-id"] for e in meta["snapshot-log"]}, {sn["snapshot-id"] for sn in meta["snapshots"]})
        for p in old:
            self.assertFalse(os.path.exists(p), p)
        for p in young + data:
            self.assertTrue(os.path.exists(p), p)
        after = self.read_table(s, obj)
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in after),
                         sorted(json.dumps(r, sort_keys=True) for r in before))
        self.verify(s, 0)
        # the older snapshots kept still name the rewritten files; with one snapshot kept
        # and no grace, those go too, and only what the snapshot names is left
        s.extra["destination"].update(snapshot_keep=1, orphan_grace=0)
        s.write_config()
        self.compact(s, f"stream icex: {obj}: nothing to compact; 2 snapshots expired; ")
        _, live, _, _ = self.current_files(s, obj)
        self.assertEqual(sorted(os.listdir(os.path.join(d, "data"))), sorted(os.path.basename(p) for p in live))
        for p in data:
            self.assertFalse(os.path.exists(p), p)
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in self.read_table(s, obj)),
                         sorted(json.dumps(r, sort_keys=True) for r in before))
        self.verify(s, 0)
        changes = churn(pg, "icex", 20000, 3)
        self.catch_up(s)
        rows = self.read_table(s, obj)
        self.assertEqual(len(rows), len(before) + changes)
        self.assertEqual(rebuild(rows), pg_state(pg, "icex"))

    def metadata_versions(self, s, obj):
        """The versions N of the table's metadata/vN.metadata.json files."""
        d = os.path.join(self.table_dir(s, obj), "metadata")
        return sorted(int(f[1:-len(".metadata.json")]) for f in os.listdir(d)
                      if f.startswith("v") and f.endswith(".metadata.json"))

    def test_old_metadata_removed(self):
        """Old metadata files, as Iceberg's table properties rule them: with
        write.metadata.previous-versions-max set to 2 (by a commit of the
        table's own, as an engine's ALTER TABLE would), every later commit
        keeps 2 previous versions in metadata-log and removes the file of the
        one it drops (delete-after-commit, sluice's default); the current
        one and those the log names stay, and ClickHouse reads the table
        equal to the source.  A leftover older version (a crash between a
        commit and its remove) goes at the next compaction; with
        delete-after-commit.enabled false, none is removed."""
        pg = self.pg
        s = self.backfilled("icemd", "icemd", 40)
        obj = "public_icemd"
        d = self.table_dir(s, obj)
        churn(pg, "icemd", 10000, 5)
        self.catch_up(s)
        version, meta = self.current_metadata(s, obj)
        self.assertGreaterEqual(version, 2)
        self.assertEqual(self.metadata_versions(s, obj), list(range(1, version + 1)))
        first = self.read_text(f"{d}/metadata/v1.metadata.json")

        def set_props(props):
            v, m = self.current_metadata(s, obj)
            m["properties"].update(props)
            m["metadata-log"].append({"timestamp-ms": m["last-updated-ms"],
                                      "metadata-file": f"{d}/metadata/v{v}.metadata.json"})
            with open(f"{d}/metadata/v{v + 1}.metadata.json", "x") as f:
                json.dump(m, f, indent=2)
            with open(f"{d}/metadata/version-hint.text", "w") as f:
                f.write(str(v + 1))

        set_props({"write.metadata.previous-versions-max": "2"})
        for k in range(4):
            churn(pg, "icemd", 11000 + 100 * k, 5)
            self.catch_up(s)
        version, meta = self.current_metadata(s, obj)
        self.assertGreaterEqual(version, 7)
        self.assertEqual([e["metadata-file"] for e in meta["metadata-log"]],
                         [f"{d}/metadata/v{v}.metadata.json" for v in (version - 2, version - 1)])
        self.assertEqual(self.metadata_versions(s, obj), [version - 2, version - 1, version])
        rows = self.read_table(s, obj)
        self.assertEqual(rebuild(rows), pg_state(pg, "icemd"))
        self.verify(s, 0)
        # a leftover of a crash between a commit and its remove: the compaction's sweep
        with open(f"{d}/metadata/v1.metadata.json", "x") as f:
            f.write(first)
        # (its replace snapshot drops one more version from the log: 2 in all)
        self.compact(s, " data file, 95 rows; 0 snapshots expired; 0 unreferenced files removed, 0 kept "
                     "(younger than orphan_grace); 2 old metadata files removed\n")
        version, meta = self.current_metadata(s, obj)
        self.assertEqual(self.metadata_versions(s, obj), [version - 2, version - 1, version])
        # delete-after-commit off: the log is trimmed, the files stay
        set_props({"write.metadata.delete-after-commit.enabled": "false"})
        kept = self.metadata_versions(s, obj)
        for k in range(2):
            churn(pg, "icemd", 12000 + 100 * k, 5)
            self.catch_up(s)
        version, meta = self.current_metadata(s, obj)
        self.assertEqual(len(meta["metadata-log"]), 2)
        self.assertEqual(self.metadata_versions(s, obj), kept + list(range(kept[-1] + 1, version + 1)))
        self.compact(s, "; 0 old metadata files removed")
        self.assertEqual(rebuild(self.read_table(s, obj)), pg_state(pg, "icemd"))

    def manifest_list(self, s, obj):
        _, meta = self.current_metadata(s, obj)
        return [sn for sn in meta["snapshots"] if sn["snapshot-id"] == meta["current-snapshot-id"]][0]["manifest-list"]

    def test_merge_without_key_refused(self):
        """Merge mode needs a key: a table without one stops the stream
        with exit 3, naming the table, and nothing is committed."""
        self.pg.execute("DROP TABLE IF EXISTS icenokey")
        self.pg.execute("CREATE TABLE icenokey (v int)")
        self.pg.execute("ALTER TABLE icenokey REPLICA IDENTITY FULL")
        self.pg.execute("INSERT INTO icenokey VALUES (1)")
        s = self.isluice("icenk", "public.icenokey", write_mode="merge")
        r = s.run("run", "--until-caught-up")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('table "public"."icenokey" has no unique NOT NULL key, so write_mode = merge', r.stderr)
        self.assertEqual(self.version(s, "public_icenokey"), 0, "a snapshot was committed")



def my_churn(my, t, base, n):
    """MariaDB: inserts, updates, deletes and key changes, one transaction
    each; returns the number of change rows they make (a key change is two)."""
    changes = 0
    for i in range(n):
        changes += my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({base + i}, 'new', 1.5)")
        changes += my.execute(f"UPDATE {t} SET counter = counter + 1, v = CONCAT(v, '+'), amount = -amount "
                              f"WHERE id = {i + 1}")
        if i % 4 == 3:
            changes += my.execute(f"DELETE FROM {t} WHERE id = {base + i - 2}")
        if i % 7 == 6:
            changes += 2 * my.execute(f"UPDATE {t} SET id = id + 1000000 WHERE id = {base + i - 1}")
    return changes


class MyIcebergTest(LocalTables, MyTestCase):
    """MariaDB into Iceberg tables, append and merge mode, read by ClickHouse."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()
        cls.my.execute("CREATE DATABASE app")

    def created(self, t, rows, stream, mode):
        """Table t with rows rows, backfilled by a new stream of write mode
        mode."""
        self.my.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v varchar(200), amount decimal(10,2), "
                        f"counter int NOT NULL DEFAULT 0)")
        for g in range(1, rows + 1):
            self.my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({g}, 'row {g}', {g * 1.25 - 50})")
        s = self.isluice(stream, t, write_mode=mode)
        self.catch_up(s)
        return s

    def assert_source(self, s, t, mode):
        """ClickHouse reads table t as the source has it: merge mode, one row
        per key; append mode, the rows replayed by _csn (a TRUNCATE clearing
        the table), each change once.  Returns the rows read."""
        rows = ch_query(f"SELECT id, v, toString(amount) AS amount, counter, _uuid, _csn, _is_deleted, "
                        f"_change_type FROM {self.table_fn(s, t.replace('.', '_'))}")
        src = {r[0]: (r[1], str(decimal.Decimal(r[2]).normalize()), r[3])
               for r in self.my.sql(f"SELECT id, v, amount, counter FROM {t}")}
        if mode == "merge":
            self.assertEqual(len({r["id"] for r in rows}), len(rows), "a key has two rows")
            self.assertEqual({r["id"]: self.row_state(r) for r in rows}, src)
            return rows
        self.assertEqual(len({r["_uuid"] for r in rows}), len(rows), "a change was committed twice")
        state = {}
        for r in sorted(rows, key=lambda r: r["_csn"]):
            if r["_change_type"] == "TRUNCATE":
                state = {}
            elif r["_is_deleted"]:
                state.pop(r["id"], None)
            else:
                state[r["id"]] = self.row_state(r)
        self.assertEqual(state, src)
        return rows

    def run_changes(self, mode):
        """Backfill, changes, a TRUNCATE and more changes: ClickHouse reads
        the source's rows."""
        my = self.my
        t = f"app.ice_{mode}"
        s = self.created(t, 100, f"my{mode}", mode)
        my_churn(my, t, 10000, 20)
        self.catch_up(s)
        my.execute(f"TRUNCATE TABLE {t}")
        for g in range(1, 31):
            my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({g}, 'again {g}', {g})")
        my_churn(my, t, 20000, 10)
        self.catch_up(s)
        self.assert_source(s, t, mode)

    @staticmethod
    def row_state(r):
        return (r["v"], str(decimal.Decimal(r["amount"]).normalize()), r["counter"])

    def test_merge(self):
        self.run_changes("merge")

    def test_append(self):
        self.run_changes("append")

    def killed(self, mode):
        """kill -9 right after a commit, before its checkpoint: the rerun
        commits nothing twice; then kill -9 at random points while changes
        stream in (after a first commit, with a random number of further
        changes, either at once, a batch pending, or once they are committed
        too).  ClickHouse reads the source's rows each time, append mode
        every change once."""
        my = self.my
        t, obj = f"app.icek_{mode}", f"app_icek_{mode}"
        s = self.created(t, 50, f"myk{mode}", mode)
        changes = 50 + my_churn(my, t, 10000, 20)
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        self.assertEqual(self.version(s, obj), 2, "the killed run committed one snapshot")
        r = self.catch_up(s)
        self.assertIn("last change from the log", r.stderr)
        rows = self.assert_source(s, t, mode)
        if mode == "append":
            self.assertEqual(len(rows), changes)
        seed = int(os.environ.get("SLUICE_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\n    mariadb iceberg kill test seed {seed} (SLUICE_TEST_SEED={seed} to repeat)", file=sys.stderr)
        rnd = random.Random(seed)
        for k in range(3):
            v0 = self.version(s, obj)
            p = s.start("run")
            changes += my_churn(my, t, 20000 + 1000 * k, 5)
            harness.wait_until(lambda: self.version(s, obj) > v0 or not p.alive(), 60, "a commit")
            v1 = self.version(s, obj)
            changes += my_churn(my, t, 20500 + 1000 * k, rnd.randint(1, 15))
            if rnd.random() < 0.5:
                harness.wait_until(lambda: self.version(s, obj) > v1 or not p.alive(), 60, "a second commit")
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            p.signal(signal.SIGKILL)
            p.wait_result(60)
        self.catch_up(s)
        rows = self.assert_source(s, t, mode)
        if mode == "append":
            self.assertEqual(len(rows), changes)

    def test_kill_append(self):
        self.killed("append")

    def test_kill_merge(self):
        self.killed("merge")

    def test_compact_beside_agent(self):
        """Compactions while two agents (append and merge) stream changes of
        one table, each once its agent committed some of a round's changes:
        every commit of either side lands, and the tables end exact (append
        mode: every change once)."""
        my = self.my
        t = "app.icecr"
        a = self.created(t, 100, "mycra", "append")
        # a replica id of its own (a second connection with the same id ends the first one's)
        m = self.isluice("mycrm", t, write_mode="merge",
                         extra={"source": {"server_id": self.my.server_id_for_sluice + 1}})
        self.catch_up(m)
        changes = 100 + self.compact_beside((a, m), "app_icecr", 6, lambda k: my_churn(my, t, 10000 + 100 * k, 6))
        self.assertEqual(len(self.assert_source(a, t, "append")), changes)
        self.assert_source(m, t, "merge")
        for s in (a, m):
            r = s.run("verify", "--stream", s.stream)
            self.assertEqual(r.rc, 0, r.describe())

    def created_as(self, t, columns, rows, stream, mode):
        """Table t of columns (their definitions) with rows (each the text
        of an INSERT's VALUES), backfilled by a new stream of write mode
        mode."""
        self.my.execute(f"CREATE TABLE {t} ({columns})")
        for r in rows:
            self.my.execute(f"INSERT INTO {t} VALUES ({r})")
        s = self.isluice(stream, t, write_mode=mode)
        self.catch_up(s)
        return s

    def assert_columns_and_rows(self, s, t, obj, mode, once=True):
        """ClickHouse reads table t's columns as MariaDB has them now (the
        payload fields of the current schema), and its rows: merge mode, one
        row per key; append mode, the latest change per key by _csn.  No two
        schemas have the same fields (none made twice), unless once is
        False.  Returns the table's metadata."""
        db, name = t.split(".")
        cols = [r[0] for r in self.my.sql(f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "
                                          f"TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{name}' "
                                          f"ORDER BY ORDINAL_POSITION")]
        fn = self.table_fn(s, obj)
        self.assertEqual([c["name"] for c in ch_query(f"DESCRIBE TABLE {fn}") if not c["name"].startswith("_")],
                         cols)
        rows = ch_query(f"SELECT {', '.join(cols)}, _csn, _is_deleted FROM {fn}")
        state = {}
        for r in sorted(rows, key=lambda r: r["_csn"]):
            if r["_is_deleted"]:
                state.pop(r["id"], None)
            else:
                state[r["id"]] = tuple(r[c] for c in cols)
        if mode == "merge":
            self.assertEqual(len(state), len(rows), "a key has two rows, or a deleted row is left")
        self.assertEqual(state, {r[0]: tuple(r) for r in self.my.sql(f"SELECT {', '.join(cols)} FROM {t}")})
        meta = self.current_metadata(s, obj)[1]
        fields = [sorted((f["id"], f["name"]) for f in sc["fields"]) for sc in meta["schemas"]]
        if once:
            self.assertEqual(len(fields), len({json.dumps(f) for f in fields}), f"two schemas with the same fields: {fields}")
        return meta

    def ddl_alone(self, mode):
        """Columns added and dropped at the source (MariaDB) with no change
        of the table after them: each becomes the Iceberg table's current
        schema with no new snapshot (a commit of the metadata alone), while
        the agent runs, and in a run started after the statement; kill -9
        right after that commit, before its checkpoint: the rerun commits
        nothing more (the version handed again has its schema already).
        ClickHouse reads the source's columns and rows each time, and after
        changes of the new columns; sluice verify passes."""
        my = self.my
        t, obj = f"app.iced_{mode}", f"app_iced_{mode}"
        s = self.created_as(t, "id int PRIMARY KEY, v varchar(50), n int",
                            [f"{g}, 'v{g}', {g * 10}" for g in range(1, 21)], f"myd{mode}", mode)
        my.execute(f"UPDATE {t} SET v = CONCAT(v, '+') WHERE id <= 5")
        my.execute(f"DELETE FROM {t} WHERE id = 6")
        self.catch_up(s)
        snapshot = self.assert_columns_and_rows(s, t, obj, mode)["current-snapshot-id"]

        def current_fields():
            meta = self.current_metadata(s, obj)[1]
            return [f["name"] for sc in meta["schemas"] if sc["schema-id"] == meta["current-schema-id"]
                    for f in sc["fields"]]

        p = s.start("run")
        try:
            for ddl, ready in ((f"ALTER TABLE {t} ADD COLUMN c5 int", lambda: "c5" in current_fields()),
                               (f"ALTER TABLE {t} DROP COLUMN n", lambda: "n" not in current_fields())):
                my.execute(ddl)
                try:
                    harness.wait_until(lambda: ready() or not p.alive(), 60, f"the table's schema after {ddl!r}")
                except TimeoutError:
                    p.signal(signal.SIGTERM)
                    print(p.wait_result(60).describe())
                    raise
                self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
                meta = self.assert_columns_and_rows(s, t, obj, mode)
                self.assertEqual(meta["current-snapshot-id"], snapshot, "a snapshot was committed")
        finally:
            p.signal(signal.SIGTERM)
            p.wait_result(60)
        my.execute(f"ALTER TABLE {t} ADD COLUMN c6 varchar(20)")
        r = self.catch_up(s)
        # read below the run's start: described from the catalog once the
        # stream passed it (no change of the table came)
        self.assertIn(f'table "app"."iced_{mode}": its columns at the run\'s start go to the destination', r.stderr)
        self.assertIn("c6", current_fields())
        self.assert_columns_and_rows(s, t, obj, mode)
        my.execute(f"ALTER TABLE {t} DROP COLUMN v")
        v0 = self.version(s, obj)
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        self.assertEqual(self.version(s, obj), v0 + 1, "the killed run committed the schema")
        nschemas = len(self.current_metadata(s, obj)[1]["schemas"])
        self.catch_up(s)
        self.assertEqual(self.version(s, obj), v0 + 1, "the rerun committed again")
        meta = self.assert_columns_and_rows(s, t, obj, mode)
        self.assertEqual((len(meta["schemas"]), meta["current-snapshot-id"]), (nschemas, snapshot))
        my.execute(f"INSERT INTO {t} (id, c5, c6) VALUES (100, 5, 'six')")
        my.execute(f"UPDATE {t} SET c5 = id, c6 = CONCAT('c', id) WHERE id <= 3")
        my.execute(f"DELETE FROM {t} WHERE id = 7")
        self.catch_up(s)
        self.assert_columns_and_rows(s, t, obj, mode)
        r = s.run("verify", "--stream", s.stream)
        self.assertEqual(r.rc, 0, r.describe())

    def test_ddl_alone_append(self):
        self.ddl_alone("append")

    def test_ddl_alone_merge(self):
        self.ddl_alone("merge")

    def widened(self, mode):
        """Widening in place (MariaDB): MODIFY of the key and of columns, int
        to BIGINT, FLOAT to DOUBLE, DECIMAL(10,2) to DECIMAL(14,2), one
        ALTER: no backfill again, so the old rows stay in data files of the
        old types.  Rows before and after it, updates and a delete of old
        rows (merge mode: equality deletes of long keys over files of int
        keys, and updates with binlog_row_image=MINIMAL whose unchanged
        values are taken from files of the old schema, converted), a
        compaction and changes after it: ClickHouse reads the source's rows."""
        my, merge = self.my, mode == "merge"
        t, obj = f"app.icew_{mode}", f"app_icew_{mode}"
        rows = [f"{g}, {2147483647 - g}, {g + 0.25}, {g * -1234567.89:.2f}, 'v{g}'" for g in range(1, 31)]
        s = self.created_as(t, "id int PRIMARY KEY, i int, f float, n decimal(10,2), v varchar(200)", rows,
                            f"myw{mode}", mode)
        my.execute(f"UPDATE {t} SET v = CONCAT(v, '+') WHERE id <= 3")
        self.catch_up(s)

        def check():
            rows = ch_query(f"SELECT id, i, f, toString(n) AS n, v, _csn, _is_deleted, _change_type, "
                            f"_unchanged_columns AS u FROM {self.table_fn(s, obj)}")
            self.assertFalse([r for r in rows if r["u"]], "unchanged values left unfilled")
            state = {}
            for r in sorted(rows, key=lambda r: r["_csn"]):
                if r["_is_deleted"]:
                    state.pop(int(r["id"]), None)
                else:
                    state[int(r["id"])] = (int(r["i"]), r["f"], str(decimal.Decimal(r["n"]).normalize()), r["v"])
            if merge:
                self.assertEqual(len(state), len(rows), "a key has two rows, or a deleted row is left")
            self.assertEqual(state, {r[0]: (r[1], r[2], str(r[3].normalize()), r[4])
                                     for r in my.sql(f"SELECT id, i, f, n, v FROM {t}")})
            return rows

        check()
        my.execute(f"ALTER TABLE {t} MODIFY id bigint NOT NULL, MODIFY i bigint, MODIFY f double, "
                   f"MODIFY n decimal(14,2)")
        for g in range(1, 4):
            my.execute(f"INSERT INTO {t} VALUES ({4294967296 + g}, {g * 8589934592}, {g}.5e300, "
                       f"999999999999.9{g}, 'big{g}')")
        my.execute(f"UPDATE {t} SET v = CONCAT(v, '!') WHERE id BETWEEN 2 AND 6")
        my.execute(f"UPDATE {t} SET n = -999999999999.99, f = 0.1 WHERE id = 11")
        my.execute(f"DELETE FROM {t} WHERE id IN (12, 4294967297)")
        if merge:
            # the row images name only the changed columns: the others are
            # taken from the key's row in a data file of the old schema
            my.execute("SET SESSION binlog_row_image = MINIMAL")
            my.execute(f"UPDATE {t} SET v = CONCAT(v, '#') WHERE id BETWEEN 5 AND 9 OR id = 4294967298")
            my.execute("SET SESSION binlog_row_image = FULL")
        self.catch_up(s)
        meta = self.current_metadata(s, obj)[1]
        self.assertEqual([{f["name"]: (f["id"], f["type"]) for f in sc["fields"] if f["name"] in ("id", "i", "f", "n")}
                          for sc in (meta["schemas"][0], meta["schemas"][-1])],
                         [{"id": (1, "int"), "i": (2, "int"), "f": (3, "float"), "n": (4, "decimal(10, 2)")},
                          {"id": (1, "long"), "i": (2, "long"), "f": (3, "double"), "n": (4, "decimal(14, 2)")}])
        before = sorted(json.dumps(r, sort_keys=True) for r in check())

        def filtered():
            """Row 20, never changed, in a file of the old schema: a filter
            on each widened column finds it (the file's bounds are of the
            old type)."""
            conds = ("i = 2147483627", "f = 20.25", "n = toDecimal64('-24691357.80', 2)", "id = 20")
            got = ch_query(" UNION ALL ".join(f"SELECT {k} AS k, id FROM {self.table_fn(s, obj)} WHERE {c}"
                                              for k, c in enumerate(conds)))
            self.assertEqual(sorted((r["k"], int(r["id"])) for r in got), [(k, 20) for k in range(len(conds))])

        filtered()
        r = s.run("compact", "--stream", s.stream)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("-> 1 data file", r.stdout)
        self.assertEqual(sorted(json.dumps(r, sort_keys=True) for r in check()), before)
        filtered()
        my.execute(f"UPDATE {t} SET v = CONCAT(v, '&') WHERE id IN (1, 13, 4294967299)")
        my.execute(f"INSERT INTO {t} VALUES (31, -9223372036854775807, -2.5e-300, -0.01, 'last')")
        self.catch_up(s)
        check()

    def test_widen_merge(self):
        self.widened("merge")

    def test_widen_append(self):
        self.widened("append")

    def catalog_ahead(self, mode, tag=None):
        """A run killed after committing an ALTER TABLE ... ADD COLUMN c2
        and a change after it, before its checkpoint; then, while sluice is
        stopped, changes with c2, and an ALTER TABLE ... ADD COLUMN c3 with
        a default that is not a constant (backfilled again while streaming)
        with no change after it.  The next run replays from the checkpoint:
        at the ALTER of c2 the catalog already has c3 (the version the
        source hands there is ahead of the binlog), the changes after it
        have the binlog's version without c3, and only the ALTER of c3
        brings c3 again (the path of property seed 4303,
        mariadb/append/iceberg, where the table ended without c3).  The
        table ends with the source's columns and rows, also after a change
        of c3.  Returns the table's metadata."""
        my = self.my
        watermark_table(my)
        tag = tag or mode   # a table and stream of its own: a bucket outlives a test
        t, obj = f"app.icecat_{tag}", f"app_icecat_{tag}"
        my.execute(f"DROP TABLE IF EXISTS {t}")
        s = self.created_as(t, "id int PRIMARY KEY, v varchar(50)", [f"{g}, 'v{g}'" for g in range(1, 11)],
                            f"mycat{tag}", mode)
        my.execute(f"ALTER TABLE {t} ADD COLUMN c2 int")
        my.execute(f"UPDATE {t} SET c2 = id WHERE id <= 3")
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        my.execute(f"INSERT INTO {t} (id, v, c2) VALUES (11, 'v11', 11)")
        my.execute(f"UPDATE {t} SET c2 = -id WHERE id BETWEEN 4 AND 6")
        my.execute(f"ALTER TABLE {t} ADD COLUMN c3 int DEFAULT (FLOOR(RAND() * 1000))")
        self.ahead_logs = [r.describe()]
        r = self.catch_up(s)
        self.ahead_logs.append(r.describe())
        self.assertIn('column "c3" was added with a default that is not a constant', r.stderr)
        self.assert_columns_and_rows(s, t, obj, mode, once=False)
        my.execute(f"UPDATE {t} SET c3 = -c3 WHERE id = 2")
        self.ahead_logs.append(self.catch_up(s).describe())
        return self.assert_columns_and_rows(s, t, obj, mode, once=False)

    def test_catalog_ahead_append(self):
        self.catalog_ahead("append")

    def test_catalog_ahead_merge(self):
        self.catalog_ahead("merge")

    def test_catalog_ahead_one_field_id(self):
        """As test_catalog_ahead_append, and no schema is made twice: c3 has
        one field id.  The replayed ALTER of c2, below the run's start, is
        described by the next table map, not by the catalog (ahead of the
        binlog there, with c3): handed to the destination, that version gave
        c3 a field id, the changes after it (the binlog's version, without
        c3) dropped it, and the ALTER of c3 added it again with a new field
        id, so that a row written with c3 under the first id would read it
        null."""
        meta = self.catalog_ahead("append", "onefield")
        fields = [sorted((f["id"], f["name"]) for f in sc["fields"]) for sc in meta["schemas"]]
        self.assertEqual(len(fields), len({json.dumps(f) for f in fields}),
                         f"two schemas with the same fields: {fields}\n" + "\n".join(self.ahead_logs))
        self.assertEqual([[n for _, n in f if not n.startswith("_")] for f in fields],
                         [["id", "v"], ["id", "v", "c2"], ["id", "v", "c2", "c3"]])

    def test_truncate_before_redone_backfill_merge(self):
        """The initial backfill killed right after its commit, before its
        checkpoint (SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT); then inserts, a
        TRUNCATE and more inserts.  The next run redoes the backfill in a
        later snapshot, commits its rows, and streams from the first run's
        position: the changes before that snapshot, the TRUNCATE with them,
        are in it and skipped, as their rows are.  Written there, the
        TRUNCATE would drop every earlier file of the merge table, the
        snapshot's rows with them, and the rows of the inserts after it
        (skipped) would be lost: the soak's binary, built without 33b8b01's
        my_query.c, lost (3, 'k106') so (property seed 4204,
        mariadb/merge/iceberg_s3)."""
        my = self.my
        t, obj = "app.redo_trunc", "app_redo_trunc"
        my.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v varchar(200), amount decimal(10,2), "
                   f"counter int NOT NULL DEFAULT 0)")
        for g in range(1, 11):
            my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({g}, 'row {g}', {g})")
        s = self.isluice("redotrunc", t, write_mode="merge")
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        self.assertEqual(self.version(s, obj), 1, "the killed run committed the backfill")
        for g in range(11, 21):
            my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({g}, 'row {g}', {g})")
        my.execute(f"TRUNCATE TABLE {t}")
        for g in range(21, 31):
            my.execute(f"INSERT INTO {t} (id, v, amount) VALUES ({g}, 'again {g}', {g})")
        r = self.catch_up(s)
        self.assertIn("redoing the interrupted backfill of app.redo_trunc", r.stderr)
        rows = self.assert_source(s, t, "merge")
        self.assertEqual(sorted(int(x["id"]) for x in rows), list(range(21, 31)))


class IcebergReplayTest(LocalTables, PgTestCase):
    """Older table versions after newer ones (doc/iceberg.md, "Older table
    versions"): a run that replays the log from a position before what the
    table already holds hands the sink the versions of those positions
    after a newer one.  A column the older version lacks stays in the
    Iceberg table, with its field id (null in the older change's row):
    taken for dropped, it would come back with a new field id once the
    stream passes the DDL that added it, and its values in the files
    written before would be invisible."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()

    def made(self, t, rows):
        self.pg.execute(f"DROP TABLE IF EXISTS {t}")
        self.pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, c1 text)")
        self.pg.execute(f"INSERT INTO {t} SELECT g, 'a' || g FROM generate_series(1, {rows}) g")
        self.pg.execute(f"ANALYZE {t}")   # 10,000 rows or more: read in chunks (doc/operations.md, "Scale")

    def assert_source(self, s, t, columns, mode):
        """The table equals the source, and every column has one field id
        in every schema of the metadata (none was dropped and added again)."""
        obj = f"public_{t}"
        self.assertEqual(IcebergTest.table_rows(self, s, obj, columns, mode), IcebergTest.pg_rows(self, t, columns))
        _, meta = self.current_metadata(s, obj)
        ids = {}
        for sc in meta["schemas"]:
            for f in sc["fields"]:
                ids.setdefault(f["name"], set()).add(f["id"])
        self.assertEqual({n: v for n, v in ids.items() if len(v) > 1}, {}, "a column with two field ids")
        cur = [sc for sc in meta["schemas"] if sc["schema-id"] == meta["current-schema-id"]][0]
        self.assertEqual([f["name"] for f in cur["fields"] if not f["name"].startswith("_")], ["id", *columns])

    def backfill_resumed(self, mode):
        """The initial backfill is killed after its first chunk was
        checkpointed and its second committed; a column is added after the
        slot's position, with changes before and after it.  The next run
        resumes the backfill after the first chunk in a later snapshot,
        with the column, and then streams from the slot's position, whose
        changes have the version before it (the path of property seed 109,
        there with an S3 outage)."""
        pg = self.pg
        t = f"icerb_{mode}"
        self.made(t, 12000)
        s = self.isluice(f"icerb{mode}", f"public.{t}", write_mode=mode, max_file_bytes=65536,
                         extra={"source": {"backfill_chunk_rows": 5000}})   # a commit per chunk
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "2"})
        self.assertEqual(r.rc, -9, r.describe())
        pg.execute(f"UPDATE {t} SET c1 = 'b' || id WHERE id % 1000 = 0")
        pg.execute(f"ALTER TABLE {t} ADD COLUMN c2 int")
        pg.execute(f"UPDATE {t} SET c2 = id WHERE id > 11990")
        pg.execute(f"INSERT INTO {t} VALUES (12001, 'new', 12001)")
        r = self.catch_up(s)
        self.assertIn("resuming after its last durable chunk", r.stderr)
        self.assert_source(s, t, ("c1", "c2"), mode)
        pg.execute(f"UPDATE {t} SET c2 = -c2 WHERE id = 11995")
        self.catch_up(s)
        self.assert_source(s, t, ("c1", "c2"), mode)

    def default_behind_checkpoint(self, mode):
        """A column added with a constant default while sluice is stopped,
        its checkpoint behind a commit of a change before it: the next run
        backfills the table again behind a marker with the catalog's
        columns, then replays the log from the checkpoint, whose changes
        have the version before it (property seed 1107)."""
        pg = self.pg
        t = f"icerd_{mode}"
        self.made(t, 20)
        s = self.isluice(f"icerd{mode}", f"public.{t}", write_mode=mode)
        self.catch_up(s)
        pg.execute(f"UPDATE {t} SET c1 = 'b' || id WHERE id <= 5")
        pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": "1"})
        self.assertEqual(r.rc, -9, r.describe())
        pg.execute(f"ALTER TABLE {t} ADD COLUMN c2 int DEFAULT 7")
        r = self.catch_up(s)
        self.assertIn(f'column "c2" was added with a default', r.stderr)
        self.assert_source(s, t, ("c1", "c2"), mode)
        pg.execute(f"UPDATE {t} SET c2 = -c2 WHERE id = 3")
        self.catch_up(s)
        self.assert_source(s, t, ("c1", "c2"), mode)

    def test_default_behind_checkpoint_append(self):
        self.default_behind_checkpoint("append")

    def test_default_behind_checkpoint_merge(self):
        self.default_behind_checkpoint("merge")

    def test_backfill_resumed_append(self):
        self.backfill_resumed("append")

    def test_backfill_resumed_merge(self):
        self.backfill_resumed("merge")


class IcebergMarkerTest(LocalTables, PgTestCase):
    """Merge mode applies records in the order they come, while a reader of
    the other destinations applies them in CSN order (doc/output.md, "Where
    a marker sorts").  A marker stands above everything the run may still
    read of the table: changes the stream reads after it, below it, are
    cleared by it, and the merge table must not take them; nor must it keep
    the rows of an interrupted backfill that are gone from the source when
    the backfill is done again (doc/iceberg.md, "Merge mode")."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()

    def parted(self, t, rows, partitions):
        """Partitioned table t (id, part, v) with partitions t_0 ... of
        rows rows each, v = id."""
        pg = self.pg
        pg.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        pg.execute(f"CREATE TABLE {t} (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                   f"PARTITION BY LIST (part)")
        for k in range(partitions):
            pg.execute(f"CREATE TABLE {t}_{k} PARTITION OF {t} FOR VALUES IN ({k})")
            pg.execute(f"INSERT INTO {t} SELECT g, {k}, g FROM generate_series(1, {rows}) g")
        pg.execute(f"ANALYZE {t}")

    def assert_parted(self, s, t):
        """The merge table of t equals the source, row by row."""
        got = ch_query(f"SELECT id, part, v FROM {self.table_fn(s, 'public_' + t)}")
        self.assertEqual(len(got), len({(r["id"], r["part"]) for r in got}), "a key has two rows")
        self.assertEqual({(r["id"], r["part"]): r["v"] for r in got},
                         {(r[0], r[1]): r[2] for r in self.pg.sql(f"SELECT id, part, v FROM {t}")})

    def test_detached_behind_another_backfill(self):
        """A partition detached while sluice is stopped, after an update of
        its rows through the root: the next run backfills the root again
        behind a marker above the run's start, but its chunks wait for the
        backfill queued before it (another table's), while the stream
        replays the update from the checkpoint.  The update's rows, read
        after the marker and below it, are of a partition no longer the
        root's: the merge table must not keep them (property seed 4203,
        pg/merge/iceberg_s3: 'wm4203.wp extra in output (not in source):
        (12, 1)', the rows its attach's update touched)."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS mkaa")
        pg.execute("CREATE TABLE mkaa (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO mkaa SELECT g, 'a' || g FROM generate_series(1, 50) g")
        self.parted("mkpart", 20, 2)
        s = self.isluice("mkd", "public.mkaa, public.mkpart", write_mode="merge")
        self.catch_up(s)
        self.assert_parted(s, "mkpart")
        pg.execute("UPDATE mkpart SET v = v + 1000 WHERE id % 3 = 0")
        pg.execute("ALTER TABLE mkpart DETACH PARTITION mkpart_1")
        r = s.run("backfill", "--stream", s.stream, "--table", "public.mkaa")
        self.assertEqual(r.rc, 0, r.describe())
        r = self.catch_up(s)
        self.assertIn("the partitions of public.mkpart changed", r.stderr)
        self.assertLess(r.stderr.index("backfilled public.mkaa while streaming"),
                        r.stderr.index("backfilled public.mkpart while streaming"), r.stderr)
        self.assertIn("mkpart\": skipping the changes below its last TRUNCATE", r.stderr)
        self.assert_parted(s, "mkpart")
        pg.execute("UPDATE mkpart SET v = -v WHERE id % 4 = 0")
        self.catch_up(s)
        self.assert_parted(s, "mkpart")

    def interrupted(self, stream, tables, commits, **kw):
        """A merge stream of tables whose initial backfill is killed (kill
        -9) right after its commits-th commit, before its checkpoint."""
        s = self.isluice(stream, tables, write_mode="merge", **kw)
        r = s.run("run", "--until-caught-up", env={"SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT": str(commits)})
        self.assertEqual(r.rc, -9, r.describe())
        return s

    def assert_rows(self, s, t):
        """The merge table of t (id int PRIMARY KEY, v text) equals the source."""
        got = ch_query(f"SELECT id, v FROM {self.table_fn(s, 'public_' + t)}")
        self.assertEqual(len(got), len({r["id"] for r in got}), "a key has two rows")
        self.assertEqual({r["id"]: r["v"] for r in got}, dict(self.pg.sql(f"SELECT id, v FROM {t}")))

    def test_redone_without_rows_deleted(self):
        """The initial backfill's rows committed, its checkpoint not: the
        next run does it again in a new snapshot, from which rows were
        deleted (and others updated, inserted) meanwhile.  The committed
        rows of the deleted keys must go, though the redo writes no row of
        them."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS mkr")
        pg.execute("CREATE TABLE mkr (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO mkr SELECT g, 'a' || g FROM generate_series(1, 40) g")
        s = self.interrupted("mkr", "public.mkr", 1)
        pg.execute("DELETE FROM mkr WHERE id % 4 = 1")
        pg.execute("UPDATE mkr SET v = 'b' || id WHERE id % 4 = 2")
        pg.execute("INSERT INTO mkr VALUES (41, 'new')")
        r = self.catch_up(s)
        self.assertIn("redoing the interrupted backfill of public.mkr", r.stderr)
        self.assert_rows(s, "mkr")

    def test_resumed_without_rows_deleted(self):
        """The initial backfill in chunks killed after its first chunk was
        checkpointed and its second committed; rows of both chunks deleted
        before the next run, which resumes after the first chunk in a new
        snapshot (the second chunk's committed rows are read again) and
        streams the deletes from the slot's position."""
        pg = self.pg
        pg.execute("DROP TABLE IF EXISTS mks")
        pg.execute("CREATE TABLE mks (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO mks SELECT g, 'a' || g FROM generate_series(1, 12000) g")
        pg.execute("ANALYZE mks")   # 10,000 rows or more: read in chunks
        s = self.interrupted("mks", "public.mks", 2, max_file_bytes=65536,
                             extra={"source": {"backfill_chunk_rows": 5000}})
        pg.execute("DELETE FROM mks WHERE id % 1000 = 7 OR id BETWEEN 4990 AND 5010")
        r = self.catch_up(s)
        self.assertIn("resuming after its last durable chunk", r.stderr)
        self.assert_rows(s, "mks")

    def test_detached_after_an_interrupted_backfill(self):
        """The root's initial backfill committed, its checkpoint not; a
        partition detached before the next run, which must not keep its
        rows: the root is backfilled again from the start, behind a
        marker."""
        self.parted("mkq", 20, 2)
        s = self.interrupted("mkq", "public.mkq", 1)
        self.pg.execute("ALTER TABLE mkq DETACH PARTITION mkq_1")
        r = self.catch_up(s)
        self.assertIn("the partitions of public.mkq changed", r.stderr)
        self.assert_parted(s, "mkq")


if __name__ == "__main__":
    unittest.main()
