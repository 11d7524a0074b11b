"""
tests/integration/test_pg_ops.py: the operations layer against a real
PostgreSQL: /metrics counters equal the workload exactly, alerts fire from
the probe within 15 s while the sink is stalled (webhook received, /healthz
503, then recovery), a slot driven to `unreserved` then `lost`, heartbeats
that keep an idle slot from holding WAL, and `sluice status` (states, last
error, retries, exit codes, --json, --stream).

The figures measured (alert latency, retained WAL) are printed.
"""

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import threading
import time
import unittest

import harness  # noqa: E402
from harness import PG_BIN, PgTestCase, int_to_lsn, lsn_to_int, records_for, sluice_test_bin, wait_until
from opsutil import (StalledSinkCase, WebhookReceiver, assert_changes_metrics, assert_changes_output, metric, metrics,
                     metrics_port, scrape)
from workload import change_counts, counted_transactions, run_counted


def wal_lsn(pg):
    return lsn_to_int(pg.one("SELECT pg_current_wal_lsn()::text"))


def slot_lag(pg, slot):
    return pg.one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
                  "FROM pg_replication_slots WHERE slot_name = %s", (slot,))


def wait_confirmed(pg, slot, target, timeout=60):
    wait_until(lambda: (pg.slot_info(slot) or {}).get("confirmed_flush_lsn", 0) >= target, timeout,
               f"slot {slot} to confirm {target:X}", interval=0.2)


def wait_streaming(p, timeout=60):
    wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), timeout, "streaming")
    assert p.alive(), p.stderr_text()


class MetricsTest(PgTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def test_counters_match_the_workload(self):
        pg = self.pg
        pg.execute("CREATE TABLE mt_a (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE mt_b (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE mt_vals (id int PRIMARY KEY, ts timestamptz, amount numeric(10,2))")
        pg.execute("CREATE TABLE mt_other (id int PRIMARY KEY, v text)")
        # a publication that carries a table the stream does not select
        pg.execute("CREATE PUBLICATION sluice_mt FOR ALL TABLES")
        BF_A, BF_B = 30, 20
        pg.execute(f"INSERT INTO mt_a SELECT g, 'a' FROM generate_series(1, {BF_A}) g")
        pg.execute(f"INSERT INTO mt_b SELECT g, 'b' FROM generate_series(1, {BF_B}) g")
        port = metrics_port()
        s = self.sluice(stream="mt", tables="public.mt_a, public.mt_b, public.mt_vals", max_file_seconds=1,
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}"}})
        p = s.start("run")
        wait_streaming(p)

        # the workload (a transaction of it writes to mt_other, which the
        # stream does not select), and what it must count
        txs = counted_transactions("mt_a", "mt_b", "mt_other")
        run_counted(pg, "pg", "public", txs)
        counts = change_counts(txs)
        want = {f"public.{t}": counts[t] for t in ("mt_a", "mt_b")}
        want["public.mt_vals"] = dict(insert=0, update=0, update_delete=0, delete=0, truncate=0)
        SKIPPED = sum(counts["mt_other"].values())
        # two timestamps past 64-bit microseconds (clamped), three NaN decimals (null)
        pg.execute("INSERT INTO mt_vals VALUES (1, '294270-01-01 00:00:00+00', 1), (2, '294271-06-01 00:00:00+00', 2)")
        pg.execute("INSERT INTO mt_vals SELECT g, now(), 'NaN' FROM generate_series(3, 5) g")
        want["public.mt_vals"]["insert"] += 5
        CLAMPS, NANS = 2, 3
        target = wal_lsn(pg)
        pg.wait_wal_flushed()
        wait_confirmed(pg, s.slot, target)

        m = metrics(port)
        assert_changes_metrics(self, m, "mt", want)
        self.assertEqual(metric(m, "sluice_backfill_rows_total", stream="mt", table="public.mt_a"), BF_A)
        self.assertEqual(metric(m, "sluice_backfill_rows_total", stream="mt", table="public.mt_b"), BF_B)
        self.assertEqual(metric(m, "sluice_backfill_rows_total", stream="mt", table="public.mt_vals"), 0)
        self.assertEqual(metric(m, "sluice_backfill_progress_ratio", stream="mt", table="public.mt_a"), 1)
        self.assertEqual(metric(m, "sluice_skipped_changes_total", stream="mt"), SKIPPED)
        self.assertEqual(metric(m, "sluice_timestamp_clamps_total", stream="mt"), CLAMPS)
        self.assertEqual(metric(m, "sluice_decimal_nan_nulls_total", stream="mt"), NANS)
        self.assertEqual(metric(m, "sluice_stream_state", stream="mt", state="streaming"), 1)
        self.assertEqual(metric(m, "sluice_stream_up", stream="mt"), 1)
        self.assertEqual(metric(m, "sluice_dead_letter_total", stream="mt"), 0)
        self.assertEqual(metric(m, "sluice_reconnects_total", stream="mt"), 0)
        self.assertEqual(metric(m, "sluice_alert_firing", stream="mt", alert="lag_warning"), 0)
        # the histogram: cumulative buckets that end in the count
        buckets = sorted((float("inf") if dict(k[1])["le"] == "+Inf" else float(dict(k[1])["le"]), v)
                         for k, v in m.items() if k[0] == "sluice_sink_flush_seconds_bucket")
        self.assertEqual(len(buckets), 12)
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))
        count = metric(m, "sluice_sink_flush_seconds_count", stream="mt")
        self.assertGreater(count, 0)
        self.assertEqual(buckets[-1][1], count)
        # the probe's figures are the server's
        slot = pg.slot_info(s.slot)
        wait_until(lambda: metric(metrics(port), "sluice_slot_active", stream="mt") == 1, 15, "a probe")
        self.assertIsNotNone(metric(metrics(port), "sluice_source_lag_bytes", stream="mt"))
        self.assertEqual(metric(metrics(port), "sluice_slot_wal_status", stream="mt", wal_status=slot["wal_status"]), 1)

        # the output holds exactly the same changes (mt_vals aside: Python's
        # datetime cannot read the clamped year 294247)
        shutil.rmtree(os.path.join(s.out, "mt", "public_mt_vals"))
        del want["public.mt_vals"]
        assert_changes_output(self, self.read(s), want)

        status, body = scrape(port, "/healthz")
        self.assertEqual((status, body), (200, "stream mt: streaming\n"))
        self.assertEqual(scrape(port, "/nothing")[0], 404)
        r = s.run("status", "--json", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        st = json.loads(r.stdout)["streams"][0]
        self.assertEqual(st["state"], "streaming")
        self.assertEqual(st["agent"]["pid"], p.pid)
        self.assertEqual(st["tables"]["public.mt_a"]["changes"]["insert"], want["public.mt_a"]["insert"])
        self.assertEqual(st["tables"]["public.mt_b"]["changes"]["truncate"], 1)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)
        # after the agent: stopped, and the endpoint is gone
        r = s.run("status", "--json", timeout=60)
        self.assertEqual(json.loads(r.stdout)["streams"][0]["state"], "stopped")


class StalledSinkTest(StalledSinkCase, PgTestCase):
    """The sink stops (the test sink's flush waits while a file exists): lag
    grows, the probe fires lag_warning and lag_critical within 15 s, the
    webhook receives them, /healthz turns 503 and recovers with the sink."""
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def test_lag_alert_while_sink_is_down(self):
        pg = self.pg
        pg.execute("CREATE TABLE st_t (id serial PRIMARY KEY, pad text)")
        s, p, block = self.start_stalled("public.st_t", wait_streaming)
        self.assertEqual(scrape(self.port, "/healthz")[0], 200)

        open(block, "w").close()          # the destination goes down
        pg.execute("INSERT INTO st_t (pad) VALUES ('x')")
        # the writer is now stuck in a flush (the replication loop only
        # acknowledges); write until the lag crosses each threshold
        crossed = self.write_until_critical(
            lambda: pg.execute("INSERT INTO st_t (pad) SELECT repeat('y', 1000) FROM generate_series(1, 1000)"),
            lambda: slot_lag(pg, s.slot))
        st = self.assert_lag_alerts(s, crossed)[1]
        # the receiver has the second alert before sluice has its answer and
        # counts it: wait for the count
        wait_until(lambda: (metric(metrics(self.port), "sluice_webhook_sent_total") or 0) >= 2, 15,
                   "sluice_webhook_sent_total to count both alerts")
        self.assertIn("lag_critical", [h["alert"] for h in st["alert_history"]])
        self.assertIn('stream "stall": alert lag_critical (critical) fires', p.stderr_text())
        self.assert_recovers(p, block)


class SlotAtRiskTest(PgTestCase):
    """1 MB WAL segments and max_slot_wal_keep_size = 3MB: with the sink
    down the slot holds WAL until it is `unreserved` (the alert fires), and a
    checkpoint makes it `lost` (the agent exits 4 with the way back)."""
    pg_initdb_args = ("--wal-segsize=1",)
    pg_settings = {"max_slot_wal_keep_size": "3MB", "min_wal_size": "2MB", "max_wal_size": "256MB",
                   "checkpoint_timeout": "1h"}

    def test_unreserved_then_lost(self):
        pg = self.pg
        pg.execute("CREATE TABLE ur_t (id serial PRIMARY KEY, pad text)")
        pg.execute("CREATE TABLE ur_pad (pad text)")
        hook = WebhookReceiver()
        self.addCleanup(hook.close)
        port = metrics_port()
        s = self.sluice(stream="risk", tables="public.ur_t", max_file_seconds=1, binary=sluice_test_bin(),
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "alert_webhook": hook.url},
                               "destination": {"type": "slow_avro_dir"}})
        block = os.path.join(s.workdir, "sink-down")
        s.extra["destination"]["flush_block_file"] = block
        s.write_config()
        p = s.start("run")
        wait_streaming(p)
        pg.execute("CHECKPOINT")
        open(block, "w").close()
        pg.execute("INSERT INTO ur_t (pad) VALUES ('x')")   # the writer blocks in this flush
        time.sleep(2)
        seen = None
        for _ in range(40):
            pg.execute("INSERT INTO ur_pad SELECT repeat(md5(g::text), 16) FROM generate_series(1, 2000) g")
            pg.execute("SELECT pg_switch_wal()")
            if pg.slot_info(s.slot)["wal_status"] == "unreserved":
                seen = time.monotonic()
                break
        self.assertIsNotNone(seen, f"the slot did not become unreserved: {pg.slot_info(s.slot)}")
        got = wait_until(lambda: hook.find("wal_unreserved", "firing", "risk"), 30, "the wal_unreserved webhook")
        print(f"\n    wal_unreserved: webhook {got[0] - seen:.1f} s after the slot was seen unreserved", end=" ")
        self.assertLessEqual(got[0] - seen, 15.0)
        self.assertEqual(metric(metrics(port), "sluice_alert_firing", stream="risk", alert="wal_unreserved"), 1)
        self.assertEqual(scrape(port, "/healthz")[0], 503)

        # a checkpoint removes the WAL: lost, the walsender is ended
        pg.execute("CHECKPOINT")
        wait_until(lambda: pg.slot_info(s.slot)["wal_status"] == "lost", 30, "the slot to be lost")
        wait_until(lambda: hook.find("slot_lost", "firing", "risk"), 30, "the slot_lost webhook")
        os.unlink(block)                  # let the stuck flush end, so the stream can stop
        r = p.wait_result(120)
        self.assertEqual(r.rc, 4, r.describe())
        self.assertIn('replication slot "sluice_risk" is lost (wal_status = lost)', r.stderr)
        self.assertIn(f"To recover, run `sluice backfill -c {s.config_path} --stream risk`", r.stderr)
        # status after the agent: failed, with that error
        r2 = s.run("status", "--json", timeout=60)
        st = json.loads(r2.stdout)["streams"][0]
        self.assertEqual(st["state"], "failed")
        self.assertIn("is lost", st["last_error"]["message"])
        self.assertEqual(r2.rc, 7, r2.describe())   # 7: a stream failed (and an alert fires: 1 < 7)
        self.assertIn("slot_lost", [a["alert"] for a in st["alerts"]])


class HeartbeatTest(PgTestCase):
    """A stream whose tables are quiet while the server writes a lot of WAL
    elsewhere: the slot's retained WAL returns under 64 MB, with heartbeats
    off and on; with heartbeats on, they come back through the stream and
    keep its freshness low.  SLUICE_HEARTBEAT_WAL_MB sets the amount of WAL
    (default 1024: 1 GB, a few seconds here with fsync off).  The WAL
    written between two status updates (10 s) is held until the next one,
    so the peak while writing is reported, and the bound is checked once the
    write is over: the slot must let go of the WAL, not hold it."""
    pg_settings = {"max_wal_size": "4GB", "checkpoint_timeout": "30s"}
    LIMIT = 64 << 20

    def run_quiet(self, name, heartbeat):
        pg = self.pg
        mb = int(os.environ.get("SLUICE_HEARTBEAT_WAL_MB", "1024"))
        pg.execute(f"CREATE TABLE hb_pub_{name} (id int PRIMARY KEY)")
        pg.execute(f"CREATE TABLE hb_other_{name} (id int, pad text)")
        port = metrics_port()
        s = self.sluice(stream=f"hb{name}", tables=f"public.hb_pub_{name}",
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"},
                               "stream": {"heartbeat_interval": str(heartbeat), "freshness_warn_seconds": "30"}})
        p = s.start("run")
        wait_streaming(p)
        peak = [0]
        stop = threading.Event()
        conn = pg.connect()

        def sample():
            with conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
                                "FROM pg_replication_slots WHERE slot_name = %s", (s.slot,))
                    peak[0] = max(peak[0], cur.fetchone()[0] or 0)
                    stop.wait(0.5)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        start = wal_lsn(pg)
        t0 = time.monotonic()
        # 1 MB of WAL per 1000 rows of 1 kB (with full_page_writes off)
        while wal_lsn(pg) - start < mb << 20:
            pg.execute(f"INSERT INTO hb_other_{name} SELECT g, repeat('x', 1000) FROM generate_series(1, 20000) g")
        wrote = wal_lsn(pg) - start
        took = time.monotonic() - t0
        pg.execute("CHECKPOINT")

        def retained():
            return pg.one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
                          "FROM pg_replication_slots WHERE slot_name = %s", (s.slot,))
        wait_until(lambda: retained() < self.LIMIT, 90, f"retained WAL under 64 MB (now {retained()})", interval=1)
        final = retained()
        stop.set()
        th.join()
        conn.close()
        print(f"\n    heartbeats {'every %d s' % heartbeat if heartbeat else 'off'}: wrote {wrote >> 20} MB of WAL "
              f"to an unpublished table in {took:.0f} s; retained WAL peak {peak[0] / 2**20:.1f} MB while writing, "
              f"{final / 2**20:.2f} MB after", end=" ")
        self.assertLess(final, self.LIMIT)
        m = metrics(port)
        run = json.load(open(os.path.join(s.state_dir, f"hb{name}.run.json")))
        self.assertNotIn("freshness", [h["alert"] for h in run["alert_history"]], run["alert_history"])
        self.assertEqual(metric(m, "sluice_alert_firing", stream=f"hb{name}", alert="freshness"), 0)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)
        return m

    def test_heartbeats_off(self):
        m = self.run_quiet("off", 0)
        self.assertEqual(metric(m, "sluice_heartbeats_sent_total", stream="hboff"), 0)
        self.assertEqual(metric(m, "sluice_heartbeats_received_total", stream="hboff"), 0)

    def test_heartbeats_on(self):
        m = self.run_quiet("on", 1)
        sent = metric(m, "sluice_heartbeats_sent_total", stream="hbon")
        back = metric(m, "sluice_heartbeats_received_total", stream="hbon")
        self.assertGreater(sent, 0)
        self.assertGreater(back, 0)
        self.assertLessEqual(back, sent)
        # end to end: the last heartbeat made durable is recent (heartbeats every
        # second, an idle stream checkpoints at least every 10 s)
        fresh = metric(m, "sluice_freshness_seconds", stream="hbon")
        self.assertIsNotNone(fresh)
        self.assertLess(fresh, 20)

    @harness.tag("sanitizers")
    def test_heartbeats_not_permitted_are_explained(self):
        pg = self.pg
        pg.execute("CREATE TABLE hb_np (id int PRIMARY KEY)")
        pg.execute("CREATE ROLE hb_role LOGIN REPLICATION")
        pg.execute("GRANT SELECT ON hb_np TO hb_role")
        pg.execute("CREATE PUBLICATION sluice_hbnp FOR TABLE hb_np")
        pg.execute("REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC")
        self.addCleanup(lambda: pg.execute(
            "GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO PUBLIC"))
        s = self.sluice(stream="hbnp", tables="public.hb_np",
                        extra={"source": {"user": "hb_role"}, "agent": {"probe_interval": "1"},
                               "stream": {"heartbeat_interval": "1"}})
        why = ('role "hb_role" may not execute pg_logical_emit_message on source "pg": run GRANT EXECUTE ON '
               'FUNCTION pg_logical_emit_message(boolean, text, text) TO hb_role, or set heartbeat_interval = 0 '
               'for stream "hbnp"')
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream hbnp: heartbeats: the agent will run without them: " + why + "\n", r.stdout)
        p = s.start("run")
        wait_streaming(p)
        wait_until(lambda: why in p.stderr_text(), 30, "the warning")
        self.assertIn('stream "hbnp": heartbeats are off for this run: ' + why, p.stderr_text())
        wait_until(lambda: json.loads(s.run("status", "--json").stdout)["streams"][0]["agent"]["heartbeats"]["note"],
                   30, "status to show it")
        r = s.run("status", timeout=60)
        self.assertIn("  heartbeats: off: " + why + "\n", r.stdout)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)


class StatusTest(PgTestCase):

    @harness.tag("sanitizers")
    def test_stream_option_and_help(self):
        self.pg.execute("CREATE TABLE so_t (id int PRIMARY KEY)")
        s = self.sluice(stream="so", tables="public.so_t")
        r = s.run("status", "--stream", "nosuch", timeout=30)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertEqual(r.stderr, f'sluice: {s.config_path}: no stream named "nosuch"\n')
        r = s.run("status", "--help", raw=True)
        self.assertEqual(r.rc, 0)
        self.assertIn("--stream NAME", r.stdout)
        self.catch_up(s)
        r = s.run("status", "--stream", "so", "--json", timeout=30)
        self.assertEqual(r.rc, 6, r.describe())   # 6: no agent runs the stream
        st = json.loads(r.stdout)["streams"]
        self.assertEqual([x["stream"] for x in st], ["so"])
        self.assertEqual(st[0]["state"], "stopped")
        self.assertIsNone(st[0]["agent"])
        self.assertTrue(st[0]["determined"])

    def test_retrying_stream_is_not_healthy(self):
        """The source goes away under a running agent: the stream retries,
        status says so with the last error and the retry count (exit 5: the
        source cannot be probed), /healthz is 503, stream_down fires; then
        the source comes back and everything recovers."""
        pg = self.pg
        pg.execute("CREATE TABLE rt_t (id int PRIMARY KEY)")
        port = metrics_port()
        s = self.sluice(stream="rt", tables="public.rt_t",
                        extra={"agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"},
                               "stream": {"stream_down_warn_seconds": "5"}})
        p = s.start("run")
        wait_streaming(p)
        pg._conn.close()
        pg._conn = None
        pg.run_cmd([os.path.join(PG_BIN, "pg_ctl"), "-D", pg.datadir, "-m", "immediate", "-w", "stop"])
        try:
            wait_until(lambda: json.loads(s.run("status", "--json", timeout=60).stdout)["streams"][0].get("retries", 0)
                       >= 2, 90, "two retries")
            r = s.run("status", "--json", timeout=60)
            self.assertEqual(r.rc, 5, r.describe())
            st = json.loads(r.stdout)["streams"][0]
            self.assertIn(st["state"], ("retrying", "starting"))
            self.assertFalse(st["determined"])
            self.assertGreaterEqual(st["retries"], 2)
            self.assertIsInstance(st["last_error"]["at_us"], int)
            self.assertIn("connect", st["last_error"]["message"])
            r = s.run("status", timeout=60)
            self.assertRegex(r.stdout, r"  last error \(\d+ s ago, \d+ retries\): .*connect")
            self.assertRegex(r.stdout, r"  state: (retrying|starting) \(since")
            self.assertEqual(scrape(port, "/healthz")[0], 503)
            wait_until(lambda: metric(metrics(port), "sluice_alert_firing", stream="rt", alert="stream_down") == 1,
                       60, "stream_down")
            self.assertGreaterEqual(metric(metrics(port), "sluice_reconnects_total", stream="rt"), 2)
        finally:
            pg.run_cmd([os.path.join(PG_BIN, "pg_ctl"), "-D", pg.datadir, "-l", pg.logfile, "-w", "-t", "60", "start"])
        wait_until(lambda: scrape(port, "/healthz") == (200, "stream rt: streaming\n"), 90, "recovery")
        r = s.run("status", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("  state: streaming", r.stdout)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)

    @harness.tag("sanitizers")
    def test_backfill_progress(self):
        """A backfill held at its end by the test sink: status shows the rows
        read against the server's estimate, and `run` on a terminal shows a
        live progress line."""
        pg = self.pg
        ROWS = 3000
        pg.execute("CREATE TABLE bp_t (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO bp_t SELECT g, 'v' FROM generate_series(1, {ROWS}) g")
        pg.execute("ANALYZE bp_t")
        est = int(pg.one("SELECT reltuples FROM pg_class WHERE relname = 'bp_t'"))
        s = self.sluice(stream="bp", tables="public.bp_t", binary=sluice_test_bin(),
                        extra={"destination": {"type": "slow_avro_dir"}, "agent": {"probe_interval": "1"}})
        block = os.path.join(s.workdir, "sink-down")
        s.extra["destination"]["flush_block_file"] = block
        s.write_config()
        open(block, "w").close()
        # stderr on a terminal
        master, slave = pty.openpty()
        proc = subprocess.Popen([sluice_test_bin(), "run", "-c", s.config_path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=slave, cwd=s.workdir, start_new_session=True)
        os.close(slave)
        seen = b""
        try:
            deadline = time.monotonic() + 30
            want = f"backfill bp public.bp_t: {ROWS}/{est} rows (99%)".encode()
            while want not in seen and time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    try:
                        seen += os.read(master, 65536)
                    except OSError:
                        break
            self.assertIn(want, seen, seen.decode(errors="replace")[-2000:])
            # the run file is written at every probe (probe_interval = 1)
            st = wait_until(lambda: [x for x in json.loads(s.run("status", "--json", timeout=60).stdout)["streams"]
                                     if x["state"] == "backfilling"], 30, "status to say backfilling")[0]
            pr = st["tables"]["public.bp_t"]["progress"]
            self.assertEqual((pr["state"], pr["rows"], pr["estimated_rows"], pr["percent"]), ("running", ROWS, est, 99))
            r = s.run("status", timeout=60)
            self.assertRegex(r.stdout, rf"  table public.bp_t: backfill running \(running now: {ROWS}/{est} rows, "
                                       rf"99%, ETA \d+ s\)")
            os.unlink(block)
            wait_until(lambda: json.loads(s.run("status", "--json").stdout)["streams"][0]["state"] == "streaming",
                       60, "streaming")
        finally:
            if os.path.exists(block):
                os.unlink(block)
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            os.close(master)
        self.assertEqual(proc.returncode, 0)


def writer_stuck_for(port, seconds):
    """/livez says the writer has not stepped for at least seconds (it is
    held in a flush)."""
    import re
    m = re.search(r"writer stepped (\d+) s ago", scrape(port, "/livez")[1])
    return m and int(m.group(1)) >= seconds


class FiguresTest(PgTestCase):
    """sluice_queue_bytes and status's queue are sampled when read, and
    sluice_changes_total counts a change once even when a failed flush made
    the stream read it again."""

    def held_run(self, stream):
        """An agent on the test sink, streaming the new table public.<stream>_t,
        whose flushes are held from now on while the returned file exists."""
        self.pg.execute(f"CREATE TABLE {stream}_t (id int PRIMARY KEY, v text)")
        port = metrics_port()
        s = self.sluice(stream=stream, tables=f"public.{stream}_t", max_file_seconds=1, binary=sluice_test_bin(),
                        extra={"destination": {"type": "slow_avro_dir"},
                               "agent": {"metrics_listen": f"127.0.0.1:{port}", "probe_interval": "1"}})
        block = os.path.join(s.workdir, "sink-down")
        s.extra["destination"]["flush_block_file"] = block
        s.write_config()
        p = s.start("run")
        wait_streaming(p)
        open(block, "w").close()
        return s, p, port, block

    def test_queue_sampled_when_read(self):
        pg = self.pg
        s, p, port, block = self.held_run("qs")
        # transactions go on while the writer is held in a flush: the reader queues them
        batch = [0]

        def more():
            pg.execute(f"INSERT INTO qs_t SELECT g, repeat('x', 1000) FROM generate_series({batch[0] * 200 + 1}, "
                       f"{batch[0] * 200 + 200}) g")
            batch[0] += 1
            return metric(metrics(port), "sluice_queue_bytes", stream="qs") >= 1 << 20
        wait_until(more, 60, "the queue to hold a megabyte", interval=0.2)
        target = wal_lsn(pg)
        pg.wait_wal_flushed()
        wait_until(lambda: pg.one("SELECT sent_lsn >= %s::pg_lsn FROM pg_stat_replication WHERE pid = "
                                  "(SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s)",
                                  (int_to_lsn(target), s.slot)), 30, "the server to send everything")
        # the server goes silent (its walsender stopped): no message arrives while the writer drains
        walsender = pg.one("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (s.slot,))
        os.kill(walsender, signal.SIGSTOP)
        try:
            os.unlink(block)
            ck = os.path.join(s.state_dir, "qs.checkpoint.json")
            wait_until(lambda: lsn_to_int(json.load(open(ck))["durable"]) >= target, 60,
                       "everything to be durable")
            chunk = 256 * 1024   # the queue keeps one emptied chunk
            self.assertLessEqual(metric(metrics(port), "sluice_queue_bytes", stream="qs"), chunk)
            st = json.loads(s.run("status", "--json", timeout=60).stdout)["streams"][0]
            self.assertLessEqual(st["agent"]["queue_bytes"], chunk)
            self.assertGreaterEqual(st["agent"]["queue_peak_bytes"], 1 << 20)
        finally:
            os.kill(walsender, signal.SIGCONT)
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())

    def test_changes_counted_once_after_a_failed_flush(self):
        pg = self.pg
        s, p, port, block = self.held_run("cr")
        ROWS = 5
        pg.execute(f"INSERT INTO cr_t SELECT g, 'v' FROM generate_series(1, {ROWS}) g")
        target = wal_lsn(pg)
        # the changes are written, and the writer is held in the flush that follows (/livez), or
        # they already count (an agent that counts them as written)
        wait_until(lambda: writer_stuck_for(port, 2) or metric(metrics(port), "sluice_changes_total", stream="cr",
                                                                  table="public.cr_t", op="insert") == ROWS,
                   30, "the changes to be written")
        # the flush fails (its folder is gone): the run is retried and reads the changes again
        shutil.rmtree(os.path.join(s.out, "cr"))
        os.unlink(block)
        wait_until(lambda: "retrying from the last checkpoint" in p.stderr_text(), 60, "the run to fail")
        pg.wait_wal_flushed()
        wait_confirmed(pg, s.slot, target)
        m = metrics(port)
        self.assertEqual(metric(m, "sluice_changes_total", stream="cr", table="public.cr_t", op="insert"), ROWS)
        self.assertEqual(metric(m, "sluice_changes_reread_total", stream="cr"), ROWS)
        self.assertEqual(metric(m, "sluice_reconnects_total", stream="cr"), 1)
        recs = records_for(self.read(s), "public", "cr_t")
        self.assertEqual(sorted(r["payload"]["id"] for r in recs), list(range(1, ROWS + 1)))
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())

    def test_done_backfill_reads_done_when_the_run_file_lags(self):
        """The checkpoint says a table's backfill is done while the run file,
        rewritten once per probe, still says it runs (the agent wrote it
        just before the end): status says done, with the checkpoint's rows."""
        pg = self.pg
        ROWS = 620
        pg.execute("CREATE TABLE bd_t (id int PRIMARY KEY)")
        pg.execute(f"INSERT INTO bd_t SELECT g FROM generate_series(1, {ROWS}) g")
        s = self.sluice(stream="bd", tables="public.bd_t")
        self.catch_up(s)
        # an agent (this process: it lives) whose last run file predates the end of the backfill
        now_us = int(time.time() * 1e6)
        with open(os.path.join(s.state_dir, "bd.lock"), "w") as f:
            f.write(f"{os.getpid()}\n")
        run = {"pid": os.getpid(), "updated_us": now_us, "agent_started_us": now_us - 20000000,
               "state": "backfilling", "state_since_us": now_us - 10000000, "probe_interval_seconds": 5,
               "queue_bytes": 0, "queue_peak_bytes": 0, "flushes": 3, "heartbeats": {},
               "alerts_firing": [], "alert_history": [],
               "tables": {"public.bd_t": {"changes": {"insert": 0, "update": 0, "update_delete": 0,
                                                      "delete": 0, "truncate": 0},
                                          "backfill": {"state": "running", "rows": 529, "estimated_rows": 700,
                                                       "started_us": now_us - 10000000, "done_us": None}}}}
        with open(os.path.join(s.state_dir, "bd.run.json"), "w") as f:
            json.dump(run, f)
        st = json.loads(s.run("status", "--json", timeout=60).stdout)["streams"][0]
        self.assertEqual(st["agent_pid"], os.getpid())
        self.assertEqual(st["tables"]["public.bd_t"]["progress"],
                         {"state": "done", "rows": ROWS, "estimated_rows": 700, "percent": 100, "eta_seconds": None})
        r = s.run("status", timeout=60)
        self.assertIn(f"  table public.bd_t: backfill done ({ROWS} rows)", r.stdout)
        self.assertNotIn("now:", r.stdout)


if __name__ == "__main__":
    unittest.main()
