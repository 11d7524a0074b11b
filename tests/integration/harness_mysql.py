"""
tests/integration/harness_mysql.py: a throwaway MariaDB server and the
helpers that compare sluice's output with its tables, in the style of
harness.py (whose Sluice, read_avro_tree, rebuild and counter_gaps work for
both sources).

  MariaDbServer   mariadb-install-db and mariadbd in a private temporary
                  directory with a private --tmpdir, a free loopback port,
                  log_bin, binlog_format=ROW, server_id; stopped by its own
                  pid; context manager and keep option like PgServer.  A
                  user `sluice` with exactly the documented grants
                  (REPLICATION SLAVE, BINLOG MONITOR, SELECT) is what sluice
                  connects as.
  MyTestCase      a test class with its own server (self.my, also self.pg
                  for the harness's Sluice), skipped when MariaDB is missing.
  my_expected_rows, my_state_diff, assert_my_table_matches: the source
                  table's rows in the Python types the Avro output reads back
                  as, compared exactly with the state rebuilt from the output
                  (by harness.rows_diff; MyTestCase's methods are
                  harness.SourceTestCase's, as PgTestCase's).

Needs Debian's mariadb-server and python3-mysqldb (scripts/deps.sh).
"""

import datetime
import decimal
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import harness
from harness import (ServerBase, PortInUse, SourceTestCase, wait_until, assert_table_matches, rows_diff,
                     values_equal, normalize, _pid_alive, UTC)

MARIADBD = os.environ.get("SLUICE_MARIADBD", shutil.which("mariadbd") or "/usr/sbin/mariadbd")
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
SLUICE_USER = "sluice"
SLUICE_PASSWORD = "sluice-test-pw-Zq7"

MY_DEFAULT_SETTINGS = {
    "server_id": "1",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "innodb_buffer_pool_size": "64M",
    "innodb_log_file_size": "64M",
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
    "character_set_server": "utf8mb4",
    "collation_server": "utf8mb4_general_ci",
    "max_allowed_packet": "64M",
    "max_connections": "200",
    "skip_name_resolve": "ON",
}


def mariadb_available():
    """None when MariaDB and MySQLdb are usable, else the reason."""
    for b in (MARIADBD, INSTALL_DB):
        if not os.access(b, os.X_OK):
            return f"MariaDB binaries not found ({b}; apt-get install mariadb-server)"
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        return "MySQLdb missing (apt-get install python3-mysqldb)"
    return None


_template = {}
_template_lock = threading.Lock()


def _installed_template():
    """A data directory made by mariadb-install-db once per process; each
    server copies it (installing takes seconds, copying a fraction)."""
    with _template_lock:
        if "dir" in _template and os.path.isdir(os.path.join(_template["dir"], "data")):
            return _template["dir"]
        # (harness.close_all(), e.g. test_harness.py's, removes it: make it again)
        d = tempfile.mkdtemp(prefix="sluice-mariadb-template-")
        tmp = os.path.join(d, "tmp")
        os.mkdir(tmp)
        argv = [INSTALL_DB, "--no-defaults", f"--datadir={d}/data", f"--tmpdir={tmp}", "--user=root",
                "--auth-root-authentication-method=normal", "--skip-test-db"]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        if p.returncode != 0:
            shutil.rmtree(d, ignore_errors=True)
            raise RuntimeError(f"mariadb-install-db failed ({p.returncode}):\n{p.stdout}")
        _template["dir"] = d
        harness._register(_TemplateCleanup(d))
        return d


class _TemplateCleanup:
    def __init__(self, d):
        self.d = d

    def close(self):
        shutil.rmtree(self.d, ignore_errors=True)


class MariaDbServer(ServerBase):
    """A throwaway MariaDB 10.11 server writing a ROW binlog.

    settings override MY_DEFAULT_SETTINGS (None removes one).  The server
    runs as root (--user=root), in <tmpdir>/data, with its own --tmpdir,
    socket and pid; binlogs are <tmpdir>/binlog/mb.NNNNNN.  stop("immediate")
    kills it (SIGKILL), stop("fast") shuts it down (SIGTERM)."""
    kind = "mariadb"

    def __init__(self, settings=None, keep=False):
        self.settings = dict(MY_DEFAULT_SETTINGS)
        for k, v in (settings or {}).items():
            if v is None:
                self.settings.pop(k, None)
            else:
                self.settings[k] = v
        self.proc = None
        self._conn = None
        self._user_made = False
        self.server_id_for_sluice = random.randrange(1000, 2_000_000_000)
        super().__init__(keep=keep)

    host = "127.0.0.1"

    @property
    def datadir(self):
        return os.path.join(self.tmpdir, "data")

    @property
    def socket(self):
        return os.path.join(self.tmpdir, "my.sock")

    @property
    def errlog(self):
        return os.path.join(self.tmpdir, "error.log")

    @property
    def password_file(self):
        return os.path.join(self.tmpdir, "sluice.pw")

    def _setup(self):
        shutil.copytree(os.path.join(_installed_template(), "data"), self.datadir, symlinks=True)
        os.makedirs(os.path.join(self.tmpdir, "tmp"))
        os.makedirs(os.path.join(self.tmpdir, "binlog"))
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(SLUICE_PASSWORD + "\n")

    def _write_conf(self):
        s = {"user": "root", "datadir": self.datadir, "tmpdir": os.path.join(self.tmpdir, "tmp"),
             "socket": self.socket, "port": str(self.port), "bind_address": "127.0.0.1",
             "pid_file": os.path.join(self.tmpdir, "mariadbd.pid"), "log_error": self.errlog,
             "log_bin": os.path.join(self.tmpdir, "binlog", "mb")}
        s.update(self.settings)
        path = os.path.join(self.tmpdir, "my.cnf")
        with open(path, "w") as f:
            f.write("[mariadbd]\n")
            for k, v in s.items():
                f.write(f"{k} = {v}\n")
        return path

    def _start(self):
        conf = self._write_conf()
        try:
            os.unlink(self.errlog)
        except FileNotFoundError:
            pass
        self.proc = subprocess.Popen([MARIADBD, f"--defaults-file={conf}"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

        def up():
            if self.proc.poll() is not None:
                log = self.log_tail()
                if "Address already in use" in log or "Do you already have another" in log:
                    raise PortInUse(log)
                raise AssertionError(f"mariadbd exited {self.proc.returncode}:\n{log}")
            self.connect(root=True).close()
            return True
        try:
            wait_until(up, 60, "mariadbd to accept connections")
        except PortInUse:
            raise
        if not self._user_made:
            self.execute(f"CREATE USER IF NOT EXISTS '{SLUICE_USER}'@'127.0.0.1' IDENTIFIED BY '{SLUICE_PASSWORD}'")
            self.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO '{SLUICE_USER}'@'127.0.0.1'")
            self._user_made = True

    def _stop(self, mode):
        self.close_conn()
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGKILL if mode == "immediate" else signal.SIGTERM)
        try:
            p.wait(90)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)

    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def log_path(self):
        return self.errlog

    # -- what sluice uses

    def source_section(self):
        return {"type": "mysql", "host": "127.0.0.1", "port": str(self.port), "user": SLUICE_USER,
                "password_file": self.password_file, "server_id": str(self.server_id_for_sluice)}

    def wait_wal_flushed(self, timeout=30):
        """Nothing to wait for: a commit that returned is in the binlog."""

    # -- the harness's own connections (the Unix socket, as root)

    def connect(self, db=None, autocommit=True, root=True):
        import MySQLdb
        kw = dict(unix_socket=self.socket, user="root", charset="utf8mb4", use_unicode=True,
                  init_command="SET time_zone = '+00:00'")
        if db:
            kw["db"] = db
        c = MySQLdb.connect(**kw)
        c.autocommit(autocommit)
        return c

    @property
    def conn(self):
        if self._conn is None:
            self._conn = self.connect()
        return self._conn

    def sql(self, query, params=None):
        """Runs one statement; returns its rows (a list of tuples)."""
        cur = self.conn.cursor()
        try:
            cur.execute(query, params)
            rows = cur.fetchall() if cur.description is not None else ()
            return list(rows)
        finally:
            cur.close()

    def execute(self, query, params=None):
        cur = self.conn.cursor()
        try:
            n = cur.execute(query, params)
            while cur.nextset():
                pass
            return n
        finally:
            cur.close()

    def master_status(self):
        """(file, position) of the binlog's head."""
        r = self.sql("SHOW MASTER STATUS")[0]
        return r[0], int(r[1])

    def binlogs(self):
        return [r[0] for r in self.sql("SHOW BINARY LOGS")]

    def gtid_pos(self):
        return self.one("SELECT @@gtid_binlog_pos")


def binlog_pos_value(file, offset):
    """A binlog position as the CSN's position part: file number << 32 | offset."""
    return int(file.rsplit(".", 1)[1]) << 32 | offset


# --------------------------------------------------------------------------
# comparing with the source

def my_column_kinds(my, db, table):
    """[(column name, kind, sql expression to select it)] in column order;
    kind is how sluice writes the column (doc/types-mysql.md), in the
    vocabulary of harness.values_equal plus 'uint' (BIGINT UNSIGNED)."""
    rows = my.sql("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, NUMERIC_PRECISION "
                  "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                  "ORDER BY ORDINAL_POSITION", (db, table))
    out = []
    for name, dt, ct, cs, nprec in rows:
        q = "`" + name.replace("`", "``") + "`"
        expr = q
        if dt in ("tinyint", "smallint", "mediumint", "int", "year"):
            kind = "int"
        elif dt == "bigint":
            kind = "uint" if "unsigned" in ct else "int"
        elif dt == "decimal":
            kind = "decimal"
        elif dt == "float":
            kind, expr = "float4", f"CAST({q} AS DOUBLE)"
        elif dt == "double":
            kind = "float8"
        elif dt == "date":
            kind = "date"
        elif dt == "datetime":
            kind = "timestamp"
        elif dt == "timestamp":
            kind = "timestamptz"
        elif dt == "time":
            kind = "time"
        elif dt == "bit":
            kind = "bool" if nprec == 1 else "bytes"
        elif dt in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                    "geometrycollection"):
            kind, expr = "bytes", f"ST_AsBinary({q})"
        elif dt == "uuid":
            kind, expr = "uuid", f"CAST({q} AS CHAR)"
        elif dt in ("inet4", "inet6"):
            kind, expr = "text", f"CAST({q} AS CHAR)"
        elif dt in ("enum", "set"):
            kind = "text"
        elif cs is None:
            kind = "bytes"
        else:
            kind = "text"
        out.append((name, kind, expr))
    return out


def _py_value(kind, v):
    if v is None:
        return None
    if kind == "bool" and isinstance(v, (bytes, bytearray)):
        return any(v)
    if kind in ("timestamp", "timestamptz") and isinstance(v, datetime.datetime):
        return v.replace(tzinfo=UTC)
    if kind == "time" and isinstance(v, datetime.timedelta):
        us = v // datetime.timedelta(microseconds=1)
        if 0 <= us < 86400 * 10**6:
            return (datetime.datetime.min + v).time()
        return v
    if kind == "bytes" and isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if kind == "text" and isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    return v


def my_expected_rows(my, db, table, key_columns):
    """The table's rows as {key tuple: {column: value}} in the Python types
    the Avro output reads back as."""
    kinds = my_column_kinds(my, db, table)
    q = "SELECT " + ", ".join(e for _, _, e in kinds) + " FROM `" + db.replace("`", "``") + "`.`" + \
        table.replace("`", "``") + "`"
    out = {}
    for row in my.sql(q):
        d = {name: _py_value(kind, v) for (name, kind, _), v in zip(kinds, row)}
        key = tuple(normalize(dict((n, k) for n, k, _ in kinds)[k], d[k]) for k in key_columns)
        if key in out:
            raise AssertionError(f"{db}.{table}: key {key} is not unique")
        out[key] = d
    return out


def my_values_equal(kind, expected, actual):
    if kind == "uint":
        if expected is None or actual is None:
            return None if expected is None and actual is None else "null vs non-null"
        ok = isinstance(actual, decimal.Decimal) and actual == expected and actual.as_tuple().exponent == 0
        return None if ok else "differs"
    return values_equal(kind, expected, actual)


def my_state_diff(my, db, table, key_columns, state, limit=20):
    """harness.state_diff for a MariaDB table."""
    return rows_diff({n: k for n, k, _ in my_column_kinds(my, db, table)},
                     my_expected_rows(my, db, table, key_columns), key_columns, state, my_values_equal, limit)


def assert_my_table_matches(testcase, my, records, db, table, key_columns):
    return assert_table_matches(testcase, my, records, db, table, key_columns, my_state_diff)


class MyTestCase(SourceTestCase):
    """A test class with its own MariaDB server (my), started once for the
    class and always closed.  my_settings go to MariaDbServer."""
    my_settings = None
    my = None
    server_attr = "my"
    source_kind = "mariadb"
    state_diff = staticmethod(my_state_diff)

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(mariadb_available())
        cls.my = MariaDbServer(cls.my_settings)
        cls.addClassCleanup(cls.my.close)
        cls.my.start()
