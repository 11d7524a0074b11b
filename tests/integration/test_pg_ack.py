"""
tests/integration/test_pg_ack.py: the slot is acknowledged promptly, against
a real PostgreSQL.

- while a steady writer inserts a few MB/s, the slot's confirmed_flush_lsn
  (read from pg_replication_slots) advances at least every
  2 x status_interval + one flush (max_file_seconds), and the slot's lag
  (pg_current_wal_lsn() - confirmed_flush_lsn) stays under
  write rate x (2 x status_interval + max_file_seconds) plus a margin;
- on an idle stream with heartbeats every second, every heartbeat is
  acknowledged within 2 x status_interval: confirmed_flush_lsn follows them.

The longest gap between two advances and the largest lag seen are printed.
"""

import signal
import threading
import time

from harness import PgTestCase, lsn_to_int, wait_until

STATUS_INTERVAL = 1      # seconds: the default
FLUSH_S = 1              # max_file_seconds
ROW = "x" * 1500         # stored inline, uncompressed: WAL grows by about the row
BATCH = 700


def slot_sample(pg, slot):
    (lag, flushed), = pg.sql(
        "SELECT pg_current_wal_lsn() - confirmed_flush_lsn, confirmed_flush_lsn::text "
        "FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    return int(lag), lsn_to_int(flushed)


class Writer(threading.Thread):
    """Inserts batches of ~1 MB, about rate_mb per second, until stopped."""

    def __init__(self, pg, rate_mb):
        super().__init__(daemon=True)
        self.conn = pg.connect()
        self.rate_mb = rate_mb
        self.stop = threading.Event()
        self.bytes = 0
        self.error = None

    def run(self):
        try:
            cur = self.conn.cursor()
            t0 = time.monotonic()
            n = 0
            while not self.stop.is_set():
                cur.execute("INSERT INTO ack_t (v) SELECT %s FROM generate_series(1, %s)", (ROW, BATCH))
                n += 1
                self.bytes += BATCH * len(ROW)
                ahead = n / self.rate_mb - (time.monotonic() - t0)
                if ahead > 0:
                    self.stop.wait(ahead)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.conn.close()


class AckTest(PgTestCase):

    def gaps_while(self, slot, seconds, pred_running):
        """Samples the slot every 50 ms for seconds: the longest time
        confirmed_flush_lsn stayed put, and the largest lag seen."""
        _, last = slot_sample(self.pg, slot)
        t_last = time.monotonic()
        longest = 0.0
        max_lag = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.assertTrue(pred_running())
            lag, flushed = slot_sample(self.pg, slot)
            now = time.monotonic()
            max_lag = max(max_lag, lag)
            if flushed != last:
                longest = max(longest, now - t_last)
                last, t_last = flushed, now
            time.sleep(0.05)
        longest = max(longest, time.monotonic() - t_last)
        return longest, max_lag

    def test_busy_and_heartbeat_acks_are_prompt(self):
        pg = self.pg
        pg.execute("CREATE TABLE ack_t (id bigserial PRIMARY KEY, v text)")
        s = self.sluice(stream="ack", tables="public.ack_t", max_file_seconds=FLUSH_S,
                        extra={"stream": {"heartbeat_interval": "1"}})
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.assertTrue(p.alive(), p.stderr_text())

        rate_mb = 3
        w = Writer(pg, rate_mb)
        w.start()
        try:
            time.sleep(1)  # the writer reaches its pace
            t0 = time.monotonic()
            lsn0 = pg.current_lsn()
            longest, max_lag = self.gaps_while(s.slot, 10, lambda: p.alive() and w.is_alive())
            rate = (pg.current_lsn() - lsn0) / (time.monotonic() - t0)
        finally:
            w.stop.set()
            w.join(30)
        self.assertIsNone(w.error)
        bound_s = 2 * STATUS_INTERVAL + FLUSH_S
        print(f"\n  busy ({rate / 1e6:.1f} MB/s of WAL): confirmed_flush_lsn stayed put at most {longest:.2f} s, "
              f"lag at most {max_lag / 1e6:.1f} MB (bound {bound_s} s x rate = {bound_s * rate / 1e6:.1f} MB)")
        self.assertGreater(rate, 1e6, "the writer kept a pace of a few MB/s")
        self.assertLessEqual(longest, bound_s, p.stderr_text())
        # the rate is an average over 10 s: a margin of half the bound for its peaks
        self.assertLessEqual(max_lag, 1.5 * rate * bound_s, p.stderr_text())

        # idle, heartbeats every second: each is acknowledged
        wait_until(lambda: slot_sample(pg, s.slot)[0] < 1_000_000, 30, "the stream to catch up")
        longest, _ = self.gaps_while(s.slot, 8, p.alive)
        print(f"  idle with heartbeats every 1 s: confirmed_flush_lsn stayed put at most {longest:.2f} s")
        self.assertLessEqual(longest, 2 * STATUS_INTERVAL + 1, p.stderr_text())
        p.signal(signal.SIGTERM)
        p.wait_result(60)
