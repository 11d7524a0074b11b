"""
tests/integration/test_pg_liveness.py: an agent the monitoring can trust,
against a real PostgreSQL.

- `sluice status` calls an agent stopped with SIGSTOP "not responding"
  (exit 8) within 2 x probe_interval + 5 s, and gives the other exit codes:
  6 when no agent runs, 7 when a stream failed (exit 4 of run);
- /livez stays 200 while PostgreSQL is down and /healthz is 503;
- a metrics_listen that another process holds stops `run` and `check` with
  exit 3, and two agents with the default (no endpoint) both start;
- under systemd's notify protocol (a fake NOTIFY_SOCKET), READY=1 once the
  stream runs, WATCHDOG=1 while the pipeline makes progress and none while
  its writer is stuck, STOPPING=1 on SIGTERM;
- contrib/systemd/sluice.service passes `systemd-analyze verify`.

Figures measured (the time status took to see the stop, /livez's answer
time) are printed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import PgTestCase, sluice_test_bin, wait_until
from opsutil import metrics_port, scrape

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
PROBE_INTERVAL = 1
STALE_S = 2 * PROBE_INTERVAL + 5


def wait_streaming(p, timeout=60):
    wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), timeout, "streaming")
    assert p.alive(), p.stderr_text()


def status_json(s):
    r = s.run("status", "--json", timeout=60)
    return r, json.loads(r.stdout)["streams"][0]


class StatusLivenessTest(PgTestCase):

    def test_sigstop_is_not_responding_and_exit_codes(self):
        pg = self.pg
        pg.execute("CREATE TABLE lv_a (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO lv_a VALUES (1, 'a')")
        s = self.sluice(stream="lv", tables="public.lv_a", max_file_seconds=1,
                        extra={"agent": {"probe_interval": str(PROBE_INTERVAL)}})
        # no agent runs: 6
        r = s.run("status", timeout=60)
        self.assertEqual(r.rc, 6, r.describe())
        self.assertIn("agent: not running", r.stdout)

        p = s.start("run")
        wait_streaming(p)
        r = wait_until(lambda: (lambda r: r if r.rc == 0 and "writer's last progress 0 s ago" in r.stdout else None)(
            s.run("status", timeout=60)), 30, "status exit 0 with the agent running and its writer stepping")
        self.assertIn(f"agent: running (pid {p.pid})", r.stdout)
        self.assertRegex(r.stdout, r"threads: probe's last pass \d+ s ago; writer's last progress \d+ s ago")
        _, st = status_json(s)
        self.assertIs(st["agent_responding"], True)
        self.assertEqual(st["responding_limit_seconds"], STALE_S)

        os.kill(p.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            r = wait_until(lambda: (lambda r: r if r.rc == 8 else None)(s.run("status", timeout=60)),
                           STALE_S + 10, "status to call the stopped agent not responding", interval=0.2)
            took = time.monotonic() - t0
            print(f"\n  status saw the SIGSTOPped agent as not responding after {took:.1f} s "
                  f"(limit 2 x probe_interval + 5 s = {STALE_S} s)")
            # the run file was last written before the stop: stale within STALE_S of it, plus the
            # time of one `sluice status` (it probes the source too) and the poll
            self.assertLessEqual(took, STALE_S + 1.5)
            self.assertIn(f"agent: not responding (pid {p.pid}: its run file was last written", r.stdout)
            rj, st = status_json(s)
            self.assertEqual(rj.rc, 8)
            self.assertIs(st["agent_responding"], False)
            self.assertGreaterEqual(st["run_file_age_seconds"], STALE_S)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        wait_until(lambda: s.run("status", timeout=60).rc == 0, 30, "status exit 0 after SIGCONT")
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        r = s.run("status", timeout=60)
        self.assertEqual(r.rc, 6, r.describe())
        self.assertIn("state: stopped", r.stdout)

        # a stream that failed for good: its slot is gone (run exits 4), status exits 7
        pg.execute("SELECT pg_drop_replication_slot(%s)", (s.slot,))
        r = s.run("run", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        r = s.run("status", timeout=60)
        self.assertEqual(r.rc, 7, r.describe())
        self.assertIn("state: failed", r.stdout)

    def test_status_help_lists_every_exit_code(self):
        s = self.sluice(stream="lh", tables="public.nothing")
        r = s.run("status", "--help", raw=True)
        self.assertEqual(r.rc, 0)
        for line in ("  0  an agent runs every stream", "  1  an alert fires", "  2  usage or configuration",
                     "  5  some status could not be determined", "  6  no agent runs a stream",
                     "  7  a stream failed", "  8  the agent that runs a stream is not responding"):
            self.assertIn(line, r.stdout)


class EndpointsTest(PgTestCase):

    def test_livez_200_and_healthz_503_with_postgres_stopped(self):
        pg = self.pg
        pg.execute("CREATE TABLE lz_a (id int PRIMARY KEY)")
        port = metrics_port()
        s = self.sluice(stream="lz", tables="public.lz_a",
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}",
                                         "probe_interval": str(PROBE_INTERVAL)}})
        p = s.start("run")
        wait_streaming(p)
        wait_until(lambda: scrape(port, "/healthz")[0] == 200, 30, "/healthz 200")
        code, body = scrape(port, "/livez")
        self.assertEqual(code, 200, body)
        self.assertRegex(body, r"^stream lz: probe passed \d+ s ago, writer stepped \d+ s ago\n$")
        pg.stop()
        try:
            code, body = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(scrape(port, "/healthz")),
                                    60, "/healthz 503 with PostgreSQL stopped")
            self.assertIn("[unhealthy]", body)
            # liveness does not follow the database: 200 for longer than a stuck probe would take
            slowest = 0.0
            until = time.monotonic() + STALE_S + 2
            while time.monotonic() < until:
                t0 = time.monotonic()
                code, body = scrape(port, "/livez", timeout=5)
                slowest = max(slowest, time.monotonic() - t0)
                self.assertEqual(code, 200, body)
                self.assertTrue(body.startswith("stream lz: probe passed"), body)
                time.sleep(0.5)
            print(f"\n  /livez answered 200 with PostgreSQL down, in at most {slowest * 1000:.0f} ms")
            self.assertEqual(scrape(port, "/healthz")[0], 503)
        finally:
            p.signal(signal.SIGTERM)
            p.wait_result(60)   # a stream in its backoff stops within a second
            pg.start()          # on a new port: the agent above is not used again

    def test_taken_metrics_port_stops_run_and_check(self):
        pg = self.pg
        pg.execute("CREATE TABLE mp_a (id int PRIMARY KEY)")
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(holder.close)
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        s = self.sluice(stream="mp", tables="public.mp_a",
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}"}})
        want = f"metrics_listen = 127.0.0.1:{port}: cannot listen there"
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(want, r.stderr)
        r = s.run("run", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(want, r.stderr)
        self.assertNotIn("streaming from slot", r.stderr)
        holder.close()
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f"metrics_listen 127.0.0.1:{port}: ok", r.stdout)

    def test_two_agents_with_the_default_config_both_start(self):
        pg = self.pg
        pg.execute("CREATE TABLE da_a (id int PRIMARY KEY)")
        pg.execute("CREATE TABLE da_b (id int PRIMARY KEY)")
        procs = []
        for name, table in (("da1", "public.da_a"), ("da2", "public.da_b")):
            s = self.sluice(stream=name, tables=table, extra={"agent": {"metrics_listen": None}})
            self.assertNotIn("metrics_listen", s.config_text())
            procs.append(s.start("run"))
        for p in procs:
            wait_streaming(p)
        for p in procs:
            p.signal(signal.SIGTERM)
            self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())


class NotifySocket:
    """A fake service manager: a unix datagram socket (a path, or an
    abstract "@name") that records every notification as (monotonic time,
    assignment)."""

    def __init__(self, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dir = tempfile.mkdtemp(prefix="sluice-notify-")
        if abstract:
            name = f"sluice-test-notify-{os.getpid()}-{id(self)}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.address = os.path.join(self.dir, "notify")
            self.sock.bind(self.address)
        self.got = []
        self.lock = threading.Lock()
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._recv, daemon=True)
        self.thread.start()

    def _recv(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            now = time.monotonic()
            with self.lock:
                self.got.extend((now, line) for line in data.decode().split("\n") if line)

    def times(self, what):
        with self.lock:
            return [t for t, line in self.got if line == what]

    def close(self):
        self.running = False
        self.thread.join(5)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class SystemdNotifyTest(PgTestCase):
    WATCHDOG_S = 2

    def run_notified(self, abstract, stream):
        self.pg.execute(f"CREATE TABLE {stream}_t (id int PRIMARY KEY)")
        ns = NotifySocket(abstract)
        self.addCleanup(ns.close)
        # the test sink holds every flush with something to write while the file exists
        s = self.sluice(stream=stream, tables=f"public.{stream}_t", max_file_seconds=1, binary=sluice_test_bin(),
                        extra={"agent": {"probe_interval": str(PROBE_INTERVAL)},
                               "destination": {"type": "slow_avro_dir"}})
        hold = os.path.join(s.workdir, "hold-flushes")
        s.extra["destination"]["flush_block_file"] = hold
        s.write_config()
        env = {"NOTIFY_SOCKET": ns.address, "WATCHDOG_USEC": str(self.WATCHDOG_S * 1000000)}
        p = s.start("run", env=env)
        wait_until(lambda: ns.times("READY=1") or not p.alive(), 60, "READY=1")
        self.assertTrue(p.alive(), p.stderr_text())
        self.assertEqual(len(ns.times("READY=1")), 1)
        return s, p, ns, hold

    def test_ready_watchdog_and_stopping(self):
        s, p, ns, hold = self.run_notified(True, "sdn")
        # pings every quarter of the interval while the pipeline makes progress
        wait_until(lambda: len([t for t in ns.times("WATCHDOG=1") if t > ns.times("READY=1")[0]]) >= 4, 20,
                   "WATCHDOG=1 after READY=1")
        # the writer gets stuck in a flush: the process lives, the pings stop
        open(hold, "w").close()
        self.pg.execute("INSERT INTO sdn_t VALUES (1)")
        t_stuck = time.monotonic()
        quiet = self.WATCHDOG_S * 2
        wait_until(lambda: (lambda w: w and time.monotonic() - w[-1] >= quiet)(ns.times("WATCHDOG=1")), 30,
                   f"no WATCHDOG=1 for {quiet} s with the writer stuck")
        last = ns.times("WATCHDOG=1")[-1]
        print(f"\n  last WATCHDOG=1 {last - t_stuck:.1f} s after the writer got stuck "
              f"(WATCHDOG_USEC {self.WATCHDOG_S} s)")
        self.assertLessEqual(last - t_stuck, self.WATCHDOG_S + 1.5)
        self.assertTrue(p.alive(), p.stderr_text())
        self.assertIn("the pipeline makes no progress: no watchdog notification", p.stderr_text())
        # the flush goes through: the pings come back
        os.unlink(hold)
        wait_until(lambda: ns.times("WATCHDOG=1")[-1] > last, 20, "WATCHDOG=1 again")
        self.assertEqual(ns.times("STOPPING=1"), [])
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        self.assertEqual(len(ns.times("STOPPING=1")), 1)
        self.assertGreater(ns.times("STOPPING=1")[0], ns.times("READY=1")[0])

    def test_ready_on_a_socket_path(self):
        s, p, ns, hold = self.run_notified(False, "sdp")
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        self.assertEqual(len(ns.times("STOPPING=1")), 1)
