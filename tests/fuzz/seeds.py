#!/usr/bin/env python3
"""tests/fuzz/seeds.py OUT: writes the fuzz targets' seed corpus into
OUT/<target>/, made from the project's own recordings and examples, so that
no binary corpus lives in the tree:

  fuzz_pgoutput   the pgoutput messages of tests/replay/workload.rec, one
                  seed per transaction (with every Relation message before it)
  fuzz_binlog     the events of tests/unit/data/mariadb-10.11/mb.00000[123]
                  without their checksums: one seed per rows event (the format
                  description, its table map, the event), and each whole file
  fuzz_config     the ```ini examples of README.md and doc/*.md
  fuzz_ocf        small container files, codecs null and deflate
  fuzz_ch_rowbin  rows of a few column layouts (tests/fuzz/fuzz_ch_rowbin.c)
  fuzz_manifest   manifests as sinks/avro_tree/manifest.c writes them
"""
import glob
import json
import os
import re
import struct
import sys
import zlib

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(msg):
    return struct.pack(">H", len(msg)) + msg


def pgoutput(out):
    with open(os.path.join(TOP, "tests/replay/workload.rec"), "rb") as f:
        rec = f.read()
    assert rec[:8] == b"SLPGREC1"
    pos, relations, txn, n = 8, [], [], 0
    while pos + 4 <= len(rec):
        (size,) = struct.unpack(">I", rec[pos:pos + 4])
        fr = rec[pos + 4:pos + 4 + size]
        pos += 4 + size
        if not fr or fr[0:1] != b"w" or len(fr) <= 25 or len(fr) > 25 + 65535:
            continue
        msg = fr[25:]
        if msg[0:1] == b"R":
            relations.append(msg)
        txn.append(msg)
        if msg[0:1] == b"C":
            seed = b"".join(frame(m) for m in relations if m not in txn) + b"".join(frame(m) for m in txn)
            if n < 64:
                put(out, "fuzz_pgoutput", "txn%03d" % n, seed)
            n += 1
            txn = []


def binlog_events(path):
    """The events of a binlog file, checksums stripped (the format
    description's algorithm set to OFF: its 4 trailer bytes stay)."""
    with open(path, "rb") as f:
        data = f.read()
    pos, events = 4, []
    while pos + 19 <= len(data):
        (size,) = struct.unpack("<I", data[pos + 9:pos + 13])
        ev = bytearray(data[pos:pos + size])
        pos += size
        if ev[4] == 15:  # FORMAT_DESCRIPTION: algorithm byte, then the checksum
            ev[-5] = 0
            ev[-4:] = b"\0\0\0\0"
        else:
            del ev[-4:]
        ev[9:13] = struct.pack("<I", len(ev))
        events.append(bytes(ev))
    return events


def binlog(out):
    n = 0
    for path in sorted(glob.glob(os.path.join(TOP, "tests/unit/data/mariadb-10.11/mb.00000*"))):
        events = binlog_events(path)
        put(out, "fuzz_binlog", os.path.basename(path), b"".join(events))
        fde, maps = None, {}
        for ev in events:
            kind = ev[4]
            if kind == 15:
                fde = ev
            elif kind == 19:
                maps[ev[19:25]] = ev
            elif 23 <= kind <= 25 or 30 <= kind <= 32:
                tm = maps.get(ev[19:25])
                if fde and tm and n < 96:
                    put(out, "fuzz_binlog", "rows%03d" % n, fde + tm + ev)
                    n += 1


def config(out):
    n = 0
    for path in [os.path.join(TOP, "README.md")] + sorted(glob.glob(os.path.join(TOP, "doc/*.md"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for block in re.findall(r"```ini\n(.*?)```", text, re.S):
            put(out, "fuzz_config", "ini%03d" % n, block.encode())
            n += 1


def zigzag(v):
    v = (v << 1) ^ (v >> 63)
    b = bytearray()
    while v > 0x7F:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


def avro_str(s):
    s = s.encode() if isinstance(s, str) else s
    return zigzag(len(s)) + s


def ocf(schema, codec, records):
    sync = bytes(range(16))
    meta = zigzag(2) + avro_str("avro.schema") + avro_str(json.dumps(schema)) + \
        avro_str("avro.codec") + avro_str(codec) + zigzag(0)
    body = b"".join(records)
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        body = c.compress(body) + c.flush()
    return b"Obj\x01" + meta + sync + zigzag(len(records)) + zigzag(len(body)) + body + sync


def ocf_seeds(out):
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                              "scale": 2}]},
        {"name": "ok", "type": "boolean"},
        {"name": "x", "type": "double"}]}
    recs = [zigzag(i) + zigzag(1) + avro_str("row %d" % i) + zigzag(1) + avro_str(bytes([i, 7])) +
            bytes([i & 1]) + struct.pack("<d", i / 3) for i in range(5)]
    put(out, "fuzz_ocf", "null.avro", ocf(schema, "null", recs))
    put(out, "fuzz_ocf", "deflate.avro", ocf(schema, "deflate", recs))
    put(out, "fuzz_ocf", "empty.avro", ocf(schema, "null", []))


def ch_rowbin(out):
    # head: count - 1, then (type, precision) per column: sluice types from
    # schema/schema.h (0 string, 2 int32, 3 int64, 6 decimal, 7 bytes,
    # 12 uuid, 14 uint64), 0x80: Nullable
    head = bytes([2, 3, 0, 0x80, 0, 0x86, 9 | 0x40])
    rows = b""
    for i in range(4):
        rows += struct.pack("<q", i * 1000 - 1)
        rows += b"\x01" if i == 2 else b"\x00" + bytes([2]) + b"v%d" % i
        rows += b"\x00" + struct.pack("<q", i * 12345)
    put(out, "fuzz_ch_rowbin", "three", head + rows)
    put(out, "fuzz_ch_rowbin", "uuid", bytes([0, 12 | 0x80, 0]) + b"\x00" + bytes(range(16)) + b"\x01")
    put(out, "fuzz_ch_rowbin", "ints", bytes([1, 2, 0, 14, 0]) + struct.pack("<iQ", -5, 2 ** 64 - 1))


def manifest(out):
    m = {"format": 1, "stream": "s1", "sequence": 2, "previous": "s1/_manifests/.0000000001.json",
         "written_at": "2026-01-02T03:04:05.000006Z", "sluice": "1.0", "source": "postgres",
         "from": {"position": "0/16B37500", "csn": "0000000016B37500"},
         "to": {"position": "0/16B38000", "csn": "0000000016B38000"},
         "files": [{"path": "s1/public_orders/f1.avro", "object": "public.orders", "schema_key": "abc",
                    "records": 3, "bytes": 1234, "first_csn": "0000000016B37500",
                    "last_csn": "0000000016B38000"}],
         "removed": ["s1/public_orders/f0.avro"]}
    put(out, "fuzz_manifest", "full.json", json.dumps(m).encode())
    m.update(previous=None, source=None, files=[], removed=[])
    m["from"] = None
    put(out, "fuzz_manifest", "first.json", json.dumps(m).encode())


def main():
    out = sys.argv[1]
    pgoutput(out)
    binlog(out)
    config(out)
    ocf_seeds(out)
    ch_rowbin(out)
    manifest(out)


if __name__ == "__main__":
    main()
