"""
tests/integration/test_masking.py: column selection and masking
(exclude_columns, mask_columns; doc/configuration.md), for PostgreSQL and
MariaDB into avro_dir:

- a canary value in an excluded column, and the clear values of hashed
  columns, never appear in any byte under the output folder or the
  state_dir, nor in the log at log_level = debug (codec null, so nothing is
  hidden by compression);
- a hashed value is Python's hmac.new(key, msg, hashlib.sha256).hexdigest()
  of the value's bytes as doc/configuration.md defines them (text as it is,
  numbers and dates in their canonical text form); truncate keeps the first
  N characters (multibyte ones counted as one), null and redact as written;
  the Avro schema has no excluded field and documents each masked one;
- an unchanged TOAST value in a masked column stays unchanged;
- a hashed key column gives an exact merge mirror (avro_dir and s3 merge
  mode, and ClickHouse's merge view for both sources) after updates,
  deletes and key changes, also with `kill -9` of sluice at random moments
  (the seed is printed; SLUICE_TEST_SEED repeats one);
- into Iceberg (read through the ClickHouse 26 engine): the excluded column
  is absent from the table, hashed values are the HMAC, and the canary is in
  no file of the warehouse;
- `check` lists each table's excluded and masked columns, and exits 2 for a
  rule that matches no column and for an excluded key column (as run does).

Every expected value is computed here from the source's values.
"""

import hashlib
import hmac
import json
import os
import random
import signal

import avro.datafile
import avro.io

import harness  # noqa: E402
from ch_harness import ChTestCase, MyChTestCase
from harness import PgTestCase, WithS3, csn, records_for, wait_until
from harness_mysql import MyTestCase
from oracle import mirror
from test_iceberg import ch_query, chdb_reason

KEY = b"mask key: \xc3\xa9t\xc3\xa9 / 42"
CANARY = "CANARY-7f3a9c1e-ssn"


def h(value):
    """HMAC-SHA-256 of the value's bytes, as sluice writes it."""
    if isinstance(value, str):
        value = value.encode()
    return hmac.new(KEY, value, hashlib.sha256).hexdigest()


def write_key(s):
    path = os.path.join(s.workdir, "mask.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(KEY + b"\n")
    return path


def masked(s, exclude, mask):
    """Adds the rules and the key file to s's stream section."""
    stream = s.extra.setdefault("stream", {})
    if exclude:
        stream["exclude_columns"] = exclude
    if mask:
        stream["mask_columns"] = mask
        if ":hash" in mask:
            stream["mask_key_file"] = write_key(s)
    s.write_config()
    return s


def all_files(*roots):
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for fn in files:
                yield os.path.join(dirpath, fn)


def payload_schema(path):
    """The payload fields of an Avro file's schema: {name: field}."""
    with open(path, "rb") as f:
        with avro.datafile.DataFileReader(f, avro.io.DatumReader()) as r:
            schema = json.loads(r.meta["avro.schema"])
    payload = next(f for f in schema["fields"] if f["name"] == "payload")
    return {f["name"]: f for f in payload["type"]["fields"]}


def avro_files(root):
    return sorted(p for p in all_files(root) if p.endswith(".avro"))


def acct_churn(t, mysql=False):
    """one(rng) for churn_with_kills on an acct table (email key, v, secret):
    updates, deletes, inserts and key changes."""
    def one(rng):
        k = rng.randrange(1, 400)
        new = (f"CONCAT('n{k}-', UUID(), '@x.org')" if mysql else
               f"'n{k}-' || gen_random_uuid() || '@x.org'")
        moved = "CONCAT('k', email)" if mysql else "'k' || email"
        secret = f"CONCAT(secret, 'x')" if mysql else "secret || 'x'"
        return rng.choice([
            f"UPDATE {t} SET v = v + 1 WHERE v % 7 = {k % 7}",
            f"DELETE FROM {t} WHERE v = {k}",
            f"INSERT INTO {t} VALUES ({new}, {k}, '{CANARY}')",
            f"UPDATE {t} SET email = {moved} WHERE v = {k}",        # a key change
            f"UPDATE {t} SET v = v + 1000, secret = {secret} WHERE v % 5 = {k % 5}",
        ])
    return one


def acct_table(execute, t, n, mysql=False):
    execute(f"CREATE TABLE {t} (email varchar(200) PRIMARY KEY, v int, secret text)")
    execute(f"INSERT INTO {t} VALUES " + ", ".join(f"('u{g}@x.org', {g}, '{CANARY}-{g}')"
                                                    for g in range(1, n + 1)))


class MaskingChecks:
    """What both sources share: the canary search and the schema check."""

    def assert_nowhere(self, s, secrets, logs, root=None):
        """No secret, as bytes, in any file under the output (root: a copy
        of it) and the state_dir, nor in the logs."""
        files = list(all_files(root or s.out, s.state_dir))
        self.assertTrue(any(p.endswith(".avro") for p in files), files)
        for p in files:
            with open(p, "rb") as f:
                data = f.read()
            for sec in secrets:
                self.assertNotIn(sec.encode(), data, f"{sec!r} found in {p}")
        for text in logs:
            for sec in secrets:
                self.assertNotIn(sec, text, f"{sec!r} found in the log")

    def assert_hashed_mirror(self, s, obj, rows, root=None):
        """The merge mirror of obj is rows (email, v) with email hashed,
        and the schema has no secret and documents the hash.  root: the
        output tree (a copy of an s3 prefix), s.out by default."""
        root = root or s.out
        got, files = mirror(root, s.stream, obj, ["email"])
        want = {(h(e),): {"email": h(e), "v": v} for e, v in rows}
        self.assertEqual(set(got), set(want), files)
        for k, row in want.items():
            self.assertEqual(got[k], (row, []), k)
        self.assert_schema(s, ["secret"], {"email": "hash"}, root)
        self.assert_nowhere(s, ["@x.org", CANARY], [], root)

    def churn_with_kills(self, s, execute, one, env=None, rounds=4):
        """Runs sluice in the background while statements one(rng) run, and
        kills it with SIGKILL at a random moment, rounds times.  The seed is printed (SLUICE_TEST_SEED
        repeats it)."""
        seed = int(os.environ.get("SLUICE_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\n{self.id()}: seed {seed}", flush=True)
        rng = random.Random(seed)
        for _ in range(rounds):
            p = s.start("run", env=env)
            for _ in range(rng.randrange(3, 9)):
                execute(one(rng))
            # The kill lands at a random point of the stream's work: sluice
            # run never exits by itself, so wait_result SIGKILLs it at the
            # deadline.
            try:
                r = p.wait_result(timeout=rng.uniform(0.05, 1.5))
                self.fail(f"seed {seed}: sluice run exited by itself:\n{r.describe()}")
            except TimeoutError:
                pass
        return seed

    def assert_schema(self, s, excluded, docs, root=None):
        files = avro_files(root or s.out)
        self.assertTrue(files)
        for p in files:
            fields = payload_schema(p)
            for c in excluded:
                self.assertNotIn(c, fields, p)
            for c, method in docs.items():
                self.assertIn(method, fields[c].get("doc", ""), f"{p}: {c}")
                self.assertEqual(fields[c]["type"], ["null", "string"], f"{p}: {c}")


class PgMaskingTest(PgTestCase, MaskingChecks):

    def test_exclude_and_mask(self):
        pg = self.pg
        pg.execute("CREATE TABLE users (id int PRIMARY KEY, email text, ssn text, name text, "
                   "note bytea, born date, score numeric(10,2), bio text); "
                   "ALTER TABLE users ALTER COLUMN bio SET STORAGE EXTERNAL")
        pg.execute("INSERT INTO users VALUES (1, 'ann@example.com', %s, 'Ézéchiel', '\\x00ff', "
                   "'1984-02-29', -0.05, 'short'), (2, '', %s, 'Bo', NULL, NULL, 12.3, NULL)",
                   (CANARY + "-1", CANARY + "-2"))
        s = self.sluice(stream="pgm", tables="public.users", codec="null", log_level="debug")
        masked(s, "public.users.ssn", "public.users.email:hash, public.users.name:truncate(3), "
               "public.users.note:null, public.users.born:hash, public.users.score:hash, "
               "public.users.bio:hash")
        r1 = self.catch_up(s)
        big = "".join(f"{i:08x}" for i in range(3000))   # 24 kB, stored out of line
        pg.execute("INSERT INTO users VALUES (3, 'cy@example.org', %s, 'Zoë', '\\x0102', "
                   "'2000-01-01', 7, %s)", (CANARY + "-3", big))
        pg.execute("UPDATE users SET name = 'Zoé Z', ssn = %s WHERE id = 3", (CANARY + "-4",))  # bio unchanged
        pg.execute("UPDATE users SET email = 'ann2@example.com' WHERE id = 1")
        pg.execute("DELETE FROM users WHERE id = 2")
        r2 = self.catch_up(s)

        recs = sorted(records_for(self.read(s), "public", "users"), key=csn)
        got = [(r["source_metadata"]["change_type"], r["payload"], r["source_metadata"]["unchanged_columns"])
               for r in recs]
        want_bf = [
            {"id": 1, "email": h("ann@example.com"), "name": "Ézé", "note": None, "born": h("1984-02-29"),
             "score": h("-0.05"), "bio": h("short")},
            {"id": 2, "email": h(""), "name": "Bo", "note": None, "born": None, "score": h("12.30"),
             "bio": None},
        ]
        row3 = {"id": 3, "email": h("cy@example.org"), "name": "Zoë", "note": None, "born": h("2000-01-01"),
                "score": h("7.00"), "bio": h(big)}
        self.assertEqual(got[:2], [("INSERT", want_bf[0], []), ("INSERT", want_bf[1], [])])
        self.assertEqual(got[2], ("INSERT", row3, []))
        self.assertEqual(got[3], ("UPDATE-INSERT", dict(row3, name="Zoé", bio=None), ["bio"]))
        self.assertEqual(got[4][0], "UPDATE-INSERT")
        self.assertEqual(got[4][1]["email"], h("ann2@example.com"))
        self.assertEqual((got[5][0], got[5][1]["id"]), ("DELETE", 2))
        self.assertEqual(len(got), 6)
        self.assert_schema(s, ["ssn"], {"email": "hash", "name": "truncate(3)", "note": "null", "bio": "hash"})
        self.assert_nowhere(s, [CANARY, "ann@example.com", "cy@example.org", "1984-02-29", big[:64]],
                            [r1.stderr, r2.stderr])

    def test_check_lists_and_refuses(self):
        pg = self.pg
        pg.execute("CREATE TABLE ck (id int PRIMARY KEY, a text, b text, c text)")
        s = self.sluice(stream="pgc", tables="public.ck")
        masked(s, "public.ck.a", "public.ck.b:hash, public.c?.c:truncate(1)")
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn('stream pgc: table public.ck: columns excluded: "a"; masked: "b" (hash), '
                      '"c" (truncate(1))\n', r.stdout)

        masked(s, "public.ck.a", "public.ck.b:hash, public.ck.nope:redact")
        r = s.run("check")
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn('column rule "public.ck.nope:redact" matches no column of the stream\'s tables', r.stderr)

        for cmd in (("check",), ("run", "--until-caught-up")):
            masked(s, "public.*.id", "public.ck.b:hash")
            r = s.run(*cmd)
            self.assertEqual(r.rc, 2, r.describe())
            self.assertIn('column "id" of table "public"."ck" is part of the table\'s key and cannot be '
                          'excluded (rule "public.*.id")', r.stderr)

    def test_hashed_key_merge_mirror(self):
        pg = self.pg
        pg.execute("CREATE TABLE acct (email text PRIMARY KEY, v int, secret text)")
        pg.execute("INSERT INTO acct SELECT 'u' || g || '@x.org', g, 's' || g FROM generate_series(1, 250) g")
        s = self.sluice(stream="pgk", tables="public.acct", write_mode="merge",
                        extra={"source": {"backfill_chunk_rows": 100}})
        masked(s, "public.acct.secret", "public.acct.email:hash")
        self.catch_up(s)
        pg.execute("UPDATE acct SET v = v + 100 WHERE v % 3 = 0")
        pg.execute("DELETE FROM acct WHERE v % 5 = 0")
        pg.execute("UPDATE acct SET email = 'moved-' || email WHERE v % 7 = 1")   # key changes
        pg.execute("BEGIN; UPDATE acct SET email = 'tmp' WHERE email = 'u2@x.org'; "
                   "UPDATE acct SET email = 'u2@x.org', v = -2 WHERE email = 'tmp'; COMMIT")
        self.catch_up(s)
        pg.execute("UPDATE acct SET v = v + 1")
        self.catch_up(s)
        self.assert_hashed_mirror(s, "public_acct", pg.sql("SELECT email, v FROM acct"))

    def test_rule_changes_are_noted(self):
        """Rules changed for a table that has output: `check` and the log
        say so (with the old and new rules, the key named by an id that an
        HMAC under it gives), the records from then on are a new version,
        and the old records keep what the old rules wrote."""
        pg = self.pg
        pg.execute("CREATE TABLE rch (id int PRIMARY KEY, email text, ssn text)")
        pg.execute("INSERT INTO rch VALUES (1, 'a@x.org', 's1')")
        s = self.sluice(stream="rch", tables="public.rch")
        masked(s, None, "public.rch.email:hash")
        r = self.catch_up(s)
        self.assertNotIn("column rules changed", r.stderr)
        key_id = hmac.new(KEY, b"sluice mask key id", hashlib.sha256).hexdigest()[:16]
        masked(s, "public.rch.ssn", "public.rch.email:redact")
        s.extra["stream"].pop("mask_key_file")
        s.write_config()
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'stream rch: table public.rch: the column rules changed since its output was written (were '
                      f'"email:hash (key {key_id})", now "email:redact, ssn:exclude")', r.stdout)
        pg.execute("INSERT INTO rch VALUES (2, 'b@x.org', 's2')")
        r = self.catch_up(s)
        self.assertIn(f'stream "rch": table "public"."rch": its column rules changed since its output was written '
                      f'(were "email:hash (key {key_id})", now "email:redact, ssn:exclude")', r.stderr)
        self.assertIn(f"sluice backfill -c {os.path.realpath(s.config_path)} --stream rch --table public.rch",
                      r.stderr)
        recs = sorted(records_for(self.read(s), "public", "rch"), key=csn)
        self.assertEqual([r["payload"] for r in recs],
                         [{"id": 1, "email": h("a@x.org"), "ssn": "s1"}, {"id": 2, "email": "REDACTED"}])
        # Noted once: the next run and check are quiet.
        r = self.catch_up(s)
        self.assertNotIn("column rules changed", r.stderr)
        r = s.run("check")
        self.assertNotIn("column rules changed", r.stdout)

    def test_dead_letter_holds_masked_values_only(self):
        """A row that goes to the dead-letter file (a NULL in a key_columns
        column made nullable while the agent runs) holds the masked values:
        no excluded column, hashed values hashed."""
        pg = self.pg
        pg.execute("CREATE TABLE dl (id int, u int NOT NULL UNIQUE, email text, ssn text)")
        pg.execute("ALTER TABLE dl REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO dl VALUES (1, 10, 'a@x.org', %s)", (CANARY + "-1",))
        s = self.sluice(stream="dl", tables="public.dl", write_mode="merge", max_file_seconds=1, codec="null",
                        extra={"stream": {"key_columns": "public.dl.u"}})
        masked(s, "public.dl.ssn", "public.dl.email:hash")
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        pg.execute("ALTER TABLE dl ALTER COLUMN u DROP NOT NULL")
        pg.execute("INSERT INTO dl VALUES (5, NULL, 'e@x.org', %s)", (CANARY + "-5",))
        pg.execute("INSERT INTO dl VALUES (6, 60, 'f@x.org', %s)", (CANARY + "-6",))
        wait_until(lambda: not p.alive() or (60,) in mirror(s.out, "dl", "public_dl", ["u"])[0], 60,
                   "the row after")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        with open(os.path.join(s.state_dir, "dl.dead-letter.jsonl")) as f:
            lines = [json.loads(x) for x in f]
        self.assertEqual([(x["change_type"], x["row"]) for x in lines],
                         [("INSERT", {"id": 5, "u": None, "email": h("e@x.org")})])
        self.assert_nowhere(s, [CANARY, "@x.org"], [r.stderr])

    def test_hashed_key_merge_kill9(self):
        pg = self.pg
        acct_table(pg.execute, "kacct", 150)
        s = self.sluice(stream="pgkk", tables="public.kacct", write_mode="merge", max_file_seconds=1)
        masked(s, "public.kacct.secret", "public.kacct.email:hash")
        seed = self.churn_with_kills(s, pg.execute, acct_churn("kacct"))
        self.catch_up(s)
        with self.subTest(seed=seed):
            self.assert_hashed_mirror(s, "public_kacct", pg.sql("SELECT email, v FROM kacct"))


class MyMaskingTest(MyTestCase, MaskingChecks):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE shop")

    def test_exclude_and_mask(self):
        my = self.my
        my.execute("CREATE TABLE shop.users (id int PRIMARY KEY, email varchar(100), ssn varchar(64), "
                   "name varchar(20) CHARACTER SET utf8mb4, photo varbinary(16), born date, "
                   "score decimal(10,2), n bigint)")
        my.execute("INSERT INTO shop.users VALUES (1, 'ann@example.com', %s, 'Ézéchiel', x'00ff', "
                   "'1984-02-29', -0.05, -7), (2, '', %s, 'Bo', NULL, NULL, 12.3, NULL)",
                   (CANARY + "-1", CANARY + "-2"))
        s = self.sluice(stream="mym", tables="shop.users", codec="null", log_level="debug")
        masked(s, "shop.users.ssn", "shop.users.email:hash, shop.users.name:truncate(3), "
               "shop.users.photo:truncate(1), shop.users.born:hash, shop.users.score:hash, shop.users.n:redact")
        r1 = self.catch_up(s)
        my.execute("INSERT INTO shop.users VALUES (3, 'cy@example.org', %s, 'Zoë', x'0102', "
                   "'2000-01-01', 7, 1)", (CANARY + "-3",))
        my.execute("UPDATE shop.users SET email = 'ann2@example.com', ssn = %s WHERE id = 1", (CANARY + "-4",))
        my.execute("DELETE FROM shop.users WHERE id = 2")
        r2 = self.catch_up(s)

        recs = sorted(records_for(self.read(s), "shop", "users"), key=csn)
        got = [(r["source_metadata"]["change_type"], r["payload"]) for r in recs]
        row1 = {"id": 1, "email": h("ann@example.com"), "name": "Ézé", "photo": b"\x00",
                "born": h("1984-02-29"), "score": h("-0.05"), "n": "REDACTED"}
        row2 = {"id": 2, "email": h(""), "name": "Bo", "photo": None, "born": None, "score": h("12.30"),
                "n": None}
        row3 = {"id": 3, "email": h("cy@example.org"), "name": "Zoë", "photo": b"\x01",
                "born": h("2000-01-01"), "score": h("7.00"), "n": "REDACTED"}
        self.assertEqual(got[:3], [("INSERT", row1), ("INSERT", row2), ("INSERT", row3)])
        self.assertEqual(got[3], ("UPDATE-INSERT", dict(row1, email=h("ann2@example.com"))))
        self.assertEqual((got[4][0], got[4][1]["id"]), ("DELETE", 2))
        self.assertEqual(len(got), 5)
        self.assert_schema(s, ["ssn"], {"email": "hash", "name": "truncate(3)", "n": "redact"})
        self.assert_nowhere(s, [CANARY, "ann@example.com", "cy@example.org", "1984-02-29"],
                            [r1.stderr, r2.stderr])

    def test_check_lists_and_refuses(self):
        self.my.execute("CREATE TABLE shop.ck (id int PRIMARY KEY, a text, b text)")
        s = self.sluice(stream="myc", tables="shop.ck")
        masked(s, "shop.ck.a", "shop.ck.b:redact")
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn('stream myc: table shop.ck: columns excluded: "a"; masked: "b" (redact)\n', r.stdout)
        masked(s, "shop.ck.a", "shop.nope.b:redact")
        r = s.run("check")
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn('column rule "shop.nope.b:redact" matches no column', r.stderr)
        masked(s, "shop.ck.id", None)
        r = s.run("check")
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn('column "id" of table "shop"."ck" is part of the table\'s key', r.stderr)

    def test_hashed_key_merge_mirror(self):
        my = self.my
        my.execute("CREATE TABLE shop.acct (email varchar(64) PRIMARY KEY, v int, secret text)")
        my.execute("INSERT INTO shop.acct VALUES " +
                   ", ".join(f"('u{g}@x.org', {g}, 's{g}')" for g in range(1, 31)))
        s = self.sluice(stream="myk", tables="shop.acct", write_mode="merge")
        masked(s, "shop.acct.secret", "shop.acct.email:hash")
        self.catch_up(s)
        my.execute("UPDATE shop.acct SET v = v + 100 WHERE v % 3 = 0")
        my.execute("DELETE FROM shop.acct WHERE v % 5 = 0")
        my.execute("UPDATE shop.acct SET email = CONCAT('moved-', email) WHERE v % 7 = 1")
        self.catch_up(s)
        my.execute("UPDATE shop.acct SET v = v + 1")
        self.catch_up(s)
        self.assert_hashed_mirror(s, "shop_acct", my.sql("SELECT email, v FROM shop.acct"))

    def test_hashed_key_merge_kill9(self):
        my = self.my
        acct_table(my.execute, "shop.kacct", 150, mysql=True)
        s = self.sluice(stream="mykk", tables="shop.kacct", write_mode="merge", max_file_seconds=1)
        masked(s, "shop.kacct.secret", "shop.kacct.email:hash")
        seed = self.churn_with_kills(s, my.execute, acct_churn("shop.kacct", mysql=True))
        self.catch_up(s)
        with self.subTest(seed=seed):
            self.assert_hashed_mirror(s, "shop_kacct", my.sql("SELECT email, v FROM shop.kacct"))


class S3Masking(MaskingChecks):
    """Into s3 (s3rver): a hashed key merge mirror after kill -9, and no
    secret in any object.  The class sets up source() and the s3 server."""

    def test_hashed_key_merge_kill9_s3(self):
        execute, sql, mysql, t, obj = self.source()
        acct_table(execute, t, 120, mysql=mysql)
        s = self.sluice(stream="s3k", tables=t, write_mode="merge", max_file_seconds=1, s3=self.s3,
                        prefix="cdc/" + self.id().rsplit(".", 2)[-2].lower())
        masked(s, t + ".secret", t + ".email:hash")
        seed = self.churn_with_kills(s, execute, acct_churn(t, mysql=mysql), rounds=3)
        self.catch_up(s)
        with self.subTest(seed=seed):
            self.assert_hashed_mirror(s, obj, sql(f"SELECT email, v FROM {t}"), root=s.output_tree())


class PgS3MaskingTest(WithS3, PgTestCase, S3Masking):

    def source(self):
        return self.pg.execute, self.pg.sql, False, "public.s3acct", "public_s3acct"


class MyS3MaskingTest(WithS3, MyTestCase, S3Masking):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE shop")

    def source(self):
        return self.my.execute, self.my.sql, True, "shop.s3acct", "shop_s3acct"


class ChMasking(MaskingChecks):
    """A hashed key into ClickHouse merge mode: the `_current` view equals
    the source with the key hashed, the excluded column is no column (the
    masked one is commented), and no secret is in the table.  The class sets
    up source()."""

    def assert_view(self, sql, t, obj):
        self.assertNotIn("secret", [c[0] for c in self.ch.columns("chk", obj)])
        comments = dict(tuple(line.split("\t", 1)) for line in self.ch.query(
            f"SELECT name, comment FROM system.columns WHERE database = 'chk' AND table = '{obj}' "
            "FORMAT TSV").decode().splitlines())
        self.assertIn("masked by sluice: hash", comments["email"])
        self.assertEqual(comments["v"], "")
        got = {}
        for r in self.ch.rows("chk", obj + "_current"):
            e = r["email"].decode() if isinstance(r["email"], bytes) else r["email"]
            self.assertNotIn(e, got)
            got[e] = r["v"]
        want = {h(e): v for e, v in sql(f"SELECT email, v FROM {t}")}
        self.assertEqual(got, want)
        dump = self.ch.query(f"SELECT * FROM chk.{obj} FORMAT TSV")
        self.assertNotIn(CANARY.encode() if isinstance(dump, bytes) else CANARY, dump)
        self.assertNotIn(b"@x.org" if isinstance(dump, bytes) else "@x.org", dump)

    def test_hashed_key_merge_view(self):
        execute, sql, mysql, t, obj = self.source()
        acct_table(execute, t, 30, mysql=mysql)
        s = self.sluice(stream="chk", tables=t, database="chk", write_mode="merge")
        masked(s, t + ".secret", t + ".email:hash")
        self.catch_up(s)
        execute(f"UPDATE {t} SET v = v + 100 WHERE v % 3 = 0")
        execute(f"DELETE FROM {t} WHERE v % 5 = 0")
        execute(f"UPDATE {t} SET email = " + ("CONCAT('moved-', email)" if mysql else "'moved-' || email") +
                " WHERE v % 7 = 1")   # key changes
        self.catch_up(s)
        execute(f"UPDATE {t} SET v = v + 1")
        self.catch_up(s)
        self.assert_view(sql, t, obj)

    def test_hashed_key_merge_kill9(self):
        execute, sql, mysql, t, obj = self.source()
        t, obj = t + "k", obj + "k"
        acct_table(execute, t, 120, mysql=mysql)
        s = self.sluice(stream="chkk", tables=t, database="chk", write_mode="merge", max_file_seconds=1)
        masked(s, t + ".secret", t + ".email:hash")
        seed = self.churn_with_kills(s, execute, acct_churn(t, mysql=mysql), env=self.env(), rounds=3)
        self.catch_up(s)
        with self.subTest(seed=seed):
            self.assert_view(sql, t, obj)


class ChMaskingTest(ChTestCase, ChMasking):

    def source(self):
        return self.pg.execute, self.pg.sql, False, "public.cacct", "public_cacct"


class MyChMaskingTest(MyChTestCase, ChMasking):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE shop")

    def source(self):
        return self.my.execute, self.my.sql, True, "shop.cacct", "shop_cacct"


class IcebergMaskingTest(PgTestCase, MaskingChecks):
    """Into Iceberg, read through the ClickHouse 26 engine."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()

    def test_exclude_and_hash(self):
        pg = self.pg
        pg.execute("CREATE TABLE iusers (id int PRIMARY KEY, email text, ssn text, name text)")
        pg.execute("INSERT INTO iusers VALUES (1, 'ann@example.com', %s, 'Ézéchiel'), (2, NULL, %s, 'Bo')",
                   (CANARY + "-1", CANARY + "-2"))
        s = self.sluice(stream="icm", tables="public.iusers", max_file_seconds=1, codec="null",
                        log_level="debug")
        s.extra.setdefault("destination", {}).update(type="iceberg", path=s.out)
        masked(s, "public.iusers.ssn", "public.iusers.email:hash, public.iusers.name:truncate(2)")
        r1 = self.catch_up(s)
        pg.execute("UPDATE iusers SET email = 'cy@example.org', ssn = %s WHERE id = 2", (CANARY + "-3",))
        r2 = self.catch_up(s)
        path = os.path.join(os.path.realpath(s.out), s.stream, "public_iusers")
        cols = [c["name"] for c in ch_query(f"DESCRIBE TABLE icebergLocal('{path}')")]
        self.assertNotIn("ssn", cols)
        self.assertEqual(cols[:3], ["id", "email", "name"])
        got = [(r["id"], r["email"], r["name"], r["_change_type"]) for r in
               ch_query(f"SELECT id, email, name, _change_type FROM icebergLocal('{path}') ORDER BY _csn")]
        self.assertEqual(got, [(1, h("ann@example.com"), "Éz", "INSERT"), (2, None, "Bo", "INSERT"),
                               (2, h("cy@example.org"), "Bo", "UPDATE-INSERT")])
        self.assert_nowhere(s, [CANARY, "ann@example.com", "cy@example.org", "Ézé"], [r1.stderr, r2.stderr])
        # The table's schema documents each masked column, as the Avro schema does.
        with open(os.path.join(path, "metadata", "version-hint.text")) as f:
            version = f.read().strip()
        with open(os.path.join(path, "metadata", f"v{version}.metadata.json")) as f:
            meta = json.load(f)
        schema = next(x for x in meta["schemas"] if x["schema-id"] == meta["current-schema-id"])
        docs = {x["name"]: x.get("doc") for x in schema["fields"]}
        self.assertIn("masked by sluice: hash", docs["email"])
        self.assertIn("masked by sluice: truncate(2)", docs["name"])
        self.assertIsNone(docs["id"])

    def test_hashed_key_merge_kill9(self):
        pg = self.pg
        acct_table(pg.execute, "iacct", 120)
        s = self.sluice(stream="ick", tables="public.iacct", write_mode="merge", max_file_seconds=1)
        s.extra.setdefault("destination", {}).update(type="iceberg", path=s.out)
        masked(s, "public.iacct.secret", "public.iacct.email:hash")
        seed = self.churn_with_kills(s, pg.execute, acct_churn("iacct"), rounds=3)
        self.catch_up(s)
        path = os.path.join(os.path.realpath(s.out), s.stream, "public_iacct")
        rows = ch_query(f"SELECT email, v FROM icebergLocal('{path}')")
        got = {}
        for r in rows:
            self.assertNotIn(r["email"], got, f"seed {seed}: a key twice")
            got[r["email"]] = r["v"]
        want = {h(e): v for e, v in pg.sql("SELECT email, v FROM iacct")}
        self.assertEqual(got, want, f"seed {seed}")
        self.assert_nowhere(s, [CANARY, "@x.org"], [])


class MyIcebergMaskingTest(MyTestCase, MaskingChecks):
    """MariaDB into Iceberg, read through the ClickHouse 26 engine: the
    excluded column is absent, hashes are the HMAC, and a hashed key gives
    an exact merge table after kill -9."""

    @classmethod
    def setUpClass(cls):
        harness.skip_unless(chdb_reason())
        super().setUpClass()
        cls.my.execute("CREATE DATABASE shop")

    def test_hashed_key_merge_kill9(self):
        my = self.my
        acct_table(my.execute, "shop.iacct", 120, mysql=True)
        s = self.sluice(stream="myick", tables="shop.iacct", write_mode="merge", max_file_seconds=1,
                        codec="null")
        s.extra.setdefault("destination", {}).update(type="iceberg", path=s.out)
        masked(s, "shop.iacct.secret", "shop.iacct.email:hash")
        seed = self.churn_with_kills(s, my.execute, acct_churn("shop.iacct", mysql=True), rounds=3)
        self.catch_up(s)
        path = os.path.join(os.path.realpath(s.out), s.stream, "shop_iacct")
        self.assertNotIn("secret", [c["name"] for c in ch_query(f"DESCRIBE TABLE icebergLocal('{path}')")])
        got = {}
        for r in ch_query(f"SELECT email, v FROM icebergLocal('{path}')"):
            self.assertNotIn(r["email"], got, f"seed {seed}: a key twice")
            got[r["email"]] = r["v"]
        want = {h(e): v for e, v in my.sql("SELECT email, v FROM shop.iacct")}
        self.assertEqual(got, want, f"seed {seed}")
        self.assert_nowhere(s, [CANARY, "@x.org"], [])

if __name__ == "__main__":
    import unittest
    unittest.main()
