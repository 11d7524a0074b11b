"""
tests/integration/harness.py: throwaway servers, a sluice runner and the
helpers that turn sluice's Avro output back into table state.

Run with Debian's Python (/usr/bin/python3): it needs python3-avro,
python3-snappy, python3-zstandard and python3-psycopg2.

  ServerBase   a private temporary directory, a free loopback port, start,
               stop and close (always: context manager and atexit).  A
               MariaDbServer is added by subclassing it, as ClickHouseServer
               is (ch_harness.py).
  PgServer     a PostgreSQL 15 cluster set up for logical replication.
  Sluice       writes a config file into its own temporary directory and runs
               the binary ($SLUICE_BIN, default <repo>/_build/sluice).
  read_avro_tree, rebuild, counter_gaps, expected_rows, assert_table_matches:
               read the output with python avro (checked against the layout
               and record contract by check_output.py), fold append records
               into the state they imply, and compare it exactly with the
               source table.
  SourceTestCase, AgentRuns, BackfillUnderLoad: what the test classes of
               both sources share (PgTestCase here, MyTestCase in
               harness_mysql.py).

Nothing here reads anything outside the repository at run time.
"""

import atexit
import collections
import datetime
import json
import decimal
import math
import os
import pwd
import random
import select
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import check_output  # noqa: E402

PG_BIN = os.environ.get("SLUICE_PG_BIN", "/usr/lib/postgresql/15/bin")
UTC = datetime.timezone.utc


def sluice_bin():
    return os.environ.get("SLUICE_BIN", os.path.join(REPO, "_build", "sluice"))


def sluice_test_bin():
    """tests/tools/sluice_test, built beside sluice: sluice with test-only
    sinks (slow_avro_dir) in its sink registry."""
    return os.environ.get("SLUICE_TEST_BIN") or \
        os.path.join(os.path.dirname(os.path.abspath(sluice_bin())), "tests", "tools", "sluice_test")


def tag(*names):
    """Decorator: tags a test method (run.py --tag NAME selects it).  A
    class's `tags` and a module's `TAGS` tag all their tests."""
    def mark(fn):
        fn.tags = set(getattr(fn, "tags", ())) | set(names)
        return fn
    return mark


def skip_unless(reason):
    """Nothing when reason is None.  Otherwise the calling test class skips,
    saying why; but in CI (CI=true) a missing server or tool fails the run
    instead, so that a CI run can never pass by skipping what it exists to
    test."""
    if not reason:
        return
    import unittest
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI needs this, and it is missing: {reason}")
    raise unittest.SkipTest(reason)


def pg_available():
    """Returns None when PostgreSQL 15 and psycopg2 are usable, else the reason."""
    for b in ("initdb", "pg_ctl", "postgres"):
        if not os.access(os.path.join(PG_BIN, b), os.X_OK):
            return f"PostgreSQL 15 binaries not found ({PG_BIN}/{b})"
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 missing (apt-get install python3-psycopg2)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no 'postgres' user to run initdb"
    return None


def free_port():
    """A free TCP port on 127.0.0.1 (the kernel picks it; a race is handled by retrying start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running_chunks(s, table):
    """The durable chunks of table's backfill while streaming, as the
    checkpoint of Sluice s has them (0 unless it is running)."""
    try:
        with open(os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")) as f:
            e = json.load(f)["tables"][table]
    except (OSError, ValueError, KeyError):
        return 0
    return e.get("chunks", 0) if e.get("backfill") == "running" else 0


def after_request(log, after, table):
    """The part of an agent's log after the first line holding after, and
    after the backfill request of table that follows it ("" while there is
    none)."""
    return log.partition(after)[2].partition(f"backfill of {table} requested")[2]


def pick_seed(what="seed"):
    """SLUICE_TEST_SEED, or a new random seed; printed, so that a failure
    can be repeated."""
    v = os.environ.get("SLUICE_TEST_SEED")
    s = int(v) if v else random.SystemRandom().randrange(1 << 30)
    print(f"\n  {what} {s} (SLUICE_TEST_SEED={s} repeats it)", file=sys.stderr, flush=True)
    return s


def checkpoint(s):
    """The checkpoint file of Sluice s as JSON (None before the first)."""
    try:
        with open(os.path.join(s.state_dir, f"{s.stream}.checkpoint.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def checkpoint_table(s, name):
    """The checkpoint's entry of table name ({} while it has none)."""
    return ((checkpoint(s) or {}).get("tables") or {}).get(name, {})


def backfill_running(s, name, method, chunks):
    """The checkpoint has table name's backfill running by method, at least
    chunks of it durable."""
    e = checkpoint_table(s, name)
    return e.get("backfill") == "running" and e.get("method") == method and e.get("chunks", 0) >= chunks


def backfill_requests_left(s):
    """The backfill request files in the state_dir of Sluice s."""
    return [n for n in os.listdir(s.state_dir) if ".backfill-request." in n]


def truncate_markers(recs):
    """The TRUNCATE records (a backfill's markers among them)."""
    return [r for r in recs if r["source_metadata"]["change_type"] == "TRUNCATE"]


def backfill_inserts(recs):
    """The rows a backfill wrote (either source's read method)."""
    return [r for r in recs if r["read_method"] in ("postgresql-backfill", "mysql-backfill-fulldump")
            and r["source_metadata"]["change_type"] == "INSERT"]


def wait_until(pred, timeout, what, interval=0.02):
    """Polls pred() until it returns a true value (returned), or raises TimeoutError."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except AssertionError:
            raise
        except Exception as e:  # the thing polled is not ready yet
            last_exc = e
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}" +
                               (f" (last error: {last_exc})" if last_exc else ""))
        time.sleep(interval)
        interval = min(interval * 1.5, 0.25)


def wait_for_log(p, text, timeout, what=None):
    """Polls the stderr of the running sluice p (a SluiceProc) every 5 ms
    until it holds text, for a test that then kills, signals or alters
    while what the line announces goes on (wait_until's polls grow to
    250 ms, in which a small table's backfill can begin and end).  Fails
    the test if p has exited (before the line or after it); raises
    TimeoutError after timeout seconds.  Returns the stderr read so far."""
    deadline = time.monotonic() + timeout
    seen = ""
    with open(p.err_path, errors="replace") as f:
        while True:
            running = p.alive()
            seen += f.read()
            if not running:
                when = "after" if text in seen else "before"
                raise AssertionError(f"sluice exited {when} {what or repr(text)}:\n{p.result().describe()}")
            if text in seen:
                return seen
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what or repr(text)}:\n{seen[-6000:]}")
            time.sleep(0.005)


# --------------------------------------------------------------------------
# servers

_live = []          # objects with close(), closed at exit in reverse order
_live_lock = threading.Lock()


def _register(obj):
    with _live_lock:
        _live.append(obj)


def _unregister(obj):
    with _live_lock:
        if obj in _live:
            _live.remove(obj)


@atexit.register
def close_all():
    """Closes every server and sluice runner still open (also run at exit).
    Termination signals wait until the cleanup is done."""
    blocked = False
    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        blocked = True
    try:
        while True:
            with _live_lock:
                if not _live:
                    return
                obj = _live.pop()
            try:
                obj.close()
            except Exception as e:
                print(f"harness: cleanup of {obj!r} failed: {e}", file=sys.stderr)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


class ServerBase:
    """A throwaway server: private temp directory, loopback port, start/stop.

    Subclasses set `kind` and implement _setup() (one-time initialisation of
    the data directory), _start() and _stop().  close() is idempotent, stops
    the server and removes the directory; it also runs at interpreter exit.
    """
    kind = "server"
    run_as = None   # a user to own the directory and run the server as, when root

    def __init__(self, keep=False):
        self.keep = keep or bool(os.environ.get("SLUICE_KEEP_TMP"))
        self.tmpdir = tempfile.mkdtemp(prefix=f"sluice-{self.kind}-")
        self.port = None
        self.running = False
        self._closed = False
        _register(self)
        if self.run_as and os.geteuid() == 0:
            pw = pwd.getpwnam(self.run_as)
            os.chown(self.tmpdir, pw.pw_uid, pw.pw_gid)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def __repr__(self):
        return f"<{type(self).__name__} port={self.port} dir={self.tmpdir}>"

    def cmd(self, argv):
        """argv run as run_as when we are root."""
        if self.run_as and os.geteuid() == 0:
            return ["runuser", "-u", self.run_as, "--"] + list(argv)
        return list(argv)

    def run_cmd(self, argv, timeout=120, check=True):
        p = subprocess.run(self.cmd(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.kind}: {' '.join(argv)} exited {p.returncode}:\n{p.stdout}")
        return p

    def start(self):
        if self.running:
            return
        last = None
        for _attempt in range(5):
            self.port = free_port()
            # marked running before it is: a start interrupted half-way (an
            # exception, a signal) still gets stopped by close()
            self.running = True
            try:
                self._start()
                return
            except PortInUse as e:   # someone took the port between free_port() and bind
                last = e
                self.stop()
            except BaseException:
                self.stop()
                raise
        raise RuntimeError(f"{self.kind}: could not find a free port: {last}")

    def stop(self, mode="immediate"):
        """Stops the server (mode is a hint: "immediate" or "fast")."""
        if self.running:
            self.running = False
            self._stop(mode)

    def restart(self, mode="fast"):
        self.stop(mode)
        self.start()

    # -- what the database servers (PostgreSQL, MariaDB) share

    log_path = None     # the server's log file, for log_tail

    def log_tail(self, n=40):
        """The last n lines of the server's log ("" when it has none)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except (OSError, TypeError):
            return ""

    def set_settings(self, settings):
        """Changes settings (None removes one); they take effect at the next
        (re)start."""
        for k, v in settings.items():
            if v is None:
                self.settings.pop(k, None)
            else:
                self.settings[k] = v

    def close_conn(self):
        """Closes the harness's own connection (conn), if it is open."""
        if getattr(self, "_conn", None) is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def one(self, query, params=None):
        """The first column of the first row of sql(), or None."""
        rows = self.sql(query, params)
        return rows[0][0] if rows else None

    def resume(self):
        """Starts the server again on the port it had (after stop()), as a
        restart that a client configured with that port reconnects to."""
        if not self.running:
            self.running = True
            try:
                self._start()
            except BaseException:
                self.stop()
                raise

    def close(self):
        if self._closed:
            return
        self._closed = True
        _unregister(self)
        try:
            self.stop()
        finally:
            if not self.keep:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            else:
                print(f"harness: kept {self.tmpdir}", file=sys.stderr)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # to implement
    def _setup(self):
        pass

    def _start(self):
        raise NotImplementedError

    def _stop(self, mode):
        raise NotImplementedError


class PortInUse(Exception):
    pass


# --------------------------------------------------------------------------
# a server behind its own network: faults on the link

_netns_reason = []   # cached result of netns_available()


def netns_available():
    """None when NetNs can be used here (root, iproute2, network namespaces
    and veth in the kernel), else the reason.  Checked once per process."""
    if _netns_reason:
        return _netns_reason[0]
    reason = None
    if os.geteuid() != 0:
        reason = "network fault tests need root (ip netns, veth, iptables)"
    elif not shutil.which("ip"):
        reason = "iproute2 is missing (apt-get install iproute2; scripts/deps.sh installs it)"
    else:
        name = f"sluice-probe-{os.getpid()}"
        p = subprocess.run(["ip", "netns", "add", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            reason = f"ip netns is unavailable: {p.stdout.strip()}"
        else:
            subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _netns_reason.append(reason)
    return reason


def _ip(*args, check=True, ns=None):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"netns: {' '.join(argv)} exited {p.returncode}: {p.stdout.strip()}")
    return p


class NetNs:
    """A private network namespace joined to this one by a veth pair, so
    that a throwaway server (PostgreSQL, MySQL, ClickHouse) can run behind a
    link the test breaks at will, as a container would be.

        ns = NetNs()                        # or: with NetNs() as ns:
        server argv: ns.wrap(argv)          # runs inside the namespace
        clients connect to ns.ns_addr       # the host side is ns.host_addr
        ns.cut()        the link goes down: sends fail, nothing arrives
        ns.blackhole()  every packet dropped silently (no RST, no ICMP)
        ns.delay(100)   each direction delayed 100 ms (200 ms round trips)
        ns.restore()    any of those undone
        ns.close()      the namespace, the veth pair and any helper process
                        go; also at exit, and when a test fails

    Local (Unix socket) connections do not cross the link, so a test can
    keep its own workload and checks going while the network is broken.
    Needs root, iproute2 and (for blackhole and delay) iptables or the
    kernel's sch_netem; netns_available() says why it cannot be used.  Each
    instance has a fresh /30 in 10.200.0.0/16 and names that carry the
    creating process's pid, so parallel test runs do not collide.
    """

    def __init__(self):
        reason = netns_available()
        if reason:
            raise RuntimeError(reason)
        self._closed = False
        self._delayer = None
        self.faults = set()
        tag = f"{os.getpid() & 0xffff:04x}{random.getrandbits(16):04x}"
        self.name = f"sluice-{os.getpid()}-{tag}"
        self.host_if, self.ns_if = f"slh{tag}", f"sln{tag}"
        _gc_stale_netns()
        _register(self)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def __repr__(self):
        return f"<NetNs {self.name} {self.host_addr}<->{self.ns_addr}>"

    def _pick_subnet(self):
        used = _ip("ip", "-4", "-o", "addr", "show").stdout
        for _ in range(100):
            base = random.randrange(0, 1 << 14) * 4
            a, b = base >> 8, base & 0xff
            host, inner = f"10.200.{a}.{b + 1}", f"10.200.{a}.{b + 2}"
            if f" {host}/" not in used and f" {inner}/" not in used:
                self.subnet = f"10.200.{a}.{b}/30"
                return host, inner
        raise RuntimeError("netns: no free /30 in 10.200.0.0/16")

    def _setup(self):
        _ip("ip", "netns", "add", self.name)
        _ip("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _ip("ip", "link", "set", self.ns_if, "netns", self.name)
        self.host_addr, self.ns_addr = self._pick_subnet()
        _ip("ip", "addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
        _ip("ip", "link", "set", self.host_if, "up")
        _ip("ip", "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if, ns=self.name)
        _ip("ip", "link", "set", self.ns_if, "up", ns=self.name)
        _ip("ip", "link", "set", "lo", "up", ns=self.name)
        # While the link is down its connected route is gone: this one then
        # answers "no route to host" at once, instead of the default route
        # taking the packets out of the machine.
        _ip("ip", "route", "add", "unreachable", self.subnet, "metric", _FALLBACK_METRIC)

    def wrap(self, argv):
        """argv run inside the namespace."""
        return ["ip", "netns", "exec", self.name] + list(argv)

    def nsrun(self, *argv, check=True):
        """Runs a command inside the namespace; returns the CompletedProcess."""
        return _ip(*argv, check=check, ns=self.name)

    # -- faults

    def unavailable(self, fault):
        """None when fault ("cut", "blackhole", "delay") can be made here,
        else the reason (for skipTest)."""
        if fault == "cut" or shutil.which("iptables") or self._netem_ok():
            return None
        return f"{fault} needs iptables (apt-get install iptables; scripts/deps.sh installs it) or sch_netem"

    def cut(self):
        """Takes the link down (both ends lose carrier): the kernel drops
        what is sent, and nothing arrives, until restore()."""
        _ip("ip", "link", "set", self.host_if, "down")
        self.faults.add("cut")

    def _rules(self, op, target):
        """Adds (-I) or deletes (-D) iptables rules in the namespace that
        send every packet crossing the link to target, both ways."""
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self.nsrun("iptables", "-w", op, chain, flag, self.ns_if, "-j", *target, check=op == "-I")

    def blackhole(self):
        """Drops every packet on the link silently, in both directions,
        until restore(): a peer that vanished without a word (iptables DROP
        inside the namespace, or netem loss 100% without iptables)."""
        if shutil.which("iptables"):
            self._rules("-I", ["DROP"])
            self.faults.add("blackhole")
        elif self._netem_ok():
            for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
                _ip("tc", "qdisc", "replace", "dev", dev, "root", "netem", "loss", "100%", ns=ns)
            self.faults.add("netem")
        else:
            raise RuntimeError("netns: blackhole needs iptables (apt-get install iptables) or sch_netem")

    def delay(self, ms):
        """Delays every packet by ms in each direction (round trips take
        2 x ms) until restore(): tc netem when the kernel has it, else
        iptables NFQUEUE and tests/integration/netdelay.py inside the
        namespace."""
        if self._netem_ok():
            for dev, ns in ((self.host_if, None), (self.ns_if, self.name)):
                _ip("tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", f"{ms}ms", ns=ns)
            self.faults.add("netem")
            return
        if not shutil.which("iptables"):
            raise RuntimeError("netns: delay needs sch_netem in the kernel, or iptables (apt-get install iptables)")
        self._delayer = subprocess.Popen(
            self.wrap([sys.executable, os.path.join(HERE, "netdelay.py"), "--queue", "0", "--delay-ms", str(ms)]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._delayer.stdout.readline().strip()
        if line != "ready":
            err = self._delayer.stderr.read() if self._delayer.poll() is not None else ""
            self._stop_delayer()
            raise RuntimeError(f"netns: the packet delayer did not start: {line} {err}".strip())
        self.faults.add("delay")
        self._rules("-I", ["NFQUEUE", "--queue-num", "0"])

    def restore(self):
        """Undoes every fault: the link is up, nothing dropped or delayed."""
        if "cut" in self.faults:
            _ip("ip", "link", "set", self.host_if, "up")
        if "blackhole" in self.faults:
            self._rules("-D", ["DROP"])
        if "delay" in self.faults:
            self._rules("-D", ["NFQUEUE", "--queue-num", "0"])
            self._stop_delayer()
        if "netem" in self.faults:
            _ip("tc", "qdisc", "del", "dev", self.host_if, "root", check=False)
            self.nsrun("tc", "qdisc", "del", "dev", self.ns_if, "root", check=False)
        self.faults.clear()

    def _netem_ok(self):
        """True when the kernel has sch_netem (checked on this link once)."""
        if not hasattr(self, "_netem"):
            p = _ip("tc", "qdisc", "add", "dev", self.host_if, "root", "netem", "delay", "0ms", check=False)
            self._netem = p.returncode == 0
            if self._netem:
                _ip("tc", "qdisc", "del", "dev", self.host_if, "root", check=False)
        return self._netem

    def _stop_delayer(self):
        d, self._delayer = self._delayer, None
        if d is not None:
            if d.poll() is None:
                d.kill()
            d.wait()
            for f in (d.stdout, d.stderr):
                f.close()

    def close(self):
        """Removes the namespace and the veth pair (and ends the delayer).
        Processes still inside are the caller's to stop first."""
        if self._closed:
            return
        self._closed = True
        _unregister(self)
        try:
            self._stop_delayer()
        finally:
            _ip("ip", "netns", "del", self.name, check=False)
            if getattr(self, "subnet", None):
                _ip("ip", "route", "del", "unreachable", self.subnet, "metric", _FALLBACK_METRIC, check=False)
            # the pair goes with the namespace; this is for a half-made setup
            if os.path.exists(f"/sys/class/net/{self.host_if}"):
                _ip("ip", "link", "del", self.host_if, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


_FALLBACK_METRIC = "4242"   # marks NetNs's unreachable routes


def _gc_stale_netns():
    """Removes what harness processes that died without cleaning up (kill
    -9) left: namespaces named sluice-PID-* whose PID is gone and that hold
    no process, and NetNs fallback routes whose veth no longer exists."""
    p = _ip("ip", "netns", "list", check=False)
    for line in p.stdout.splitlines():
        m = re.match(r"^(sluice-(\d+)-[0-9a-f]{8})\b", line)
        if not m or _pid_alive(int(m.group(2))):
            continue
        if not _ip("ip", "netns", "pids", m.group(1), check=False).stdout.strip():
            _ip("ip", "netns", "del", m.group(1), check=False)
    addrs = _ip("ip", "-4", "-o", "addr", "show", check=False).stdout
    for line in _ip("ip", "-4", "route", "show", check=False).stdout.splitlines():
        m = re.match(r"^unreachable (10\.200\.(\d+)\.(\d+)/30) metric " + _FALLBACK_METRIC + r"\b", line)
        if m and f" 10.200.{m.group(2)}.{int(m.group(3)) + 1}/30 " not in addrs:
            _ip("ip", "route", "del", "unreachable", m.group(1), "metric", _FALLBACK_METRIC, check=False)


PG_DEFAULT_SETTINGS = {
    "wal_level": "logical",
    "max_replication_slots": "64",
    "max_wal_senders": "64",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_slot_wal_keep_size": "4GB",
}


class PgServer(ServerBase):
    """A throwaway PostgreSQL 15 cluster for logical replication.

    settings override PG_DEFAULT_SETTINGS (e.g. {"wal_level": "replica"}).
    With netns (a NetNs), the server runs inside that namespace and listens
    on its address (host), so the test can break the network between it and
    sluice; the harness's own connections (connect(), sql()) use the Unix
    socket and keep working meanwhile.  initdb_args are added to initdb's
    (e.g. ["--wal-segsize=1"] for 1 MB WAL segments, so that a test can
    drive a slot to `lost` quickly).  Use as a context manager, or call
    start() and close().
    """
    kind = "pg"
    run_as = "postgres"

    def __init__(self, settings=None, keep=False, netns=None, initdb_args=()):
        self.settings = dict(PG_DEFAULT_SETTINGS)
        self.settings.update(settings or {})
        self.netns = netns
        self.initdb_args = list(initdb_args)
        self._conn = None
        super().__init__(keep=keep)

    @property
    def host(self):
        """The address sluice connects to."""
        return self.netns.ns_addr if self.netns else "127.0.0.1"

    @property
    def datadir(self):
        return os.path.join(self.tmpdir, "data")

    @property
    def logfile(self):
        return os.path.join(self.tmpdir, "pg.log")

    def _setup(self):
        self.run_cmd([os.path.join(PG_BIN, "initdb"), "-D", self.datadir, "-U", "postgres",
                      "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"] + self.initdb_args)
        with open(os.path.join(self.datadir, "pg_hba.conf"), "a") as f:
            f.write("\n# sluice test harness\n"
                    "host all all 127.0.0.1/32 trust\n"
                    "host replication all 127.0.0.1/32 trust\n")
            if self.netns:
                f.write(f"host all all {self.netns.host_addr}/32 trust\n"
                        f"host replication all {self.netns.host_addr}/32 trust\n")

    def _write_conf(self):
        # An include at the end of postgresql.conf, rewritten at every start:
        # its settings win over the defaults initdb wrote above it.
        s = dict(self.settings)
        s.update({"listen_addresses": self.host, "port": str(self.port),
                  "unix_socket_directories": self.tmpdir})
        path = os.path.join(self.datadir, "sluice_harness.conf")
        with open(path, "w") as f:
            for k, v in s.items():
                f.write(f"{k} = '{v}'\n")
        conf = os.path.join(self.datadir, "postgresql.conf")
        with open(conf) as f:
            text = f.read()
        if "include = 'sluice_harness.conf'" not in text:
            with open(conf, "a") as f:
                f.write("\ninclude = 'sluice_harness.conf'\n")
        if os.geteuid() == 0:
            pw = pwd.getpwnam(self.run_as)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def _start(self):
        self._write_conf()
        argv = self.cmd([os.path.join(PG_BIN, "pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                         "-w", "-t", "60", "start"])
        if self.netns:
            argv = self.netns.wrap(argv)
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=120, text=True)
        if p.returncode != 0:
            log = self.log_tail()
            if "could not bind" in log or "Address already in use" in log:
                raise PortInUse(log)
            raise RuntimeError(f"pg_ctl start failed ({p.returncode}):\n{p.stdout}\n{log}")
        import psycopg2
        wait_until(lambda: psycopg2.connect(self.dsn, connect_timeout=2).close() or True,
                   30, "postgres to accept connections")

    def _stop(self, mode):
        self.close_conn()
        pid = self.postmaster_pid()
        if pid and not self._is_our_postmaster(pid):
            # a postmaster killed earlier left its pid file, and the pid may
            # be another process's by now (pid_max is often 32768): pg_ctl
            # would signal that process
            try:
                os.unlink(os.path.join(self.datadir, "postmaster.pid"))
            except OSError:
                pass
            return
        p = self.run_cmd([os.path.join(PG_BIN, "pg_ctl"), "-D", self.datadir, "-m", mode,
                          "-w", "-t", "60", "stop"], check=False)
        if p.returncode != 0:
            # pg_ctl failed: kill the postmaster we started, by its pid, and wait for it.
            pid = self.postmaster_pid()
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                    wait_until(lambda: not _pid_alive(pid), 30, "postmaster to exit")
                except ProcessLookupError:
                    pass

    def _is_our_postmaster(self, pid):
        """pid is a live postgres whose data directory is ours."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            return False
        return bool(argv) and os.path.basename(argv[0]) in (b"postgres", b"postmaster") and \
            os.fsencode(os.path.realpath(self.datadir)) in [os.fsencode(os.path.realpath(os.fsdecode(a)))
                                                           for a in argv[1:] if a]

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    @property
    def log_path(self):
        return self.logfile

    # -- client side

    @property
    def dsn(self):
        """The harness's own connections: TCP on loopback, or the Unix
        socket when the server is behind a NetNs (then it does not cross
        the link the test breaks)."""
        host = self.tmpdir if self.netns else "127.0.0.1"
        return f"host={host} port={self.port} user=postgres dbname=postgres"

    def connect(self, autocommit=True):
        """A new psycopg2 connection (session time zone UTC, json left as text)."""
        import psycopg2
        import psycopg2.extras
        # synchronous_commit=on for the tests' own sessions: a commit that has
        # returned is flushed, so a sluice started next sees it.
        conn = psycopg2.connect(self.dsn, options="-c timezone=UTC -c synchronous_commit=on")
        conn.autocommit = autocommit
        psycopg2.extras.register_default_json(conn, loads=lambda s: s)
        psycopg2.extras.register_default_jsonb(conn, loads=lambda s: s)
        return conn

    @property
    def conn(self):
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def sql(self, query, params=None):
        """Runs one statement in autocommit mode; returns its rows (a list of tuples, [] if none)."""
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description is not None else []

    def execute(self, query, params=None):
        """Runs one statement (or several separated by ';' when params is None); returns rowcount."""
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.rowcount

    def current_lsn(self):
        """The WAL insert position (what a commit that just returned lies before)."""
        return lsn_to_int(self.one("SELECT pg_current_wal_insert_lsn()::text"))

    def wait_wal_flushed(self, timeout=30):
        """Waits until all WAL inserted so far is flushed, so that a walsender
        can send it (the server runs with synchronous_commit=off)."""
        target = self.current_lsn()
        wait_until(lambda: lsn_to_int(self.one("SELECT pg_current_wal_flush_lsn()::text")) >= target,
                   timeout, "WAL flush")

    def slot_info(self, name):
        """The slot's row of pg_replication_slots as a dict (LSNs as ints), or None."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT slot_name, plugin, slot_type, active, active_pid, "
                        "restart_lsn::text, confirmed_flush_lsn::text, wal_status, safe_wal_size, "
                        "temporary FROM pg_replication_slots WHERE slot_name = %s", (name,))
            row = cur.fetchone()
            if row is None:
                return None
            d = dict(zip([c.name for c in cur.description], row))
        for k in ("restart_lsn", "confirmed_flush_lsn"):
            d[k] = lsn_to_int(d[k]) if d[k] else None
        return d

    def wait_slot_inactive(self, name, timeout=30):
        """Waits until no process holds the slot (after sluice was killed, the
        walsender notices the broken connection a little later)."""
        wait_until(lambda: not (self.slot_info(name) or {}).get("active"), timeout,
                   f"slot {name} to become inactive")


def _proc_stat(path):
    """A /proc stat file (a process's or a thread's): (its name, the fields
    after the name): state(0) ppid(1) ... utime(11) stime(12) cutime(13)
    cstime(14), in clock ticks.  Raises OSError or ValueError."""
    with open(path) as f:
        st = f.read()
    end = st.rindex(")")
    return st[st.index("(") + 1:end], st[end + 2:].split()


def server_cpu_s(pid):
    """CPU seconds (user + system) used so far by server process pid: its
    own (all threads), its children's that it has reaped, and its live
    children's (PostgreSQL's backends).  For benchmarks: the difference
    around a run is what the server spent on it.  None if pid is gone."""
    try:
        total = sum(int(x) for x in _proc_stat(f"/proc/{pid}/stat")[1][11:15])
    except (OSError, ValueError):
        return None
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == pid:
            continue
        try:
            f = _proc_stat(f"/proc/{d}/stat")[1]
        except (OSError, ValueError):
            continue
        if int(f[1]) == pid:
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def _pid_alive(pid):
    """True while pid runs (a zombie waiting for its parent counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        return _proc_stat(f"/proc/{pid}/stat")[1][0] not in ("Z", "X")
    except (OSError, ValueError, IndexError):
        return False


def lsn_to_int(text):
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def int_to_lsn(v):
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def qident(name):
    """A PostgreSQL quoted identifier (for SQL built in tests)."""
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------
# running sluice

class Result(tuple):
    """(exit code, stdout, stderr), plus .maxrss_kb (wait4's ru_maxrss), .hwm_kb
    (sampled VmHWM, when asked for), .cpu_s (user+sys), .wall_s and .argv."""

    def __new__(cls, rc, out, err, maxrss_kb=0, cpu_s=0.0, wall_s=0.0, argv=()):
        self = super().__new__(cls, (rc, out, err))
        self.rc, self.stdout, self.stderr = rc, out, err
        self.maxrss_kb, self.cpu_s, self.wall_s, self.argv = maxrss_kb, cpu_s, wall_s, list(argv)
        self.hwm_kb = 0
        return self

    def describe(self):
        return (f"$ {' '.join(self.argv)}\nexit {self.rc} after {self.wall_s:.1f}s\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-6000:]}")


class SluiceProc(subprocess.Popen):
    """A background sluice process.  Its output goes to files; wait_result()
    reaps it with os.wait4 to collect its resource usage."""

    def _setup(self, out_path, err_path, argv, fhs, sample_hwm=False):
        self.out_path, self.err_path, self.argv = out_path, err_path, argv
        self._fhs = fhs
        self.t0 = time.monotonic()
        self.t_end = None         # when it was seen to exit
        self.measured = sample_hwm
        self.rusage = None
        self.hwm_kb = 0
        self.thread_cpu = {}      # thread name -> CPU seconds, last sampled (sample_hwm)
        self._hwm_stop = threading.Event()
        if sample_hwm:
            threading.Thread(target=self._sample_hwm, daemon=True).start()

    def _sample_hwm(self):
        """Samples VmHWM (peak RSS of the process's own address space) every 10 ms.

        ru_maxrss from wait4 is also collected, but on Linux a child's
        ru_maxrss starts at its parent's RSS at fork time (the high-water mark
        of the forked address space survives exec), so for a Python parent of
        60 MB it cannot show a sluice below that.  VmHWM of the exec'd image
        has no such floor."""
        path = f"/proc/{self.pid}/status"
        tck = os.sysconf("SC_CLK_TCK")
        seen = {}   # tid -> (thread name, CPU seconds so far)
        while not self._hwm_stop.is_set() and self.returncode is None:
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.hwm_kb = max(self.hwm_kb, int(line.split()[1]))
                            break
                for tid in os.listdir(f"/proc/{self.pid}/task"):
                    name, rest = _proc_stat(f"/proc/{self.pid}/task/{tid}/stat")
                    seen[tid] = (name, (int(rest[11]) + int(rest[12])) / tck)
            except (OSError, ValueError):
                pass
            self.thread_cpu = {}
            for name, cpu in seen.values():
                self.thread_cpu[name] = self.thread_cpu.get(name, 0.0) + cpu
            self._hwm_stop.wait(0.01)

    def alive(self):
        return self.returncode is None and self._poll4(os.WNOHANG)

    def _poll4(self, flags):
        """Reaps with wait4 if it exited.  Returns True while it is still running."""
        if self.returncode is not None:
            return False
        try:
            pid, status, ru = os.wait4(self.pid, flags)
        except ChildProcessError:
            self.returncode = self.returncode if self.returncode is not None else -1
            return False
        if pid == 0:
            return True
        self.returncode = os.waitstatus_to_exitcode(status)
        self.t_end = time.monotonic()
        self.rusage = ru
        self._hwm_stop.set()
        return False

    def wait_result(self, timeout=120):
        """Waits up to timeout seconds (then SIGKILLs it and raises TimeoutError).
        A measured run (sample_hwm) is polled every 2 ms, so that its wall
        time is exact to that; others back off to 100 ms."""
        deadline = time.monotonic() + timeout
        interval = 0.002 if self.measured else 0.005
        longest = 0.002 if self.measured else 0.1
        while self._poll4(os.WNOHANG):
            if time.monotonic() > deadline:
                self.kill9()
                raise TimeoutError(f"sluice did not exit within {timeout}s: {' '.join(self.argv)}\n"
                                   f"--- stderr ---\n{self.stderr_text()[-6000:]}")
            time.sleep(interval)
            interval = min(interval * 1.5, longest)
        return self.result()

    def kill9(self):
        """SIGKILL, then reap."""
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._poll4(0)

    def signal(self, sig):
        if self.returncode is None:
            os.kill(self.pid, sig)

    def stderr_text(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def stdout_text(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def result(self):
        for fh in self._fhs:
            fh.close()
        ru = self.rusage
        r = Result(self.returncode, self.stdout_text(), self.stderr_text(),
                   maxrss_kb=ru.ru_maxrss if ru else 0,
                   cpu_s=(ru.ru_utime + ru.ru_stime) if ru else 0.0,
                   wall_s=(self.t_end or time.monotonic()) - self.t0, argv=self.argv)
        r.hwm_kb = self.hwm_kb
        r.thread_cpu = dict(self.thread_cpu)
        return r


class Sluice:
    """A sluice configuration in a private directory, and the means to run it.

    The config has one source (`pg`), one avro_dir destination (`out`) and one
    stream.  Pass extra={"agent": {...}, "source": {...}, "destination": {...},
    "stream": {...}} to add or override keys (None removes a key), or call
    write_config(text) to write any text.
    """

    def __init__(self, pg, stream="s1", tables="public.*", codec="deflate", compression_level=1,
                 max_file_bytes="64MB", max_file_seconds=60, backfill="auto", write_mode="append",
                 state_dir=None, out=None, extra=None, binary=None, log_level=os.environ.get("SLUICE_TEST_LOG_LEVEL", "info"), s3=None,
                 prefix="cdc"):
        self.pg = pg
        self.s3 = s3              # an S3Server: the destination is type s3 on it
        self.prefix = prefix
        self._ncopy = 0
        self.binary = binary or sluice_bin()
        self.workdir = tempfile.mkdtemp(prefix="sluice-run-")
        self.keep = bool(os.environ.get("SLUICE_KEEP_TMP"))
        self.stream = stream
        self.tables = tables
        self.codec = codec
        self.compression_level = compression_level
        self.max_file_bytes = max_file_bytes
        self.max_file_seconds = max_file_seconds
        self.backfill = backfill
        self.write_mode = write_mode
        self.log_level = log_level
        self.state_dir = state_dir or os.path.join(self.workdir, "state")
        self.out = out or os.path.join(self.workdir, "out")
        self.extra = extra or {}
        self.config_path = os.path.join(self.workdir, "sluice.ini")
        self.procs = []
        self._closed = False
        self._nrun = 0
        _register(self)
        self.write_config()

    def __repr__(self):
        return f"<Sluice {self.stream} {self.workdir}>"

    @property
    def slot(self):
        return self.extra.get("stream", {}).get("slot") or f"sluice_{self.stream}"

    @property
    def publication(self):
        return self.extra.get("stream", {}).get("publication") or f"sluice_{self.stream}"

    def sections(self):
        """The config as an ordered {section: {key: value}}."""
        secs = collections.OrderedDict()
        secs["agent"] = collections.OrderedDict(
            state_dir=self.state_dir, log_level=self.log_level, metrics_listen="")
        if self.pg is not None and hasattr(self.pg, "source_section"):
            # another kind of server (harness_mysql.MariaDbServer) writes its own profile
            secs["source.pg"] = collections.OrderedDict(self.pg.source_section())
        else:
            secs["source.pg"] = collections.OrderedDict(
                type="postgres", host=self.pg.host if self.pg else "127.0.0.1",
                port=str(self.pg.port if self.pg else 5432),
                user="postgres", dbname="postgres")
        if self.s3 is not None:
            secs["destination.out"] = collections.OrderedDict(
                type="s3", endpoint=self.s3.endpoint, bucket=self.s3.bucket, prefix=self.prefix,
                region=self.s3.region, path_style="true",
                access_key_id_env="SLUICE_TEST_S3_KEY_ID", secret_access_key_env="SLUICE_TEST_S3_SECRET",
                codec=self.codec, compression_level=str(self.compression_level),
                max_file_bytes=str(self.max_file_bytes), max_file_seconds=str(self.max_file_seconds))
        else:
            secs["destination.out"] = collections.OrderedDict(
                type="avro_dir", path=self.out, codec=self.codec,
                compression_level=str(self.compression_level),
                max_file_bytes=str(self.max_file_bytes), max_file_seconds=str(self.max_file_seconds))
        secs[f"stream.{self.stream}"] = collections.OrderedDict(
            source="pg", destination="out", tables=self.tables, backfill=self.backfill,
            write_mode=self.write_mode)
        for short, name in (("agent", "agent"), ("source", "source.pg"),
                            ("destination", "destination.out"), ("stream", f"stream.{self.stream}")):
            for k, v in self.extra.get(short, {}).items():
                if v is None:
                    secs[name].pop(k, None)
                else:
                    secs[name][k] = str(v)
        return secs

    def config_text(self):
        lines = ["; written by tests/integration/harness.py"]
        for sec, kv in self.sections().items():
            lines.append(f"[{sec}]")
            lines.extend(f"{k} = {v}" for k, v in kv.items())
            lines.append("")
        return "\n".join(lines)

    def write_config(self, text=None):
        with open(self.config_path, "w") as f:
            f.write(self.config_text() if text is None else text)
        return self.config_path

    def argv(self, *args, config=None):
        argv = [self.binary] + list(args)
        if args and args[0] in ("check", "run", "status", "backfill", "verify", "compact") and "-c" not in args:
            argv[2:2] = ["-c", config or self.config_path]
        return argv

    def start(self, *args, config=None, env=None, raw=False, sample_hwm=False, binary=None):
        """Starts `sluice ARGS` (with -c CONFIG inserted after the command
        unless raw) in the background; returns a SluiceProc.  binary
        replaces the sluice binary for this run (e.g. sluice_test_bin())."""
        binary = binary or self.binary
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"sluice binary not found: {binary} (set SLUICE_BIN)")
        self._nrun += 1
        out_path = os.path.join(self.workdir, f"run{self._nrun}.out")
        err_path = os.path.join(self.workdir, f"run{self._nrun}.err")
        fo, fe = open(out_path, "wb"), open(err_path, "wb")
        argv = [self.binary] + list(args) if raw else self.argv(*args, config=config)
        argv[0] = binary
        e = dict(os.environ)
        if self.s3 is not None:
            e["SLUICE_TEST_S3_KEY_ID"] = self.s3.key_id
            e["SLUICE_TEST_S3_SECRET"] = self.s3.secret
        e.update(env or {})
        p = SluiceProc(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=self.workdir,
                       env=e, start_new_session=True)
        p._setup(out_path, err_path, argv, (fo, fe), sample_hwm=sample_hwm)
        self.procs.append(p)
        return p

    def run(self, *args, timeout=180, config=None, env=None, raw=False, sample_hwm=False):
        """Runs `sluice ARGS` to completion; returns Result (rc, stdout, stderr)."""
        return self.start(*args, config=config, env=env, raw=raw,
                          sample_hwm=sample_hwm).wait_result(timeout)

    def catch_up(self, testcase=None, timeout=240, extra_args=(), sample_hwm=False):
        """`sluice run --until-caught-up`, which must exit 0.  Returns the Result."""
        if self.pg is not None and self.pg.running:
            self.pg.wait_wal_flushed()
        r = self.run("run", "--until-caught-up", *extra_args, timeout=timeout, sample_hwm=sample_hwm)
        if r.rc != 0:
            msg = f"sluice run --until-caught-up failed:\n{r.describe()}"
            if testcase is not None:
                testcase.fail(msg)
            raise AssertionError(msg)
        return r

    def read(self, testcase=None, codec=None):
        """All records of the output tree (see read_avro_tree); for an s3
        destination, of a fresh copy of <prefix>/ downloaded with boto3."""
        return read_avro_tree(self.output_tree(), testcase, codec=codec if codec is not None else self.codec)

    def output_tree(self):
        """A local folder laid out as the destination's path: the avro_dir
        path itself, or a fresh download of everything under the s3 prefix."""
        if self.s3 is None:
            return self.out
        self._ncopy += 1
        dest = os.path.join(self.workdir, f"s3copy{self._ncopy}")
        self.s3.download(self.prefix.strip("/") + "/", dest)
        return dest

    def close(self):
        if self._closed:
            return
        self._closed = True
        _unregister(self)
        for p in self.procs:
            if p.returncode is None:
                p.kill9()
            for fh in getattr(p, "_fhs", ()):
                fh.close()
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            print(f"harness: kept {self.workdir}", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# --------------------------------------------------------------------------
# a local S3 server

S3SERVER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3server")


def s3_available():
    """None when the local S3 server can run, else why not."""
    if not shutil.which("node"):
        return "node is not installed (scripts/deps.sh installs nodejs and npm)"
    if not os.path.isdir(os.path.join(S3SERVER_DIR, "node_modules", "s3rver")):
        return f"s3rver is not installed in {S3SERVER_DIR}/node_modules (scripts/deps.sh installs it)"
    try:
        import boto3  # noqa: F401
    except ImportError:
        return "python3-boto3 is not installed (scripts/deps.sh installs it)"
    return None


class S3Server:
    """A throwaway S3 server: s3rver behind tests/integration/s3server/
    s3server.js (SigV4 checked, multipart listing and abort added), on a free
    loopback port, its store in a private temporary directory, with one
    access key and the given buckets.  stop() and start() keep the store;
    close() removes it.  client() is an independent boto3 client.
    conditional_put: PutObject honours If-None-Match: * (412 when the key
    exists), as AWS S3 does and s3rver alone does not."""

    def __init__(self, buckets=("lake",), key_id="AKIDSLUICETEST", secret="sluice-test-secret-5c1e",
                 region="us-east-1", keep=False, part_delay_ms=0, conditional_put=False):
        self.part_delay_ms = part_delay_ms
        self.conditional_put = conditional_put
        self.buckets = list(buckets)
        self.bucket = self.buckets[0]
        self.key_id = key_id
        self.secret = secret
        self.region = region
        self.keep = keep or bool(os.environ.get("SLUICE_KEEP_TMP"))
        self.base = tempfile.mkdtemp(prefix="sluice-s3-")
        self.data = os.path.join(self.base, "data")
        self.log = os.path.join(self.base, "requests.log")
        os.makedirs(self.data)
        self.port = free_port()
        self.proc = None
        self._client = None
        _register(self)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout=30):
        argv = ["node", os.path.join(S3SERVER_DIR, "s3server.js"), "--port", str(self.port),
                "--dir", self.data, "--key", f"{self.key_id}:{self.secret}", "--region", self.region,
                "--log", self.log, "--part-delay-ms", str(self.part_delay_ms)]
        for b in self.buckets:
            argv += ["--bucket", b]
        if self.conditional_put:
            argv.append("--conditional-put")
        out = open(os.path.join(self.base, "server.out"), "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out,
                                     start_new_session=True)
        out.close()
        line = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        if not line.startswith(b"ready"):
            self.stop()
            raise RuntimeError(f"the S3 server did not start: {self.server_log()}")
        return self

    def server_log(self):
        try:
            with open(os.path.join(self.base, "server.out"), errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGKILL):
        """Stops the server (by default as a crash would: SIGKILL); the store stays."""
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=30)
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None

    def close(self):
        self.stop()
        _unregister(self)
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)
        else:
            print(f"harness: kept {self.base}", file=sys.stderr)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def requests(self, timing=False):
        """The requests the server answered so far: [(method, target, status)],
        or with timing [(method, target, status, milliseconds, body bytes)]."""
        out = []
        try:
            with open(self.log) as f:
                for line in f:
                    if not line.strip():
                        continue
                    method, rest = line.rstrip("\n").split(" ", 1)
                    target, status, ms, size = rest.rsplit(" ", 3)
                    out.append((method, target, status, float(ms), int(size)) if timing else
                               (method, target, status))
        except FileNotFoundError:
            pass
        return out

    def client(self, key_id=None, secret=None):
        import boto3
        from botocore.config import Config
        if key_id is None and self._client is not None:
            return self._client
        c = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                         aws_access_key_id=key_id or self.key_id, aws_secret_access_key=secret or self.secret,
                         config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))
        if key_id is None:
            self._client = c
        return c

    def objects(self, prefix=""):
        """{key: size} of every object under prefix (boto3, all pages)."""
        out = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                out[o["Key"]] = o["Size"]
        return out

    def get(self, key):
        return self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def uploads(self, prefix=""):
        """Incomplete multipart uploads, [(key, upload id)], as the server's store holds them."""
        d = os.path.join(self.data, self.bucket, "._S3rver_uploads")
        out = []
        for uid in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            try:
                with open(os.path.join(d, uid, "key")) as f:
                    k = f.read()
            except OSError:
                continue
            if k.startswith(prefix):
                out.append((k, uid))
        return out

    def age(self, key, seconds):
        """Sets the object key's LastModified (the mtime of s3rver's file of
        it) seconds back."""
        *dirs, base = key.split("/")
        p = os.path.join(self.data, self.bucket, *dirs, f"{base}._S3rver_object")
        t = os.path.getmtime(p) - seconds
        os.utime(p, (t, t))

    def age_upload(self, upload_id, seconds):
        """Sets the incomplete upload's Initiated (s3server.js: the mtime
        of its "key" file) seconds back."""
        p = os.path.join(self.data, self.bucket, "._S3rver_uploads", upload_id, "key")
        t = os.path.getmtime(p) - seconds
        os.utime(p, (t, t))

    def download(self, prefix, dest):
        """Downloads every object under prefix into dest, as relative paths."""
        os.makedirs(dest, exist_ok=True)
        for key in self.objects(prefix):
            rel = key[len(prefix):]
            path = os.path.join(dest, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(self.get(key))
        return dest


# --------------------------------------------------------------------------
# reading output

class WithS3:
    """A test case mixin (before the test case class in the bases): a local
    S3 server for the class, cls.s3, with one bucket "lake" and the class's
    s3_kw for S3Server; skips without node and s3rver."""
    s3_kw = {}

    @classmethod
    def setUpClass(cls):
        skip_unless(s3_available())
        super().setUpClass()
        cls.s3 = S3Server(buckets=("lake",), **cls.s3_kw)
        cls.addClassCleanup(cls.s3.close)
        cls.s3.start()


def read_avro_tree(path, testcase=None, codec=None, keep=None, workers=1):
    """Reads every .avro file under path with python avro and checks the
    layout and record contract (check_output.py).  Fails the test (or raises
    AssertionError) on any breach.  Returns the records in path order (or
    keep(record) for each, when keep is given)."""
    results, errors = check_output.check_tree(path, codec=codec, keep=keep, workers=workers)
    # avro-c 1.11 (Debian 12) has no zstandard codec: Python avro, with the
    # zstandard module, is then the only reader.
    if not errors and codec != "zstandard":
        errors = avro_c_crosscheck(path, results)
    if errors:
        msg = f"output tree {path} breaks the contract ({len(errors)} problems):\n  " + \
              "\n  ".join(errors[:40])
        if testcase is not None:
            testcase.fail(msg)
        raise AssertionError(msg)
    out = []
    for _rel, kept in results:
        out.extend(kept)
    return out


def avro_c_reader():
    """The avro-c reader built with sluice (tests/tools/avro_read)."""
    return os.environ.get("SLUICE_AVRO_READ") or \
        os.path.join(os.path.dirname(os.path.abspath(sluice_bin())), "tests", "tools", "avro_read")


def avro_c_crosscheck(root, results):
    """Reads every file again with avro-c (the second, independent reader) and
    checks it sees the same records as Python: the same count, and where the
    Python records are whole, the same uuid and CSN in the same order.
    Returns a list of problems."""
    reader = avro_c_reader()
    if not os.access(reader, os.X_OK):
        return [f"avro-c reader {reader} not found (build sluice, or set SLUICE_AVRO_READ)"]
    problems = []
    for i in range(0, len(results), 200):
        chunk = results[i:i + 200]
        paths = [os.path.join(root, rel) for rel, _ in chunk]
        p = subprocess.run([reader] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            problems.append(f"avro-c could not read every file: {p.stderr.strip()[:2000]}")
            continue
        lines = p.stdout.rstrip("\n").split("\n") if p.stdout else []
        if len(lines) != len(chunk):
            problems.append(f"avro-c reader printed {len(lines)} lines for {len(chunk)} files")
            continue
        for (rel, kept), line in zip(chunk, lines):
            f = line.split("\t")
            pairs = list(zip(f[1:-1:2], f[2:-1:2]))
            if int(f[-1]) != len(kept):
                problems.append(f"{rel}: avro-c reads {f[-1]} records, Python {len(kept)}")
            elif kept and isinstance(kept[0], dict) and "uuid" in kept[0]:
                mine = [(r["uuid"], r["source_metadata"]["change_sequence_number"]) for r in kept]
                if mine != pairs:
                    problems.append(f"{rel}: avro-c and Python read different uuids or CSNs")
    return problems


def csn(rec):
    return rec["source_metadata"]["change_sequence_number"]


def change_type(rec):
    return rec["source_metadata"]["change_type"]


def table_of(rec):
    sm = rec["source_metadata"]
    return (sm["schema"] if "schema" in sm else sm["database"], sm["table"])


def records_for(records, schema, table):
    return [r for r in records if table_of(r) == (schema, table)]


def _without_read_ts(rec):
    r = dict(rec)
    r.pop("read_timestamp", None)
    return r


def _truncate_again(a, b):
    """Two deliveries of one MariaDB TRUNCATE statement, the second written
    after a restart under a later table version (doc/output.md, "a change
    delivered twice"): equal but for schema_key and the payload's fields,
    every value of both payloads null.  Only the binlog's TRUNCATE records:
    a marker written again is the same record in every field."""
    if any(r["source_metadata"].get("change_type") != "TRUNCATE" or r["read_method"] != "mysql-cdc-binlog" or
           any(v is not None for v in r["payload"].values()) for r in (a, b)):
        return False
    strip = ("schema_key", "payload")
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


def dedup(records):
    """Drops exact repeats by uuid; asserts that records sharing a uuid are
    identical apart from read_timestamp (and a MariaDB TRUNCATE's table
    version: _truncate_again), and that a change (table, CSN, key or row
    image) never comes back under a different uuid.  Returns the unique
    records sorted by CSN (stable)."""
    by_uuid = {}
    for r in records:
        u = r["uuid"]
        if u in by_uuid:
            a, b = _without_read_ts(by_uuid[u]), _without_read_ts(r)
            if a != b and not _truncate_again(a, b):
                raise AssertionError(f"two records with uuid {u} differ:\n  {a}\n  {b}")
        else:
            by_uuid[u] = r
    seen = {}
    for u, r in by_uuid.items():
        sm = r["source_metadata"]
        ident = (r["object"], sm["change_sequence_number"], sm["change_type"],
                 tuple(sorted((k, repr(v)) for k, v in r["payload"].items())))
        if ident in seen:
            raise AssertionError(f"the same change came twice with different uuids {seen[ident]} and {u}: {ident}")
        seen[ident] = u
    return sorted(by_uuid.values(), key=csn)


class UnknownValue:
    """The value of an unchanged column whose key was never seen (rebuild
    and ch_harness.rebuild_append with lazy=True): equal to nothing, so it
    is a difference only if its row survives to the end (a later TRUNCATE
    marker, as before a backfill that the changes came before, removes it)."""

    def __init__(self, where):
        self.where = where

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<unchanged value of a key never seen at {self.where}>"


def rebuild(records, key_columns, table=None, lazy=False):
    """The state implied by append records of one table: {key tuple: payload dict}.

    records may hold several tables; table=(schema, name) selects one (it is
    required when records hold more than one).  Exact repeats are dropped by
    uuid (see dedup), the rest applied in CSN order: INSERT and UPDATE-INSERT
    upsert the payload (columns listed in unchanged_columns keep their old
    value: the key's own row, or after a key change the row that the
    UPDATE-DELETE at the previous sequence number of the same transaction
    removed), DELETE and UPDATE-DELETE remove the key, TRUNCATE removes every
    row seen so far.  An unchanged column of a key never seen raises, or with
    lazy is an UnknownValue (doc/output.md's equivalent rule, the highest CSN
    per key, drops it when a later marker or delete removes the row).
    """
    if table is not None:
        records = records_for(records, *table)
    tables = {table_of(r) for r in records}
    if len(tables) > 1:
        raise AssertionError(f"rebuild() over several tables {sorted(tables)}: pass table=")
    state = {}
    moved = None   # (CSN position, sequence, row) of the last UPDATE-DELETE
    ordered = dedup(records)
    tied = marker_ties(ordered)
    if tied:
        raise AssertionError("a TRUNCATE shares its CSN with another record of the table, so CSN order "
                             f"cannot tell what it ends: {tied[:5]}")
    for r in ordered:
        sm = r["source_metadata"]
        ct = sm["change_type"]
        p = r["payload"]
        pos, seq = csn(r).split("-")
        if ct == "TRUNCATE":
            state.clear()
            continue
        key = tuple(p[k] for k in key_columns)
        if ct in ("INSERT", "UPDATE-INSERT"):
            row = dict(p)
            for c in sm.get("unchanged_columns") or ():
                if key in state:
                    row[c] = state[key][c]
                elif moved and ct == "UPDATE-INSERT" and moved[0] == pos and int(moved[1]) + 1 == int(seq):
                    # a key change: the row came from the key the UPDATE-DELETE
                    # just before it (same transaction, previous sequence) removed
                    row[c] = moved[2][c]
                elif lazy:
                    row[c] = UnknownValue(csn(r))
                else:
                    raise AssertionError(f"{csn(r)}: unchanged column {c} for a key never seen: {key}")
            state[key] = row
        elif ct in ("DELETE", "UPDATE-DELETE"):
            if any(v is None for v in key):
                raise AssertionError(f"{csn(r)}: {ct} without its key: {p}")
            old = state.pop(key, None)
            if ct == "UPDATE-DELETE" and old is not None:
                moved = (pos, seq, old)
        else:
            raise AssertionError(f"unknown change_type {ct}")
    return state


def marker_ties(records):
    """The CSNs that a TRUNCATE shares with a record of its table other
    than a TRUNCATE (records: one table's, repeats dropped).  A marker
    sorts strictly after every record of the state it ends and strictly
    before every record after it (doc/output.md), so this is empty."""
    rows = {csn(r) for r in records if change_type(r) != "TRUNCATE"}
    return sorted({csn(r) for r in records if change_type(r) == "TRUNCATE" and csn(r) in rows})


def assert_marker_between(testcase, old, marker, new):
    """The marker's CSN is strictly above every record of old (the state it
    ends) and strictly below every record of new (the records that rebuild
    the table after it)."""
    m = csn(marker)
    testcase.assertEqual(change_type(marker), "TRUNCATE")
    above = [csn(r) for r in old if csn(r) >= m]
    below = [csn(r) for r in new if csn(r) <= m]
    testcase.assertEqual(above, [], f"records of the ended state at or above the marker {m}")
    testcase.assertEqual(below, [], f"records after the marker at or below it {m}")


def counter_gaps(records, key_columns, counter="counter", table=None):
    """Checks each key's counter (+1 on every update) through the append
    records in CSN order, repeats dropped.  Returns a list of problems.

    - A CDC UPDATE-INSERT must carry the previous row's counter + 1 (the row
      moves to a new key on a primary-key change: UPDATE-DELETE, then
      UPDATE-INSERT at the next sequence number).
    - A backfill row starts a key at any value; when the key was already seen
      it must carry the last counter seen (a snapshot at P holds exactly the
      changes committed before P).
    - A key may start with CDC updates and no earlier row only when a later
      backfill row covers it, or a later re-backfill marker (a backfill
      TRUNCATE) replaces the table's state: sluice redoes an interrupted
      backfill from a new snapshot P2 while the slot re-delivers changes from
      before P2, and a key those changes update and then delete before P2
      has no row in either snapshot.
    """
    if table is not None:
        records = records_for(records, *table)
    recs = dedup(records)

    def is_backfill(r):
        return r["read_method"] in ("postgresql-backfill", "mysql-backfill-fulldump")

    last_backfill = {}   # key -> CSN of its last backfill row
    last_marker = ""     # CSN of the last re-backfill marker
    for r in recs:
        if is_backfill(r) and change_type(r) == "TRUNCATE":
            last_marker = max(last_marker, csn(r))
        elif is_backfill(r):
            last_backfill[tuple(r["payload"][k] for k in key_columns)] = csn(r)
    last = {}            # key -> last counter seen
    renamed = {}         # (position, seq) of an UPDATE-INSERT -> counter of the key it renames
    before_marker = {}   # key -> counter seen before the last re-backfill marker
    problems = []
    for r in recs:
        ct = change_type(r)
        p = r["payload"]
        cs = csn(r)
        pos, sq = csn_position(cs), csn_seq(cs)
        if ct == "TRUNCATE":
            if is_backfill(r):
                # a re-backfill marker: the snapshot's rows replace the state;
                # a row may carry a later counter (changes missed while a slot
                # was lost) but never an earlier one than already seen
                before_marker.update(last)
            last.clear()
            continue
        key = tuple(p[k] for k in key_columns)
        if ct == "DELETE":
            last.pop(key, None)
            continue
        if ct == "UPDATE-DELETE":
            # a key change: the next change of the transaction carries the row on
            renamed[(pos, sq + 1)] = last.pop(key, None)
            continue
        if ct not in ("INSERT", "UPDATE-INSERT"):
            continue
        c = p[counter]
        if is_backfill(r):
            if key not in last and before_marker.get(key, c) > c:
                problems.append(f"key {key}: backfill row at {cs} has counter {c}, "
                                f"older than {before_marker[key]} seen before the re-backfill")
            if key in last and last[key] != c:
                problems.append(f"key {key}: backfill row at {cs} has counter {c}, "
                                f"but the changes before it reached {last[key]}")
            last[key] = c
            continue
        if ct == "INSERT":
            if key in last:
                problems.append(f"key {key}: INSERT at {cs} of a key already present")
            last[key] = c
            continue
        prev = renamed.pop((pos, sq)) if (pos, sq) in renamed else last.get(key)
        if prev is None:
            if last_backfill.get(key, "") <= cs and last_marker <= cs:
                problems.append(f"key {key}: UPDATE-INSERT at {cs} (counter {c}) with no earlier row for it")
        elif c != prev + 1:
            problems.append(f"key {key}: counter {prev} -> {c} at {cs}")
        last[key] = c
    return problems


# --------------------------------------------------------------------------
# comparing with the source

def column_kinds(pg, schema, table, with_oids=False):
    """[(column name, kind)] in column order.  kind says how sluice writes the
    column (doc/types.md): bool, int, float4, float8, decimal (numeric with a
    typmod), numeric (no typmod), bytes, date, time, timestamp, timestamptz,
    uuid, or text (json, jsonb, enums, arrays, strings, everything else: the
    PostgreSQL text output).  with_oids adds the type OID to each tuple."""
    rows = pg.sql(
        "SELECT a.attname, a.atttypid::int, a.atttypmod FROM pg_attribute a "
        "WHERE a.attrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (schema, table))
    by_oid = {16: "bool", 21: "int", 23: "int", 20: "int", 700: "float4", 701: "float8",
              17: "bytes", 1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz",
              2950: "uuid"}
    out = []
    for name, oid, typmod in rows:
        if oid == 1700:
            # numeric(p,s) with 0 <= s <= p is an Avro decimal; anything else is text
            kind = "numeric"
            if typmod >= 4:
                p, sc = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0x7FF
                if sc & 0x400:
                    sc -= 0x800
                if p >= 1 and 0 <= sc <= p:
                    kind = "decimal"
        else:
            kind = by_oid.get(oid, "text")
        out.append((name, kind, oid) if with_oids else (name, kind))
    return out


def expected_rows(pg, schema, table, key_columns):
    """The source table's rows as {key tuple: {column: value}}, in the Python
    types the Avro output should read back as (see normalize)."""
    import psycopg2.extensions as E
    from psycopg2 import sql as S
    kinds3 = column_kinds(pg, schema, table, with_oids=True)
    kinds = [(n, k) for n, k, _ in kinds3]
    q = S.SQL("SELECT {} FROM {}.{}").format(S.SQL(", ").join(S.Identifier(n) for n, _ in kinds),
                                             S.Identifier(schema), S.Identifier(table))
    with pg.conn.cursor() as cur:
        # text kinds come back exactly as the type's output function writes
        # them (no ::text cast: that trims char(n) and rewrites inet)
        raw_oids = tuple({oid for _, k, oid in kinds3 if k in ("text", "numeric", "uuid")})
        if raw_oids:
            E.register_type(E.new_type(raw_oids, "SLUICE_RAW", lambda v, c: v), cur)
        cur.execute(q)
        rows = cur.fetchall()
    names = [n for n, _ in kinds]
    out = {}
    for row in rows:
        d = {}
        for (name, kind), v in zip(kinds, row):
            if isinstance(v, memoryview):
                v = bytes(v)
            if kind == "timestamp" and v is not None:
                v = v.replace(tzinfo=UTC)
            if kind == "decimal" and isinstance(v, str):   # numeric OID registered raw above
                v = decimal.Decimal(v)
            d[name] = v
        key = tuple(normalize(dict(kinds)[k], d[k]) for k in key_columns)
        if key in out:
            raise AssertionError(f"{schema}.{table}: key {key} is not unique")
        out[key] = d
    assert set(key_columns) <= set(names), f"key columns {key_columns} not in {names}"
    return out


def normalize(kind, v):
    """A comparable form of a value (source or Avro side) for a column kind."""
    if v is None:
        return None
    if kind == "float4":
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        return struct.pack("<f", v)
    if kind == "float8":
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        return struct.pack("<d", v)
    if kind in ("timestamp", "timestamptz") and isinstance(v, datetime.datetime):
        return v.astimezone(UTC) if v.tzinfo else ("naive", v)
    return v


def values_equal(kind, expected, actual):
    """Exact comparison of a source value and an Avro value of a column kind.
    Returns None when equal, else a reason."""
    if expected is None or actual is None:
        return None if expected is None and actual is None else "null vs non-null"
    if kind == "bool":
        ok = isinstance(actual, bool) and actual == expected
    elif kind == "int":
        ok = isinstance(actual, int) and not isinstance(actual, bool) and actual == expected
    elif kind in ("float4", "float8"):
        ok = isinstance(actual, float) and normalize(kind, actual) == normalize(kind, expected)
    elif kind == "decimal":
        ok = isinstance(actual, decimal.Decimal) and actual == expected and \
             actual.as_tuple().exponent == expected.as_tuple().exponent
    elif kind == "numeric":
        # unconstrained numeric: written as its text, or as a decimal of equal value
        if isinstance(actual, str):
            ok = actual == expected
        else:
            ok = isinstance(actual, decimal.Decimal) and actual == decimal.Decimal(expected)
    elif kind == "bytes":
        ok = isinstance(actual, bytes) and actual == expected
    elif kind == "date":
        ok = type(actual) is datetime.date and actual == expected
    elif kind == "time":
        ok = type(actual) is datetime.time and actual == expected
    elif kind in ("timestamp", "timestamptz"):
        ok = isinstance(actual, datetime.datetime) and actual.tzinfo is not None and \
             actual.utcoffset() == datetime.timedelta(0) and actual == expected
    elif kind == "uuid":
        ok = isinstance(actual, str) and actual == str(uuidlib.UUID(expected)) and actual == expected
    else:
        ok = isinstance(actual, str) and actual == expected
    return None if ok else "differs"


_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def avro_field_name(column, columns):
    """The payload field name of a column, by the documented rule
    (doc/types.md): a valid Avro name is kept; any other is escaped byte by
    byte (bytes outside [A-Za-z0-9], the underscore included, and a leading
    digit become '_' and two lowercase hex digits), with _2, _3, ... only
    when that meets another column's valid name."""
    if _AVRO_NAME.match(column):
        return column
    out = ""
    for i, b in enumerate(column.encode("utf-8")):
        ch = chr(b)
        if ch.isascii() and (ch.isalpha() or (ch.isdigit() and i > 0)):
            out += ch
        else:
            out += f"_{b:02x}"
    taken = {c for c in columns if _AVRO_NAME.match(c)}
    name, n = out or "_", 2
    while name in taken:
        name = f"{out}_{n}"
        n += 1
    return name


def rows_diff(kinds, exp, key_columns, state, equal, limit=20):
    """Compares rebuilt state ({key: {payload field: value}}) with the
    source's rows exp ({key: {column: value}}, keys normalized), exactly,
    column by column; kinds: {column: kind}; equal(kind, expected, actual)
    returns None or why they differ.  Returns a list of differences (empty
    when equal).  Either source's state_diff is this one."""
    diffs = []
    # payload fields are named by the Avro rule: back to column names
    names = {avro_field_name(c, kinds): c for c in kinds}
    state = {key: {names.get(f, f): v for f, v in row.items()} for key, row in state.items()}
    # normalise the rebuilt state's keys the same way
    got = {tuple(normalize(kinds[k], v) for k, v in zip(key_columns, key)): row for key, row in state.items()}
    for key in sorted(set(exp) - set(got), key=repr)[:limit]:
        diffs.append(f"missing in output: {key} = {exp[key]}")
    for key in sorted(set(got) - set(exp), key=repr)[:limit]:
        diffs.append(f"extra in output (not in source): {key} = {got[key]}")
    for key in sorted(set(exp) & set(got), key=repr):
        e, g = exp[key], got[key]
        if set(g) != set(e):
            diffs.append(f"{key}: payload fields {sorted(g)} are not the columns {sorted(e)}")
            continue
        for col in e:
            why = equal(kinds[col], e[col], g[col])
            if why:
                diffs.append(f"{key}.{col}: source {e[col]!r} vs output {g[col]!r} ({kinds[col]}: {why})")
        if len(diffs) > limit:
            break
    return diffs


def state_diff(pg, schema, table, key_columns, state, limit=20):
    """Compares rebuilt state with the source table, exactly, column by column.
    Returns a list of differences (empty when equal)."""
    return rows_diff(dict(column_kinds(pg, schema, table)), expected_rows(pg, schema, table, key_columns),
                     key_columns, state, values_equal, limit)


def assert_table_matches(testcase, pg, records, schema, table, key_columns, diff=state_diff):
    """Rebuilds one table from records and asserts it equals the source
    exactly (diff: the source's state_diff)."""
    state = rebuild(records, key_columns, table=(schema, table))
    diffs = diff(pg, schema, table, key_columns, state)
    if diffs:
        testcase.fail(f"{schema}.{table}: output differs from source ({len(diffs)} shown):\n  " +
                      "\n  ".join(diffs[:30]))
    return state


def csn_position(csn_text):
    return int(csn_text.split("-")[0], 16)


def csn_seq(csn_text):
    return int(csn_text.split("-")[1])


def lsn_value(v):
    """source_metadata.lsn as an int (accepts 'X/Y' text or a number)."""
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.match(r"^[0-9A-Fa-f]+/[0-9A-Fa-f]+$", v):
        return lsn_to_int(v)
    if isinstance(v, str) and re.match(r"^[0-9A-Fa-f]{16}$", v):
        return int(v, 16)
    raise ValueError(f"lsn {v!r} is neither 'X/Y' nor a number")


# --------------------------------------------------------------------------
# test base class

import unittest  # noqa: E402


class SourceTestCase(unittest.TestCase):
    """What the test classes of both sources share: a Sluice on the class's
    server (the attribute server_attr names), closed when the test ends,
    and the output compared with the source (state_diff: the source's)."""
    server_attr = "pg"
    source_kind = "pg"      # workload.py's name of the source
    state_diff = staticmethod(state_diff)

    @property
    def source_server(self):
        return getattr(self, self.server_attr)

    def sluice(self, **kw):
        """A Sluice on this class's server, closed when the test ends."""
        s = Sluice(self.source_server, **kw)
        self.addCleanup(s.close)
        return s

    def catch_up(self, s, timeout=240, **kw):
        return s.catch_up(self, timeout=timeout, **kw)

    def read(self, s, **kw):
        return read_avro_tree(s.out, self, codec=s.codec, **kw)

    def assertTableMatches(self, records, schema, table, key_columns):
        return assert_table_matches(self, self.source_server, records, schema, table, key_columns,
                                    type(self).state_diff)

    def assertNoCounterGaps(self, records, schema, table, key_columns, counter="counter"):
        gaps = counter_gaps(records, key_columns, counter, table=(schema, table))
        if gaps:
            self.fail(f"{schema}.{table}: counter gaps ({len(gaps)}):\n  " + "\n  ".join(gaps[:30]))


class PgTestCase(SourceTestCase):
    """A test class with its own PostgreSQL server (pg), started once for the
    class and always closed.  Skips when PostgreSQL 15 is not installed.
    pg_settings and pg_initdb_args go to PgServer."""
    pg_settings = None
    pg_initdb_args = ()
    pg = None

    @classmethod
    def setUpClass(cls):
        skip_unless(pg_available())
        cls.pg = PgServer(cls.pg_settings, initdb_args=cls.pg_initdb_args)
        cls.addClassCleanup(cls.pg.close)
        cls.pg.start()


def slow_config(s, **keys):
    """The path of a config of Sluice s whose destination is
    tests/tools/sluice_test's slow_avro_dir on the same output, with keys
    (flush_delay, flush_block_file) added to its section."""
    secs = s.sections()
    secs["destination.out"]["type"] = "slow_avro_dir"
    secs["destination.out"].update(keys)
    path = os.path.join(s.workdir, "slow.ini")
    with open(path, "w") as f:
        for sec, kv in secs.items():
            f.write(f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()))
    return path


class AgentRuns:
    """Methods of a test case (either source) that run the agent of a
    Sluice: slow (every flush delayed), until it streams, and stopped."""

    def start_slow(self, s, flush_delay="1s", env=None, **keys):
        """Runs s with every flush delayed by flush_delay (the test sink
        slow_avro_dir of tests/tools/sluice_test, on the same output, with
        keys added to its section), so that a backfill is still running
        when the test kills it."""
        return s.start("run", config=slow_config(s, flush_delay=flush_delay, **keys), binary=sluice_test_bin(),
                       env=env)

    def kill_after_a_durable_chunk(self, s, table, request=True):
        """Runs s slow until the backfill while streaming of table (asked
        for with `sluice backfill --table` when request) has a chunk
        durable, kill -9s it there (the entry stays running), and sets
        backfill_chunk_rows to 10000 for the runs after.  Every chunk
        closes a file (max_file_bytes = 1KB) whose flush the slow sink
        delays 1 s, so the backfill is still running when the test looks:
        with one file a second, the whole table could be read before the
        first flush, the checkpoint then going from no durable chunk to done
        (CI, once)."""
        p = self.start_streaming(s, slow=True, max_file_bytes="1KB")
        if request:
            r = s.run("backfill", "--stream", s.stream, "--table", table, timeout=60)
            self.assertEqual(r.rc, 0, r.describe())
        try:
            wait_until(lambda: backfill_running(s, table, "watermark", 1) or not p.alive(), 120, "a durable chunk")
        except TimeoutError:
            p.kill9()
            raise AssertionError("no durable chunk: checkpoint entry %r; the agent printed:\n%s"
                                 % (checkpoint_table(s, table), p.stderr_text()[-5000:]))
        p.kill9()
        p.wait_result(30)
        self.assertEqual(checkpoint_table(s, table).get("backfill"), "running", p.stderr_text())
        s.extra["source"]["backfill_chunk_rows"] = 10000
        s.write_config()

    def start_streaming(self, s, slow=False, env=None, **keys):
        """The agent of s (with env), once it streams (from a slot or a
        binlog); slow: start_slow's, with keys."""
        p = self.start_slow(s, env=env, **keys) if slow else s.start("run", env=env)
        wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 120, "streaming")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        return p

    def stop(self, p):
        """SIGTERM, and exit 0."""
        p.signal(signal.SIGTERM)
        r = p.wait_result(120)
        self.assertEqual(r.rc, 0, r.describe())
        return r


class BackfillUnderLoad(AgentRuns):
    """The backfill-while-streaming tests under a workload that both sources
    run, in namespace ns (a mixin of a SourceTestCase whose class gives
    make_table(name, rows): a table (id, v, counter, pad) with the rows
    1..rows, and agent(stream, tables, **kw): a Sluice with
    backfill_chunk_rows = self.chunk_rows)."""
    ns = None

    def load(self, table, ids):
        """Small random transactions on table, which holds the rows ids:
        inserts, updates, deletes and key changes (to a key before or after
        every chunk), on a thread (workload.Runner)."""
        from workload import CounterWorkload, Runner
        return Runner(self.source_server, CounterWorkload(pick_seed(), self.source_kind, self.ns, [table], ids,
                                                          mix=(0.25, 0.5, 0.15, 0.1), negative_keys=True))

    def rebackfill_with_kill(self, rows, **kw):
        """`sluice backfill --table` of table rbw (rows rows) while a slow
        agent streams under load, kill -9 once 2 chunks of 100 rows are
        durable: the next run resumes after the last durable chunk, and the
        table equals the source, with one marker, one initial snapshot and
        more chunks than were durable.  Returns every record of the output."""
        t = f"{self.ns}.rbw"
        self.make_table("rbw", rows)
        self.chunk_rows = 100
        s = self.agent("rbw", t, **kw)
        p = self.start_streaming(s, slow=True)
        w = self.load("rbw", range(1, rows + 1))
        w.start()
        try:
            wait_until(lambda: w.tx > 50, 60, "the workload to run")
            r = s.run("backfill", "--stream", "rbw", "--table", t, timeout=60)
            self.assertEqual(r.rc, 0, r.describe())
            self.assertIn(f"stream rbw: {t} requested for backfill from the running agent (pid {p.pid})", r.stdout)
            # kill -9 once some chunks are durable, before the last one
            wait_until(lambda: backfill_running(s, t, "watermark", 2) or not p.alive(), 120,
                       "durable chunks of the re-backfill")
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            p.kill9()
            p.wait_result(30)
            e = checkpoint_table(s, t)
            self.assertEqual((e["backfill"], e["method"]), ("running", "watermark"), e)
            durable_chunks, durable_rows = e["chunks"], e["rows"]
            self.assertIn("resume_key", e)
            self.assertIn(f"backfilling {t} while streaming (watermark method, chunks of 100 rows)", p.stderr_text())
            if hasattr(self.source_server, "wait_slot_inactive"):
                self.source_server.wait_slot_inactive(s.slot)
            p = s.start("run")
            wait_until(lambda: f"backfilled {t} while streaming" in p.stderr_text() or not p.alive(), 240,
                       "the resumed re-backfill to finish")
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            self.assertIn(f"resuming the backfill of {t} while streaming after its last durable chunk "
                          f"({durable_rows} rows, {durable_chunks} chunks durable)", p.stderr_text())
            time.sleep(1)
        finally:
            w.finish()
        self.stop(p)
        self.catch_up(s)
        all_recs = self.read(s)
        recs = records_for(all_recs, self.ns, "rbw")
        self.assertTableMatches(recs, self.ns, "rbw", ["id"])
        ms = truncate_markers(recs)
        self.assertEqual(len(ms), 1, "one re-backfill marker")
        initial = {csn(r) for r in backfill_inserts(recs) if csn(r) < csn(ms[0])}
        self.assertEqual(len(initial), 1, "one initial snapshot")
        chunks = {csn(r) for r in backfill_inserts(recs) if csn(r) > csn(ms[0])}
        self.assertGreater(len(chunks), durable_chunks, "the re-backfill's chunks, each at its high watermark")
        e = checkpoint_table(s, t)
        self.assertEqual((e["backfill"], e["method"]), ("done", "watermark"), e)
        self.assertNotIn("resume_key", e)
        return all_recs

    def backfill_request_while_running(self, also=""):
        """`sluice backfill --table` of table req_a (3000 rows, 10 of them
        updated first) to an agent streaming it and req_b (and the tables
        of `also`): taken within seconds, its request file removed, read
        in 6 chunks of 500 rows after one marker, each row once with its
        new value; req_b untouched.  Without --table, or with a table the
        stream does not select, the request is refused (exit 2).  Returns
        every record of the output."""
        a, b = f"{self.ns}.req_a", f"{self.ns}.req_b"
        self.make_table("req_a", 3000)
        self.make_table("req_b", 50)
        s = self.agent("req", f"{a}, {b}" + (f", {also}" if also else ""))
        p = self.start_streaming(s)
        self.source_server.execute(f"UPDATE {a} SET v = 'new' WHERE id <= 10")
        r = s.run("backfill", "--stream", "req", "--table", a, timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        t0 = time.monotonic()
        wait_until(lambda: f"backfill of {a} requested" in p.stderr_text() or not p.alive(), 10,
                   "the agent to take the request")
        self.assertLess(time.monotonic() - t0, 5)
        wait_until(lambda: f"backfilled {a} while streaming: 3000 rows in 6 chunks" in p.stderr_text()
                   or not p.alive(), 60, "the re-backfill")
        self.assertEqual(backfill_requests_left(s), [], "the request file is removed")
        r = s.run("backfill", "--stream", "req", timeout=60)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn("stop that agent first to backfill every table", r.stderr)
        r = s.run("backfill", "--stream", "req", "--table", f"{self.ns}.nope", timeout=60)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn(f"--table {self.ns}.nope names no table the stream selects", r.stderr)
        self.stop(p)
        self.catch_up(s)
        recs = self.read(s)
        ra, rb = records_for(recs, self.ns, "req_a"), records_for(recs, self.ns, "req_b")
        self.assertEqual(len(truncate_markers(ra)), 1)
        self.assertEqual(truncate_markers(rb), [])
        ms = csn(truncate_markers(ra)[0])
        after = [r for r in backfill_inserts(ra) if csn(r) > ms]
        self.assertEqual(sorted(r["payload"]["id"] for r in after), list(range(1, 3001)), "each row once")
        self.assertEqual(len({csn(r) for r in after}), 6, "6 chunks of 500 rows")
        self.assertEqual(len(backfill_inserts(rb)), 50)
        self.assertTableMatches(ra, self.ns, "req_a", ["id"])
        self.assertTableMatches(rb, self.ns, "req_b", ["id"])
        self.assertEqual(sorted(r["payload"]["v"] for r in after if r["payload"]["id"] <= 10), ["new"] * 10)
        return recs

    def first_watermark_written(self, s):
        """Whether the agent of s wrote its re-backfill's first low watermark
        where a test sees it (MariaDB's class: the watermark table).
        PostgreSQL's is a message in the WAL: the checkpoint's running
        backfill, which rebackfill_never_durable waits for too, stands for
        it."""
        return True

    def rebackfill_never_durable(self, name, rows, also=""):
        """Table NAME of rows rows, backfilled by stream NAME (with the
        tables of `also`); then `sluice backfill --table` of the running
        agent, whose chunks are all read again (SLUICE_FAULT_CHUNKS_SPOILED),
        so that none becomes durable.  Returns (s, p) once the checkpoint
        has the re-backfill running and its first low watermark is written:
        the changes before it are in the chunks, and the stream skips them."""
        t = f"{self.ns}.{name}"
        self.make_table(name, rows)
        s = self.agent(name, t + (f", {also}" if also else ""))
        self.catch_up(s)
        p = self.start_streaming(s, env={"SLUICE_FAULT_CHUNKS_SPOILED": "1"})
        r = s.run("backfill", "--stream", name, "--table", t, timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        wait_until(lambda: (backfill_running(s, t, "watermark", 0) and self.first_watermark_written(s))
                   or not p.alive(), 30, "the re-backfill's first watermark")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        return s, p

    def truncate_skipped_before_the_first_watermark(self):
        """A re-backfill that no chunk of is durable, killed; then, with no
        agent running, a row deleted and inserted again, the table
        truncated and rows inserted.  The next run replays those changes
        after its first chunk opened, which read the table after them: it
        skips the table's changes up to that chunk's low watermark (its
        marker clears what the stream wrote of them before), the TRUNCATE
        too.  Applied to the chunk, the TRUNCATE removed the rows it read,
        and the inserts (skipped, their records below the marker) never
        brought them back (issue 17: seed 329 of test_property's
        pg/append/clickhouse cell, 'wa329.wa missing in ClickHouse:
        (170,)', the resumed chunk reading 14 rows and applying 14 changes;
        seed 205 of its mariadb/append/clickhouse cell, 'wa205.wa missing
        in ClickHouse: (187,)')."""
        t = f"{self.ns}.trunc"
        s, p = self.rebackfill_never_durable("trunc", 20)
        p.kill9()
        p.wait_result(30)
        e = checkpoint_table(s, t)
        self.assertEqual((e.get("backfill"), e.get("method"), e.get("resume_key")), ("running", "watermark", None), e)
        src = self.source_server
        src.execute(f"DELETE FROM {t} WHERE id = 7")
        src.execute(f"INSERT INTO {t} VALUES (7, 'deleted and inserted again', 1, 'p')")
        src.execute(f"TRUNCATE TABLE {t}")
        src.execute(f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, 'after', 1, 'after')" for i in range(101, 106)))
        r = self.catch_up(s)
        self.assertIn(f"resuming the backfill of {t} while streaming after its last durable chunk (0 rows, "
                      "0 chunks durable)", r.stderr)
        self.assertIn(f"backfilled {t} while streaming: 5 rows in 1 chunks", r.stderr)
        recs = records_for(self.read(s), self.ns, "trunc")
        self.assertEqual(sorted(r["payload"]["id"] for r in backfill_inserts(recs)
                                if csn(r) > csn(truncate_markers(recs)[-1])), list(range(101, 106)))
        self.assertTableMatches(recs, self.ns, "trunc", ["id"])

    def table_added_under_load(self, rows):
        """Table add_b (rows rows) added to the `tables` of a stream of
        add_a is backfilled while the stream goes on, under load on add_b:
        both tables equal the source, add_b with one marker.  Returns every
        record of the output."""
        a, b = f"{self.ns}.add_a", f"{self.ns}.add_b"
        self.make_table("add_a", 100)
        s = self.agent("addt", a)
        self.catch_up(s)
        self.make_table("add_b", rows)
        s.tables = f"{a}, {b}"
        s.write_config()
        p = self.start_streaming(s)
        w = self.load("add_b", range(1, rows + 1))
        w.start()
        try:
            wait_until(lambda: f"backfilled {b} while streaming" in p.stderr_text() or not p.alive(), 240,
                       "the new table's backfill")
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
            time.sleep(1)
        finally:
            w.finish()
        self.assertIn(f"backfilling {b} while streaming (watermark method", p.stderr_text())
        self.assertNotIn(f"backfilling {b} at", p.stderr_text(), "not from a snapshot before streaming")
        self.stop(p)
        self.catch_up(s)
        recs = self.read(s)
        ra, rb = records_for(recs, self.ns, "add_a"), records_for(recs, self.ns, "add_b")
        self.assertTableMatches(ra, self.ns, "add_a", ["id"])
        self.assertTableMatches(rb, self.ns, "add_b", ["id"])
        self.assertEqual(truncate_markers(ra), [])
        self.assertEqual(len(truncate_markers(rb)), 1)
        self.assertEqual(checkpoint_table(s, b)["backfill"], "done")
        return recs
