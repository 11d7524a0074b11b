"""
tests/integration/opsutil.py: what the operations tests share: a scrape of
the agent's HTTP endpoint, a parser of the Prometheus text exposition format
(written from the format's rules, independent of sluice), and a tiny local
HTTP receiver that records the webhook's POSTs; the changes of a table
counted in /metrics and in the output, compared with what the workload did.
"""

import http.server
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request

from harness import free_port, sluice_test_bin, table_of, wait_until

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(r"^(" + _NAME + r")(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def _unescape(v):
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            out.append({"n": "\n", "\\": "\\", '"': '"'}.get(v[i + 1], "\\" + v[i + 1]))
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


def parse_metrics(text):
    """Parses exposition text into {(name, frozenset(labels)): float}, and
    checks its grammar: every sample belongs to a family declared by # HELP
    and # TYPE before it, every line is a comment or NAME{labels} VALUE.
    Raises AssertionError on a breach."""
    samples, types, fam = {}, {}, None
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        if line.startswith("# HELP "):
            fam = line.split(" ")[2]
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            assert parts[2] == fam, f"line {n}: TYPE for {parts[2]} after HELP for {fam}"
            assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert parts[2] not in types, f"line {n}: family {parts[2]} declared twice"
            types[parts[2]] = parts[3]
            continue
        assert not line.startswith("#"), f"line {n}: unknown comment {line!r}"
        m = _SAMPLE.match(line)
        assert m, f"line {n}: not a sample: {line!r}"
        name, _, labels, value = m.groups()
        assert fam and (name == fam or (types.get(fam) == "histogram" and name in
                        (fam + "_bucket", fam + "_sum", fam + "_count"))), f"line {n}: {name} outside its family"
        lab = {}
        rest = labels or ""
        while rest:
            lm = _LABEL.match(rest)
            assert lm, f"line {n}: bad labels {labels!r}"
            lab[lm.group(1)] = _unescape(lm.group(2))
            rest = rest[lm.end():]
        key = (name, frozenset(lab.items()))
        assert key not in samples, f"line {n}: duplicate sample {line!r}"
        samples[key] = float(value)
    return samples, types


def metric(samples, name, **labels):
    """The value of the sample name{labels}, or None."""
    return samples.get((name, frozenset(labels.items())))


def scrape(port, path="/metrics", timeout=10):
    """(status, body) of GET http://127.0.0.1:port/path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(port):
    status, body = scrape(port)
    assert status == 200, f"/metrics answered {status}: {body}"
    return parse_metrics(body)[0]


class WebhookReceiver:
    """A local HTTP server that records every POST as (monotonic time, JSON).
    status is what it answers (change it to make deliveries fail)."""

    def __init__(self):
        self.posts = []
        self.status = 200
        self.lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with owner.lock:
                    owner.posts.append((time.monotonic(), self.headers.get("Content-Type"), json.loads(body)))
                self.send_response(owner.status)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def find(self, alert, status, stream=None):
        """The first recorded (time, payload) for alert with status, or None."""
        with self.lock:
            for t, _ctype, p in self.posts:
                a = p["alerts"][0]
                if a["labels"]["alertname"] == alert and a["status"] == status and \
                        (stream is None or a["labels"]["stream"] == stream):
                    return t, p
        return None

    def names(self):
        with self.lock:
            return [(p["alerts"][0]["labels"]["alertname"], p["status"]) for _t, _c, p in self.posts]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def metrics_port():
    return free_port()


# the op label of sluice_changes_total of each change type of the output
CHANGE_OPS = {"INSERT": "insert", "UPDATE-INSERT": "update", "UPDATE-DELETE": "update_delete",
              "DELETE": "delete", "TRUNCATE": "truncate"}


def output_change_counts(recs, table):
    """{op: n}: the records of table ("ns.name") that the stream read from
    the log (not the backfill's), counted by the op label of
    sluice_changes_total."""
    got = dict.fromkeys(CHANGE_OPS.values(), 0)
    for r in recs:
        if "-cdc-" in r["read_method"] and ".".join(table_of(r)) == table:
            got[CHANGE_OPS[r["source_metadata"]["change_type"]]] += 1
    return got


def assert_changes_metrics(testcase, m, stream, want):
    """want ({"ns.name": {op: n}}, what the workload did) is what /metrics
    (the samples m) counts in sluice_changes_total."""
    for table, ops in want.items():
        for op, n in ops.items():
            testcase.assertEqual(metric(m, "sluice_changes_total", stream=stream, table=table, op=op), n,
                                 f"{table} {op}")


def assert_changes_output(testcase, recs, want):
    """want ({"ns.name": {op: n}}) is what the output records recs hold."""
    for table, ops in want.items():
        testcase.assertEqual(output_change_counts(recs, table), ops, table)


class StalledSinkCase:
    """The stalled sink test of either source (a mixin of its test case):
    a stream "stall" into the test sink slow_avro_dir, whose flush waits
    while a file exists, with lag thresholds of 2 MB and 6 MB, alerts sent
    to a webhook and /metrics served."""

    def start_stalled(self, tables, wait_streaming):
        """The stream (s), its running agent (p) and the file that holds its
        sink (block: not there yet); self.hook and self.port are the
        webhook's receiver and the /metrics port."""
        self.hook = WebhookReceiver()
        self.addCleanup(self.hook.close)
        self.port = metrics_port()
        s = self.sluice(stream="stall", tables=tables, max_file_seconds=1, binary=sluice_test_bin(),
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{self.port}", "alert_webhook": self.hook.url,
                                         # the smallest queue: it fills at once, and the reader
                                         # then waits for room
                                         "queue_bytes": "256KB"},
                               "destination": {"type": "slow_avro_dir"},
                               "stream": {"lag_warn_bytes": "2MB", "lag_critical_bytes": "6MB"}})
        block = os.path.join(s.workdir, "sink-down")
        s.extra["destination"]["flush_block_file"] = block
        s.write_config()
        p = s.start("run")
        wait_streaming(p)
        return s, p, block

    def write_until_critical(self, write, lag):
        """Calls write() (1,000 rows of 1 kB) until lag() (bytes) crosses
        6 MB, at most 60 times; returns {alert: when its threshold was
        crossed (time.monotonic())}."""
        crossed = {}
        for _ in range(60):
            write()
            n = lag()
            now = time.monotonic()
            if n >= 2 << 20:
                crossed.setdefault("lag_warning", now)
            if n >= 6 << 20:
                crossed.setdefault("lag_critical", now)
                break
        self.assertIn("lag_critical", crossed, "the lag never reached 6 MB")
        return crossed

    def assert_lag_alerts(self, s, crossed):
        """Each alert reached the webhook within 15 s of its threshold (the
        latencies printed); /healthz is 503, /metrics and `sluice status`
        (exit 1) have lag_critical firing.  Returns (the /metrics samples,
        the stream's status)."""
        latencies = {}
        for alert in ("lag_warning", "lag_critical"):
            got = wait_until(lambda: self.hook.find(alert, "firing", "stall"), 30, f"the {alert} webhook")
            latencies[alert] = got[0] - crossed[alert]
            self.assertEqual(got[1]["status"], "firing")
            self.assertIn(f"sluice stream stall: {alert} fires", got[1]["text"])
        print(f"\n    alert latency (threshold crossed -> webhook received): "
              f"lag_warning {latencies['lag_warning']:.1f} s, lag_critical {latencies['lag_critical']:.1f} s", end=" ")
        for alert, lat in latencies.items():
            self.assertLessEqual(lat, 15.0, f"{alert} took {lat:.1f} s")
        status, body = scrape(self.port, "/healthz")
        self.assertEqual(status, 503, body)
        self.assertIn("stream stall: streaming; critical alert lag_critical: lag ", body)
        m = metrics(self.port)
        self.assertEqual(metric(m, "sluice_alert_firing", stream="stall", alert="lag_critical"), 1)
        self.assertGreaterEqual(metric(m, "sluice_source_lag_bytes", stream="stall"), 6 << 20)
        # status: the same alerts, exit 1 (an alert fires, everything determined)
        r = s.run("status", "--json", timeout=60)
        self.assertEqual(r.rc, 1, r.describe())
        st = json.loads(r.stdout)["streams"][0]
        self.assertTrue(st["determined"])
        self.assertIn("lag_critical", [a["alert"] for a in st["alerts"]])
        return m, st

    def assert_recovers(self, p, block):
        """The sink back (block removed): lag_critical resolves, /healthz is
        200 again, and the agent exits 0 on SIGTERM."""
        os.unlink(block)
        wait_until(lambda: self.hook.find("lag_critical", "resolved", "stall"), 90, "lag_critical to resolve")
        wait_until(lambda: scrape(self.port, "/healthz")[0] == 200, 60, "/healthz to recover")
        self.assertEqual(scrape(self.port, "/healthz")[1], "stream stall: streaming\n")
        self.assertTrue(p.alive(), p.stderr_text())
        self.assertIn('stream "stall": alert lag_critical resolved', p.stderr_text())
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(90).rc, 0)
