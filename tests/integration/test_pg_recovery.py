"""
tests/integration/test_pg_recovery.py: the ways back after trouble.

- every cause of exit code 4 (the slot dropped, the slot lost to
  max_slot_wal_keep_size, the slot ahead of the checkpoint, a corrupt
  checkpoint) gives one command in its message; the test runs exactly that
  command, parsed out of the message, then starts sluice again, which must
  work the first time: a new slot, a new backfill, and the output converges
  on the source again;
- a backfill interrupted by SIGTERM or kill -9 resumes on the next run after
  its last durable chunk (or is redone when none was), with no duplicate
  backfill rows and no leftover temporary files;
- `sluice backfill --table` re-reads one table while its slot keeps its place.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import unittest

import harness  # noqa: E402
from harness import PgTestCase, csn, records_for, wait_for_log


def hidden_files(root):
    """Hidden files other than the tree's own manifests and schema files."""
    found = []
    for d, _, names in os.walk(root):
        found += [os.path.join(d, n) for n in names if n.startswith(".") and n != ".schema.avsc"
                  and os.path.basename(d) != "_manifests"]
    return found


def backfill_records(recs):
    """The backfill rows (INSERTs), without re-backfill markers."""
    return [r for r in recs if r["read_method"] == "postgresql-backfill"
            and r["source_metadata"]["change_type"] == "INSERT"]


def markers(recs):
    """Re-backfill markers: TRUNCATE records with the backfill read method."""
    return [r for r in recs if r["read_method"] == "postgresql-backfill"
            and r["source_metadata"]["change_type"] == "TRUNCATE"]


def csn_before(c):
    """The CSN of the position just before c's position, sequence 0."""
    pos = int(c.split("-")[0], 16)
    return f"{pos - 1:016X}-0000000000"


def recovery_tail(s, drops):
    """The end of every exit-4 message: the one command that recovers."""
    return (f". To recover, run `sluice backfill -c {s.config_path} --stream {s.stream}`"
            f"{', which drops the slot' if drops else ''}, then start sluice again: it creates a new slot "
            f"and backfills every table")


def follow_recovery(testcase, s, r, cwd=None):
    """Runs, word for word, the one command that the exit-4 message of r
    gives (its `sluice ...` in backquotes), with the binary under test for
    "sluice", in cwd (the stream's folder by default).  Returns that
    command's Result."""
    testcase.assertEqual(r.rc, 4, r.describe())
    commands = re.findall(r"`(sluice [^`]*)`", r.stderr)
    testcase.assertEqual(len(commands), 1, f"one recovery command in the message:\n{r.describe()}")
    argv = shlex.split(commands[0])
    argv[0] = s.binary
    p = subprocess.run(argv, cwd=cwd or s.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    testcase.assertEqual(p.returncode, 0, f"$ {commands[0]}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


class RecoveryTest(PgTestCase):

    def test_recovery_command_names_the_absolute_config_path(self):
        """-c given relative to the current folder: the exit-4 message names
        the config by its absolute path, so that the command works when
        pasted in another folder."""
        pg = self.pg
        pg.execute("CREATE TABLE rec_rel (id int PRIMARY KEY)")
        pg.execute("INSERT INTO rec_rel VALUES (1)")
        s = self.sluice(stream="recrel", tables="public.rec_rel")
        self.catch_up(s)
        pg.execute("SELECT pg_drop_replication_slot('sluice_recrel')")
        rel = os.path.basename(s.config_path)
        self.assertEqual(os.path.join(s.workdir, rel), s.config_path)
        r = s.run("run", "-c", rel, "--until-caught-up", raw=True, timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        absolute = os.path.realpath(s.config_path)
        self.assertIn(f". To recover, run `sluice backfill -c {absolute} --stream recrel`", r.stderr)
        p = follow_recovery(self, s, r, cwd="/")
        self.assertIn("every table marked for backfill", p.stdout)

    def test_backfill_after_lost_slot_converges(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_lost (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_lost SELECT g, 'v' || g FROM generate_series(1, 50) g")
        s = self.sluice(stream="reclost", tables="public.rec_lost")
        self.catch_up(s)
        durable = json.load(open(os.path.join(s.state_dir, "reclost.checkpoint.json")))["durable"]
        pg.execute("SELECT pg_drop_replication_slot('sluice_reclost')")
        # changes made while no slot exists are lost to the log...
        pg.execute("UPDATE rec_lost SET v = 'changed' WHERE id <= 10")
        pg.execute("DELETE FROM rec_lost WHERE id > 45")
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        ckpt = os.path.join(s.state_dir, "reclost.checkpoint.json")
        self.assertIn(f'stream "reclost": replication slot "sluice_reclost" does not exist on source "pg", but the '
                      f'checkpoint "{ckpt}" says changes up to {durable} were already read from it; changes after '
                      f'that position may be gone, and sluice will not skip them silently' +
                      recovery_tail(s, drops=False) + "\n", r.stderr)
        p = follow_recovery(self, s, r)
        self.assertIn("every table marked for backfill", p.stdout)
        # ...and recovered by the new backfill, the first time
        self.catch_up(s)
        self.assertIsNotNone(pg.slot_info("sluice_reclost"), "a new slot was created")
        recs = records_for(self.read(s), "public", "rec_lost")
        self.assertTableMatches(recs, "public", "rec_lost", ["id"])
        snapshots = sorted({csn(r) for r in backfill_records(recs)})
        self.assertEqual(len(snapshots), 2, "two backfills: the first run's and the recovery's")
        second = [r for r in backfill_records(recs) if csn(r) == snapshots[1]]
        self.assertEqual(len(second), 45)
        # the recovery's rows are preceded by a marker that drops rows deleted
        # while no slot followed the table (ids 46-50)
        self.assertEqual([csn(r) for r in markers(recs)], [csn_before(snapshots[1])])
        # streaming goes on from the new slot
        pg.execute("INSERT INTO rec_lost VALUES (100, 'after')")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rec_lost")
        self.assertTableMatches(recs, "public", "rec_lost", ["id"])

    @harness.tag("sanitizers")
    def test_slot_ahead_of_checkpoint_is_position_lost(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_ahead (id int PRIMARY KEY)")
        s = self.sluice(stream="recahead", tables="public.rec_ahead")
        self.catch_up(s)
        pg.execute("INSERT INTO rec_ahead VALUES (1)")
        # another reader consumes the slot past what sluice made durable
        pg.execute("SELECT pg_replication_slot_advance('sluice_recahead', pg_current_wal_lsn())")
        ckpt = os.path.join(s.state_dir, "recahead.checkpoint.json")
        durable = json.load(open(ckpt))["durable"]
        confirmed = pg.one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                           "WHERE slot_name = 'sluice_recahead'")
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        self.assertIn(f'stream "recahead": slot "sluice_recahead" has confirmed position {confirmed}, ahead of '
                      f'{durable} in checkpoint "{ckpt}": changes between them were acknowledged by another '
                      f'reader, or the checkpoint is stale' + recovery_tail(s, drops=True) +
                      " (if the checkpoint is stale, putting the current one back resumes the slot instead)\n",
                      r.stderr)
        self.assertEqual(records_for(self.read(s), "public", "rec_ahead"), [],
                         "nothing was written past the gap")
        # the message's command works the first time: it drops the slot and
        # asks for a new one; the next run backfills and converges
        pg.execute("INSERT INTO rec_ahead VALUES (2)")
        p = follow_recovery(self, s, r)
        self.assertIn("stream recahead: dropped replication slot sluice_recahead (its confirmed position "
                      f"{confirmed} is ahead of the checkpoint's {durable}): it could not be resumed", p.stdout)
        self.assertIsNone(pg.slot_info("sluice_recahead"))
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rec_ahead")
        self.assertTableMatches(recs, "public", "rec_ahead", ["id"])
        pg.execute("INSERT INTO rec_ahead VALUES (3)")
        self.catch_up(s)
        self.assertTableMatches(records_for(self.read(s), "public", "rec_ahead"), "public", "rec_ahead", ["id"])

    @harness.tag("sanitizers")
    def test_corrupt_checkpoint_stops_at_once_and_recovers(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_corrupt (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_corrupt SELECT g, 'v' || g FROM generate_series(1, 20) g")
        s = self.sluice(stream="reccorrupt", tables="public.rec_corrupt")
        self.catch_up(s)
        ckpt = os.path.join(s.state_dir, "reccorrupt.checkpoint.json")
        with open(ckpt, "w") as f:
            f.write('{"format": 2, "durable": ')   # a torn write, say
        pg.execute("UPDATE rec_corrupt SET v = 'changed' WHERE id <= 5")
        pg.execute("DELETE FROM rec_corrupt WHERE id > 15")
        r = s.run("run", timeout=30)
        self.assertEqual(r.rc, 4, f"a corrupt checkpoint needs the operator: exit 4 at once\n{r.describe()}")
        self.assertLess(r.wall_s, 10)
        self.assertNotIn("retrying", r.stderr)
        self.assertIn(f'checkpoint "{ckpt}" is corrupt (line 1: ', r.stderr)
        self.assertIn(f'), so the position of stream "reccorrupt" is unknown; the file was not changed. '
                      f'To recover, run `sluice backfill -c {s.config_path} --stream reccorrupt`, which keeps the '
                      f'corrupt file as "{ckpt}.corrupt", then start sluice again: it backfills every table (or put '
                      f'back a good copy of the checkpoint)\n', r.stderr)
        r2 = s.run("status", timeout=30)
        self.assertEqual(r2.rc, 5, f"a corrupt checkpoint: the status cannot be determined\n{r2.describe()}")
        self.assertIn("is corrupt", r2.stderr)
        p = follow_recovery(self, s, r)
        self.assertIn(f"stream reccorrupt: checkpoint {ckpt} is corrupt; kept it as {ckpt}.corrupt", p.stdout)
        self.assertTrue(os.path.exists(ckpt + ".corrupt"))
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rec_corrupt")
        self.assertTableMatches(recs, "public", "rec_corrupt", ["id"])

    def interrupted_backfill(self, how, stream):
        pg = self.pg
        table = f"rec_{stream}"
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text, pad text)")
        pg.execute(f"INSERT INTO {table} SELECT g, 'v' || g, repeat(md5(g::text), 20) FROM generate_series(1, 150000) g")
        s = self.sluice(stream=stream, tables=f"public.{table}", max_file_bytes="1MB")
        p = s.start("run")
        wait_for_log(p, "backfilling public." + table, 60, "the backfill to start")
        if how == "kill":
            p.kill9()
            p.wait_result(30)
        else:
            p.signal(signal.SIGTERM)
            r = p.wait_result(60)
            self.assertEqual(r.rc, 0, f"a drain during backfill exits 0:\n{r.describe()}")
        pg.wait_slot_inactive(s.slot)
        pg.execute(f"UPDATE {table} SET v = 'changed' WHERE id % 1000 = 0")
        r = self.catch_up(s)
        self.assertEqual(hidden_files(s.out), [], "leftover temporary files")
        recs = records_for(self.read(s), "public", table)
        bf = backfill_records(recs)
        self.assertEqual(len(bf), 150000, "every row backfilled exactly once")
        self.assertEqual(len({r["uuid"] for r in bf}), 150000)
        if "resuming after its last durable chunk" in r.stderr:
            # the chunks durable before the interruption stay; the rest
            # comes from the next run's snapshot, with no marker
            self.assertEqual(len({csn(r) for r in bf}), 2, "two snapshots, each key from one")
            self.assertEqual(markers(recs), [])
        else:
            self.assertEqual(len({csn(r) for r in bf}), 1, "one backfill snapshot survives")
            self.assertEqual([csn(r) for r in markers(recs)], [csn_before(csn(bf[0]))],
                             "the redone backfill starts with one marker")
        self.assertTableMatches(recs, "public", table, ["id"])
        return r

    def test_sigterm_during_backfill(self):
        self.interrupted_backfill("term", "recterm")

    def test_kill_during_backfill(self):
        self.interrupted_backfill("kill", "reckill")

    def test_rebackfill_one_table(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_a (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE rec_b (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_a SELECT g, 'a' || g FROM generate_series(1, 30) g")
        pg.execute("INSERT INTO rec_b SELECT g, 'b' || g FROM generate_series(1, 20) g")
        s = self.sluice(stream="recone", tables="public.rec_a, public.rec_b")
        self.catch_up(s)
        pg.execute("UPDATE rec_a SET v = 'new' WHERE id < 5")
        r = s.run("backfill", "--stream", "recone", "--table", "public.rec_a", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        recs = self.read(s)
        a, b = records_for(recs, "public", "rec_a"), records_for(recs, "public", "rec_b")
        self.assertEqual(len({csn(r) for r in backfill_records(a)}), 2, "rec_a was backfilled again")
        self.assertEqual(len(backfill_records(a)), 60)
        self.assertEqual(len(backfill_records(b)), 20, "rec_b was not")
        self.assertEqual(len(markers(a)), 1)
        self.assertEqual(markers(b), [])
        self.assertTableMatches(a, "public", "rec_a", ["id"])
        self.assertTableMatches(b, "public", "rec_b", ["id"])
        r = s.run("status", "--json", timeout=60)
        self.assertIn('"backfill": "done"', r.stdout)



class LostSlotTest(PgTestCase):
    """A slot driven to wal_status = lost by max_slot_wal_keep_size, with
    1 MB WAL segments so that a few MB of WAL are enough."""
    tags = {"sanitizers"}   # also run in the sanitizer pass
    pg_initdb_args = ("--wal-segsize=1",)
    pg_settings = {"max_slot_wal_keep_size": "2MB", "min_wal_size": "2MB", "max_wal_size": "32MB"}

    def drive_slot_lost(self, slot):
        pg = self.pg
        pg.execute("CREATE TABLE IF NOT EXISTS pad (v text)")
        for _ in range(40):
            if (pg.slot_info(slot) or {}).get("wal_status") == "lost":
                return
            pg.execute("INSERT INTO pad SELECT repeat(md5(g::text), 16) FROM generate_series(1, 2000) g")
            pg.execute("SELECT pg_switch_wal()")
            pg.execute("CHECKPOINT")
        self.fail(f"slot {slot} did not become lost: {pg.slot_info(slot)}")

    def test_lost_slot_recovers_as_the_message_says(self):
        pg = self.pg
        pg.execute("CREATE TABLE rec_wal (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rec_wal SELECT g, 'v' || g FROM generate_series(1, 40) g")
        s = self.sluice(stream="recwal", tables="public.rec_wal")
        self.catch_up(s)
        durable = json.load(open(os.path.join(s.state_dir, "recwal.checkpoint.json")))["durable"]
        # changes the lost slot never delivers
        pg.execute("UPDATE rec_wal SET v = 'changed' WHERE id <= 10")
        pg.execute("DELETE FROM rec_wal WHERE id > 35")
        self.drive_slot_lost("sluice_recwal")

        # status: lost, and what the server no longer knows is unknown, not -1
        r = s.run("status", "--json", timeout=60)
        self.assertEqual(r.rc, 6, f"an alert fires, and no agent runs (6 wins over 1):\n{r.describe()}")
        slot = json.loads(r.stdout)["streams"][0]["slot_status"]
        self.assertEqual(slot["state"], "lost")
        self.assertEqual(slot["postgres"]["wal_status"], "lost")
        self.assertIsNone(slot["postgres"]["restart_lsn"])
        self.assertIsNone(slot["retained_wal_bytes"])
        r = s.run("status", timeout=60)
        self.assertIn("retained WAL: unknown", r.stdout)
        self.assertNotIn("-1 bytes", r.stdout)
        self.assertIn("ALERT slot_lost (critical)", r.stdout)

        lost_msg = ('stream "recwal": replication slot "sluice_recwal" is lost (wal_status = lost): the server '
                    'removed WAL it still needed, so changes ')
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        # check judges the slot against the checkpoint, as run does: the same words
        self.assertIn(lost_msg + f"after {durable} are gone" + recovery_tail(s, drops=True) + "\n", r.stderr)
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, r.describe())
        self.assertIn(lost_msg + f"after {durable} are gone" + recovery_tail(s, drops=True) + "\n", r.stderr)

        p = follow_recovery(self, s, r)
        self.assertIn("stream recwal: dropped replication slot sluice_recwal (it is lost): it could not be resumed",
                      p.stdout)
        self.catch_up(s)
        slot = pg.slot_info("sluice_recwal")
        self.assertIsNotNone(slot, "a new slot was created")
        self.assertNotEqual(slot["wal_status"], "lost")
        recs = records_for(self.read(s), "public", "rec_wal")
        self.assertTableMatches(recs, "public", "rec_wal", ["id"])
        self.assertEqual(len(markers(recs)), 1, "the recovery's backfill starts with a marker")
        pg.execute("INSERT INTO rec_wal VALUES (100, 'after')")
        self.catch_up(s)
        self.assertTableMatches(records_for(self.read(s), "public", "rec_wal"), "public", "rec_wal", ["id"])


if __name__ == "__main__":
    unittest.main()
