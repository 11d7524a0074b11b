#!/usr/bin/python3
"""Prints a summary of a sluice avro_dir output tree and a few decoded records."""
import collections
import os
import sys

import avro.datafile
import avro.io


def main(root):
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n) for n in names if n.endswith(".avro")]
    counts = collections.Counter()
    samples = {}
    for path in sorted(files):
        with open(path, "rb") as fh:
            for rec in avro.datafile.DataFileReader(fh, avro.io.DatumReader()):
                md = rec["source_metadata"]
                key = (rec["object"], rec["read_method"], md["change_type"])
                counts[key] += 1
                samples.setdefault((rec["object"], md["change_type"]), rec)
    print(f"{len(files)} Avro files, {sum(counts.values())} records")
    for (obj, method, ctype), n in sorted(counts.items()):
        print(f"  {obj:16} {method:20} {ctype:14} {n:6}")
    print("\na few decoded records:")
    for (obj, ctype), rec in sorted(samples.items())[:4]:
        md = rec["source_metadata"]
        print(f"- {obj} {ctype} csn={md['change_sequence_number']} lsn={md['lsn']} uuid={rec['uuid']}")
        print(f"  source_timestamp={rec['source_timestamp']} payload={rec['payload']}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
