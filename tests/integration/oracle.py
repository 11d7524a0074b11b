"""
tests/integration/oracle.py: one independent oracle for every destination
(issue 17).  It rebuilds each table from what sluice wrote, by the
documented reader rules, and compares it value by value with the source
table read with its own SELECT (PostgreSQL or MariaDB):

- avro_dir and s3, append mode: every record in CSN order, exact repeats
  dropped, TRUNCATE markers clear the table (doc/output.md; harness.rebuild);
  an unchanged value of a key never seen is a difference only if its row
  survives (the equivalent rule, the highest CSN per key, drops the rest);
- both modes: every row read with the object's newest schema (.schema.avsc),
  as a reader resolving each file's schema to it does: a field added since a
  file was written reads as its default there (a column added with a
  constant default, whose value the existing rows have without a change;
  doc/output.md, "DDL that changes existing rows");
- avro_dir and s3, merge mode: the current files (the base plus the later
  files), the highest CSN per key, deleted keys dropped, nothing older than
  the latest TRUNCATE marker (doc/output.md, "The reader's rule": mirror());
- ClickHouse, merge mode: the table's `_current` view, legacy and modern
  layouts; append mode: the change rows replayed by CSN (ch_harness), on
  the source's columns (a column dropped at the source is kept there).
- Iceberg tables, read by ClickHouse 26 (chdb, icebergLocal in a folder,
  icebergS3 in a bucket: the format version 2 reader applies the equality
  deletes), merge mode: the rows as
  they are, one per key; append mode: the rows replayed by `_csn`
  (doc/iceberg.md), TRUNCATE rows clearing the table, as for Avro records;
  a change of the log twice (the same `_uuid`) is a difference, the
  repeated rows of an interrupted backfill are not (doc/iceberg.md).

diff_* return a list of differences, the first differing row first; check()
raises AssertionError naming the seed, the cell and that first row.
The Avro readers are python3-avro's (harness.read_avro_tree).
"""

import decimal
import io
import json
import os

import avro.datafile
import avro.io
import avro.schema

from check_output import object_name
from harness import read_avro_tree, rebuild, state_diff


def read_file(path):
    """Every record of one Avro file (python3-avro)."""
    with open(path, "rb") as f:
        with avro.datafile.DataFileReader(f, avro.io.DatumReader()) as r:
            return list(r)


def current_files(root, stream, obj):
    """The reader's rule for the files: every visible .avro file of the
    object, less those the newest compaction record (.base.json) replaced."""
    d = os.path.join(root, stream, obj)
    replaced = set()
    base = os.path.join(d, ".base.json")
    if os.path.exists(base):
        with open(base) as f:
            seq = json.load(f)["sequence"]
        with open(os.path.join(d, ".compact-%010d.json" % seq)) as f:
            replaced = set(json.load(f)["removed"])
    out = []
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames[:] = [x for x in dirnames if not x.startswith(".")]
        for fn in filenames:
            if fn.startswith(".") or not fn.endswith(".avro"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
            if rel not in replaced:
                out.append(os.path.join(dirpath, fn))
    return sorted(out)


def mirror(root, stream, obj, key_columns):
    """The table as the merge reader's rule rebuilds it:
    ({key tuple: (payload, unchanged_columns)}, current files)."""
    best, trunc = {}, ""
    files = current_files(root, stream, obj)
    for path in files:
        for r in read_file(path):
            sm = r["source_metadata"]
            c = sm["change_sequence_number"]
            if sm["change_type"] == "TRUNCATE":
                trunc = max(trunc, c)
                continue
            k = tuple(r["payload"][col] for col in key_columns)
            if k not in best or c > best[k][0]:
                best[k] = (c, sm["is_deleted"], r["payload"], sm["unchanged_columns"])
    return {k: (p, u) for k, (c, d, p, u) in best.items() if not d and c >= trunc}, files


# ---- the source side

def avro_default(ftype, default):
    """A field's default (Avro JSON, of the first branch of a union) as
    python3-avro reads a record's value of that type: decimals as Decimal,
    timestamps as datetimes, bytes from the code points 0-255 the
    specification gives them.  python3-avro's own schema resolution (1.11)
    fills a missing field with the raw JSON value instead: no logical type
    (an int for a timestamp, bytes for a decimal), and bytes defaults
    encoded as UTF-8; so the value is encoded with the plain type and read
    back with the field's own."""
    t = ftype[0] if isinstance(ftype, list) else ftype
    if t == "null" or default is None:
        return None
    base = t["type"] if isinstance(t, dict) else t
    raw = default.encode("latin-1") if base in ("bytes", "fixed") else default
    buf = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(base))).write(raw, avro.io.BinaryEncoder(buf))
    buf.seek(0)
    return avro.io.DatumReader(avro.schema.parse(json.dumps(t))).read(avro.io.BinaryDecoder(buf))


def newest_schema(root, stream, obj):
    """The object's newest schema (.schema.avsc, the reader schema), parsed
    JSON, or None when it has none."""
    path = os.path.join(root, stream, obj, ".schema.avsc")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def newest_payload_fields(root, stream, obj):
    """{field: default} of the payload in the object's newest schema
    (.schema.avsc), or None when it has none.  A reader that reads every
    file with that schema (Avro schema resolution) sees a field added since
    a file was written as its default (a column added with a constant
    default: that default; else null), and none of the fields dropped."""
    schema = newest_schema(root, stream, obj)
    if schema is None:
        return None
    payload = next(f["type"] for f in schema["fields"] if f["name"] == "payload")
    if isinstance(payload, list):
        payload = next(t for t in payload if isinstance(t, dict))
    return {f["name"]: avro_default(f["type"], f.get("default")) for f in payload["fields"]}


def resolve_check(root, stream, obj):
    """Reads every current file of the object with its newest schema as the
    reader schema (python3-avro's DatumReader(writer, reader)): it raises
    when a file does not resolve to it.  Returns the number of records."""
    schema = newest_schema(root, stream, obj)
    if schema is None:
        return 0
    reader = avro.schema.parse(json.dumps(schema))
    n = 0
    for path in current_files(root, stream, obj):
        with open(path, "rb") as f:
            with avro.datafile.DataFileReader(f, avro.io.DatumReader(None, reader)) as r:
                n += sum(1 for _ in r)
    return n


def resolved_state(state, root, stream, ns, table):
    """state (rebuilt rows of ns.table) read with the object's newest schema."""
    return resolve(state, newest_payload_fields(root, stream, object_name(ns, table)))


def resolve(state, fields):
    """state's rows read with the newest schema's payload fields."""
    if fields is None:
        return state
    return {k: {f: row.get(f, default) for f, default in fields.items()} for k, row in state.items()}


def source_tables(source, server, ns, only=None):
    """[(table, [key columns])] of the namespace's base tables (or those of
    them named in only), from the source's catalog (primary keys).  A
    partition is its root's rows (the root's object holds them), and a
    table of its own once detached."""
    if source == "pg":
        rows = server.sql(
            "SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
            "WHERE n.nspname = %s AND i.indisprimary AND NOT c.relispartition "
            "ORDER BY c.relname, k.ord", (ns,))
    else:
        rows = server.sql(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE TABLE_SCHEMA = %s AND CONSTRAINT_NAME = 'PRIMARY' "
            "ORDER BY TABLE_NAME, ORDINAL_POSITION", (ns,))
    out = {}
    for t, c in rows:
        if only is None or t in only:
            out.setdefault(t, []).append(c)
    return sorted(out.items())


def _avro_state_diff(source, server, ns, table, keys, state):
    if source == "pg":
        return state_diff(server, ns, table, keys, state)
    from harness_mysql import my_state_diff
    return my_state_diff(server, ns, table, keys, state)


# ---- the destinations

def diff_avro(source, server, ns, tree, stream, write_mode, codec=None, tables=None, records=None):
    """Differences between the source tables of ns (or those of them named
    in tables) and an Avro tree (an avro_dir path, or an s3 prefix
    downloaded: Sluice.output_tree).  records: the tree's records, when the
    caller read them already (append mode)."""
    diffs = []
    if records is None and write_mode == "append":
        records = read_avro_tree(tree, codec=codec)
    for table, keys in source_tables(source, server, ns, tables):
        if write_mode == "append":
            try:
                state = rebuild(records, keys, table=(ns, table), lazy=True)
            except AssertionError as e:
                diffs.append(f"{ns}.{table}: the records do not rebuild: {e}")
                continue
        else:
            got, _files = mirror(tree, stream, object_name(ns, table), keys)
            state = {}
            for k, (payload, unchanged) in got.items():
                if unchanged:
                    diffs.append(f"{ns}.{table} {k}: unchanged values {unchanged} in the merged file")
                state[k] = payload
        state = resolve(state, newest_payload_fields(tree, stream, object_name(ns, table)))
        diffs.extend(f"{ns}.{table} {d}" for d in _avro_state_diff(source, server, ns, table, keys, state))
    return diffs


def diff_clickhouse(source, server, ns, ch, database, write_mode, modern, tables=None):
    """Differences between the source tables of ns (or those of them named
    in tables) and ClickHouse database `database`: the `_current` view
    (merge) or the change rows replayed (append)."""
    from ch_harness import (ch_object, ch_state_diff, my_source_rows_for_ch, rebuild_append, source_columns,
                            source_rows_for_ch)
    diffs = []
    for table, keys in source_tables(source, server, ns, tables):
        if source == "pg":
            expected, kinds = source_rows_for_ch(server, ns, table, keys, modern)
        else:
            expected, kinds = my_source_rows_for_ch(server, ns, table, keys, modern)
        obj = ch_object(ns, table)
        if not ch.table_exists(database, obj):
            if expected:
                diffs.append(f"{ns}.{table}: no table {database}.{obj} in ClickHouse ({len(expected)} source rows)")
            continue
        if write_mode == "append":
            state, problems = rebuild_append(ch.rows(database, obj, final=True), keys, lazy=True)
            diffs.extend(f"{ns}.{table}: {p}" for p in problems)
            got = source_columns(state.values(), kinds)
        else:
            got = ch.rows(database, obj + "_current")
        diffs.extend(f"{ns}.{table} {d}" for d in ch_state_diff(expected, kinds, got, keys))
    return diffs


ICEBERG_METADATA = ("_uuid", "_source_timestamp", "_read_timestamp", "_change_type", "_csn", "_is_deleted",
                    "_tx_id", "_unchanged_columns", "_lsn", "_log_file", "_log_position", "_gtid")


def iceberg_value(ch_type, v):
    """A value of ClickHouse's JSONEachRow (decimals quoted) as python3-avro
    decodes the data file's: a decimal at its type's scale, an int."""
    t = ch_type[len("Nullable("):-1] if ch_type.startswith("Nullable(") else ch_type
    if v is None:
        return None
    if t.startswith("Decimal("):
        scale = int(t[:-1].split(",")[1])
        return decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale))
    if t.startswith(("Int", "UInt")):
        return int(v)
    return v


def read_iceberg(ns, table, src):
    """The rows of an Iceberg table as records of the Avro layout (payload,
    source_metadata, uuid), read by ClickHouse 26 through the table function
    src (icebergLocal, icebergS3)."""
    from test_iceberg import ch_query
    types = {c["name"]: c["type"] for c in ch_query(f"DESCRIBE TABLE {src}")}
    rows = ch_query(f"SELECT * FROM {src} SETTINGS output_format_json_quote_decimals = 1")
    out = []
    for r in rows:
        # a payload column named _x is __x in the table (doc/iceberg.md)
        payload = {(c[1:] if c.startswith("__") else c): iceberg_value(types[c], v)
                   for c, v in r.items() if c not in ICEBERG_METADATA}
        out.append({"uuid": r["_uuid"], "object": f"{ns}.{table}", "payload": payload, "source_metadata": {
            "schema": ns, "table": table, "change_sequence_number": r["_csn"],
            "change_type": r["_change_type"], "is_deleted": r["_is_deleted"],
            "unchanged_columns": r["_unchanged_columns"], "tx_id": int(r["_tx_id"])}})
    return out


def diff_iceberg(source, server, ns, write_mode, table_fn):
    """Differences between the source tables of ns and their Iceberg tables:
    the rows as they are (merge) or replayed by _csn (append).  table_fn(table)
    is the ClickHouse table function that reads the Iceberg table of source
    table ns.table (icebergLocal of a folder, icebergS3 of a bucket), or None
    when that table has no metadata yet."""
    diffs = []
    for table, keys in source_tables(source, server, ns):
        src = table_fn(table)
        records = read_iceberg(ns, table, src) if src is not None else []
        if write_mode == "append":
            # no change of the log is committed twice (doc/iceberg.md); only
            # an interrupted backfill's rows (transaction 0) may repeat
            seen = set()
            for r in records:
                if r["uuid"] in seen and r["source_metadata"]["tx_id"] != 0:
                    diffs.append(f"{ns}.{table}: the change {r['source_metadata']['change_sequence_number']} "
                                 f"(_uuid {r['uuid']}) is in the table twice")
                seen.add(r["uuid"])
            try:
                state = rebuild(records, keys, lazy=True)
            except AssertionError as e:
                diffs.append(f"{ns}.{table}: the rows do not rebuild: {e}")
                continue
        else:
            state = {}
            for r in records:
                sm, payload = r["source_metadata"], r["payload"]
                k = tuple(payload[col] for col in keys)
                if k in state:
                    diffs.append(f"{ns}.{table} {k}: two rows of the key in the merge table "
                                 f"({sm['change_sequence_number']})")
                if sm["unchanged_columns"]:
                    diffs.append(f"{ns}.{table} {k}: unchanged values {sm['unchanged_columns']} in the merge table")
                if sm["is_deleted"]:
                    diffs.append(f"{ns}.{table} {k}: a deleted row in the merge table ({sm['change_type']})")
                state[k] = payload
        diffs.extend(f"{ns}.{table} {d}" for d in _avro_state_diff(source, server, ns, table, keys, state))
    return diffs


def check(diffs, seed, cell):
    """Raises AssertionError with the seed, the cell and the first differing
    row when diffs is not empty."""
    if diffs:
        raise AssertionError(f"seed {seed} cell {cell}: the destination differs from the source "
                             f"({len(diffs)} differences shown)\n  first differing row: {diffs[0]}\n  " +
                             "\n  ".join(diffs[1:20]) +
                             f"\n  (SLUICE_TEST_SEED={seed} repeats it)")
