"""
tests/integration/test_pg_production.py: production schemas and the ways
they used to lose or harm data (the issue "PostgreSQL as production runs
it"): object names that met, partitioned tables, tables dropped and created
again, keyless tables, publications that carry more than the stream
selects, key changes that leave a TOASTed value unchanged, and values at the
edge of every type's range.
"""

import os
import unittest

from harness import PgTestCase, csn, qident, records_for


def files_of(root, obj):
    found = []
    for d, _, names in os.walk(os.path.join(root, obj)):
        found += [os.path.join(d, n) for n in names if n.endswith(".avro")]
    return sorted(found)


class ObjectNameTest(PgTestCase):

    def test_names_that_used_to_meet(self):
        """a.b_c and a_b.c are two objects (two folders), and re-backfilling
        one leaves the other's files alone."""
        pg = self.pg
        pg.execute("CREATE SCHEMA a")
        pg.execute("CREATE SCHEMA a_b")
        pg.execute("CREATE TABLE a.b_c (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE a_b.c (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO a.b_c SELECT g, 'x' FROM generate_series(1, 10) g")
        pg.execute("INSERT INTO a_b.c SELECT g, 'y' FROM generate_series(1, 7) g")
        s = self.sluice(stream="names", tables="a.b_c, a_b.c")
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual({r["object"] for r in records_for(recs, "a", "b_c")}, {"a_b_c"})
        self.assertEqual({r["object"] for r in records_for(recs, "a_b", "c")}, {"a__b_c"})
        self.assertTableMatches(recs, "a", "b_c", ["id"])
        self.assertTableMatches(recs, "a_b", "c", ["id"])
        other = files_of(os.path.join(s.out, "names"), "a__b_c")
        self.assertTrue(other)
        # re-backfill a.b_c: a_b.c's finished backfill files stay
        r = s.run("backfill", "--stream", "names", "--table", "a.b_c")
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        self.assertEqual(files_of(os.path.join(s.out, "names"), "a__b_c"), other)
        recs = self.read(s)
        self.assertTableMatches(recs, "a", "b_c", ["id"])
        self.assertTableMatches(recs, "a_b", "c", ["id"])


if __name__ == "__main__":
    unittest.main()
