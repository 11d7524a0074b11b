"""
tests/integration/test_pg_first_hour.py: what a newcomer meets in the first
hour, with a non-superuser role where privileges matter.

`check` predicts `run`: for every case below, `sluice check` and
`sluice run --until-caught-up` give the same exit code and the same words,
and after the fix the message gives, both pass:

- no publication, and a role that may not create it;
- a table added to the config that the role may not add to the publication;
- no USAGE on a schema other than public (run used to retry "permission
  denied for schema" forever);
- no SELECT on a table, revoked after the stream ran;
- a checkpoint whose slot was dropped (check used to say "will be created");
- write_mode = merge on a sink that cannot merge;
- a role that does not exist (a failed login is not retried).

A strict CLI: an option a command does not take, an unknown option and a
stream the config does not have are usage errors (exit 2) that name them.

Failures surface at once, as JSON lines when asked: one stream that stops
(exit 4) is logged while the others go on, a retried error carries its
SQLSTATE, and the agent exits with the highest exit code of its streams.
"""

import json
import os
import re
import signal
import unittest

from harness import PgTestCase, read_avro_tree, wait_until

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CheckPredictsRunTest(PgTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        pg = cls.pg
        pg.execute("CREATE ROLE fh_user LOGIN REPLICATION")
        pg.execute("CREATE SCHEMA sales")
        pg.execute("CREATE TABLE sales.orders (id int PRIMARY KEY, amount numeric(10,2))")
        pg.execute("INSERT INTO sales.orders SELECT g, g * 1.5 FROM generate_series(1, 7) g")
        for t in ("fh_a", "fh_b", "fh_c"):
            pg.execute(f"CREATE TABLE public.{t} (id int PRIMARY KEY, v text)")
            pg.execute(f"INSERT INTO public.{t} SELECT g, 'v' || g FROM generate_series(1, 5) g")
            pg.execute(f"GRANT SELECT ON public.{t} TO fh_user")

    def limited(self, name, tables, publication=None):
        ex = {"source": {"user": "fh_user"}}
        if publication:
            ex["stream"] = {"publication": publication}
        return self.sluice(stream=name, tables=tables, extra=ex)

    def agree(self, s, rc, words):
        """check and run --until-caught-up both exit rc and say the same
        thing, which contains words; returns that message."""
        c = s.run("check", timeout=120)
        self.assertEqual(c.rc, rc, c.describe())
        m = re.search(r"^sluice: (.*)$", c.stderr, re.M)
        self.assertIsNotNone(m, c.describe())
        said = m.group(1)
        self.assertIn(words, said)
        r = s.run("run", "--until-caught-up", timeout=120)
        self.assertEqual(r.rc, rc, r.describe())
        self.assertIn(said, r.stderr, "run said something else than check")
        self.assertNotIn("retrying", r.stderr, "an operator error was retried")
        return said

    def grants_in(self, said):
        m = re.search(r"run: (.*?)(?: \(|$)", said)
        self.assertIsNotNone(m, said)
        return [g.strip() for g in m.group(1).split(";")]

    def test_no_publication_and_role_may_not_create_it(self):
        s = self.limited("fh1", "public.fh_a")
        said = self.agree(s, 3, 'role "fh_user" may not create publication "sluice_fh1"')
        for stmt in self.grants_in(said):
            self.pg.execute(stmt)                  # the owner runs exactly that
        self.assertEqual(s.run("check").rc, 0)
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "fh_a", ["id"])

    def test_table_added_that_the_role_may_not_add(self):
        pg = self.pg
        pg.execute("CREATE PUBLICATION fh2_pub FOR TABLE public.fh_b")
        s = self.limited("fh2", "public.fh_b", publication="fh2_pub")
        self.catch_up(s)
        s.tables = "public.fh_b, public.fh_c"
        s.write_config()
        said = self.agree(s, 3, 'may not add tables to publication "fh2_pub"')
        self.assertIn('ALTER PUBLICATION "fh2_pub" ADD TABLE "public"."fh_c"', said)
        for stmt in self.grants_in(said):
            pg.execute(stmt)
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "fh_b", ["id"])
        self.assertTableMatches(recs, "public", "fh_c", ["id"])

    def test_schema_without_usage(self):
        pg = self.pg
        pg.execute("CREATE PUBLICATION fh3_pub FOR TABLE sales.orders")
        pg.execute("GRANT SELECT ON sales.orders TO fh_user")   # but no USAGE on sales
        s = self.limited("fh3", "sales.orders", publication="fh3_pub")
        said = self.agree(s, 3, 'role "fh_user" may not read every selected table')
        self.assertEqual(self.grants_in(said), ['GRANT USAGE ON SCHEMA "sales" TO "fh_user"'])
        pg.execute(self.grants_in(said)[0])
        self.assertEqual(s.run("check").rc, 0)
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "sales", "orders", ["id"])

    def test_select_revoked_after_the_stream_ran(self):
        pg = self.pg
        pg.execute("CREATE TABLE public.fh_r (id int PRIMARY KEY)")
        pg.execute("INSERT INTO public.fh_r VALUES (1), (2)")
        pg.execute("GRANT SELECT ON public.fh_r TO fh_user")
        pg.execute("CREATE PUBLICATION fh4_pub FOR TABLE public.fh_r")
        s = self.limited("fh4", "public.fh_r", publication="fh4_pub")
        self.catch_up(s)
        pg.execute("REVOKE SELECT ON public.fh_r FROM fh_user")
        said = self.agree(s, 3, "may not read every selected table")
        self.assertEqual(self.grants_in(said), ['GRANT SELECT ON "public"."fh_r" TO "fh_user"'])
        pg.execute(self.grants_in(said)[0])
        pg.execute("INSERT INTO public.fh_r VALUES (3)")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "fh_r", ["id"])

    def test_checkpoint_whose_slot_was_dropped(self):
        pg = self.pg
        s = self.sluice(stream="fh5", tables="public.fh_a")
        self.catch_up(s)
        pg.execute("SELECT pg_drop_replication_slot('sluice_fh5')")
        said = self.agree(s, 4, 'replication slot "sluice_fh5" does not exist on source')
        m = re.search(r"run `(sluice backfill [^`]*)`", said)
        self.assertIsNotNone(m, said)
        self.assertIn("--stream fh5", m.group(1))

    def test_merge_on_a_table_without_a_key(self):
        # every sink merges now (avro_dir too): a table without a key is what merge mode refuses
        self.pg.execute("CREATE TABLE IF NOT EXISTS fh_nokey (a int, b text)")
        s = self.sluice(stream="fh6", tables="public.fh_nokey", extra={"stream": {"write_mode": "merge"}})
        self.agree(s, 3, '"public"."fh_nokey"')

    def test_role_that_does_not_exist(self):
        s = self.sluice(stream="fh7", tables="public.fh_a", extra={"source": {"user": "fh_nosuch"}})
        said = self.agree(s, 3, 'role "fh_nosuch" does not exist')
        self.assertIn("a failed login is not retried", said)


class StrictCliTest(PgTestCase):

    def test_options_a_command_does_not_take(self):
        s = self.sluice(stream="cli", tables="public.cli_t")
        cases = [
            (("check", "--json"), "sluice check: --json is not an option of this command"),
            (("run", "--table", "public.cli_t"), "sluice run: --table is not an option of this command"),
            (("status", "--until-caught-up"), "sluice status: --until-caught-up is not an option of this command"),
            (("backfill", "--stream", "cli", "--json"), "sluice backfill: --json is not an option of this command"),
            (("status", "--bogus"), "sluice status: unknown option --bogus"),
            (("status", "-x"), "sluice status: unknown option -x"),
            (("status", "--json=yes"), "sluice status: --json takes no value"),
            (("run", "--stream"), "sluice run: a value is needed after --stream"),
            (("check", "extra"), 'sluice check: unexpected argument "extra"'),
        ]
        for args, words in cases:
            r = s.run(*args)
            self.assertEqual(r.rc, 2, r.describe())
            self.assertEqual(r.stderr.splitlines()[0], words)
            self.assertIn("usage: sluice " + args[0], r.stderr)
            self.assertEqual(r.stdout, "")

    def test_a_stream_the_config_does_not_have(self):
        s = self.sluice(stream="cli2", tables="public.cli_t")
        for cmd in ("status", "check", "run", "backfill"):
            r = s.run(cmd, "--stream", "nosuch")
            self.assertEqual(r.rc, 2, r.describe())
            self.assertIn('no stream named "nosuch"', r.stderr)
        r = s.run("status", "--help")
        self.assertEqual(r.rc, 0)
        self.assertIn("--stream NAME", r.stdout)

    def test_help_names_every_source_and_destination(self):
        s = self.sluice(stream="cli3", tables="public.cli_t")
        r = s.run("--help", raw=True)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertTrue(r.stdout.startswith(
            "sluice: change data capture from PostgreSQL (pgoutput) and MySQL/MariaDB\n"
            "(binlog) into Avro files in a folder (avro_dir) or an S3 bucket (s3), or into\n"
            "ClickHouse tables (clickhouse), in append or merge mode\n"), r.stdout)
        self.assertIn("Documentation: README.md and doc/ (configuration.md for every key,\n", r.stdout)
        for doc in ("configuration.md", "operations.md", "deploy.md", "mysql.md", "clickhouse.md", "s3.md"):
            self.assertIn(doc, r.stdout)
            self.assertTrue(os.path.exists(os.path.join(TOP, "doc", doc)), doc)


class FailuresAndLogsTest(PgTestCase):

    def test_a_failed_stream_is_said_at_once_and_the_others_go_on(self):
        pg = self.pg
        pg.execute("CREATE TABLE lf_t (id int PRIMARY KEY)")
        pg.execute("INSERT INTO lf_t VALUES (1), (2)")
        # a role whose every transaction is read-only: CREATE PUBLICATION fails
        # with SQLSTATE 25006, a runtime error that is retried
        pg.execute("CREATE ROLE lf_ro SUPERUSER LOGIN REPLICATION")
        pg.execute("ALTER ROLE lf_ro SET default_transaction_read_only = on")
        s = self.sluice(stream="lf_good", tables="public.lf_t", max_file_seconds=1,
                        extra={"agent": {"log_format": "json"}})
        text = s.config_text() + (
            f"\n[source.ro]\ntype = postgres\nhost = {pg.host}\nport = {pg.port}\nuser = lf_ro\n"
            "dbname = postgres\n\n"
            "[stream.lf_bad]\nsource = pg\ndestination = out\ntables = public.lf_t\n\n"
            "[stream.lf_ro]\nsource = ro\ndestination = out\ntables = public.lf_t\n")
        s.write_config(text)
        r = s.run("run", "--stream", "lf_bad", "--until-caught-up")
        self.assertEqual(r.rc, 0, r.describe())
        pg.execute("SELECT pg_drop_replication_slot('sluice_lf_bad')")

        p = s.start("run")
        self.addCleanup(lambda: p.signal(signal.SIGKILL))

        def lines():
            return [json.loads(l) for l in p.stderr_text().splitlines() if l.strip()]
        wait_until(lambda: any(l["level"] == "error" and l.get("stream") == "lf_bad" for l in lines())
                   or not p.alive(), 60, "the failed stream's error")
        self.assertTrue(p.alive(), "one stream's failure ended the agent")
        err = [l for l in lines() if l["level"] == "error" and l.get("stream") == "lf_bad"]
        self.assertEqual(len(err), 1)
        self.assertIn('replication slot "sluice_lf_bad" does not exist', err[0]["msg"])
        # the good stream goes on
        wait_until(lambda: any("streaming from slot" in l["msg"] for l in lines() if l.get("stream") == "lf_good"),
                   60, "the good stream to stream")
        pg.execute("INSERT INTO lf_t VALUES (3)")
        wait_until(lambda: 3 in read_avro_tree(s.out, self, keep=lambda rec: rec["payload"]["id"])
                   or not p.alive(), 60, "the good stream's change")
        # the retried one says why, with its SQLSTATE
        wait_until(lambda: any(l.get("stream") == "lf_ro" and l.get("sqlstate") == "25006" for l in lines()),
                   60, "the read-only stream's retry")
        retry = [l for l in lines() if l.get("stream") == "lf_ro" and l.get("sqlstate")][0]
        self.assertEqual(retry["level"], "warning")
        self.assertIn("read-only transaction", retry["msg"])
        self.assertIn("retrying", retry["msg"])
        p.signal(signal.SIGTERM)
        res = p.wait_result(60)
        self.assertEqual(res.rc, 4, "the highest exit code of the streams (4 > 1 > 0)\n" + res.describe())
        for l in lines():
            self.assertEqual(set(l) - {"ts", "level", "stream", "table", "msg", "sqlstate", "errno"}, set(), l)
            self.assertRegex(l["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIn(l["level"], ("debug", "info", "warning", "error"))
            self.assertNotIn("\n", l["msg"])
        unnamed = [l for l in lines() if "stream \"" in l["msg"] and "stream" not in l]
        self.assertEqual(unnamed, [], "lines about a stream that do not name it")



class ReaderSideTest(PgTestCase):
    """The reader's side of the output: each object's current-schema file
    (.schema.avsc) is the Avro schema of its newest table version, as in the
    newest file's header, so a loader takes it without scanning files."""

    def newest_header_schema(self, folder):
        import avro.datafile
        import avro.io
        files = []
        for d, _dirs, names in os.walk(folder):
            files += [os.path.join(d, n) for n in names if n.endswith(".avro")]
        # file names start with their first CSN: the newest sorts last
        newest = max(files, key=os.path.basename)
        with open(newest, "rb") as f, avro.datafile.DataFileReader(f, avro.io.DatumReader()) as r:
            return json.loads(r.meta["avro.schema"].decode())

    def test_schema_file_follows_the_newest_version(self):
        pg = self.pg
        pg.execute("CREATE TABLE rs_t (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rs_t SELECT g, 'v' || g FROM generate_series(1, 3) g")
        s = self.sluice(stream="rs", tables="public.rs_t", max_file_seconds=1)
        self.catch_up(s)
        folder = os.path.join(s.out, "rs", "public_rs_t")
        with open(os.path.join(folder, ".schema.avsc")) as f:
            first = json.load(f)
        self.assertEqual(first, self.newest_header_schema(folder))
        payload = [f for f in first["fields"] if f["name"] == "payload"][0]["type"]
        self.assertEqual([f["name"] for f in payload["fields"]], ["id", "v"])
        # a column added: a new version, a new file, and the schema file follows
        pg.execute("ALTER TABLE rs_t ADD COLUMN note varchar(20)")
        pg.execute("INSERT INTO rs_t VALUES (4, 'v4', 'added')")
        self.catch_up(s)
        with open(os.path.join(folder, ".schema.avsc")) as f:
            second = json.load(f)
        self.assertEqual(second, self.newest_header_schema(folder))
        payload = [f for f in second["fields"] if f["name"] == "payload"][0]["type"]
        self.assertEqual([f["name"] for f in payload["fields"]], ["id", "v", "note"])
        # the records of the newest file read with it
        recs = read_avro_tree(s.out, self)
        self.assertEqual(sorted(r["payload"]["id"] for r in recs), [1, 2, 3, 4])
        self.assertEqual([r["payload"].get("note") for r in recs if r["payload"]["id"] == 4], ["added"])


if __name__ == "__main__":
    unittest.main()
