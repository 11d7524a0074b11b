"""
tests/integration/test_ch26.py: tests/tools/clickhouse26, the ClickHouse 26
server of the tests (ClickHouse's HTTP interface in front of the chdb
engine), without sluice:

  - /ping, SELECT version();
  - a ReplacingMergeTree(_version, _is_deleted) table loaded with RowBinary
    bodies, plain and gzip, read back with FINAL; an external table
    (multipart/form-data) as sluice's lookups send it;
  - settings as URL parameters apply to their query only; a 200 KB URL;
  - credentials: basic auth, X-ClickHouse-User/-Key, a wrong password and
    an unknown user (403, Code 516), a read-only user;
  - errors: the server's status codes and "Code: N. DB::Exception: ..."
    bodies;
  - after SIGTERM, another process opens the data directory with chdb and
    reads the rows.

Skips, saying why, when node or chdb (tests/integration/ch26/node_modules)
is missing; with CI=true a missing chdb fails instead.  Prints the shim's
start time and memory.
"""

import base64
import gzip
import json
import os
import shutil
import struct
import subprocess
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from ch_harness import (CH26_MODULES, CH_PASSWORD, ClickHouse26Server, ClickHouseError, clickhouse26_available,
                        rowbinary_rows)

TYPES = ["Int32", "Nullable(String)", "UInt64", "UInt8"]
TABLE = ("CREATE TABLE shim.t (k Int32, s Nullable(String), _version UInt64, _is_deleted UInt8) "
         "ENGINE = ReplacingMergeTree(_version, _is_deleted) ORDER BY k")
INSERT = "INSERT INTO shim.t (k, s, _version, _is_deleted) FORMAT RowBinary"
FIRST = [(1, b"one", 1, 0), (2, b"two", 1, 0), (3, None, 1, 0), (4, b"four", 1, 0)]
SECOND = [(1, b"one, again", 2, 0), (2, b"two", 2, 1), (4, b"old four", 0, 0)]


def rowbinary(rows):
    """Rows of TYPES as RowBinary (written here, not by the code under test)."""
    out = b""
    for k, s, v, d in rows:
        out += struct.pack("<i", k)
        if s is None:
            out += b"\x01"
        else:
            assert len(s) < 128
            out += b"\x00" + bytes([len(s)]) + s
        out += struct.pack("<QB", v, d)
    return out


def final_state(*batches):
    """The rows FINAL shows: per key the row of the highest version, none
    when that row is deleted."""
    best = {}
    for rows in batches:
        for r in rows:
            if r[0] not in best or r[2] >= best[r[0]][2]:
                best[r[0]] = r
    return [best[k] for k in sorted(best) if not best[k][3]]


def post(ch, params="", body=b"", headers=None):
    """(status, headers, body) of a POST to the shim."""
    req = urllib.request.Request(f"{ch.url}/?{params}", data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def chdb_missing():
    """None when the shim can run; else raises SkipTest, or fails in CI when
    node is there but chdb is not."""
    reason = clickhouse26_available()
    if reason is None:
        return
    if shutil.which("node") and os.environ.get("CI") == "true":
        raise AssertionError(f"CI=true: {reason}")
    raise unittest.SkipTest(reason)


class ClickHouse26ShimTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        chdb_missing()
        cls.ch = ClickHouse26Server()
        cls.addClassCleanup(cls.ch.close)
        t0 = time.monotonic()
        cls.ch.start()
        cls.start_s = time.monotonic() - t0
        cls.ch.query("CREATE DATABASE shim")
        cls.ch.query(TABLE)

    def assertError(self, status, code, name, got):
        """got (status, headers, body) is the server's answer for exception code."""
        self.assertEqual(got[0], status, got[2])
        self.assertEqual(got[1]["X-ClickHouse-Exception-Code"], str(code))
        self.assertRegex(got[2].decode(), rf"^Code: {code}\. DB::Exception: .*\({name}\) \(version 26\.[0-9.]+\)\n\Z")

    def test_1_ping_and_version(self):
        with urllib.request.urlopen(f"{self.ch.url}/ping", timeout=10) as r:
            self.assertEqual(r.read(), b"Ok.\n")
        version = self.ch.scalar("SELECT version()")
        self.assertRegex(version, r"^26\.[0-9]+\.[0-9]+")
        print(f"\n  clickhouse26: ClickHouse {version}, answered /ping {self.start_s:.2f} s after it started")

    def test_2_rowbinary_plain_and_gzip(self):
        self.ch.query(INSERT, data=rowbinary(FIRST), params={"wait_end_of_query": "1"})
        st, _, body = post(self.ch, "query=" + urllib.parse.quote(INSERT), gzip.compress(rowbinary(SECOND)),
                           {"Content-Encoding": "gzip", "Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200, body)
        got = rowbinary_rows(self.ch.query("SELECT * FROM shim.t FINAL ORDER BY k FORMAT RowBinary"), TYPES)
        self.assertEqual(got, final_state(FIRST, SECOND))
        # a body of rows after the FORMAT of the statement in the body
        self.ch.query("CREATE TABLE shim.tsv (k Int32, s String) ENGINE = MergeTree ORDER BY k")
        self.ch.query("INSERT INTO shim.tsv FORMAT TabSeparated\n7\tseven\n8\teight\n")
        self.assertEqual(self.ch.query("SELECT * FROM shim.tsv ORDER BY k FORMAT TSV"), b"7\tseven\n8\teight\n")

    def test_3_external_table(self):
        """A lookup as sluice sends it: the keys as a RowBinary external table."""
        self.ch.query(INSERT, data=rowbinary([(10, b"ten", 1, 0), (11, b"eleven", 1, 0), (12, b"twelve", 1, 0)]))
        boundary = "sluice-test-boundary"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"sluice_keys\"; filename=\"sluice_keys\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode() + struct.pack("<ii", 10, 12) + \
            f"\r\n--{boundary}--\r\n".encode()
        q = "SELECT * FROM shim.t FINAL WHERE (k) IN (SELECT k0 FROM sluice_keys) ORDER BY k FORMAT RowBinary"
        st, _, out = post(self.ch, urllib.parse.urlencode({"wait_end_of_query": "1", "query": q,
                                                           "sluice_keys_structure": "k0 Int32",
                                                           "sluice_keys_format": "RowBinary"}),
                          body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
        self.assertEqual(st, 200, out)
        self.assertEqual(rowbinary_rows(out, TYPES), [(10, b"ten", 1, 0), (12, b"twelve", 1, 0)])
        # the temporary table is gone afterwards
        self.assertError(404, 60, "UNKNOWN_TABLE", post(self.ch, "", b"SELECT * FROM sluice_keys"))

    def test_4_settings_per_query(self):
        sql = b"SELECT getSetting('max_threads') FORMAT TSV"
        before = post(self.ch, "", sql)[2]
        self.assertNotEqual(before, b"3\n")
        self.assertEqual(post(self.ch, "max_threads=3&wait_end_of_query=1", sql)[2], b"3\n")
        self.assertEqual(post(self.ch, "", sql)[2], before)
        self.assertEqual(post(self.ch, "database=system", b"SELECT currentDatabase()")[2], b"system\n")
        self.assertEqual(post(self.ch, "", b"SELECT currentDatabase()")[2], b"default\n")

    def test_4a_server_defaults(self):
        """The server's defaults where chdb's differ: mutations run in the
        background (mutations_sync 0 in ClickHouse's Settings.cpp, 1 in
        chdb), and a statement needs its SELECT (implicit_select)."""
        self.assertEqual(post(self.ch, "", b"SELECT getSetting('mutations_sync')")[2], b"0\n")
        self.assertError(400, 62, "SYNTAX_ERROR", post(self.ch, "", b"1 + 1"))

    def test_4b_long_url(self):
        """A query of 200 KB in the URL (the server takes URLs up to 1 MiB)."""
        st, _, out = post(self.ch, urllib.parse.urlencode({"query": f"SELECT length('{'x' * 200000}') FORMAT TSV"}))
        self.assertEqual((st, out), (200, b"200000\n"))

    def test_5_credentials(self):
        basic = "Basic " + base64.b64encode(f"sluice:{CH_PASSWORD}".encode()).decode()
        self.assertEqual(post(self.ch, "", b"SELECT 1", {"Authorization": basic})[:3:2], (200, b"1\n"))
        ok = post(self.ch, "", b"SELECT 1", {"X-ClickHouse-User": "sluice", "X-ClickHouse-Key": CH_PASSWORD})
        self.assertEqual(ok[:3:2], (200, b"1\n"))
        for headers in ({"X-ClickHouse-User": "sluice", "X-ClickHouse-Key": "wrong"},
                        {"Authorization": "Basic " + base64.b64encode(b"sluice:wrong").decode()},
                        {"X-ClickHouse-User": "nobody"}):
            self.assertError(403, 516, "AUTHENTICATION_FAILED", post(self.ch, "", b"SELECT 1", headers))
        reader = {"X-ClickHouse-User": "reader"}
        self.assertEqual(post(self.ch, "", b"SELECT getSetting('readonly')", reader)[2], b"1\n")
        self.assertError(500, 164, "READONLY", post(self.ch, "", b"CREATE DATABASE nope", reader))
        self.assertEqual(self.ch.scalar("SELECT count() FROM system.databases WHERE name = 'nope'"), "0")

    def test_6_errors(self):
        self.assertError(400, 62, "SYNTAX_ERROR", post(self.ch, "", b"SELEC 1"))
        self.assertError(404, 60, "UNKNOWN_TABLE", post(self.ch, "", b"SELECT * FROM shim.nope"))
        self.assertError(404, 81, "UNKNOWN_DATABASE", post(self.ch, "", b"SELECT * FROM nope.t"))
        self.assertError(404, 47, "UNKNOWN_IDENTIFIER", post(self.ch, "", b"SELECT nope FROM shim.t"))
        with self.assertRaises(ClickHouseError) as e:
            self.ch.query(INSERT, data=b"\x01\x00")   # a truncated row
        self.assertRegex(e.exception.text, r"^Code: (33|32|27)\. DB::Exception: ")


class ClickHouse26DataDirTest(unittest.TestCase):

    def test_data_dir_opened_by_another_process(self):
        """SIGTERM closes the session: chdb in another process reads the rows."""
        chdb_missing()
        ch = ClickHouse26Server()
        self.addCleanup(ch.close)
        ch.start()
        ch.query("CREATE DATABASE shim")
        ch.query(TABLE)
        ch.query(INSERT, data=rowbinary(FIRST))
        st, _, body = post(ch, "query=" + urllib.parse.quote(INSERT), gzip.compress(rowbinary(SECOND)),
                           {"Content-Encoding": "gzip"})
        self.assertEqual(st, 200, body)
        with open(f"/proc/{ch.proc.pid}/status") as f:
            mem = dict(line.split(":", 1) for line in f)
        proc = ch.proc
        ch.stop("fast")
        self.assertEqual(proc.returncode, 0)
        print(f"\n  clickhouse26: {mem['VmRSS'].strip()} resident, {mem['VmHWM'].strip()} at its peak")
        script = ("const { Session } = require(process.argv[1]);"
                  "const s = new Session(process.argv[2]);"
                  "process.stdout.write(s.query('SELECT k, s, _version FROM shim.t FINAL ORDER BY k "
                  "FORMAT JSONCompactEachRow', 'JSONCompactEachRow'));"
                  "s.close();")
        r = subprocess.run(["node", "-e", script, os.path.join(CH26_MODULES, "chdb"), os.path.join(ch.tmpdir, "data")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [tuple(json.loads(line)) for line in r.stdout.splitlines()]
        want = [(k, s.decode() if s is not None else None, str(v)) for k, s, v, _ in final_state(FIRST, SECOND)]
        self.assertEqual([(k, s, str(v)) for k, s, v in got], want)
