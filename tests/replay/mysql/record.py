#!/usr/bin/python3
"""
tests/replay/mysql/record.py: records the binlog stream of a varied workload
from a throwaway MariaDB 10.11 (binlog_row_metadata=FULL) into this folder,
for the replay test (tests/unit/test_my_replay.c; see README.md here).

  SLUICE_BIN=_build/sluice /usr/bin/python3 tests/replay/mysql/record.py [--out-dir DIR]

It creates the tables below, notes the binlog head, runs WORKLOAD, and has
tests/tools/my_record (built beside sluice, through sluice's own dump
connection) record every event from that position to the head.  It writes
workload.rec (the events), workload.tables ("db<TAB>table" of the tables
the replayed stream selects), workload.end (the head after the workload, a
position as the checkpoint writes it) and workload.final ("db<TAB>table<TAB>
rows<TAB>keys" after the workload, from the server).
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
import harness_mysql  # noqa: E402

SETUP = [
    "CREATE DATABASE rp",
    "CREATE TABLE rp.kv (id int PRIMARY KEY, v varchar(20), n int)",
    "CREATE TABLE rp.nokey (a int, b varchar(10))",
    "CREATE TABLE rp.alt (id int PRIMARY KEY, a varchar(10))",
    "CREATE TABLE rp.trunc_t (id int PRIMARY KEY)",
    "CREATE TABLE rp.unsel (id int PRIMARY KEY)",
    """CREATE TABLE rp.types_t (id int PRIMARY KEY, c_tiny tinyint, c_ubig bigint unsigned, c_big bigint,
       c_dec decimal(65,30), c_dec2 decimal(10,2), c_float float, c_double double, c_date date, c_dt datetime(6),
       c_ts timestamp(6) NULL DEFAULT NULL, c_time time(6), c_year year, c_char char(5), c_vc varchar(40),
       c_latin1 varchar(20) CHARACTER SET latin1, c_bin binary(4), c_blob blob, c_enum enum('sad','ok','happy'),
       c_set set('a','b','c'), c_bit1 bit(1), c_bit10 bit(10), c_json json, c_geo point)""",
    "INSERT INTO rp.kv VALUES (100, 'before the position', 0)",
]

TYPES_COLS = ("id, c_tiny, c_ubig, c_big, c_dec, c_dec2, c_float, c_double, c_date, c_dt, c_ts, c_time, c_year, "
              "c_char, c_vc, c_latin1, c_bin, c_blob, c_enum, c_set, c_bit1, c_bit10, c_json, c_geo")
TYPES_ROWS = [
    "(1, -128, 18446744073709551615, -9223372036854775808, '-" + "9" * 35 + "." + "9" * 30 + "', -0.01, "
    "-3.40282e38, 2.718281828459045, '0001-01-01', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', "
    "'-838:59:59.000000', 2155, 'ab  ', 'utf8mb4 \U0001F600 \u2713', 'caf\u00e9 \u20ac', x'01', REPEAT(x'ab', 300), "
    "'happy', 'a,c', b'1', b'1000000001', '{\"k\": [1, 2.5], \"n\": null}', POINT(1.5, -2.25))",
    "(2, 127, 0, 9223372036854775807, '0.000000000000000000000000000001', 99999999.99, 1.5, -0.0, "
    "'2024-02-29', '2024-02-29 13:45:00.5', '1970-01-01 00:00:01', '838:59:59.999999', 0, '', '', '', x'', x'', "
    "'sad', '', b'0', b'0', '[]', POINT(0, 0))",
    "(3" + ", NULL" * 23 + ")",
]

WORKLOAD = [
    "INSERT INTO rp.kv VALUES (1, 'one', 1), (2, 'two', NULL), (3, NULL, 3)",
    "UPDATE rp.kv SET v = 'uno', n = n + 1 WHERE id = 1",
    "UPDATE rp.kv SET id = 30 WHERE id = 3",
    "DELETE FROM rp.kv WHERE id = 2",
    "UPDATE rp.kv SET n = n + 1 WHERE id = 100",
    ["BEGIN", "INSERT INTO rp.kv VALUES (4, 'rolled back', 4)", "ROLLBACK"],
    ["BEGIN", "INSERT INTO rp.kv VALUES (5, 'multi', 5)", "INSERT INTO rp.nokey VALUES (1, 'x')",
     "INSERT INTO rp.trunc_t VALUES (1), (2)", "COMMIT"],
    "INSERT INTO rp.kv SELECT seq, CONCAT('bulk ', seq), seq FROM rp.seq_1000_to_1019",
    f"INSERT INTO rp.types_t ({TYPES_COLS}) VALUES " + ", ".join(TYPES_ROWS),
    "UPDATE rp.types_t SET c_vc = 'changed', c_tiny = c_tiny - 1 WHERE id = 2",
    "DELETE FROM rp.types_t WHERE id = 3",
    "INSERT INTO rp.nokey VALUES (1, 'x'), (2, NULL)",
    "UPDATE rp.nokey SET b = 'y' WHERE a = 2",
    "DELETE FROM rp.nokey WHERE a = 1 LIMIT 1",
    "INSERT INTO rp.alt VALUES (1, 'a1')",
    "ALTER TABLE rp.alt ADD COLUMN b int DEFAULT 7",
    "INSERT INTO rp.alt VALUES (2, 'a2', 20)",
    "UPDATE rp.alt SET b = 10 WHERE id = 1",
    "INSERT INTO rp.unsel VALUES (1)",
    "FLUSH BINARY LOGS",
    "TRUNCATE TABLE rp.trunc_t",
    "INSERT INTO rp.trunc_t VALUES (3)",
    # XA: prepared on a connection that then goes away (the server keeps it
    # prepared), committed or rolled back from another
    ("own", ["XA START 'xa1'", "INSERT INTO rp.kv VALUES (6, 'xa', 6)", "XA END 'xa1'", "XA PREPARE 'xa1'"]),
    "INSERT INTO rp.kv VALUES (7, 'between', 7)",
    "XA COMMIT 'xa1'",
    ("own", ["XA START 'xa2'", "INSERT INTO rp.kv VALUES (8, 'xa rolled back', 8)", "XA END 'xa2'",
             "XA PREPARE 'xa2'"]),
    "XA ROLLBACK 'xa2'",
    ["SET SESSION sql_mode = ''", "INSERT INTO rp.types_t (id, c_date, c_dt) VALUES (4, '0000-00-00', '2024-02-30 00:00:00')",
     "SET SESSION sql_mode = DEFAULT"],
]

TABLES = [("rp", "kv"), ("rp", "nokey"), ("rp", "alt"), ("rp", "trunc_t"), ("rp", "types_t")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=HERE)
    a = ap.parse_args()
    rec = os.path.join(os.path.dirname(os.path.abspath(harness.sluice_bin())), "tests", "tools", "my_record")
    if not os.access(rec, os.X_OK):
        sys.exit(f"record.py: {rec} not found: build sluice first (scripts/build.sh), or set SLUICE_BIN")
    with harness_mysql.MariaDbServer() as my:
        for st in SETUP:
            my.execute(st)
        f0, p0 = my.master_status()
        c = my.connect()
        cur = c.cursor()
        for w in WORKLOAD:
            if isinstance(w, tuple):
                c2 = my.connect()
                cur2 = c2.cursor()
                for st in w[1]:
                    cur2.execute(st)
                c2.close()
                continue
            for st in ([w] if isinstance(w, str) else w):
                cur.execute(st)
        c.close()
        f1, p1 = my.master_status()
        out = os.path.join(a.out_dir, "workload.rec")
        p = subprocess.run([rec, "--host", "127.0.0.1", "--port", str(my.port), "--user", harness_mysql.SLUICE_USER,
                            "--password-file", my.password_file, "--server-id", "777", "--file", f0,
                            "--pos", str(p0), "--out", out], stdin=subprocess.DEVNULL, timeout=120)
        if p.returncode != 0:
            sys.exit("record.py: my_record failed")
        with open(os.path.join(a.out_dir, "workload.tables"), "w") as f:
            for db, t in TABLES:
                f.write(f"{db}\t{t}\n")
        with open(os.path.join(a.out_dir, "workload.end"), "w") as f:
            f.write(f"{f1}:{p1}\n")
        with open(os.path.join(a.out_dir, "workload.final"), "w") as f:
            for db, t in TABLES:
                n = my.one(f"SELECT count(*) FROM {db}.{t}")
                first = my.sql(f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND "
                               f"TABLE_NAME=%s ORDER BY ORDINAL_POSITION LIMIT 1", (db, t))[0][0]
                keys = ",".join(str(r[0]) for r in my.sql(f"SELECT `{first}` FROM {db}.{t} ORDER BY 1"))
                f.write(f"{db}\t{t}\t{n}\t{keys}\n")
    print(f"record.py: wrote {out} ({os.path.getsize(out)} bytes) from {f0}:{p0} to {f1}:{p1}")


if __name__ == "__main__":
    main()
