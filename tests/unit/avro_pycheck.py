#!/usr/bin/python3
"""tests/unit/avro_pycheck.py DIR: reads the avro_dir output that
test_avro_python wrote under DIR (streams s_null, s_deflate, s_snappy,
s_zstandard, and the same written by compression threads) with the Apache reference Avro
reader and checks every decoded value against the values below, written
down by hand.  Streams b_*: many rows in many blocks and files, every row
there and in order (check_bulk).  Prints TAP; exits non-zero on failure.
A stream whose codec this Python cannot read (snappy without python3-snappy,
zstandard without python3-zstandard) is reported as a SKIP.  The blocks of
a zstandard file are also checked with the zstandard module directly: each
is one frame that records its content size (check_zstd_frames)."""
import datetime
import decimal
import json
import os
import re
import sys

import avro.datafile
import avro.io

UTC = datetime.timezone.utc
D = decimal.Decimal

EXPECTED_PAYLOADS = [
    {
        'id': 1, 'amount': D('-505.00'), 'big': D('12345678901234567890123456.7890123456'),
        'ts': datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        'lts': datetime.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC),
        'd': datetime.date(2024, 1, 31), 't': datetime.time(13, 45, 0, 500000),
        'b': b'\x0a\x0b\xff', 'f4': 1.5, 'f8': -0.1,
        'u': 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'j': '{"k": [1, 2]}',
        'name': 'h\u00e9llo', 'flag': True, 'i8': -9000000000, 'Odd_20_22Name_22': 'odd',
    },
    {
        'id': 2, 'amount': D('0.50'), 'big': None,
        'ts': datetime.datetime(2024, 1, 31, 8, 15, 0, tzinfo=UTC),
        'lts': datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        'd': datetime.date(1, 1, 1), 't': None, 'b': b'', 'f4': None, 'f8': None,
        'u': None, 'j': None, 'name': None, 'flag': None, 'i8': None, 'Odd_20_22Name_22': None,
    },
    {
        'id': 3, 'amount': None, 'big': None, 'ts': None, 'lts': None, 'd': None, 't': None,
        'b': None, 'f4': None, 'f8': None, 'u': None, 'j': None, 'name': None, 'flag': None,
        'i8': None, 'Odd_20_22Name_22': None,
    },
]
CHANGE_TYPES = ['INSERT', 'UPDATE-INSERT', 'DELETE']
UNCHANGED = [[], ['name'], []]
PATH = re.compile(r'^public_py_t/2024/01/31/13/45/'
                  r'0000000016B374D8-0000000001_0000000016B374D8-0000000003_[0-9a-f]{8}\.avro$')

try:
    import snappy  # noqa: F401
    HAVE_SNAPPY = True
except ImportError:
    HAVE_SNAPPY = False
try:
    import zstandard
    HAVE_ZSTANDARD = True
except ImportError:
    HAVE_ZSTANDARD = False


def read_long(data, pos):
    """The zigzag varint long at data[pos:], and the position after it."""
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos


def check_zstd_frames(rel, data, sync):
    """Each block of the container bytes data (blocks follow the header's
    sync marker, each ended by it) is exactly one zstandard frame that
    records its content size, and decompresses to that many bytes."""
    problems = []
    pos = data.index(sync) + 16
    while pos < len(data):
        _, pos = read_long(data, pos)
        size, pos = read_long(data, pos)
        block = data[pos:pos + size]
        pos += size
        if data[pos:pos + 16] != sync:
            return [f'{rel}: a block does not end with the sync marker']
        pos += 16
        params = zstandard.get_frame_parameters(block)
        plain = zstandard.ZstdDecompressor().decompress(block)
        if params.content_size != len(plain) or zstandard.frame_header_size(block) >= len(block):
            problems.append(f'{rel}: a block of {size} bytes: content size {params.content_size}, '
                            f'decompressed {len(plain)}')
        # one frame: decompressing it whole leaves nothing after it
        dobj = zstandard.ZstdDecompressor().decompressobj()
        dobj.decompress(block)
        if dobj.unused_data:
            problems.append(f'{rel}: a block holds {len(dobj.unused_data)} bytes after its frame')
    return problems


def check_stream(root, stream, codec):
    problems = []
    files = []
    meta = []
    for d, _, fs in os.walk(os.path.join(root, stream)):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), os.path.join(root, stream))
            (meta if f.startswith('.') else files).append(rel)
    if len(files) != 1:
        return [f'{stream}: expected one file, found {files}']
    # besides it only the manifest, its pointer and the object's schema file
    want_meta = ['_manifests/.0000000001.json', '_manifests/.latest.json', 'public_py_t/.schema.avsc']
    if sorted(meta) != want_meta:
        problems.append(f'{stream}: hidden files {sorted(meta)}, want {want_meta}')
    rel = files[0]
    if not PATH.match(rel):
        problems.append(f'{stream}: unexpected path {rel}')
    with open(os.path.join(root, stream, rel), 'rb') as fh:
        rd = avro.datafile.DataFileReader(fh, avro.io.DatumReader())
        if rd.meta['avro.codec'] != codec.encode():
            problems.append(f'{stream}: codec {rd.meta["avro.codec"]!r}')
        schema = json.loads(rd.meta['avro.schema'])
        payload_fields = schema['fields'][9]['type']['fields']
        amount = [f for f in payload_fields if f['name'] == 'amount'][0]
        if amount['type'][1] != {'type': 'bytes', 'logicalType': 'decimal', 'precision': 10, 'scale': 2}:
            problems.append(f'{stream}: amount type {amount["type"]!r}')
        odd = [f for f in payload_fields if f['name'] == 'Odd_20_22Name_22'][0]
        if odd['sluice.column'] != 'Odd "Name"':
            problems.append(f'{stream}: sluice.column {odd["sluice.column"]!r}')
        records = list(rd)
        rd.close()
    # the current-schema file holds the very schema of the newest file
    try:
        with open(os.path.join(root, stream, 'public_py_t', '.schema.avsc'), 'rb') as fh:
            if fh.read() != rd.meta['avro.schema']:
                problems.append(f'{stream}: public_py_t/.schema.avsc differs from the file\'s schema')
    except OSError as e:
        problems.append(f'{stream}: {e}')
    if len(records) != 3:
        return problems + [f'{stream}: {len(records)} records, want 3']
    for i, r in enumerate(records):
        want_csn = f'0000000016B374D8-000000000{i + 1}'
        md = r['source_metadata']
        checks = {
            'read_timestamp': (r['read_timestamp'], datetime.datetime(2024, 1, 31, 13, 45, 0, 1500, tzinfo=UTC)),
            'source_timestamp': (r['source_timestamp'], datetime.datetime(2024, 1, 31, 13, 45, tzinfo=UTC)),
            'object': (r['object'], 'public_py_t'),
            'read_method': (r['read_method'], 'postgresql-cdc-wal'),
            'stream_name': (r['stream_name'], stream),
            'sort_keys': (r['sort_keys'], ['0000000016B374D8', f'000000000{i + 1}']),
            'schema': (md['schema'], 'public'),
            'table': (md['table'], 'py_t'),
            'change_type': (md['change_type'], CHANGE_TYPES[i]),
            'is_deleted': (md['is_deleted'], i == 2),
            'primary_keys': (md['primary_keys'], ['id']),
            'change_sequence_number': (md['change_sequence_number'], want_csn),
            'tx_id': (md['tx_id'], 777),
            'unchanged_columns': (md['unchanged_columns'], UNCHANGED[i]),
            'lsn': (md['lsn'], '0/16B374D8'),
        }
        if not re.match(r'^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$', r['uuid']):
            problems.append(f'{stream}: record {i}: uuid {r["uuid"]!r} is not a lowercase UUIDv5')
        if len(r['schema_key']) != 16:
            problems.append(f'{stream}: record {i}: schema_key {r["schema_key"]!r}')
        for k, (got, want) in checks.items():
            if got != want:
                problems.append(f'{stream}: record {i}: {k} = {got!r}, want {want!r}')
        for k, want in EXPECTED_PAYLOADS[i].items():
            got = r['payload'].get(k, 'MISSING')
            if got != want or type(got) is not type(want):
                problems.append(f'{stream}: record {i}: payload {k} = {got!r}, want {want!r}')
        if sorted(r['payload']) != sorted(EXPECTED_PAYLOADS[i]):
            problems.append(f'{stream}: record {i}: payload fields {sorted(r["payload"])}')
    return problems


BULK_ROWS = 30000


def check_bulk(root, stream, codec):
    """Every row of test_avro_python's write_bulk, in order, across files
    taken in name order (the first CSN leads the name)."""
    problems = []
    files = sorted(os.path.relpath(os.path.join(d, f), os.path.join(root, stream))
                   for d, _, fs in os.walk(os.path.join(root, stream)) for f in fs
                   if not f.startswith('.') and f.endswith('.avro'))
    if len(files) < 2:
        problems.append(f'{stream}: expected several files, found {files}')
    want = 1
    blocks = 0
    for rel in files:
        with open(os.path.join(root, stream, rel), 'rb') as fh:
            data = fh.read()
            fh.seek(0)
            rd = avro.datafile.DataFileReader(fh, avro.io.DatumReader())
            if rd.meta['avro.codec'] != codec.encode():
                problems.append(f'{stream}: {rel}: codec {rd.meta["avro.codec"]!r}')
            blocks += data.count(rd.sync_marker) - 1
            if codec == 'zstandard':
                problems += check_zstd_frames(rel, data, rd.sync_marker)
            for r in rd:
                i = r['payload']['id']
                note = f'note {want} ' * (want % 7)
                if i != want or r['payload']['note'] != note:
                    problems.append(f'{stream}: {rel}: row {i!r} ({r["payload"]["note"]!r}) where {want} was due')
                    return problems
                want += 1
            rd.close()
    if want != BULK_ROWS + 1:
        problems.append(f'{stream}: {want - 1} rows, want {BULK_ROWS}')
    if blocks < 10:
        problems.append(f'{stream}: only {blocks} blocks')
    return problems


def main():
    root = sys.argv[1]
    cases = [('s_null', 'null'), ('s_deflate', 'deflate'), ('s_snappy', 'snappy'),
             ('s_deflate_threads', 'deflate'), ('s_snappy_threads', 'snappy'),
             ('b_deflate_threads', 'deflate'), ('b_snappy_threads', 'snappy'),
             ('s_zstandard', 'zstandard'), ('s_zstandard_threads', 'zstandard'),
             ('b_zstandard_threads', 'zstandard')]
    print(f'1..{len(cases)}')
    failed = 0
    for n, (stream, codec) in enumerate(cases, 1):
        if codec == 'snappy' and not HAVE_SNAPPY:
            print(f'ok {n} # SKIP /usr/bin/python3 lacks the snappy module (python3-snappy)')
            continue
        if codec == 'zstandard' and not HAVE_ZSTANDARD:
            print(f'ok {n} # SKIP /usr/bin/python3 lacks the zstandard module (python3-zstandard)')
            continue
        try:
            check = check_bulk if stream.startswith('b_') else check_stream
            problems = check(root, stream, codec)
        except Exception as e:  # a reader exception is a failure, with its text
            problems = [f'{stream}: {type(e).__name__}: {e}']
        for p in problems[:30]:
            print(f'# {p}')
        if problems:
            failed += 1
            print(f'not ok {n} - Python avro reads the {codec} files of {stream} with the expected values')
        else:
            print(f'ok {n} - Python avro reads the {codec} files of {stream} with the expected values')
    sys.exit(1 if failed else 0)


main()
