#!/usr/bin/python3
"""
tests/integration/run.py: runs the integration tests (unittest discovery of
tests/integration/test_*.py), prints one line per test and ends with

  integration: N passed, N failed, N skipped

It exits 1 if any test failed or errored, else 0.  Tests that need
PostgreSQL 15 skip, with the reason, when its binaries are missing.

  SLUICE_BIN=/path/to/sluice /usr/bin/python3 tests/integration/run.py [-k PATTERN] [-x] [-j N]

-j N (or SLUICE_TEST_JOBS=N) runs the test modules in N processes at once,
each module whole in one of them (most tests wait on servers far more than
they compute); their lines are printed as they come, prefixed [1].. [N].

Environment: SLUICE_BIN (default <repo>/_build/sluice), SLUICE_PG_BIN
(default /usr/lib/postgresql/15/bin), SLUICE_TEST_SEED (kill test),
SLUICE_KEEP_TMP=1 (keep temporary directories for a post-mortem),
SLUICE_LARGE_TX_ROWS (default 1000000).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Debian's python3 has python3-avro and python3-psycopg2; a pyenv python may not.
try:
    import avro  # noqa: F401
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3") \
            and not os.environ.get("SLUICE_REEXEC"):
        os.environ["SLUICE_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("integration: python3-avro is missing (use /usr/bin/python3; apt-get install python3-avro)")
    print("integration: 0 passed, 1 failed, 0 skipped")
    sys.exit(1)

import argparse  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import unittest  # noqa: E402

sys.path.insert(0, HERE)
import harness  # noqa: E402


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


class Result(unittest.TestResult):
    """Prints a line per test; counts class-level skips and errors once per test of the class."""

    def __init__(self, class_sizes, stream):
        super().__init__()
        self.class_sizes = class_sizes
        self.stream = stream
        self.n_passed = self.n_failed = self.n_skipped = 0
        self.reports = []
        self._t0 = {}

    def _holder_count(self, test):
        # _ErrorHolder for setUpClass/tearDownClass: "setUpClass (module.Class)"
        desc = getattr(test, "description", "")
        if "(" in desc:
            cls = desc[desc.index("(") + 1:desc.rindex(")")]
            return cls, self.class_sizes.get(cls, 1)
        return desc, 1

    def startTest(self, test):
        super().startTest(test)
        self._t0[test.id()] = time.monotonic()
        self.stream.write(f"{test.id()} ... ")
        self.stream.flush()

    def _dt(self, test):
        t0 = self._t0.get(test.id())
        return f" ({time.monotonic() - t0:.1f}s)" if t0 else ""

    def addSuccess(self, test):
        super().addSuccess(test)
        self.n_passed += 1
        self.stream.write(f"ok{self._dt(test)}\n")

    def _bad(self, kind, test, err):
        if isinstance(test, unittest.case._SubTest):
            test = test.test_case
        if not hasattr(test, "_testMethodName"):   # class or module fixture
            cls, n = self._holder_count(test)
            self.n_failed += n
            self.stream.write(f"{test.description} ... {kind} (counts for {n} tests)\n")
        else:
            self.n_failed += 1
            self.stream.write(f"{kind}{self._dt(test)}\n")
        self.reports.append((kind, str(getattr(test, "description", None) or test.id()),
                             "".join(traceback.format_exception(*err))))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad("FAIL", test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._bad("ERROR", test, err)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            # counted once through the parent below
            self.reports.append(("FAIL" if issubclass(err[0], test.failureException) else "ERROR",
                                 subtest.id(), "".join(traceback.format_exception(*err))))
            self._subtest_failed = getattr(self, "_subtest_failed", set()) | {test.id()}

    def stopTest(self, test):
        super().stopTest(test)
        failed_sub = getattr(self, "_subtest_failed", set())
        if test.id() in failed_sub:
            failed_sub.discard(test.id())
            self.n_failed += 1
            self.stream.write(f"FAIL (subtest){self._dt(test)}\n")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        if not hasattr(test, "_testMethodName"):
            cls, n = self._holder_count(test)
            self.n_skipped += n
            self.stream.write(f"{cls} ... skipped {n} tests: {reason}\n")
        else:
            self.n_skipped += 1
            self.stream.write(f"skipped: {reason}\n")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.n_passed += 1
        self.stream.write("expected failure\n")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.n_failed += 1
        self.stream.write("unexpected success\n")


# Seconds each module took in CI (tests only): the shards are balanced by them.
WEIGHTS = {
    "test_my_ops": 89, "test_pg_ops": 78, "test_pg_network": 63, "test_pg_rebackfill": 61,
    "test_avro_merge": 50, "test_my_clickhouse": 47, "test_pg_large_tx": 46, "test_clickhouse": 44,
    "test_my_large_tx": 41, "test_s3": 39, "test_pg_recovery": 39, "test_pg_reconnect": 35,
    "test_my_rebackfill": 100, "test_my_recovery": 13, "test_pg_idle": 12, "test_my_changes": 12,
    "test_pg_kill": 9, "test_pg_production2": 120,
}


def run_sharded(a, modules):
    """Runs the modules in a.jobs child processes; prints their lines as
    they come; returns the exit status."""
    import subprocess
    import tempfile
    shards = [[] for _ in range(a.jobs)]
    load = [0.0] * a.jobs
    for m in sorted(modules, key=lambda m: (-WEIGHTS.get(m, 5), m)):
        i = load.index(min(load))
        shards[i].append(m)
        load[i] += WEIGHTS.get(m, 5) + 2   # + the servers' start
    shards = [sh for sh in shards if sh]
    tmp = tempfile.mkdtemp(prefix="sluice-shards-")
    procs = []
    t0 = time.monotonic()
    for i, sh in enumerate(shards):
        argv = [sys.executable, os.path.abspath(__file__), "--modules", ",".join(sh)]
        for p in a.patterns or []:
            argv += ["-k", p]
        if a.failfast:
            argv.append("-x")
        out = open(os.path.join(tmp, f"{i + 1}.out"), "w+")
        procs.append((i + 1, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                              env=dict(os.environ, SLUICE_TEST_JOBS="1")), out, [0, ""]))
    totals = [0, 0, 0]

    def drain(final):
        for n, p, out, st in procs:
            out.flush()
            with open(out.name) as f:
                f.seek(st[0])
                text = f.read()
                st[0] = f.tell()
            text = st[1] + text
            lines = text.split("\n")
            st[1] = "" if final else lines.pop()
            for line in lines:
                if final and not line:
                    continue
                m = re.match(r"integration: (\d+) passed, (\d+) failed, (\d+) skipped", line)
                if m:
                    for k in range(3):
                        totals[k] += int(m.group(k + 1))
                    st.append("summary")
                print(f"[{n}] {line}")
        sys.stdout.flush()

    try:
        while any(p.poll() is None for _, p, _, _ in procs):
            drain(False)
            time.sleep(0.5)
    except KeyboardInterrupt:
        for _, p, _, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p, _, _ in procs:
            p.wait()
        drain(True)
        print("integration: interrupted; the shards' servers were cleaned up")
        print(f"integration: {totals[0]} passed, {totals[1] + 1} failed, {totals[2]} skipped")
        return 1
    drain(True)
    for n, p, out, st in procs:
        out.close()
        if "summary" not in st or p.returncode not in (0, 1):
            print(f"integration: shard [{n}] ended with status {p.returncode} and no summary")
            totals[1] += 1
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"integration: total time {time.monotonic() - t0:.0f}s in {len(procs)} processes")
    print(f"integration: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] else 0


def main():
    ap = argparse.ArgumentParser(description="run sluice's integration tests")
    ap.add_argument("-k", action="append", dest="patterns", help="only tests matching this substring or glob")
    ap.add_argument("-x", "--failfast", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("SLUICE_TEST_JOBS") or 1),
                    help="test modules run in this many processes at once (default 1, or SLUICE_TEST_JOBS)")
    ap.add_argument("--modules", help=argparse.SUPPRESS)   # a shard's modules, comma-separated
    a = ap.parse_args()

    # SIGTERM/SIGHUP: exit through atexit so servers and temp dirs are cleaned
    # up.  Forked children (multiprocessing workers) inherit this handler and
    # must die the default way instead.
    main_pid = os.getpid()
    interrupted = []

    def on_signal(signum, frame):
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        interrupted.append(signum)
        raise KeyboardInterrupt   # unittest lets this through (SystemExit would only fail one test)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    reason = harness.pg_available()
    print(f"integration: sluice binary {harness.sluice_bin()}"
          f"{'' if os.access(harness.sluice_bin(), os.X_OK) else ' (MISSING: set SLUICE_BIN)'}")
    print(f"integration: PostgreSQL {harness.PG_BIN}: {'ok' if not reason else 'skipping: ' + reason}")
    sys.stdout.flush()

    loader = unittest.TestLoader()
    if a.patterns:
        loader.testNamePatterns = [p if any(c in p for c in "*?[") else f"*{p}*" for p in a.patterns]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    if a.modules is not None:
        keep = set(a.modules.split(","))
        suite = unittest.TestSuite(t for t in iter_tests(suite) if type(t).__module__ in keep)
    elif a.jobs > 1:
        modules = {type(t).__module__ for t in iter_tests(suite) if hasattr(t, "_testMethodName")}
        if len(modules) > 1:
            return run_sharded(a, modules)
    sizes = {}
    for t in iter_tests(suite):
        if hasattr(t, "_testMethodName"):
            cls = f"{type(t).__module__}.{type(t).__qualname__}"
            sizes[cls] = sizes.get(cls, 0) + 1
    result = Result(sizes, sys.stdout)
    result.failfast = a.failfast
    t0 = time.monotonic()
    try:
        suite.run(result)
    except KeyboardInterrupt:
        sig = interrupted[0] if interrupted else signal.SIGINT
        result.n_failed += 1
        result.reports.append(("INTERRUPTED", f"signal {sig}", "the run was stopped; servers cleaned up\n"))
    finally:
        harness.close_all()
    for kind, name, tb in result.reports:
        print("=" * 70)
        print(f"{kind}: {name}")
        print("-" * 70)
        print(tb)
    # loader errors (a test module that does not import) show as failed tests
    print(f"integration: total time {time.monotonic() - t0:.0f}s")
    print(f"integration: {result.n_passed} passed, {result.n_failed} failed, {result.n_skipped} skipped")
    return 1 if result.n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
