"""
tests/integration/test_ch_refused.py: a ClickHouse destination that refuses
the user stops the stream with exit 3, against the throwaway ClickHouse of
ch_harness.py.

- a wrong password: `run --until-caught-up` exits 3 at the first refusal
  (no retries), naming the destination's error (WRONG_PASSWORD, 193 in
  18.16; AUTHENTICATION_FAILED, 516 later), and `check` exits 3 too;
- a read-only user: the same, with READONLY (164);
- a schema change ClickHouse's table cannot take (a column retyped in
  ClickHouse by hand, a type narrowed at the source): exit 3 at once, naming
  the table, the column, the side that changed and what to do.
"""

import time

from ch_harness import ChTestCase

RETRY_PAUSE = "retrying in"


class RefusedTest(ChTestCase):

    def make_table(self):
        self.pg.execute("CREATE TABLE IF NOT EXISTS rf (id int PRIMARY KEY, v text)")
        self.pg.execute("INSERT INTO rf VALUES (1, 'a') ON CONFLICT DO NOTHING")

    def run_refused(self, s, env):
        t0 = time.monotonic()
        r = s.run("run", "--until-caught-up", timeout=120, env=env)
        took = time.monotonic() - t0
        self.assertEqual(r.rc, 3, r.describe())
        self.assertNotIn(RETRY_PAUSE, r.stderr, "a refused user is not retried")
        print(f"\n  run --until-caught-up stopped with exit 3 in {took:.1f} s")
        return r

    def test_wrong_password_exits_3(self):
        self.make_table()
        s = self.sluice(stream="rf_pw", tables="public.rf", database="rf_pw")
        env = {"SLUICE_TEST_CH_PASSWORD": "wrong-password"}
        r = self.run_refused(s, env)
        self.assertIn(f"Code: {self.ch.wrong_password_code}", r.stderr)
        self.assertNotIn("wrong-password", r.stdout + r.stderr)
        r = s.run("check", env=env)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("does not answer as user \"sluice\"", r.stderr)

    def test_readonly_user_exits_3(self):
        self.make_table()
        s = self.sluice(stream="rf_ro", tables="public.rf", database="rf_ro",
                        dest={"user": "reader", "password_env": None})
        r = self.run_refused(s, None)
        self.assertIn("Code: 164", r.stderr)
        r = s.run("check")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("user \"reader\" is read-only in ClickHouse", r.stderr)

    def test_refused_schema_change_exits_3(self):
        """A column retyped in ClickHouse by hand, and a type narrowed at the
        source (bigint to int, which no MODIFY COLUMN keeps exact): exit 3 at
        once, naming the table, the column, the side that changed it and
        what to do."""
        cases = (
            ("rt", "int", "ALTER TABLE rf_rt.public_rt MODIFY COLUMN counter Nullable(String)", None,
             'table "public_rt": column "counter" was changed in ClickHouse: sluice made it Nullable(Int32), which '
             'the source table still needs, and ClickHouse now has Nullable(String)'),
            ("nw", "bigint", None, "ALTER TABLE nw ALTER COLUMN counter TYPE int",
             'table "public_nw": column "counter" changed at the source: ClickHouse has Nullable(Int64), as sluice '
             'made it, and the source table now needs Nullable(Int32)'),
        )
        for t, col_type, ch_ddl, pg_ddl, message in cases:
            with self.subTest(table=t):
                self.pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, counter {col_type})")
                self.pg.execute(f"INSERT INTO {t} SELECT g, g FROM generate_series(1, 5) g")
                s = self.sluice(stream=f"rf_{t}", tables=f"public.{t}", database=f"rf_{t}", write_mode="merge")
                self.catch_up(s)
                if ch_ddl:
                    self.ch.query(ch_ddl)
                if pg_ddl:
                    self.pg.execute(pg_ddl)
                self.pg.execute(f"UPDATE {t} SET counter = counter + 1 WHERE id = 1")
                self.pg.wait_wal_flushed()
                r = self.run_refused(s, self.env())
                self.assertIn(message, r.stderr)
                self.assertIn('the stream stops here. To go on: when ClickHouse was changed, put its column '
                              f'back; when the source was, drop "rf_{t}"."public_{t}" in ClickHouse and run '
                              f'`sluice backfill -c {s.config_path} --stream rf_{t} --table public.{t}`', r.stderr)
                self.assertNotIn("retrying from the last checkpoint", r.stderr)
