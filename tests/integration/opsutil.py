"""
tests/integration/opsutil.py: what the operations tests share: a scrape of
the agent's HTTP endpoint, a parser of the Prometheus text exposition format
(written from the format's rules, independent of sluice), and a tiny local
HTTP receiver that records the webhook's POSTs.
"""

import http.server
import json
import re
import threading
import time
import urllib.error
import urllib.request

from harness import free_port

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
