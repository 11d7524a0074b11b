"""
tests/integration/ch_harness.py: a throwaway ClickHouse server for the
integration tests, and the means to read what sluice wrote into it.

  ClickHouseServer  clickhouse-server with a config in a private temporary
                    directory, free loopback ports, started in the
                    background and stopped by its own pid (the server writes
                    no pid file); pause() and resume() stop it and start it
                    again on the same port with its data.
  ClickHouse26Server the same for ClickHouse 26: tests/tools/clickhouse26,
                    ClickHouse's HTTP interface in front of the chdb engine.
                    new_clickhouse_server() makes it instead of
                    clickhouse-server when SLUICE_CH_ENGINE=26.
  ChTestCase        a test class with a PostgreSQL server (pg) and a
                    ClickHouse server (ch); skips, saying why, when either is
                    missing.
  rowbinary_rows    an independent reader of ClickHouse's RowBinary output
                    for the types sluice creates.
  ch_expected, assert_ch_table_matches: the source table's rows as the
                    ClickHouse table must hold them (doc/clickhouse.md), and
                    an exact comparison.

Only the Python standard library talks to ClickHouse (urllib, HTTP POST).
"""

import datetime
import decimal
import http.server
import os
import re
import shutil
import signal
import struct
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from harness import (PgServer, skip_unless, PortInUse, ServerBase, Sluice, _pid_alive, column_kinds, free_port,
                     pg_available, wait_until, UnknownValue, UTC)

CH_SERVER = os.environ.get("SLUICE_CLICKHOUSE_SERVER", "/usr/sbin/clickhouse-server")
# "26": the tests run against tests/tools/clickhouse26 (ClickHouse 26 as
# chdb) instead of clickhouse-server.
CH_ENGINE = os.environ.get("SLUICE_CH_ENGINE", "")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CH26 = os.path.join(_REPO, "tests", "tools", "clickhouse26")
CH26_MODULES = os.path.join(_REPO, "tests", "integration", "ch26", "node_modules")

CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>{dir}/log/server.log</log>
        <errorlog>{dir}/log/server.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>{tls}
    <path>{dir}/data/</path>
    <tmp_path>{dir}/tmp/</tmp_path>
    <user_files_path>{dir}/user_files/</user_files_path>
    <format_schema_path>{dir}/format_schemas/</format_schema_path>
    <users_config>{dir}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <timezone>UTC</timezone>
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
        </default>
        <readonly>
            <readonly>1</readonly>
        </readonly>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
        <sluice>
            <password>{password}</password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </sluice>
        <reader>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>readonly</profile>
            <quota>default</quota>
        </reader>
    </users>
    <quotas>
        <default>
            <interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval>
        </default>
    </quotas>
</yandex>
"""

TLS = """
    <https_port>{https_port}</https_port>
    <openSSL>
        <server>
            <certificateFile>{dir}/tls/server.pem</certificateFile>
            <privateKeyFile>{dir}/tls/server.key</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>"""

# The password of the "sluice" user of every test server (a canary: it must
# never show up in sluice's output).
CH_PASSWORD = "ch-canary-7c1e9b"


def clickhouse26_available():
    """None when tests/tools/clickhouse26 can run, else the reason."""
    if not shutil.which("node"):
        return "node is not installed (scripts/deps.sh installs nodejs and npm)"
    if not os.path.isfile(os.path.join(CH26_MODULES, "chdb", "package.json")):
        return f"chdb is not installed in {CH26_MODULES} (scripts/deps.sh installs it)"
    libs = os.path.join(CH26_MODULES, "@chdb")
    if not any(n.startswith("lib-") for n in (os.listdir(libs) if os.path.isdir(libs) else [])):
        return f"chdb has no engine for this platform in {libs} (@chdb/lib-*; scripts/deps.sh installs it)"
    return None


def clickhouse_available():
    """None when the ClickHouse server of the tests can run, else the reason."""
    if CH_ENGINE == "26":
        return clickhouse26_available()
    if not os.access(CH_SERVER, os.X_OK):
        return f"clickhouse-server not found ({CH_SERVER}; apt-get install clickhouse-server)"
    return None


class ClickHouseError(Exception):
    def __init__(self, status, text):
        super().__init__(f"HTTP {status}: {text[:500]}")
        self.status = status
        self.text = text


def openssl_available():
    """None when the openssl command can make test certificates, else the reason."""
    import shutil
    return None if shutil.which("openssl") else "openssl not found (apt-get install openssl)"


class ClickHouseServer(ServerBase):
    """A throwaway ClickHouse server (18.16 in Debian 12) on loopback ports.
    With tls, it also serves HTTPS on https_port with a certificate for
    "localhost" only, signed by a CA of its own (ca_file)."""
    kind = "clickhouse"
    wrong_password_code = 193    # WRONG_PASSWORD; later versions answer 516 AUTHENTICATION_FAILED

    def __init__(self, tls=False, keep=False):
        self.tls = tls
        super().__init__(keep=keep)

    def _make_certs(self):
        d = os.path.join(self.tmpdir, "tls")
        os.makedirs(d, exist_ok=True)

        def ossl(*args):
            subprocess.run(["openssl"] + list(args), cwd=d, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=sluice test CA")
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost")
        with open(os.path.join(d, "ext.cnf"), "w") as f:
            f.write("subjectAltName=DNS:localhost\n")
        ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
        self.ca_file = os.path.join(d, "ca.pem")

    def https_url(self, host="localhost"):
        return f"https://{host}:{self.https_port}"

    def _setup(self):
        self.https_port = None
        self.ca_file = None
        if self.tls:
            self._make_certs()
        for d in ("log", "data", "tmp", "user_files", "format_schemas"):
            os.makedirs(os.path.join(self.tmpdir, d), exist_ok=True)
        with open(os.path.join(self.tmpdir, "users.xml"), "w") as f:
            f.write(USERS.format(password=CH_PASSWORD))
        self.proc = None
        self.tcp_port = None
        self._same_port = False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _start(self):
        if not self._same_port or not self.tcp_port:
            self.tcp_port = free_port()
            self.https_port = free_port() if self.tls else None
        tls = TLS.format(dir=self.tmpdir, https_port=self.https_port) if self.tls else ""
        with open(os.path.join(self.tmpdir, "config.xml"), "w") as f:
            f.write(CONFIG.format(dir=self.tmpdir, http_port=self.port, tcp_port=self.tcp_port, tls=tls))
        self._launch([CH_SERVER, f"--config-file={self.tmpdir}/config.xml"],
                     os.path.join(self.tmpdir, "log", "stdout.log"), os.path.join(self.tmpdir, "log", "server.err.log"),
                     "Address already in use")

    def _launch(self, argv, out_path, errlog, in_use):
        """Starts argv in the background, its output appended to out_path,
        and waits for /ping.  errlog's new lines explain a failure; in_use
        among them is a port taken meanwhile (PortInUse)."""
        name = os.path.basename(argv[0] if argv[0] != "node" else argv[1])
        err_before = os.path.getsize(errlog) if os.path.exists(errlog) else 0
        out = open(out_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     cwd=self.tmpdir, start_new_session=True)
        out.close()

        def up():
            if self.proc.poll() is not None:
                log = self.log_tail(errlog, err_before)
                if in_use in log:
                    raise PortInUse(log)
                raise RuntimeError(f"{name} exited with {self.proc.returncode}:\n{log}")
            with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as r:
                return r.read() == b"Ok.\n"
        try:
            wait_until(up, 60, f"{name} to answer /ping")
        except TimeoutError:
            raise RuntimeError(f"{name} did not answer:\n{self.log_tail(errlog, err_before)}")

    def log_tail(self, path=None, start=0, n=40):
        path = path or os.path.join(self.tmpdir, "log", "server.err.log")
        try:
            with open(path, errors="replace") as f:
                f.seek(start)
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def _stop(self, mode):
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        try:
            p.send_signal(signal.SIGKILL if mode == "immediate" else signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
        except ProcessLookupError:
            pass
        wait_until(lambda: not _pid_alive(p.pid), 30, "clickhouse-server to exit")

    def pause(self, mode="immediate"):
        """Stops the server, keeping its data and its ports: SIGKILL by
        default (a crash; 18.16 takes 15 s or more to stop on SIGTERM while
        a client keeps a connection open), or SIGTERM with mode="fast"."""
        self.stop(mode)

    def resume(self):
        """Starts the server again on the same ports."""
        self._same_port = True
        try:
            super().resume()
        finally:
            self._same_port = False

    # -- client side

    def query(self, sql, data=None, user="default", password="", params=None, timeout=120):
        """Runs one statement; returns the response body (bytes).  With data,
        sql goes in the URL and data is the body (an insert)."""
        q = dict(params or {})
        if data is not None:
            q["query"] = sql
            body = data
        else:
            body = sql.encode()
        url = f"{self.url}/?{urllib.parse.urlencode(q)}" if q else f"{self.url}/"
        req = urllib.request.Request(url, data=body, method="POST")
        req.add_header("X-ClickHouse-User", user)
        if password:
            req.add_header("X-ClickHouse-Key", password)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            raise ClickHouseError(e.code, e.read().decode("utf-8", "replace")) from None

    def scalar(self, sql):
        return self.query(sql + " FORMAT TSV").decode().strip()

    def version(self):
        """The server's version(): "18.16.1", "26.7.2.1"."""
        return self.scalar("SELECT version()")

    def columns(self, db, table):
        """[(name, type, in_sorting_key)] of a table, in its column order."""
        out = self.query("SELECT name, type, toUInt8(is_in_sorting_key) FROM system.columns WHERE database = "
                         f"{quote_str(db)} AND table = {quote_str(table)} FORMAT RowBinary")
        return [(n.decode(), t.decode(), k) for n, t, k in
                rowbinary_rows(out, ["String", "String", "UInt8"])]

    def table_exists(self, db, table):
        return self.scalar(f"SELECT count() FROM system.tables WHERE database = {quote_str(db)} "
                           f"AND name = {quote_str(table)}") == "1"

    def rows(self, db, table, where="", final=False, order_by=None):
        """Every row of a table (or view) as a list of {column: value},
        decoded from RowBinary by the column types."""
        cols = self.columns(db, table)
        if not cols:
            raise AssertionError(f"{db}.{table} does not exist in ClickHouse")
        sql = f"SELECT * FROM {quote_ident(db)}.{quote_ident(table)}"
        if final:
            sql += " FINAL"
        if where:
            sql += f" WHERE {where}"
        if order_by:
            sql += f" ORDER BY {order_by}"
        out = self.query(sql + " FORMAT RowBinary")
        names = [c[0] for c in cols]
        return [dict(zip(names, r)) for r in rowbinary_rows(out, [c[1] for c in cols])]


class ClickHouse26Server(ClickHouseServer):
    """ClickHouse 26 for the tests: tests/tools/clickhouse26 (the chdb
    engine behind ClickHouse's HTTP interface) on a loopback port, with its
    data in the temporary directory and the users of USERS: default,
    sluice (CH_PASSWORD) and reader (read-only).  It serves no HTTPS."""
    kind = "clickhouse26"
    wrong_password_code = 516

    def __init__(self, tls=False, keep=False):
        if tls:
            raise unittest.SkipTest("the ClickHouse 26 server of the tests (tests/tools/clickhouse26) serves no HTTPS")
        super().__init__(keep=keep)

    def _setup(self):
        self.https_port = None
        self.ca_file = None
        os.makedirs(os.path.join(self.tmpdir, "log"), exist_ok=True)
        self.proc = None
        self._same_port = False

    def _start(self):
        # SLUICE_CH26_LOG: a file that keeps the errors of every server
        errlog = os.environ.get("SLUICE_CH26_LOG") or os.path.join(self.tmpdir, "log", "server.err.log")
        self._launch(["node", CH26, "--port", str(self.port), "--path", os.path.join(self.tmpdir, "data"),
                      "--user", "default", "--user", "sluice", "--password", CH_PASSWORD, "--readonly-user", "reader"],
                     errlog, errlog, "EADDRINUSE")


def new_clickhouse_server(tls=False, engine=None):
    """The ClickHouse server of the tests: ClickHouse26Server when
    SLUICE_CH_ENGINE=26, else clickhouse-server."""
    return ClickHouse26Server(tls=tls) if (engine or CH_ENGINE) == "26" else ClickHouseServer(tls=tls)


class HoldingProxy:
    """An HTTP proxy in front of ClickHouse or the S3 server.  Once armed, it
    forwards the first request that matches, then holds that answer (and
    every request after it) until disarmed or closed: the server has the
    rows or the object, and sluice never learns it, as when it is killed
    between the 2xx and its checkpoint.  arm(marker) matches an INSERT whose
    body holds the marker (b"" matches any INSERT); arm_match(fn) matches
    fn(method, path, body).  Disarmed, it passes everything through, every
    header included (S3's signatures cover the Host header)."""

    HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "te", "upgrade",
           "proxy-connection"}

    def __init__(self, target):
        self.target = target.rstrip("/")
        self.match = None
        self.held = threading.Event()
        self.release = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self):
                if proxy.held.is_set():
                    proxy.release.wait(120)
                    self.close_connection = True
                    return
                body = self._body() if self.command in ("POST", "PUT") else None
                if self.command in ("POST", "PUT") and body is None:
                    # the client went away in the middle of its body: the
                    # server never sees a request cut short (S3 would store
                    # nothing, ClickHouse insert nothing)
                    self.close_connection = True
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in proxy.HOP}
                rq = urllib.request.Request(proxy.target + self.path, data=body, headers=headers,
                                            method=self.command)
                try:
                    with urllib.request.urlopen(rq, timeout=120) as r:
                        status, out, rh = r.status, r.read(), r.headers
                except urllib.error.HTTPError as e:
                    status, out, rh = e.code, e.read(), e.headers
                except (urllib.error.URLError, OSError):
                    # the server is down: so is the connection, as it would be without the proxy
                    self.close_connection = True
                    return
                match = proxy.match
                if match is not None and match(self.command, urllib.parse.unquote(self.path), body or b""):
                    proxy.held.set()
                    proxy.release.wait(120)
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    for k, v in rh.items():
                        if k.lower() not in proxy.HOP and k.lower() not in ("server", "date"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True   # the client was killed meanwhile

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

            def _body(self):
                """The request's whole body, or None when the client went
                away before its end."""
                try:
                    if "chunked" in self.headers.get("Transfer-Encoding", ""):
                        parts = []
                        while True:
                            n = int(self.rfile.readline().split(b";")[0], 16)
                            parts.append(self.rfile.read(n))
                            if len(parts[-1]) < n or not self.rfile.readline().endswith(b"\n"):
                                return None
                            if n == 0:
                                return b"".join(parts)
                    n = int(self.headers.get("Content-Length", "0"))
                    body = self.rfile.read(n)
                    return body if len(body) == n else None
                except (ValueError, OSError):
                    return None

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def arm(self, marker):
        self.arm_match(lambda method, path, body: "INSERT" in path and marker in body)

    def arm_match(self, fn):
        self.match = fn

    def pass_through(self):
        self.match = None
        self.held.clear()
        self.release.set()
        self.release = threading.Event()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def quote_ident(name):
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ch_object(schema, table):
    """The ClickHouse table of schema.table: its object name, by the rule of
    schema/schema.h (underscores in the schema doubled, '%', '/' and control
    characters as %XX, a leading '_' of the table as %5F)."""
    def esc(s, first_table=False):
        out = ""
        for i, ch in enumerate(s):
            b = ch.encode()
            if ch in "%/" or ord(ch) < 0x20 or ord(ch) == 0x7f or (first_table and i == 0 and ch == "_"):
                out += "".join(f"%{x:02X}" for x in b)
            else:
                out += ch
        return out
    return esc(schema).replace("_", "__") + "_" + esc(table, True)


def merge_engine_re(key, modern=False):
    """engine_full of a merge-mode table ordered by key, as 18.16 and later
    versions spell it ("ORDER BY id", "ORDER BY (id) SETTINGS ..."); the
    modern layout's has _is_deleted too."""
    args = r"_version, _is_deleted" if modern else r"_version"
    return rf"^ReplacingMergeTree\({args}\) ORDER BY ({key}|\({key}\))( |$)"


# --------------------------------------------------------------------------
# RowBinary, read independently of sluice's decoder

def _uleb(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def _read(buf, pos, t):
    if t.startswith("Nullable("):
        if buf[pos]:
            return None, pos + 1
        return _read(buf, pos + 1, t[9:-1])
    if t.startswith("Array("):
        n, pos = _uleb(buf, pos)
        out = []
        for _ in range(n):
            v, pos = _read(buf, pos, t[6:-1])
            out.append(v)
        return out, pos
    m = re.match(r"^Decimal\((\d+),\s*(\d+)\)$", t)
    if m:
        p, s = int(m.group(1)), int(m.group(2))
        width = 4 if p <= 9 else 8 if p <= 18 else 16 if p <= 38 else 32
        v = int.from_bytes(buf[pos:pos + width], "little", signed=True)
        return decimal.Decimal(v).scaleb(-s, context=decimal.Context(prec=100)), pos + width
    if t == "UUID":
        # two little-endian UInt64: the high half (the text's first 16 hex
        # digits), then the low half; read as the canonical text
        hi, lo = struct.unpack_from("<QQ", buf, pos)
        h = f"{hi:016x}{lo:016x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}".encode(), pos + 16
    if t.startswith("DateTime64(6"):
        t = "Int64"     # microseconds since the epoch, whatever the time zone
    fixed = {"UInt8": "<B", "Int32": "<i", "Int64": "<q", "UInt64": "<Q", "Float32": "<f", "Float64": "<d",
             "Bool": "<B", "Date32": "<i"}
    if t in fixed:
        fmt = fixed[t]
        n = struct.calcsize(fmt)
        if t.startswith("Float"):
            return buf[pos:pos + n], pos + n   # the bits: compared exactly
        return struct.unpack_from(fmt, buf, pos)[0], pos + n
    if t == "String":
        n, pos = _uleb(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    raise ValueError(f"rowbinary_rows: type {t} not supported")


def rowbinary_rows(buf, types):
    """Decodes RowBinary rows of the given ClickHouse types.  Floats come
    back as their little-endian bits (bytes), Decimals as decimal.Decimal
    with the column's scale, Strings as bytes."""
    rows, pos = [], 0
    while pos < len(buf):
        row = []
        for t in types:
            v, pos = _read(buf, pos, t)
            row.append(v)
        rows.append(tuple(row))
    return rows


# --------------------------------------------------------------------------
# expected values

EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def _micros(td):
    return (td.days * 86400 + td.seconds) * 1000000 + td.microseconds


DATE32_MIN, DATE32_MAX = -25567, 120529   # 1900-01-01, 2299-12-31


def ch_expected(kind, v, oid=None, typmod=None, modern=False):
    """A PostgreSQL value (as harness.expected_rows reads it) as sluice
    writes it to ClickHouse (doc/clickhouse.md), in rowbinary_rows' terms,
    in the legacy or the modern layout."""
    if v is None:
        return None
    if kind == "date" and modern:
        return min(max((v - EPOCH_DATE).days, DATE32_MIN), DATE32_MAX)
    if kind == "bool":
        return 1 if v else 0
    if kind == "int":
        return v
    if kind == "float4":
        return struct.pack("<f", v)
    if kind == "float8":
        return struct.pack("<d", v)
    if kind == "decimal":
        p = ((typmod - 4) >> 16) & 0xFFFF
        if p > (76 if modern else 38):
            return str(v).encode()   # text with exactly the scale's digits
        return v
    if kind == "bytes":
        return bytes(v)
    if kind == "date":
        return (v - EPOCH_DATE).days
    if kind == "time":
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000000 + v.microsecond
    if kind in ("timestamp", "timestamptz"):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return _micros(v - EPOCH)
    if kind == "uuid":
        return str(v).lower().encode()
    return v.encode() if isinstance(v, str) else v


def ch_value_equal(kind, expected, actual):
    if kind == "decimal" and isinstance(expected, decimal.Decimal) and isinstance(actual, decimal.Decimal):
        return expected == actual and expected.as_tuple().exponent == actual.as_tuple().exponent
    return expected == actual


def source_rows_for_ch(pg, schema, table, key_columns, modern=False):
    """{key tuple: {ClickHouse column name: expected value}} of the source table."""
    from harness import expected_rows
    kinds = column_kinds(pg, schema, table, with_oids=True)
    typmods = dict(pg.sql(
        "SELECT a.attname, a.atttypmod FROM pg_attribute a WHERE a.attrelid = "
        "(quote_ident(%s) || '.' || quote_ident(%s))::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        (schema, table)))
    rows = expected_rows(pg, schema, table, key_columns)
    out = {}
    for _key, row in rows.items():
        conv = {}
        for name, kind, oid in kinds:
            conv[ch_column(name)] = ch_expected(kind, row[name], oid, typmods[name], modern)
        out[tuple(conv[ch_column(k)] for k in key_columns)] = conv
    return out, {ch_column(n): k for n, k, _ in kinds}


def ch_column(name):
    """The ClickHouse column of a source column (a leading '_' doubled)."""
    return "_" + name if name.startswith("_") else name


METADATA = ("_uuid", "_source_timestamp", "_read_timestamp", "_change_type", "_csn", "_version",
            "_is_deleted", "_tx_id", "_unchanged_columns", "_lsn", "_log_file", "_log_position", "_gtid")


def ch_state_diff(expected, kinds, got_rows, key_columns, limit=20):
    """Differences between expected ({key: row}) and rows read from
    ClickHouse (payload columns only)."""
    keys = [ch_column(k) for k in key_columns]
    got = {}
    diffs = []
    for r in got_rows:
        key = tuple(r[k] for k in keys)
        if key in got:
            diffs.append(f"key {key} appears twice in ClickHouse")
        got[key] = {c: v for c, v in r.items() if c not in METADATA}
    for key in sorted(set(expected) - set(got), key=repr)[:limit]:
        diffs.append(f"missing in ClickHouse: {key}")
    for key in sorted(set(got) - set(expected), key=repr)[:limit]:
        diffs.append(f"extra in ClickHouse (not in source): {key} = {got[key]}")
    for key in sorted(set(expected) & set(got), key=repr):
        e, g = expected[key], got[key]
        if set(e) != set(g):
            diffs.append(f"{key}: columns {sorted(g)} are not the source's {sorted(e)}")
            continue
        for c in e:
            if not ch_value_equal(kinds[c], e[c], g[c]):
                diffs.append(f"{key}.{c}: source {e[c]!r} vs ClickHouse {g[c]!r} ({kinds[c]})")
        if len(diffs) > limit:
            break
    return diffs


def source_columns(rows, kinds):
    """rows (payloads) on the source's columns (kinds): an append-mode table
    keeps a column dropped or renamed at the source, with its history
    (doc/clickhouse.md, "Schema changes")."""
    return [{c: v for c, v in r.items() if c in kinds} for r in rows]


def rebuild_append(rows, key_columns, lazy=False):
    """The table state an append-mode ClickHouse table implies: its rows in
    CSN order applied one by one (TRUNCATE clears; an unchanged value comes
    from the key's row, or after a key change from the old key's; of a key
    never seen, a problem, or with lazy an harness.UnknownValue).  Returns
    ({key: payload}, [problems])."""
    keys = [ch_column(k) for k in key_columns]
    meta = {c for c in rows[0] if c.startswith("_") and not c.startswith("__")} if rows else set()
    state, problems, moved = {}, [], None
    for r in sorted(rows, key=lambda r: r["_csn"]):
        ct = r["_change_type"].decode()
        payload = {c: v for c, v in r.items() if c not in meta}
        key = tuple(r[k] for k in keys)
        csn = r["_csn"].decode()
        if ct == "TRUNCATE":
            state.clear()
        elif ct in ("INSERT", "UPDATE-INSERT"):
            for c in r["_unchanged_columns"]:
                c = c.decode()
                if key in state:
                    payload[c] = state[key][c]
                elif moved and moved[0] == csn.split("-")[0] and int(moved[1]) + 1 == int(csn.split("-")[1]):
                    payload[c] = moved[2][c]
                elif lazy:
                    payload[c] = UnknownValue(csn)
                else:
                    problems.append(f"{csn}: unchanged {c} of a key never seen: {key}")
            state[key] = payload
        else:
            old = state.pop(key, None)
            if ct == "UPDATE-DELETE" and old is not None:
                moved = (csn.split("-")[0], csn.split("-")[1], old)
    return state, problems



class ChTestCase(unittest.TestCase):
    """A test class with a PostgreSQL server (pg) and a ClickHouse server
    (ch), both started once for the class and always closed."""
    pg_settings = None
    pg = None
    ch = None
    ch_tls = False     # the ClickHouse server also serves HTTPS (needs openssl)
    ch_engine = None   # "26": tests/tools/clickhouse26 whatever SLUICE_CH_ENGINE says

    @classmethod
    def setUpClass(cls):
        skip_unless(pg_available() or clickhouse_available() or (openssl_available() if cls.ch_tls else None))
        cls.pg = PgServer(cls.pg_settings)
        cls.addClassCleanup(cls.pg.close)
        cls.pg.start()
        cls.ch = new_clickhouse_server(tls=cls.ch_tls, engine=cls.ch_engine)
        cls.addClassCleanup(cls.ch.close)
        cls.ch.start()

    @property
    def modern(self):
        """Whether sluice makes modern-layout tables on this server (23.x and
        later, with the default layout = auto)."""
        if not hasattr(self.ch, "_modern"):
            self.ch._modern = int(self.ch.version().split(".")[0]) >= 23
        return self.ch._modern

    def sluice(self, database="replica", write_mode="append", dest=None, **kw):
        """A Sluice on this class's servers writing to ClickHouse database
        `database`, closed when the test ends.  dest adds or overrides keys
        of the destination section."""
        d = {"type": "clickhouse", "path": None, "codec": None, "compression_level": None,
             "max_file_bytes": None, "max_file_seconds": None, "url": self.ch.url,
             "database": database, "user": "sluice", "password_env": "SLUICE_TEST_CH_PASSWORD"}
        d.update(dest or {})
        extra = kw.pop("extra", {})
        extra = {k: dict(v) for k, v in extra.items()}
        extra.setdefault("destination", {}).update(d)
        s = Sluice(self.pg, write_mode=write_mode, extra=extra, **kw)
        s.ch_database = database
        self.addCleanup(s.close)
        return s

    def env(self):
        return {"SLUICE_TEST_CH_PASSWORD": CH_PASSWORD}

    def catch_up(self, s, timeout=240, env=None):
        if self.pg.running:
            self.pg.wait_wal_flushed()
        e = self.env()
        e.update(env or {})
        r = s.run("run", "--until-caught-up", timeout=timeout, env=e)
        if r.rc != 0:
            self.fail(f"sluice run --until-caught-up failed:\n{r.describe()}")
        self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr, "the ClickHouse password appeared in the output")
        return r

    def stop_and_catch_up(self, procs):
        """Ends the agents of procs ({Sluice: its running process}) with
        SIGTERM (each must drain and exit 0, not having exited before), then
        catches each stream up (after its slot is free, for PostgreSQL)."""
        for s, p in procs.items():
            if not p.alive():
                self.fail(f"sluice exited on its own:\n{p.result().describe()}")
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
            self.assertEqual(r.rc, 0, f"SIGTERM must drain and exit 0:\n{r.describe()}")
            self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr)
            if hasattr(self.pg, "wait_slot_inactive"):
                self.pg.wait_slot_inactive(s.slot)
            self.catch_up(s)

    def source_rows(self, schema, table, key_columns):
        """The source table as ClickHouse must hold it: ({key: row}, {column: kind})."""
        return source_rows_for_ch(self.pg, schema, table, key_columns, self.modern)

    def assertChMatches(self, s, schema, table, key_columns, append=False):
        """The table's merge view equals the source table exactly; with
        append, the state its change rows rebuild does."""
        expected, kinds = self.source_rows(schema, table, key_columns)
        obj = ch_object(schema, table)
        if append:
            state, problems = rebuild_append(self.ch.rows(s.ch_database, obj, final=True), key_columns)
            if problems:
                self.fail(f"{schema}.{table}: the append rows do not rebuild:\n  " + "\n  ".join(problems[:20]))
            got = source_columns(state.values(), kinds)
        else:
            got = self.ch.rows(s.ch_database, obj + "_current")
        diffs = ch_state_diff(expected, kinds, got, key_columns)
        if diffs:
            self.fail(f"{schema}.{table}: ClickHouse differs from the source ({len(diffs)} shown):\n  " +
                      "\n  ".join(diffs[:30]))
        return got


# --------------------------------------------------------------------------
# a MariaDB source

def my_ch_expected(kind, v, precision=None, scale=None, modern=False):
    """A MariaDB value as MySQLdb returns it (harness_mysql.my_column_kinds'
    kinds and expressions) as sluice writes it to ClickHouse, in
    rowbinary_rows' terms (doc/clickhouse.md, doc/types-mysql.md)."""
    if v is None:
        return None
    if kind in ("int", "uint"):
        return int(v)
    if kind == "bool":
        return 1 if any(bytes(v)) else 0
    if kind == "decimal":
        v = v.quantize(decimal.Decimal(1).scaleb(-scale), context=decimal.Context(prec=100))
        return format(v, "f").encode() if precision > (76 if modern else 38) else v
    if kind == "float4":
        return struct.pack("<f", v)
    if kind == "float8":
        return struct.pack("<d", v)
    if kind == "date":
        days = (v - EPOCH_DATE).days
        return min(max(days, DATE32_MIN), DATE32_MAX) if modern else days
    if kind == "time":
        return v // datetime.timedelta(microseconds=1)
    if kind in ("timestamp", "timestamptz"):
        return _micros(v.replace(tzinfo=UTC) - EPOCH)
    if kind == "bytes":
        return bytes(v)
    return v.encode() if isinstance(v, str) else bytes(v)


def my_source_rows_for_ch(my, db, table, key_columns, modern=False):
    """{key tuple: {ClickHouse column: expected value}} of a MariaDB table,
    read with its own SELECT (the harness's connection, time_zone UTC), and
    {ClickHouse column: kind}."""
    from harness_mysql import my_column_kinds
    kinds = my_column_kinds(my, db, table)
    prec = {n: (p, s) for n, p, s in my.sql(
        "SELECT COLUMN_NAME, NUMERIC_PRECISION, NUMERIC_SCALE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table))}
    q = "SELECT " + ", ".join(e for _, _, e in kinds) + " FROM `" + db.replace("`", "``") + "`.`" + \
        table.replace("`", "``") + "`"
    out = {}
    for row in my.sql(q):
        conv = {ch_column(n): my_ch_expected(k, v, *prec[n], modern=modern) for (n, k, _), v in zip(kinds, row)}
        key = tuple(conv[ch_column(k)] for k in key_columns)
        if key in out:
            raise AssertionError(f"{db}.{table}: key {key} is not unique")
        out[key] = conv
    return out, {ch_column(n): ("int" if k == "uint" else k) for n, k, _ in kinds}


class MyChTestCase(ChTestCase):
    """ChTestCase with a MariaDB source: self.my (also self.pg, which the
    harness's Sluice takes as the source) and a ClickHouse server."""
    my_settings = None
    my = None

    @classmethod
    def setUpClass(cls):
        from harness_mysql import MariaDbServer, mariadb_available
        skip_unless(mariadb_available() or clickhouse_available())
        cls.my = cls.pg = MariaDbServer(cls.my_settings)
        cls.addClassCleanup(cls.my.close)
        cls.my.start()
        cls.ch = new_clickhouse_server(engine=cls.ch_engine)
        cls.addClassCleanup(cls.ch.close)
        cls.ch.start()

    _server_ids = 0

    def sluice(self, database="replica", write_mode="append", dest=None, **kw):
        """As ChTestCase.sluice, with a server_id of its own for each stream
        (two streams with one server_id end each other's connection)."""
        MyChTestCase._server_ids += 1
        extra = {k: dict(v) for k, v in kw.pop("extra", {}).items()}
        extra.setdefault("source", {}).setdefault("server_id", str(self.my.server_id_for_sluice +
                                                                    MyChTestCase._server_ids))
        return super().sluice(database=database, write_mode=write_mode, dest=dest, extra=extra, **kw)

    def source_rows(self, schema, table, key_columns):
        return my_source_rows_for_ch(self.my, schema, table, key_columns, self.modern)
