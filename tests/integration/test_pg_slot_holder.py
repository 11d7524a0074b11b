"""
tests/integration/test_pg_slot_holder.py: a slot read by another process,
against a real PostgreSQL.

- `sluice check` of a stream whose slot another agent reads (an agent of
  another state_dir, as on another host) exits 3, naming the walsender's
  pid and client, and says to stop the other agent;
- `check` of the stream whose own agent runs (this state_dir) exits 0;
- `run` gives the same message, and retries (the reader may be its own old
  walsender after a silent network failure).
"""

import signal

from harness import PgTestCase, wait_until


def hint(stream, slot, pid):
    return (f'stream "{stream}": replication slot "{slot}" is in use by another process (walsender pid {pid}, '
            f'application_name "sluice", client 127.0.0.1): another agent (or a tool such as pg_recvlogical) '
            f'reads it. Stop it before starting this stream, or give this stream a slot of its own (stream '
            f'key slot)')


class SlotHolderTest(PgTestCase):

    def test_check_names_the_other_reader(self):
        pg = self.pg
        pg.execute("CREATE TABLE sh_t (id int PRIMARY KEY)")
        pg.execute("INSERT INTO sh_t VALUES (1)")
        a = self.sluice(stream="sh", tables="public.sh_t", max_file_seconds=1)
        b = self.sluice(stream="sh", tables="public.sh_t", max_file_seconds=1)  # its own state_dir
        self.assertNotEqual(a.state_dir, b.state_dir)
        pa = a.start("run")
        wait_until(lambda: "streaming from slot" in pa.stderr_text() or not pa.alive(), 60, "a streaming")
        self.assertTrue(pa.alive(), pa.stderr_text())
        info = pg.slot_info(a.slot)
        self.assertTrue(info["active"])
        pid = info["active_pid"]

        r = a.run("check")
        self.assertEqual(r.rc, 0, r.describe())

        r = b.run("check")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn(hint("sh", a.slot, pid), r.stderr)

        pb = b.start("run")
        try:
            wait_until(lambda: hint("sh", a.slot, pid) in pb.stderr_text() or not pb.alive(), 60,
                       "run to name the other reader")
            self.assertTrue(pb.alive(), "run retries")
            self.assertIn("retrying", pb.stderr_text())
        finally:
            pb.kill9()
        pa.signal(signal.SIGTERM)
        self.assertEqual(pa.wait_result(60).rc, 0)
