"""
tests/integration/test_pg_config.py: the command line's exit codes.

  2  bad configuration files (the message names FILE:LINE and the reason,
     exactly as agent/config.c and the key tables word it) and bad usage,
     including a destination type no sink implements and merge mode on a
     sink that does not support it;
  3  `sluice check` against a server with wal_level=replica;
  4  the stream's slot was dropped behind sluice's back;
a password never shows in any output; and a tables line of any length
works end to end.
"""

import os
import unittest

import harness
from harness import PgServer, PgTestCase, Sluice


def numbered(text):
    return "\n".join(f"{i + 1:3} {l}" for i, l in enumerate(text.splitlines()))


@unittest.skipUnless(os.access(harness.sluice_bin(), os.X_OK), f"no sluice binary at {harness.sluice_bin()}")
class ConfigErrorTest(unittest.TestCase):
    """No server needed: configuration errors come before any connection."""

    def setUp(self):
        self.s = Sluice(None)
        self.addCleanup(self.s.close)
        self.base = self.s.config_text().splitlines()

    def line_of(self, lines, text):
        return lines.index(text) + 1

    def expect(self, lines, line, message, rc=2):
        """Writes lines as the config; `sluice check` must exit rc and stderr
        must hold "<FILE>:<line>: <message>"."""
        text = "\n".join(lines) + "\n"
        path = self.s.write_config(text)
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = self.s.run(*cmd, timeout=30)
            want = f"{path}:{line}: {message}"
            self.assertEqual(r.rc, rc, f"{cmd}: want exit {rc}\n{numbered(text)}\n{r.describe()}")
            self.assertIn(want, r.stderr, f"{cmd}: want {want!r}\n{numbered(text)}\n{r.describe()}")

    def insert_after(self, header, new_line):
        lines = list(self.base)
        i = lines.index(header)
        lines.insert(i + 1, new_line)
        return lines, i + 2

    def test_unknown_key(self):
        lines, n = self.insert_after("[destination.out]", "colour = blue")
        self.expect(lines, n, 'unknown key "colour" in [destination.out]')

    def test_duplicate_key(self):
        lines = list(self.base)
        first = self.line_of(lines, "codec = deflate")
        lines.insert(first, "codec = null")   # right after the first one
        self.expect(lines, first + 1, f'duplicate key "codec" in [destination.out] (first on line {first})')

    def test_missing_required_key(self):
        lines = [l for l in self.base if l != "destination = out"]
        n = self.line_of(lines, "[stream.s1]")
        self.expect(lines, n, 'missing required key "destination" in [stream.s1]')

    def test_bad_enum_value(self):
        lines = [("backfill = sometimes" if l == "backfill = auto" else l) for l in self.base]
        n = self.line_of(lines, "backfill = sometimes")
        self.expect(lines, n, 'bad value "sometimes" for key "backfill": must be one of auto, none')

    def test_bad_number(self):
        lines = [("port = 99999" if l.startswith("port = ") else l) for l in self.base]
        n = self.line_of(lines, "port = 99999")
        self.expect(lines, n, 'bad value "99999" for key "port": must be from 1 to 65535')

    def test_bad_byte_size(self):
        lines = [("max_file_bytes = lots" if l.startswith("max_file_bytes = ") else l) for l in self.base]
        n = self.line_of(lines, "max_file_bytes = lots")
        self.expect(lines, n, 'bad value "lots" for key "max_file_bytes": not a byte size (a number of bytes, '
                    'with an optional suffix KB, MB, GB, TB, KiB, MiB, GiB or TiB)')

    def test_unknown_source_reference(self):
        lines = [("source = nosuch" if l == "source = pg" else l) for l in self.base]
        n = self.line_of(lines, "source = nosuch")
        self.expect(lines, n, 'unknown source "nosuch" in [stream.s1] (there is no [source.nosuch] section)')

    def test_unknown_destination_type(self):
        lines = [("type = gcs" if l == "type = avro_dir" else l) for l in self.base]
        n = self.line_of(lines, "type = gcs")
        self.expect(lines, n, 'bad value "gcs" for key "type": no sink implements this destination type '
                    '(supported: avro_dir, clickhouse, iceberg, s3)')

    def test_missing_file_and_bad_usage(self):
        r = self.s.run("check", config=os.path.join(self.s.workdir, "nonexistent.ini"), timeout=30)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn("nonexistent.ini", r.stderr)
        for argv in (("frobnicate",), ("run",), ("run", "-c"), ("check", "-c", self.s.config_path, "--bogus")):
            r = self.s.run(*argv, raw=True, timeout=30)
            self.assertEqual(r.rc, 2, r.describe())


class SlotAndSecretsTest(PgTestCase):

    def test_missing_slot_is_position_lost(self):
        pg = self.pg
        pg.execute("CREATE TABLE lost_t (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO lost_t VALUES (1, 'a')")
        s = self.sluice(stream="lostslot", tables="public.lost_t")
        self.catch_up(s)
        self.assertIsNotNone(pg.slot_info("sluice_lostslot"))
        pg.execute("SELECT pg_drop_replication_slot('sluice_lostslot')")
        pg.execute("INSERT INTO lost_t VALUES (2, 'b')")
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 4, f"a dropped slot is a lost position:\n{r.describe()}")
        self.assertIn("sluice_lostslot", r.stderr)
        self.assertIn("backfill", r.stderr, "the message says how to recover (sluice backfill)")
        # and it did not quietly make a new slot and move on
        self.assertIsNone(pg.slot_info("sluice_lostslot"))

    def test_password_never_printed(self):
        canary = "Canary-Pw-7f3a9c"
        s = self.sluice(stream="secret", tables="public.nothing_here_*",
                        extra={"source": {"password_env": "SLUICE_TEST_PW"}})
        env = {"SLUICE_TEST_PW": canary}
        outs = []
        for cmd in (("check",), ("run", "--until-caught-up"), ("status",), ("status", "--json")):
            r = s.run(*cmd, env=env, timeout=60)
            outs.append(r)
            self.assertNotIn(canary, r.stdout + r.stderr, r.describe())
        # a wrong port makes connection errors; they must not echo the password either
        s2 = self.sluice(stream="secret2", tables="public.x*",
                         extra={"source": {"password_env": "SLUICE_TEST_PW", "port": harness.free_port(),
                                           "connect_timeout": 2}})
        r = s2.run("check", env=env, timeout=60)
        self.assertNotEqual(r.rc, 0, r.describe())
        self.assertNotIn(canary, r.stdout + r.stderr, r.describe())


class LongLinesTest(PgTestCase):

    def test_long_tables_line(self):
        """A tables list over 200 characters (libinih's old line limit): every table is streamed."""
        pg = self.pg
        names = [f"long_table_name_number_{i:02d}_for_the_line" for i in range(12)]
        for i, t in enumerate(names):
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY)")
            pg.execute(f"INSERT INTO {t} VALUES ({i})")
        pg.execute("CREATE TABLE long_table_left_out (id int PRIMARY KEY)")
        pg.execute("INSERT INTO long_table_left_out VALUES (99)")
        tables = ", ".join(f"public.{t}" for t in names)
        self.assertGreater(len("tables = " + tables), 200)
        s = self.sluice(stream="longline", tables=tables)
        self.assertIn("tables = " + tables, s.config_text().splitlines())
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        # the avro_dir sink's own check, moved out of the agent, says the same as before
        self.assertIn(f"stream longline: destination out: path {s.out} can be created\n", r.stdout)
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual(sorted(r["source_metadata"]["table"] for r in recs), sorted(names))


class PrerequisitesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(harness.pg_available())
        cls.pg = PgServer({"wal_level": "replica"})
        cls.addClassCleanup(cls.pg.close)
        cls.pg.start()

    def test_check_wal_level_replica(self):
        self.pg.execute("CREATE TABLE IF NOT EXISTS pre_t (id int PRIMARY KEY)")
        s = Sluice(self.pg, stream="pre", tables="public.pre_t")
        self.addCleanup(s.close)
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("wal_level", r.stderr)
        r = s.run("run", "--until-caught-up", timeout=60)
        self.assertEqual(r.rc, 3, r.describe())


if __name__ == "__main__":
    unittest.main()
