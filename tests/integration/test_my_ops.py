"""
tests/integration/test_my_ops.py: the operations layer against a real
MariaDB, the binlog side of test_pg_ops.py:

  - /metrics counters equal the workload exactly (changes per table and op,
    backfill rows, changes of tables the stream does not select), and
    `sluice status --json` has the same counts;
  - the sink stalled: the lag alerts reach the webhook within 15 s (the
    latency is printed), /healthz 503, then recovery; a running stream is
    never `slot_inactive` (a binlog source has no slot to attach to);
  - `sluice status --json` of a MariaDB stream: the `binlog` object checked
    against the server (SHOW MASTER STATUS, SHOW BINARY LOGS, the expiry
    variable, the binlog files' own times);
  - the time-to-purge alert: the stream's durable position left in an older
    binlog file with binlog_expire_logs_seconds = 3600: `log_purge_soon`
    fires in `sluice status` and in a running agent's /metrics when
    log_purge_warn_seconds is above the time left, and not when below;
  - freshness measured end to end with the server's binlog heartbeats: an
    idle stream stays fresh (no alert), a stuck pipeline turns stale and
    the freshness alert fires, then resolves.
"""

import json
import os
import signal
import time

from harness import checkpoint, sluice_test_bin, wait_until
from harness_mysql import MyTestCase
from opsutil import (StalledSinkCase, assert_changes_metrics, assert_changes_output, metric, metrics, metrics_port,
                     scrape)
from workload import change_counts, counted_transactions, run_counted


def wait_streaming(p, timeout=60):
    wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), timeout, "streaming")
    assert p.alive(), p.stderr_text()


def durable_file_pos(s):
    """(binlog file, offset) of the checkpoint's durable position."""
    ck = checkpoint(s)
    if not ck or not ck.get("durable"):
        return None
    d = ck["durable"]
    text = d if isinstance(d, str) else d.get("text") or d.get("position")
    f, rest = text.split(":", 1)
    return f, int(rest.split(" ")[0])


def binlog_sizes(my):
    return [(r[0], int(r[1])) for r in my.sql("SHOW BINARY LOGS")]


def lag_from_server(my, file, offset):
    """The bytes of binlog after (file, offset), from SHOW BINARY LOGS."""
    logs = binlog_sizes(my)
    names = [n for n, _ in logs]
    i = names.index(file)
    return logs[i][1] - offset + sum(sz for _, sz in logs[i + 1:])


def wait_durable_head(my, s, timeout=60):
    """Until the checkpoint's durable position is the server's head."""
    head = my.master_status()
    wait_until(lambda: durable_file_pos(s) == head, timeout, f"the checkpoint to reach {head}", interval=0.2)


class MyOpsTestCase(MyTestCase):

    def sluice(self, **kw):
        """A stream with a server_id of its own."""
        MyOpsTestCase._ids = getattr(MyOpsTestCase, "_ids", 0) + 1
        extra = {k: dict(v) for k, v in kw.pop("extra", {}).items()}
        extra.setdefault("source", {}).setdefault("server_id", str(self.my.server_id_for_sluice + MyOpsTestCase._ids))
        return super().sluice(extra=extra, **kw)


class MyMetricsTest(MyOpsTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def test_counters_match_the_workload(self):
        my = self.my
        my.execute("CREATE DATABASE ops")
        for t in ("mt_a", "mt_b", "mt_other"):
            my.execute(f"CREATE TABLE ops.{t} (id int PRIMARY KEY, v varchar(20))")
        BF_A, BF_B = 30, 20
        my.execute(f"INSERT INTO ops.mt_a SELECT seq, 'a' FROM mysql.seq_1_to_{BF_A}")
        my.execute(f"INSERT INTO ops.mt_b SELECT seq, 'b' FROM mysql.seq_1_to_{BF_B}")
        port = metrics_port()
        s = self.sluice(stream="mt", tables="ops.mt_a, ops.mt_b", max_file_seconds=1,
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"},
                               "stream": {"slot_inactive_warn_seconds": "3"}})
        p = s.start("run")
        wait_streaming(p)

        # the workload (a transaction of it writes to mt_other, which the
        # stream does not select), and what it must count
        txs = counted_transactions("mt_a", "mt_b", "mt_other")
        run_counted(my, "mariadb", "ops", txs)
        counts = change_counts(txs)
        want = {f"ops.{t}": counts[t] for t in ("mt_a", "mt_b")}
        skipped = sum(counts["mt_other"].values())
        self.assertEqual((want["ops.mt_a"], want["ops.mt_b"], skipped),
                         (dict(insert=8, update=6, update_delete=1, delete=4, truncate=0),
                          dict(insert=3, update=2, update_delete=0, delete=1, truncate=1), 7))
        wait_durable_head(my, s)

        m = metrics(port)
        assert_changes_metrics(self, m, "mt", want)
        self.assertEqual(metric(m, "sluice_backfill_rows_total", stream="mt", table="ops.mt_a"), BF_A)
        self.assertEqual(metric(m, "sluice_backfill_rows_total", stream="mt", table="ops.mt_b"), BF_B)
        self.assertEqual(metric(m, "sluice_backfill_progress_ratio", stream="mt", table="ops.mt_a"), 1)
        wait_until(lambda: metric(metrics(port), "sluice_skipped_changes_total", stream="mt") == skipped, 10,
                   "the skipped changes to be counted")
        self.assertEqual(metric(m, "sluice_stream_state", stream="mt", state="streaming"), 1)
        self.assertEqual(metric(m, "sluice_stream_up", stream="mt"), 1)
        self.assertEqual(metric(m, "sluice_reconnects_total", stream="mt"), 0)

        # the probe's figures are the server's: nothing behind, the binlog file available
        wait_until(lambda: metric(metrics(port), "sluice_source_lag_bytes", stream="mt") == 0, 15, "a probe")
        m = metrics(port)
        self.assertEqual(metric(m, "sluice_slot_wal_status", stream="mt", wal_status="available"), 1)
        head_file = my.master_status()[0]
        self.assertEqual(metric(m, "sluice_slot_retained_wal_bytes", stream="mt"),
                         dict(binlog_sizes(my))[head_file])

        # the output holds exactly the same changes
        assert_changes_output(self, self.read(s), want)

        # a running binlog stream is not "inactive" (slot_inactive_warn_seconds = 3, probes every second)
        time.sleep(6)
        m = metrics(port)
        self.assertEqual(metric(m, "sluice_alert_firing", stream="mt", alert="slot_inactive"), 0)
        self.assertEqual(metric(m, "sluice_slot_active", stream="mt"), 1)
        self.assertEqual(scrape(port, "/healthz"), (200, "stream mt: streaming\n"))
        r = s.run("status", "--json", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        st = json.loads(r.stdout)["streams"][0]
        self.assertEqual(st["state"], "streaming")
        self.assertEqual(st["agent"]["pid"], p.pid)
        self.assertEqual(st["alerts"], [])
        self.assertEqual(st["tables"]["ops.mt_a"]["changes"]["insert"], 8)
        self.assertEqual(st["tables"]["ops.mt_b"]["changes"]["truncate"], 1)
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'stream "mt": skipped {skipped} changes of tables that the stream does not select', r.stderr)


class MyStalledSinkTest(StalledSinkCase, MyOpsTestCase):
    """The sink stops (the test sink's flush waits while a file exists): the
    binlog lag grows, lag_warning and lag_critical reach the webhook within
    15 s, /healthz turns 503 and recovers with the sink."""
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def test_lag_alert_while_sink_is_down(self):
        my = self.my
        my.execute("CREATE DATABASE st")
        my.execute("CREATE TABLE st.st_t (id int AUTO_INCREMENT PRIMARY KEY, pad text)")
        s, p, block = self.start_stalled("st.st_t", wait_streaming)
        my.execute("INSERT INTO st.st_t (pad) VALUES ('first')")
        wait_durable_head(my, s)
        self.assertEqual(scrape(self.port, "/healthz")[0], 200)

        open(block, "w").close()          # the destination goes down
        durable = durable_file_pos(s)
        my.execute("INSERT INTO st.st_t (pad) VALUES ('x')")

        def write():
            my.execute("INSERT INTO st.st_t (pad) SELECT repeat('y', 1000) FROM mysql.seq_1_to_1000")
            self.assertEqual(durable_file_pos(s), durable, "the checkpoint moved while the sink was down")
        crossed = self.write_until_critical(write, lambda: lag_from_server(my, *durable))
        m, st = self.assert_lag_alerts(s, crossed)
        self.assertLessEqual(metric(m, "sluice_source_lag_bytes", stream="stall"), lag_from_server(my, *durable))
        self.assertEqual(st["slot_status"]["lag_bytes"], lag_from_server(my, *durable))
        self.assert_recovers(p, block)


class MyBinlogStatusTest(MyOpsTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass
    my_settings = {"binlog_expire_logs_seconds": "3600"}

    def status(self, s, rc=None):
        r = s.run("status", "--json", timeout=60)
        if rc is not None:
            self.assertEqual(r.rc, rc, r.describe())
        return r, json.loads(r.stdout)["streams"][0]

    def test_binlog_object_and_time_to_purge(self):
        my = self.my
        my.execute("CREATE DATABASE bl")
        my.execute("CREATE TABLE bl.t (id int PRIMARY KEY, v varchar(20))")
        my.execute("INSERT INTO bl.t VALUES (1, 'a')")
        s = self.sluice(stream="bl", tables="bl.t", binary=sluice_test_bin(),
                        extra={"stream": {"log_purge_warn_seconds": "4000"}})
        self.catch_up(s)
        # the durable position is the head: the current file is never purged
        r, st = self.status(s, rc=6)   # 6: no agent runs the stream
        b = st["binlog"]
        head_file, head_pos = my.master_status()
        logs = binlog_sizes(my)
        self.assertEqual(b["head"].split(" ")[0], f"{head_file}:{head_pos}")
        self.assertEqual(b["files"], len(logs))
        self.assertEqual(b["bytes"], sum(sz for _, sz in logs))
        self.assertEqual(b["expire_seconds"], int(my.one("SELECT @@binlog_expire_logs_seconds")))
        self.assertEqual(b["expire_seconds"], 3600)
        self.assertEqual(b["needed_file"], head_file)
        self.assertEqual(b["needed_file_age_seconds"], 0)
        self.assertIsNone(b["time_to_purge_seconds"])
        self.assertEqual(st["slot_status"]["state"], "kept")
        self.assertEqual(st["slot_status"]["mysql"]["needed_file_status"], "available")
        self.assertEqual(st["slot_status"]["mysql"]["needed_file"], head_file)
        self.assertEqual(st["slot_status"]["lag_bytes"], 0)

        # a change made durable, sluice stopped; then the server rotates and writes on
        t_before = time.time()
        my.execute("INSERT INTO bl.t VALUES (2, 'b')")
        t_after = time.time()
        self.catch_up(s)
        needed = my.master_status()[0]
        self.assertEqual(durable_file_pos(s), my.master_status())
        time.sleep(2.5)
        my.execute("FLUSH BINARY LOGS")
        closed = os.stat(os.path.join(my.tmpdir, "binlog", needed)).st_mtime
        my.execute("INSERT INTO bl.t VALUES (3, 'c')")
        my.execute("FLUSH BINARY LOGS")
        my.execute("INSERT INTO bl.t VALUES (4, 'd')")
        time.sleep(1.5)

        r, st = self.status(s, rc=6)   # an alert fires, and no agent runs: 6 wins over 1
        now = time.time()
        b = st["binlog"]
        logs = binlog_sizes(my)
        self.assertEqual(b["needed_file"], needed)
        self.assertNotEqual(b["head"].split(":")[0], needed)
        self.assertEqual(b["files"], len(logs))
        self.assertEqual(b["bytes"], sum(sz for _, sz in logs))
        age, left = b["needed_file_age_seconds"], b["time_to_purge_seconds"]
        # on the safe side: at least the file's real age (it stopped growing
        # when it was closed), at most the time since the last durable commit
        self.assertGreaterEqual(age, int(now - closed) - 1)
        self.assertLessEqual(age, int(now - t_before) + 1)
        self.assertEqual(left, 3600 - age)
        self.assertLessEqual(left, 3600 - int(now - closed) + 1)
        self.assertEqual(st["slot_status"]["lag_bytes"], lag_from_server(my, *durable_file_pos(s)))
        alerts = {a["alert"]: a for a in st["alerts"]}
        self.assertIn("log_purge_soon", alerts, st["alerts"])
        self.assertEqual(alerts["log_purge_soon"]["source"], "status")
        self.assertIn("(log_purge_warn_seconds 4000)", alerts["log_purge_soon"]["message"])
        print(f"\n    needed binlog closed {now - closed:.1f} s ago, last durable commit {now - t_after:.1f} s ago: "
              f"age {age} s, time to purge {left} s of 3600", end=" ")

        # the threshold below the time left: no alert
        s.extra["stream"]["log_purge_warn_seconds"] = "3000"
        s.write_config()
        r, st = self.status(s, rc=6)   # no agent runs
        self.assertEqual(st["alerts"], [])

        # a running agent whose sink cannot make the new changes durable: the
        # position stays in the old file, and the probe sees the same
        port = metrics_port()
        s.extra["stream"]["log_purge_warn_seconds"] = "4000"
        s.extra["agent"] = {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"}
        s.extra["destination"] = {"type": "slow_avro_dir", "flush_block_file": os.path.join(s.workdir, "down")}
        s.write_config()
        open(os.path.join(s.workdir, "down"), "w").close()
        p = s.start("run")
        wait_until(lambda: metric(metrics(port), "sluice_alert_firing", stream="bl", alert="log_purge_soon") == 1,
                   20, "log_purge_soon in /metrics")
        m = metrics(port)
        ttp = metric(m, "sluice_log_time_to_purge_seconds", stream="bl")
        now = time.time()
        self.assertLessEqual(ttp, 3600 - int(now - closed) + 1)
        self.assertGreaterEqual(ttp, 3600 - int(now - t_before) - 1)
        self.assertEqual(durable_file_pos(s)[0], needed)
        p.kill9()
        s.extra["stream"]["log_purge_warn_seconds"] = "3000"
        s.write_config()
        p = s.start("run")
        wait_until(lambda: metric(metrics(port), "sluice_log_time_to_purge_seconds", stream="bl") is not None, 20,
                   "a probe")
        time.sleep(3)
        m = metrics(port)
        self.assertEqual(metric(m, "sluice_alert_firing", stream="bl", alert="log_purge_soon"), 0)
        self.assertGreater(metric(m, "sluice_log_time_to_purge_seconds", stream="bl"), 3000)
        os.unlink(os.path.join(s.workdir, "down"))
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)
        # caught up: the needed file is the head again (no agent runs: 6)
        r, st = self.status(s, rc=6)
        self.assertEqual(st["binlog"]["needed_file"], my.master_status()[0])
        self.assertIsNone(st["binlog"]["time_to_purge_seconds"])


class MyHeartbeatIntervalTest(MyOpsTestCase):
    """heartbeat_interval on a binlog stream asks the server for its
    heartbeat events that often (the default period with the default
    receive_timeout is 5 s), and sluice writes nothing into the server."""

    def test_heartbeat_interval_sets_the_period(self):
        my = self.my
        my.execute("CREATE DATABASE hb")
        my.execute("CREATE TABLE hb.t (id int PRIMARY KEY)")
        port = metrics_port()
        s = self.sluice(stream="hb", tables="hb.t",
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"},
                               "stream": {"heartbeat_interval": "1"}})
        p = s.start("run")
        wait_streaming(p)
        pos0 = my.master_status()
        n0 = metric(metrics(port), "sluice_heartbeats_received_total", stream="hb") or 0
        time.sleep(10)
        m = metrics(port)
        got = metric(m, "sluice_heartbeats_received_total", stream="hb") - n0
        # one a second while idle (5 s apart without heartbeat_interval: 2 at most)
        self.assertGreaterEqual(got, 7, p.stderr_text()[-3000:])
        self.assertLessEqual(got, 12)
        self.assertEqual(metric(m, "sluice_heartbeats_sent_total", stream="hb"), 0)
        # nothing was written into the server's binlog
        self.assertEqual(my.master_status(), pos0)
        r = s.run("status", "--json", timeout=60)
        hb = json.loads(r.stdout)["streams"][0]["agent"]["heartbeats"]
        self.assertEqual((hb["from"], hb["interval_seconds"], hb["sent"]), ("server", 1, 0), hb)
        print(f"\n    {got:.0f} heartbeats in 10 s idle with heartbeat_interval = 1", end=" ")


class MyFreshnessTest(MyOpsTestCase):
    """The server's binlog heartbeats (every 2 s of silence with
    receive_timeout = 5) travel through the pipeline like a change: an idle
    stream stays fresh, a stuck one does not."""

    def test_idle_is_fresh_stuck_is_not(self):
        my = self.my
        my.execute("CREATE DATABASE fr")
        my.execute("CREATE TABLE fr.t (id int PRIMARY KEY, v varchar(20))")
        port = metrics_port()
        s = self.sluice(stream="fr", tables="fr.t", binary=sluice_test_bin(), max_file_seconds=1,  # fr.other: not selected
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"},
                               "source": {"receive_timeout": "5"},
                               "stream": {"freshness_warn_seconds": "10"},
                               "destination": {"type": "slow_avro_dir"}})
        block = os.path.join(s.workdir, "sink-down")
        s.extra["destination"]["flush_block_file"] = block
        s.write_config()
        p = s.start("run")
        wait_streaming(p)
        my.execute("INSERT INTO fr.t VALUES (1, 'a')")
        # idle for 25 s: heartbeats keep it fresh
        worst = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 25:
            m = metrics(port)
            f = metric(m, "sluice_freshness_seconds", stream="fr")
            if f is not None and time.monotonic() - t0 > 5:
                worst = max(worst, f)
            self.assertEqual(metric(m, "sluice_alert_firing", stream="fr", alert="freshness"), 0, p.stderr_text()[-3000:])
            time.sleep(1)
        m = metrics(port)
        self.assertGreater(metric(m, "sluice_heartbeats_received_total", stream="fr"), 5)
        self.assertEqual(metric(m, "sluice_heartbeats_sent_total", stream="fr"), 0)
        print(f"\n    idle binlog stream: freshness at most {worst:.1f} s over 20 s", end=" ")
        self.assertLess(worst, 10)
        r = s.run("status", "--json", timeout=60)
        hb = json.loads(r.stdout)["streams"][0]["agent"]["heartbeats"]
        self.assertTrue(hb["on"], hb)
        self.assertEqual(hb["from"], "server")
        self.assertGreater(hb["received"], 5)
        r = s.run("status", timeout=60)
        self.assertRegex(r.stdout, r"\n  heartbeats: the server's own, \d+ came back\n")

        # busy elsewhere: a table the stream does not select is written every
        # 0.2 s, so the server sends no heartbeat event; the commits of that
        # table keep the stream fresh
        my.execute("CREATE TABLE fr.other (id int AUTO_INCREMENT PRIMARY KEY, v varchar(20))")
        worst = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15:
            my.execute("INSERT INTO fr.other (v) VALUES ('busy')")
            m = metrics(port)
            f = metric(m, "sluice_freshness_seconds", stream="fr")
            worst = max(worst, f)
            self.assertEqual(metric(m, "sluice_alert_firing", stream="fr", alert="freshness"), 0)
            time.sleep(0.2)
        print(f"busy server, quiet table: freshness at most {worst:.1f} s over 15 s", end=" ")
        self.assertLess(worst, 10)

        # stuck: a change the sink cannot make durable; the source is idle again
        open(block, "w").close()
        my.execute("INSERT INTO fr.t VALUES (2, 'b')")
        t_stuck = time.monotonic()
        got = wait_until(lambda: metric(metrics(port), "sluice_alert_firing", stream="fr", alert="freshness") == 1,
                         40, "the freshness alert")
        took = time.monotonic() - t_stuck
        print(f"freshness alert {took:.1f} s after the pipeline stuck (freshness_warn_seconds 10)", end=" ")
        self.assertTrue(got)
        self.assertGreaterEqual(metric(metrics(port), "sluice_freshness_seconds", stream="fr"), 10)
        self.assertIn('stream "fr": alert freshness (warning) fires: the last durable change or heartbeat is',
                      p.stderr_text())
        os.unlink(block)
        wait_until(lambda: metric(metrics(port), "sluice_alert_firing", stream="fr", alert="freshness") == 0, 60,
                   "freshness to resolve")
        self.assertLess(metric(metrics(port), "sluice_freshness_seconds", stream="fr"), 10)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)


if __name__ == "__main__":
    import unittest
    unittest.main()
