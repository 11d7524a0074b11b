"""
Many small tables in one stream: 500 one-row tables, each with its own set of
columns, are all backfilled exactly.  The catalog is read for the whole
selection in one query and small tables are not waited for one by one
(doc/operations.md, "Scale"), so each table must still get its own columns
and its own row.
"""

import unittest

import harness  # noqa: F401
from harness import PgTestCase, records_for

NTABLES = 500

CREATE = """
DO $$
DECLARE name text;
BEGIN
  FOR i IN 1..%s LOOP
    name := 'm_' || lpad(i::text, 4, '0');
    EXECUTE format('CREATE TABLE %%I (id int PRIMARY KEY, v text NOT NULL%%s)', name,
                   repeat(', c' || (i %% 4)::text || '_x bigint', least(i %% 4, 1))
                   || CASE WHEN i %% 3 = 0 THEN ', w numeric(10,2)' ELSE '' END);
    EXECUTE format('INSERT INTO %%I (id, v) VALUES (%%s, %%L)', name, i, 'row of ' || name);
    IF i %% 4 > 0 THEN
      EXECUTE format('UPDATE %%I SET %%I = %%s', name, 'c' || (i %% 4)::text || '_x', i * 1000);
    END IF;
    IF i %% 3 = 0 THEN
      EXECUTE format('UPDATE %%I SET w = %%s', name, i + 0.25);
    END IF;
  END LOOP;
END $$"""


class ManyTablesTest(PgTestCase):
    pg_settings = {"max_locks_per_transaction": "1024"}

    def test_every_table_backfilled_exactly(self):
        self.pg.execute(CREATE % NTABLES)
        s = self.sluice(tables="public.m_*", extra={"source": {"backfill_connections": 2}})
        r = self.catch_up(s, timeout=900)
        self.assertEqual(r.stderr.count("backfilled public.m_"), NTABLES, r.describe())
        recs = self.read(s)
        names = [row[0] for row in self.pg.sql(
            "SELECT relname FROM pg_class WHERE relname LIKE 'm\\_%' AND relkind = 'r' ORDER BY relname")]
        self.assertEqual(len(names), NTABLES)
        for name in names:
            self.assertEqual(len(records_for(recs, "public", name)), 1, name)
            self.assertTableMatches(recs, "public", name, ["id"])


if __name__ == "__main__":
    unittest.main()
