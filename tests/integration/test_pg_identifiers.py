"""
tests/integration/test_pg_identifiers.py: hostile identifiers.  A table
named a"b in a schema named `we ird`, with a column named select, and a table
named `;DROP TABLE t`, are backfilled and streamed like any other.
"""

import unittest

from harness import PgTestCase, csn, qident, records_for

SCHEMA = "we ird"
T1 = 'a"b'
T2 = ";DROP TABLE t"


class HostileIdentifiersTest(PgTestCase):

    def test_hostile_names(self):
        pg = self.pg
        s_ = qident(SCHEMA)
        t1 = f"{s_}.{qident(T1)}"
        t2 = f"{s_}.{qident(T2)}"
        pg.execute(f"CREATE SCHEMA {s_}")
        pg.execute(f'CREATE TABLE {t1} (id int PRIMARY KEY, "select" text, counter int NOT NULL DEFAULT 0)')
        pg.execute(f'CREATE TABLE {t2} ("from" int PRIMARY KEY, "where" text)')
        pg.execute("CREATE TABLE t (id int PRIMARY KEY)")   # the table the name tries to drop
        pg.execute(f"INSERT INTO {t1} VALUES (1, 'one', 0), (2, 'two', 0)")
        pg.execute(f"INSERT INTO {t2} VALUES (1, 'x')")

        s = self.sluice(stream="hostile", tables="we ird.*")
        self.catch_up(s)
        pg.execute(f"INSERT INTO {t1} VALUES (3, 'three', 0)")
        pg.execute(f"UPDATE {t1} SET \"select\" = 'uno', counter = counter + 1 WHERE id = 1")
        pg.execute(f"DELETE FROM {t1} WHERE id = 2")
        pg.execute(f"INSERT INTO {t2} VALUES (2, 'y')")
        pg.execute(f"UPDATE {t2} SET \"from\" = 20 WHERE \"from\" = 1")
        self.catch_up(s)

        recs = self.read(s)
        r1 = sorted(records_for(recs, SCHEMA, T1), key=csn)
        r2 = sorted(records_for(recs, SCHEMA, T2), key=csn)
        self.assertEqual({r["object"] for r in r1}, {f"{SCHEMA}_{T1}"})
        self.assertEqual({r["object"] for r in r2}, {f"{SCHEMA}_{T2}"})
        self.assertEqual([(r["source_metadata"]["change_type"], r["payload"]["id"]) for r in r1],
                         [("INSERT", 1), ("INSERT", 2), ("INSERT", 3), ("UPDATE-INSERT", 1), ("DELETE", 2)])
        self.assertEqual(r1[3]["payload"], {"id": 1, "select": "uno", "counter": 1})
        self.assertEqual(r1[0]["source_metadata"]["primary_keys"], ["id"])
        self.assertEqual(r2[-1]["source_metadata"]["primary_keys"], ["from"])
        self.assertEqual([r["source_metadata"]["change_type"] for r in r2],
                         ["INSERT", "INSERT", "UPDATE-DELETE", "UPDATE-INSERT"])
        self.assertTableMatches(recs, SCHEMA, T1, ["id"])
        self.assertTableMatches(recs, SCHEMA, T2, ["from"])
        self.assertNoCounterGaps(recs, SCHEMA, T1, ["id"])
        # nothing outside the selected schema, and table t still exists
        self.assertEqual({r["source_metadata"]["schema"] for r in recs}, {SCHEMA})
        self.assertEqual(pg.one("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 't'"), 1)

    def test_hostile_publication_name(self):
        """A publication name with both kinds of quote: created, passed to
        START_REPLICATION (a literal holding an identifier list), streamed."""
        pg = self.pg
        pg.execute("CREATE TABLE pubq (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO pubq VALUES (1, 'a')")
        pub = """my"pub'x"""
        s = self.sluice(stream="pubq", tables="public.pubq", extra={"stream": {"publication": pub}})
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        self.assertEqual(pg.one("SELECT count(*) FROM pg_publication WHERE pubname = %s", (pub,)), 1)
        pg.execute("INSERT INTO pubq VALUES (2, 'b')")
        pg.execute("UPDATE pubq SET v = 'c' WHERE id = 1")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "pubq")
        self.assertEqual(sorted(r["source_metadata"]["change_type"] for r in recs),
                         ["INSERT", "INSERT", "UPDATE-INSERT"])
        self.assertTableMatches(recs, "public", "pubq", ["id"])


if __name__ == "__main__":
    unittest.main()
