"""
Many small tables in one stream: 500 one-row tables, each with its own set of
columns, are all backfilled exactly.  The catalog is read for the whole
selection in one query, and small tables are backfilled in groups, each
group made durable by one flush and checkpointed by one save
(doc/operations.md, "Scale"), so each table must still get its own columns
and its own row, and the flushes are far fewer than the tables.  A kill -9
in the middle of the groups, then a restart, still ends with every table
exact and no row written twice.  Each flush fsyncs each file and each
folder once (the store's "flushed N files, M fsyncs (F folders)" debug
lines, checked against the files and folders on disk), or, with sync =
syncfs, makes them durable with three syncfs() calls and no fsync.

With backfill_connections = 3, the small tables of a group are read over
all three of the snapshot's connections at once: the server's own log
(log_statement = all, with each backend's pid) shows their COPYs on three
backends, and the kill -9 test reads over three connections too.
"""

import os
import re
import time
import unittest

import harness  # noqa: F401
from harness import PgTestCase, dedup, records_for

NTABLES = 500
NSYNCFS = 120      # tables of the sync = syncfs test: a group of 100, one of 20
NKILL = 300        # tables of the kill -9 test
KILL_AFTER = 130   # tables read when it is killed: in the middle of the second group

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


COPY_RE = re.compile(r'^\[(\d+)\] .*statement: COPY \(SELECT .* FROM ONLY "public"\."([a-z]_\d+)"\) TO STDOUT',
                     re.M)


class ManyTablesTest(PgTestCase):
    pg_settings = {"max_locks_per_transaction": "1024", "log_statement": "all", "log_line_prefix": "[%p] "}

    def copy_backends(self, prefix):
        """Per backend pid, the tables of prefix (e.g. 'm_') whose COPY it
        ran, from the server's log."""
        with open(self.pg.logfile, errors="replace") as f:
            text = f.read()
        out = {}
        for pid, table in COPY_RE.findall(text):
            if table.startswith(prefix):
                out.setdefault(pid, set()).add(table)
        return out

    def test_every_table_backfilled_exactly(self):
        self.pg.execute(CREATE % NTABLES)
        s = self.sluice(tables="public.m_*", extra={"source": {"backfill_connections": 3}}, log_level="debug")
        r = self.catch_up(s, timeout=900)
        self.assertEqual(r.stderr.count("backfilled public.m_"), NTABLES, r.describe())
        # Read over all three connections of the snapshot, each table once,
        # and handed on one table after another in the selection's order.
        backends = self.copy_backends("m_")
        self.assertEqual(len(backends), 3, {pid: len(t) for pid, t in backends.items()})
        self.assertEqual(sum(len(t) for t in backends.values()), NTABLES)
        order = re.findall(r"backfilling public\.(m_\d+) at", r.stderr)
        self.assertEqual(order, sorted(order))
        # One flush per group of small tables, not one per table.
        flushes = r.stderr.count("flushed in ")
        self.assertLess(flushes, NTABLES // 10, f"{flushes} flushes for {NTABLES} tables")
        self.check_fsyncs(s, r)
        recs = self.read(s)
        names = [row[0] for row in self.pg.sql(
            "SELECT relname FROM pg_class WHERE relname LIKE 'm\\_%' AND relkind = 'r' ORDER BY relname")]
        self.assertEqual(len(names), NTABLES)
        for name in names:
            self.assertEqual(len(records_for(recs, "public", name)), 1, name)
            self.assertTableMatches(recs, "public", name, ["id"])

    def test_syncfs(self):
        self.pg.execute(CREATE.replace("'m_'", "'y_'") % NSYNCFS)
        s = self.sluice(stream="msync", tables="public.y_*", extra={"destination": {"sync": "syncfs"}},
                        log_level="debug")
        r = self.catch_up(s, timeout=600)
        self.assertEqual(r.stderr.count("backfilled public.y_"), NSYNCFS, r.describe())
        lines = [tuple(map(int, m)) for m in re.findall(
            r"flushed (\d+) files, (\d+) fsyncs, (\d+) syncfs \((\d+) folders\)", r.stderr)]
        self.assertTrue(lines, f"no syncfs counts in the debug log\n{r.describe()}")
        # Each group: its data files, its schema files, then its folders.
        for files, fsyncs, syncfs, folders in lines:
            self.assertEqual((fsyncs, syncfs), (0, 3), lines)
        on_disk, _ = self.files_and_folders(s)
        self.assertEqual(sum(x[0] for x in lines), on_disk, lines)
        recs = self.read(s)
        for i in range(1, NSYNCFS + 1):
            name = f"y_{i:04d}"
            self.assertEqual(len(records_for(recs, "public", name)), 1, name)
            self.assertTableMatches(recs, "public", name, ["id"])

    def files_and_folders(self, s):
        """The stream's data and schema files on disk, and its folders
        (the manifests' left out: they are put one at a time)."""
        on_disk, dirs = 0, 0
        for top, subdirs, names in os.walk(os.path.join(s.out, s.stream)):
            if os.path.basename(top) == "_manifests":
                continue
            dirs += 1
            on_disk += sum(1 for n in names if n.endswith(".avro") or n == ".schema.avsc")
        return on_disk, dirs

    def check_fsyncs(self, s, r):
        """Every flush fsynced each file and each folder once: as many
        files as the stream's data and schema files on disk, and no more
        folders than there are under the stream, plus its own folder once
        per flush (a new table in it each time)."""
        lines = [tuple(map(int, m)) for m in
                 re.findall(r"flushed (\d+) files, (\d+) fsyncs \((\d+) folders\)", r.stderr)]
        self.assertTrue(lines, f"no fsync counts in the debug log\n{r.describe()}")
        for files, fsyncs, folders in lines:
            self.assertEqual(fsyncs, files + folders, lines)
        on_disk, dirs = self.files_and_folders(s)
        self.assertEqual(sum(x[0] for x in lines), on_disk, lines)
        self.assertLessEqual(sum(x[2] for x in lines), dirs + len(lines), lines)

    def test_kill9_in_the_middle_then_restart(self):
        pg = self.pg
        pg.execute(f"""
DO $$
BEGIN
  FOR i IN 1..{NKILL} LOOP
    EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, v text NOT NULL)', 'k_' || lpad(i::text, 4, '0'));
    EXECUTE format('INSERT INTO %I VALUES (%s, %L), (%s, %L)', 'k_' || lpad(i::text, 4, '0'),
                   i, 'first of ' || i, -i, 'second of ' || i);
  END LOOP;
END $$""")
        s = self.sluice(stream="mkill", tables="public.k_*", extra={"source": {"backfill_connections": 3}})
        p = s.start("run")
        deadline = time.monotonic() + 600
        while p.stderr_text().count("backfilled public.k_") < KILL_AFTER:
            if not p.alive():
                self.fail(f"sluice exited before the kill:\n{p.result().describe()}")
            if time.monotonic() > deadline:
                self.fail(f"{KILL_AFTER} tables not read in time:\n{p.stderr_text()[-3000:]}")
            time.sleep(0.05)
        p.kill9()
        self.assertGreater(len(self.copy_backends("k_")), 1)
        r = self.catch_up(s, timeout=900)
        recs = self.read(s)
        names = [row[0] for row in pg.sql(
            "SELECT relname FROM pg_class WHERE relname LIKE 'k\\_%' AND relkind = 'r' ORDER BY relname")]
        self.assertEqual(len(names), NKILL)
        for name in names:
            rows = [x for x in dedup(records_for(recs, "public", name))
                    if x["source_metadata"]["change_type"] == "INSERT"]
            self.assertEqual(len(rows), 2, f"{name}: {rows}\n{r.describe()}")
            self.assertTableMatches(recs, "public", name, ["id"])


if __name__ == "__main__":
    unittest.main()
