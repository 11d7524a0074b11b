"""
bench/fair.py: what the benches share so that sluice and its baseline are
measured alike.

Both sides are whole processes started by measured(): wall time from spawn
to exit on one monotonic clock (polled every 2 ms), CPU and voluntary context
switches from the rusage wait4 returns for the reaped child (which covers all
its threads and the children it reaped itself: a `sh -c 'a & b & wait'` is
measured with both).  Runs alternate A B A B ... for --pairs pairs, and every
figure is printed as min/median/max over them.
"""

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

from harness import SluiceProc, sluice_bin  # noqa: E402


def finish(p, timeout):
    """Waits for SluiceProc p (started with sample_hwm, so polled every
    2 ms) and returns its harness.Result, with .nvcsw (voluntary context
    switches of every thread, from wait4's rusage) added."""
    try:
        r = p.wait_result(timeout)
    finally:
        if p.returncode is None:
            p.kill9()
    r.nvcsw = p.rusage.ru_nvcsw if p.rusage else 0
    return r


def measured(argv, workdir, name, timeout, stdout_path=None, env=None):
    """Runs argv to completion as a measured process; returns finish()'s Result."""
    fo = open(stdout_path or os.path.join(workdir, f"{name}.out"), "wb")
    fe = open(os.path.join(workdir, f"{name}.err"), "wb")
    e = dict(os.environ)
    e.update(env or {})
    p = SluiceProc(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=workdir, env=e,
                   start_new_session=True)
    p._setup(fo.name, fe.name, argv, (fo, fe), sample_hwm=True)
    return finish(p, timeout)


WRAP_HELP = ('run sluice under this command line, e.g. "valgrind --tool=callgrind '
             '--callgrind-out-file=/tmp/cg.%%p" or "perf record -g -o /tmp/perf.data"')


def add_run_args(ap):
    """The arguments every MariaDB bench takes: --sluice-bin, --pairs,
    --timeout, --wrap."""
    ap.add_argument("--sluice-bin", default=sluice_bin())
    ap.add_argument("--pairs", type=int, default=3, help="runs of each side, alternated (default 3)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--wrap", default="", metavar="CMD", help=WRAP_HELP)


def mariadb_tool(bench, tool):
    """The path of the MariaDB client program tool, or None once it has
    printed why bench is skipped (no MariaDB server, or no tool)."""
    import harness_mysql
    reason = harness_mysql.mariadb_available()
    path = shutil.which(tool)
    if reason or not path:
        print(f"{bench}: skipped: {reason or f'{tool} not found (apt-get install mariadb-client)'}")
        return None
    return path


def wrapped(binary, wrap, workdir):
    """binary itself without wrap, else a script in workdir that runs it
    under the command line wrap (e.g. "valgrind --tool=callgrind" or
    "perf record -g -o FILE"), for profiling a bench's sluice runs."""
    if not wrap:
        return binary
    path = os.path.join(workdir, "wrapped-sluice")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {wrap} {shlex.quote(binary)} "$@"\n')
    os.chmod(path, 0o755)
    return path


def mmm(xs, fmt="{:.2f}"):
    """min/median/max of xs, each formatted with fmt."""
    return "/".join(fmt.format(v) for v in (min(xs), statistics.median(xs), max(xs)))


def report(label, results, units, unit="change", rss=True):
    """One line for one side: wall seconds, units per second, CPU-us per
    unit, voluntary context switches per 1,000 units, peak RSS (sampled
    VmHWM of the process itself; without rss, when it is a shell around the
    real clients, not printed); each min/median/max over results."""
    walls = [r.wall_s for r in results]
    hwm = f"peak RSS {mmm([r.hwm_kb / 1024 for r in results], '{:.0f}')} MiB" if rss else "peak RSS not sampled"
    print(f"{label:16} wall {mmm(walls)} s  {mmm([units / w for w in walls], '{:.0f}')} {unit}s/s  "
          f"CPU {mmm([r.cpu_s / units * 1e6 for r in results])} us/{unit}  "
          f"vol. ctx switches {mmm([r.nvcsw / units * 1000 for r in results], '{:.1f}')} per 1,000 {unit}s  "
          f"{hwm}   (min/median/max of {len(results)})")


def ratio(label, a, b):
    """The wall-time ratio a/b, min/median/max over the pairs (a[i] with b[i])."""
    print(f"ratio {label} (wall time, pair by pair): {mmm([x.wall_s / y.wall_s for x, y in zip(a, b)])}")


def pg_bench_args(name, doc, changes, extra=()):
    """The arguments of a bench that drains a PostgreSQL backlog (--changes,
    default changes; --batch, --sluice-bin, --timeout, --pairs; extra: more
    (flag, kwargs) pairs), parsed.  Returns (args, None), or (None, exit
    code) after saying why the bench cannot run."""
    import harness
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=changes)
    ap.add_argument("--batch", type=int, default=5000, help="rows per transaction (default 5000)")
    for flag, kw in extra:
        ap.add_argument(flag, **kw)
    ap.add_argument("--sluice-bin", default=sluice_bin())
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--pairs", type=int, default=3, help="runs of each side, alternated (default 3)")
    a = ap.parse_args()
    reason = harness.pg_available()
    if reason:
        print(f"{name}: skipped: {reason}")
        return None, 0
    if not os.access(a.sluice_bin, os.X_OK):
        print(f"{name}: no sluice binary at {a.sluice_bin} (set SLUICE_BIN)", file=sys.stderr)
        return None, 2
    return a, None
