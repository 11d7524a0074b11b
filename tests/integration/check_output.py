#!/usr/bin/python3
"""
tests/integration/check_output.py: checks an avro_dir output tree against the
record and layout contract (doc/ and the interface contract in DESIGN).

It reads every file with Python's reference Avro reader and reports every
breach it finds:

  layout   <path>/<stream>/<object>/YYYY/MM/DD/HH/mm/<first>_<last>_<8hex>.avro;
           the time folders are the UTC source time of the file's first record;
           first/last are the CSNs of the first and last record in the file;
           nothing else is visible: files whose name starts with '.'
           (temporary files, and the tree's manifests and .schema.avsc
           files, which `sluice verify` checks) are ignored, any other
           non-.avro file is an error.
  records  every record has the Datastream-style fields; uuid is a UUIDv5;
           sort_keys are the two CSN parts; object is "<schema>_<table>" and
           matches the folder; stream_name matches the folder; backfill rows
           have sequence 0, CDC rows a sequence >= 1; records in a file are in
           CSN order and share one schema_key; TRUNCATE carries no values.

Used as a library by harness.py (check_tree) and as a command:

  /usr/bin/python3 tests/integration/check_output.py OUT_DIR [--codec deflate]

which prints each problem and exits 1 if there is any, 0 otherwise.
Only the standard library and python3-avro are needed.
"""

import argparse
import datetime
import os
import re
import sys
import uuid as uuidlib

import avro.datafile
import avro.io

CSN_RE = re.compile(r"^([0-9A-F]{16})-([0-9]{10})$")
FILE_RE = re.compile(r"^([0-9A-F]{16}-[0-9]{10})_([0-9A-F]{16}-[0-9]{10})_[0-9A-Fa-f]{8}\.avro$")
TIME_PARTS_RE = [re.compile(r"^[0-9]{4}$")] + [re.compile(r"^[0-9]{2}$")] * 4

TOP_FIELDS = ("uuid", "read_timestamp", "source_timestamp", "object", "read_method",
              "stream_name", "schema_key", "sort_keys", "source_metadata", "payload")
META_FIELDS = ("schema", "table", "change_type", "is_deleted", "primary_keys",
               "change_sequence_number", "tx_id", "unchanged_columns", "lsn")
CHANGE_TYPES = ("INSERT", "UPDATE-INSERT", "UPDATE-DELETE", "DELETE", "TRUNCATE")
PG_METHODS = ("postgresql-cdc-wal", "postgresql-backfill")
READ_METHODS = PG_METHODS + ("mysql-cdc-binlog", "mysql-backfill-fulldump")
BACKFILL_METHODS = ("postgresql-backfill", "mysql-backfill-fulldump")


def csn_parts(csn):
    """Returns (position int, sequence int) of a CSN string, or None if malformed."""
    if not isinstance(csn, str):
        return None
    m = CSN_RE.match(csn)
    if not m:
        return None
    return int(m.group(1), 16), int(m.group(2))


def _is_utc_datetime(v):
    return isinstance(v, datetime.datetime) and v.tzinfo is not None and v.utcoffset() == datetime.timedelta(0)


def check_record(rec, where, errors, stream=None, obj=None):
    """Appends to errors every contract breach of one record.  where prefixes messages."""
    if not isinstance(rec, dict):
        errors.append(f"{where}: record is not a record: {rec!r}")
        return
    missing = [f for f in TOP_FIELDS if f not in rec]
    if missing:
        errors.append(f"{where}: missing top-level fields {missing}")
        return
    try:
        u = uuidlib.UUID(rec["uuid"])
        if str(u) != rec["uuid"].lower() or u.version != 5:
            errors.append(f"{where}: uuid {rec['uuid']!r} is not a canonical UUIDv5")
    except (ValueError, TypeError, AttributeError):
        errors.append(f"{where}: uuid {rec['uuid']!r} is not a UUID")
    for f in ("read_timestamp", "source_timestamp"):
        if not _is_utc_datetime(rec[f]):
            errors.append(f"{where}: {f} {rec[f]!r} is not a timestamp-micros (UTC datetime)")
    if rec["read_method"] not in READ_METHODS:
        errors.append(f"{where}: unknown read_method {rec['read_method']!r}")
    if stream is not None and rec["stream_name"] != stream:
        errors.append(f"{where}: stream_name {rec['stream_name']!r} is not the folder's {stream!r}")
    if not isinstance(rec["schema_key"], str) or not rec["schema_key"]:
        errors.append(f"{where}: empty schema_key")
    sm = rec["source_metadata"]
    if not isinstance(sm, dict):
        errors.append(f"{where}: source_metadata is not a record")
        return
    missing = [f for f in META_FIELDS if f not in sm]
    if rec["read_method"] not in PG_METHODS:
        missing = [f for f in missing if f not in ("lsn", "schema")]
    if missing:
        errors.append(f"{where}: source_metadata lacks {missing}")
        return
    ns = sm.get("schema", sm.get("database"))
    want_obj = object_name(ns, sm["table"])
    if rec["object"] != want_obj:
        errors.append(f"{where}: object {rec['object']!r} is not <schema>_<table> = {want_obj!r}")
    if obj is not None and rec["object"] != obj:
        errors.append(f"{where}: object {rec['object']!r} is not the folder's {obj!r}")
    ct = sm["change_type"]
    if ct not in CHANGE_TYPES:
        errors.append(f"{where}: unknown change_type {ct!r}")
    if not isinstance(sm["is_deleted"], bool):
        errors.append(f"{where}: is_deleted {sm['is_deleted']!r} is not a boolean")
    elif ct == "DELETE" and not sm["is_deleted"]:
        errors.append(f"{where}: DELETE with is_deleted false")
    elif ct in ("INSERT", "UPDATE-INSERT") and sm["is_deleted"]:
        errors.append(f"{where}: {ct} with is_deleted true")
    if not isinstance(sm["primary_keys"], list) or not all(isinstance(k, str) for k in sm["primary_keys"]):
        errors.append(f"{where}: primary_keys {sm['primary_keys']!r} is not an array of strings")
    uc = sm["unchanged_columns"]
    if uc is not None and (not isinstance(uc, list) or not all(isinstance(k, str) for k in uc)):
        errors.append(f"{where}: unchanged_columns {uc!r} is not an array of strings")
    csn = sm["change_sequence_number"]
    parts = csn_parts(csn)
    if parts is None:
        errors.append(f"{where}: change_sequence_number {csn!r} is not 16 hex digits, '-', 10 digits")
    else:
        if rec["sort_keys"] != csn.split("-"):
            errors.append(f"{where}: sort_keys {rec['sort_keys']!r} are not the CSN parts of {csn!r}")
        if rec["read_method"] in BACKFILL_METHODS:
            if parts[1] != 0:
                errors.append(f"{where}: backfill row with CSN sequence {parts[1]} (want 0)")
            # backfill rows are INSERTs; a re-backfill starts with a TRUNCATE marker
            if ct not in ("INSERT", "TRUNCATE"):
                errors.append(f"{where}: backfill row with change_type {ct!r}")
        elif parts[1] < 1:
            errors.append(f"{where}: CDC change with CSN sequence {parts[1]} (want >= 1)")
    payload = rec["payload"]
    if not isinstance(payload, dict):
        errors.append(f"{where}: payload is not a record")
    elif ct == "TRUNCATE" and any(v is not None for v in payload.values()):
        errors.append(f"{where}: TRUNCATE with non-null payload values")


def check_file(root, relpath, codec=None, keep=None):
    """Checks one .avro file (relpath is relative to root, '/'-separated).

    Returns (kept, errors, meta): kept is [keep(rec)] (the records themselves
    when keep is None), errors a list of messages, meta the file's header map.
    """
    errors = []
    kept = []
    parts = relpath.split("/")
    name = parts[-1]
    stream = obj = None
    if len(parts) != 8:
        errors.append(f"{relpath}: not <stream>/<object>/YYYY/MM/DD/HH/mm/<file>.avro")
    else:
        stream, obj = parts[0], parts[1]
        for p, rx in zip(parts[2:7], TIME_PARTS_RE):
            if not rx.match(p):
                errors.append(f"{relpath}: bad time folder {p!r}")
    m = FILE_RE.match(name)
    if not m:
        errors.append(f"{relpath}: file name is not <first_csn>_<last_csn>_<8hex>.avro")
    meta = {}
    first = last = None
    prev_csn = None
    schema_keys = set()
    n = 0
    try:
        with open(os.path.join(root, relpath), "rb") as fh:
            reader = avro.datafile.DataFileReader(fh, avro.io.DatumReader())
            meta = dict(reader.meta)
            for rec in reader:
                where = f"{relpath}#{n}"
                check_record(rec, where, errors, stream, obj)
                csn = rec.get("source_metadata", {}).get("change_sequence_number") if isinstance(rec, dict) else None
                if first is None:
                    first = rec
                last = rec
                if csn is not None and prev_csn is not None and csn < prev_csn:
                    errors.append(f"{where}: CSN {csn} goes backwards (after {prev_csn})")
                prev_csn = csn
                if isinstance(rec, dict):
                    schema_keys.add(rec.get("schema_key"))
                kept.append(rec if keep is None else keep(rec))
                n += 1
            if not reader.is_EOF():
                errors.append(f"{relpath}: trailing bytes after the last block")
            # every block ends with the file's sync marker; python avro does
            # not notice a file cut short inside the last block's tail
            fh.seek(-16, os.SEEK_END)
            if fh.read(16) != reader.sync_marker:
                errors.append(f"{relpath}: does not end with its sync marker (truncated?)")
    except Exception as e:  # a reader failure is a finding, not a crash of the checker
        errors.append(f"{relpath}: python avro cannot read it: {type(e).__name__}: {e}")
        return kept, errors, meta
    codec_name = meta.get("avro.codec", b"null")
    codec_name = codec_name.decode() if isinstance(codec_name, bytes) else codec_name
    if codec is not None and codec_name != codec:
        errors.append(f"{relpath}: codec {codec_name!r}, want {codec!r}")
    if n == 0:
        errors.append(f"{relpath}: empty file")
        return kept, errors, meta
    if len(schema_keys) > 1:
        errors.append(f"{relpath}: records with several schema_keys {sorted(map(str, schema_keys))}")
    try:
        fcsn = first["source_metadata"]["change_sequence_number"]
        lcsn = last["source_metadata"]["change_sequence_number"]
        if m and (m.group(1) != fcsn or m.group(2) != lcsn):
            errors.append(f"{relpath}: name says {m.group(1)}..{m.group(2)}, records hold {fcsn}..{lcsn}")
        ts = first["source_timestamp"]
        if len(parts) == 8 and _is_utc_datetime(ts):
            want = ts.astimezone(datetime.timezone.utc).strftime("%Y/%m/%d/%H/%M")
            if "/".join(parts[2:7]) != want:
                errors.append(f"{relpath}: time folders are not the first record's source time {want}")
    except (KeyError, TypeError, AttributeError):
        pass  # already reported by check_record
    return kept, errors, meta


def list_tree(root):
    """Returns (avro relpaths, errors for stray visible files).  Hidden entries
    (name starting with '.') are temporary files and are skipped."""
    files, errors = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            if f.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
            if f.endswith(".avro"):
                files.append(rel)
            else:
                errors.append(f"{rel}: visible file that is not .avro (leaked temporary file?)")
    return files, errors


def object_name(ns, table):
    """The object name of ns.table by the documented rule (doc/configuration.md,
    schema.h): '_' doubled in the namespace, a leading '_' of the table written
    %5F, and '%', '/' and control characters written %XX: one-to-one, and
    common names unchanged."""
    def part(s, double_underscore, escape_lead):
        out = bytearray()
        for i, ch in enumerate(s.encode("utf-8", "surrogateescape")):
            if ch == 0x5F and double_underscore:
                out += b"__"
            elif ch in (0x25, 0x2F) or ch < 0x20 or ch == 0x7F or (ch == 0x5F and i == 0 and escape_lead):
                out += b"%%%02X" % ch
            else:
                out.append(ch)
        return out
    return (part(ns, True, False) + b"_" + part(table, False, True)).decode("utf-8", "surrogateescape")


def _check_file_job(args):
    return args[1], check_file(*args)


def check_tree(root, codec=None, keep=None, workers=1):
    """Checks every file under root.  Returns (results, errors) where results
    is a list of (relpath, kept) in path order; see check_file for keep.
    With workers > 1 files are read in that many processes (keep must then be
    a picklable top-level function)."""
    errors = []
    if not os.path.isdir(root):
        return [], [f"{root}: no such directory"]
    files, errors = list_tree(root)
    jobs = [(root, rel, codec, keep) for rel in files]
    if workers > 1 and len(jobs) > 1:
        # forkserver, not fork: a pool forked from a process that has had
        # threads (a workload thread, a sampler) can inherit a lock held at
        # fork time and hang forever in the child.
        import multiprocessing
        with multiprocessing.get_context("forkserver").Pool(workers) as pool:
            out = pool.map(_check_file_job, jobs, chunksize=1)
    else:
        out = [_check_file_job(j) for j in jobs]
    results = []
    for rel, (kept, errs, _meta) in out:
        errors.extend(errs)
        results.append((rel, kept))
    return results, errors


def main(argv=None):
    ap = argparse.ArgumentParser(description="check an avro_dir output tree against the sluice contract")
    ap.add_argument("root")
    ap.add_argument("--codec", choices=("null", "deflate", "snappy", "zstandard"), help="codec every file must use")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    a = ap.parse_args(argv)
    results, errors = check_tree(a.root, codec=a.codec, keep=_count_only, workers=a.jobs)
    for e in errors:
        print(e)
    nrec = sum(len(k) for _, k in results)
    print(f"check_output: {len(results)} files, {nrec} records, {len(errors)} problems")
    return 1 if errors else 0


def _count_only(rec):
    return None


if __name__ == "__main__":
    sys.exit(main())
