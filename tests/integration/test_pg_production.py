"""
tests/integration/test_pg_production.py: production schemas and the ways
they used to lose or harm data (the issue "PostgreSQL as production runs
it"): object names that met, partitioned tables, tables dropped and created
again, keyless tables, publications that carry more than the stream
selects, key changes that leave a TOASTed value unchanged, and values at the
edge of every type's range.
"""

import json
import os
import unittest

import avro.datafile
import avro.io
import avro.schema

from ch_harness import HoldingProxy
from harness import (AgentRuns, PgTestCase, WithS3, assert_marker_between, backfill_running, change_type, checkpoint_table, csn,
                     qident, read_avro_tree, records_for, wait_until)

INT64_MAX = 2**63 - 1


def strip_logical(o):
    if isinstance(o, dict):
        if "logicalType" in o and o.get("logicalType") != "decimal":
            return strip_logical(o["type"])
        return {k: strip_logical(v) for k, v in o.items()}
    if isinstance(o, list):
        return [strip_logical(x) for x in o]
    return o


def read_raw(root):
    """Every record under root, with dates, times and timestamps as the
    plain ints the files hold (Python's datetime cannot hold BC years or
    years after 9999)."""
    out = []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith(".avro"):
                continue
            with open(os.path.join(d, n), "rb") as f:
                r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
                ws = json.loads(r.get_meta("avro.schema"))
                r.datum_reader.writers_schema = avro.schema.parse(json.dumps(strip_logical(ws)))
                out.extend(r)
    return out


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


def changes(recs):
    return [r["source_metadata"]["change_type"] for r in recs]


class FieldNameTest(PgTestCase):

    def test_field_names_stay_with_their_columns(self):
        """Columns whose names clean up to the same text: dropping one moves
        no field name to another, in the files before and after."""
        pg = self.pg
        pg.execute('CREATE TABLE fn (id int PRIMARY KEY, "a-b" text, "a b" text, a_b text)')
        pg.execute("INSERT INTO fn VALUES (1, 'dash', 'space', 'under')")
        s = self.sluice(stream="fn", tables="public.fn")
        self.catch_up(s)
        pg.execute('ALTER TABLE fn DROP COLUMN "a-b"')
        pg.execute("INSERT INTO fn VALUES (2, 'space2', 'under2')")
        pg.execute("UPDATE fn SET a_b = a_b || '!' WHERE id = 1")
        self.catch_up(s)
        schemas = []
        for d, _, names in os.walk(s.out):
            for n in sorted(names):
                if not n.endswith(".avro"):
                    continue  # manifests and schema files
                with open(os.path.join(d, n), "rb") as f:
                    r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
                    ws = json.loads(r.get_meta("avro.schema"))
                    payload = [f for f in ws["fields"] if f["name"] == "payload"][0]["type"]["fields"]
                    schemas.append({p["sluice.column"]: p["name"] for p in payload})
        self.assertEqual(len({json.dumps(x, sort_keys=True) for x in schemas}), 2, schemas)
        for sc in schemas:
            self.assertEqual(sc["a b"], "a_20b")
            self.assertEqual(sc["a_b"], "a_b")
            if "a-b" in sc:
                self.assertEqual(sc["a-b"], "a_2db")
        self.assertTableMatches(self.read(s), "public", "fn", ["id"])


class PartitionTest(AgentRuns, PgTestCase):

    def test_partitioned_root(self):
        """A selected root is backfilled in full and streamed under its own
        name (one object), nested partitions included; a cross-partition
        update and a partition attached with rows or detached while the
        stream runs end with the output equal to the root."""
        pg = self.pg
        pg.execute("CREATE TABLE ev (id int, region text, n int NOT NULL DEFAULT 0, PRIMARY KEY (id, region)) "
                   "PARTITION BY LIST (region)")
        pg.execute("CREATE TABLE ev_eu PARTITION OF ev FOR VALUES IN ('eu')")
        pg.execute("CREATE TABLE ev_us PARTITION OF ev FOR VALUES IN ('us') PARTITION BY RANGE (id)")
        pg.execute("CREATE TABLE ev_us_lo PARTITION OF ev_us FOR VALUES FROM (0) TO (1000)")
        pg.execute("CREATE TABLE ev_us_hi PARTITION OF ev_us FOR VALUES FROM (1000) TO (100000)")
        pg.execute("INSERT INTO ev SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, 0 "
                   "FROM generate_series(1, 2000) g")
        s = self.sluice(stream="parts", tables="public.ev*")
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual({r["object"] for r in recs}, {"public_ev"}, "one object: the root")
        self.assertEqual(len(records_for(recs, "public", "ev")), 2000)
        self.assertTableMatches(recs, "public", "ev", ["id", "region"])
        # changes arrive under the root, a cross-partition update included
        pg.execute("UPDATE ev SET n = n + 1 WHERE id <= 10")
        pg.execute("UPDATE ev SET region = 'us' WHERE id = 2")
        pg.execute("DELETE FROM ev WHERE id = 1500")
        pg.execute("INSERT INTO ev VALUES (5000, 'eu', 0)")
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual({r["object"] for r in recs}, {"public_ev"})
        self.assertTableMatches(recs, "public", "ev", ["id", "region"])
        # a partition attached with rows of its own, and one detached: rows
        # come and go without changes, so the root is backfilled again
        pg.execute("CREATE TABLE ev_asia (LIKE ev INCLUDING DEFAULTS, PRIMARY KEY (id, region))")
        pg.execute("INSERT INTO ev_asia SELECT g, 'asia', 7 FROM generate_series(1, 30) g")
        before = {r["uuid"] for r in self.read(s)}
        p = s.start("run")
        from harness import wait_until
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        pg.execute("ALTER TABLE ev ATTACH PARTITION ev_asia FOR VALUES IN ('asia')")
        pg.execute("INSERT INTO ev VALUES (31, 'asia', 0)")
        pg.execute("ALTER TABLE ev_us DETACH PARTITION ev_us_hi")
        pg.execute("UPDATE ev SET n = n + 1 WHERE region = 'eu' AND id <= 100")
        wait_until(lambda: "restarting the stream" in p.stderr_text() or not p.alive(), 60, "the restart")
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(__import__("signal").SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0)
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "ev", ["id", "region"])
        # the detached partition is a table of its own now, and the stream
        # selects it (public.ev*); ev_asia, a table of its own until it was
        # attached, is now part of the root: its own object ends cleared
        self.assertTableMatches(recs, "public", "ev_us_hi", ["id", "region"])
        from harness import rebuild
        asia = records_for(recs, "public", "ev_asia")
        if asia:
            self.assertEqual(rebuild(asia, ["id", "region"], table=("public", "ev_asia")), {})
        self.assertEqual({r["object"] for r in recs} - {"public_ev", "public_ev_us_hi", "public_ev_asia"}, set())
        # the root's re-backfill marker sorts after every record of the root
        # before it and before the rows that rebuild it
        ev = records_for(recs, "public", "ev")
        marks = [r for r in ev if change_type(r) == "TRUNCATE" and r["uuid"] not in before]
        self.assertEqual(len(marks), 1)
        rows = [r for r in ev if r["read_method"] == "postgresql-backfill" and r["uuid"] not in before
                and r is not marks[0]]
        self.assertEqual(len(rows), len(self.pg.sql("SELECT 1 FROM ev")))
        assert_marker_between(self, [r for r in ev if r["uuid"] in before], marks[0], rows)

    def table_with_rows(self, root, k):
        """Table root_k, a table of its own with 20 rows, to attach to the
        partitioned table root (id, part, v) for part = k."""
        self.pg.execute(f"CREATE TABLE {root}_{k} (id int, part int, v int NOT NULL, PRIMARY KEY (id, part))")
        self.pg.execute(f"INSERT INTO {root}_{k} SELECT g, {k}, g FROM generate_series(1, 20) g")

    def attach_and_detach(self, root, k, every):
        """root_k attached to root, the rows with id % every = 0 changed
        through the root, root_k detached again."""
        for sql in (f"ALTER TABLE {root} ATTACH PARTITION {root}_{k} FOR VALUES IN ({k})",
                    f"UPDATE {root} SET v = v + 1 WHERE id % {every} = 0",
                    f"ALTER TABLE {root} DETACH PARTITION {root}_{k}"):
            self.pg.execute(sql)

    def test_attached_and_detached_between_runs(self):
        """A partition attached with rows, changed through the root and
        detached again, all while sluice is stopped: the next run reads the
        catalog with the root's partitions as they were at the checkpoint,
        but replays changes of the partition's rows under the root.  The
        leaf's Relation message that pgoutput sends after the root's names
        the partition, no longer one of the root's: the root is backfilled
        again behind a marker, and its output does not keep those rows
        (soak seed 4105: rows of a detached partition stayed in the root's
        mirror).  The same while sluice runs, quicker than its looks at the
        catalog, with a partition that was a table of its own in the stream
        before: that table is backfilled again too (its changes while
        attached came under the root's name)."""
        pg = self.pg
        pg.execute("CREATE TABLE ad (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                   "PARTITION BY LIST (part)")
        pg.execute("CREATE TABLE ad_0 PARTITION OF ad FOR VALUES IN (0)")
        pg.execute("INSERT INTO ad SELECT g, 0, g FROM generate_series(1, 20) g")
        s = self.sluice(stream="adr", tables="public.ad*")
        self.catch_up(s)
        self.table_with_rows("ad", 1)
        self.attach_and_detach("ad", 1, 3)
        pg.execute("UPDATE ad SET v = v + 1 WHERE id % 3 = 0")
        r = self.catch_up(s)
        self.assertIn('came from partition "public"."ad_1", which is no longer one of its partitions', r.stderr)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "ad", ["id", "part"])
        self.assertTableMatches(recs, "public", "ad_1", ["id", "part"])
        # the next run finds the root's backfill after those changes
        r = self.catch_up(s)
        self.assertNotIn("no longer one of its partitions", r.stderr)
        self.assertTableMatches(self.read(s), "public", "ad", ["id", "part"])
        # the same while sluice runs, faster than its looks at the catalog
        # (every 15 s): the root is backfilled again at once
        self.table_with_rows("ad", 2)
        p = self.start_streaming(s)
        self.attach_and_detach("ad", 2, 4)
        wait_until(lambda: "backfilled public.ad while streaming" in p.stderr_text() or not p.alive(), 60,
                   "the root backfilled again")
        self.stop(p)
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "ad", ["id", "part"])
        self.assertTableMatches(recs, "public", "ad_2", ["id", "part"])

    def test_attached_and_detached_while_it_backfills(self):
        """A table of the stream, its backfill while streaming part done
        (chunks durable) when sluice stops, is attached to the selected
        partitioned table, changed through it and detached again: those
        changes came under the root's name, so the chunks read before them
        lack them.  The next run backfills the table again from the start,
        behind a new marker; resuming after its last durable chunk would
        keep the old values (CI, once, in the test above, sluice running:
        the partition's backfill had its one chunk durable, not yet done,
        when the root's change was read)."""
        pg = self.pg
        pg.execute("CREATE TABLE bd (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                   "PARTITION BY LIST (part)")
        pg.execute("CREATE TABLE bd_0 PARTITION OF bd FOR VALUES IN (0)")
        pg.execute("INSERT INTO bd SELECT g, 0, g FROM generate_series(1, 20) g")
        s = self.sluice(stream="bdr", tables="public.bd*", max_file_seconds=1,
                        extra={"source": {"backfill_chunk_rows": 100}})
        self.catch_up(s)
        pg.execute("CREATE TABLE bd_1 (id int, part int, v int NOT NULL, PRIMARY KEY (id, part))")
        pg.execute("INSERT INTO bd_1 SELECT g, 1, g FROM generate_series(1, 3000) g")
        # bd_1 is new to the stream: its backfill while streaming starts itself
        self.kill_after_a_durable_chunk(s, "public.bd_1", request=False)
        self.attach_and_detach("bd", 1, 1)
        r = self.catch_up(s)
        self.assertIn('table "public"."bd_1" was a partition of "public"."bd"', r.stderr)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "bd", ["id", "part"])
        self.assertTableMatches(recs, "public", "bd_1", ["id", "part"])
        self.assertEqual(len(pg.sql("SELECT 1 FROM bd_1 WHERE v = id + 1")), 3000)

    def test_attached_while_the_stream_starts(self):
        """A partition attached after a new stream lists its tables, before
        the snapshot of its initial backfill (the ATTACH holds the lock that
        the publication's creation waits for): the snapshot reads the
        partition's rows, so the shape the stream records must be the
        snapshot's, or the partition detached later leaves its rows in the
        root's output (seed 4105, pg/merge/avro_dir and pg/merge/clickhouse:
        'wp extra in output (not in source): (1, 1)')."""
        pg = self.pg
        pg.execute("CREATE TABLE sa (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                   "PARTITION BY LIST (part)")
        pg.execute("CREATE TABLE sa_0 PARTITION OF sa FOR VALUES IN (0)")
        pg.execute("INSERT INTO sa SELECT g, 0, g FROM generate_series(1, 20) g")
        self.table_with_rows("sa", 1)
        s = self.sluice(stream="sas", tables="public.sa")
        conn = pg.connect(autocommit=False)
        try:
            conn.cursor().execute("ALTER TABLE sa ATTACH PARTITION sa_1 FOR VALUES IN (1)")
            p = s.start("run")
            wait_until(lambda: pg.sql("SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE NOT "
                                      "l.granted AND a.application_name LIKE 'sluice%'") or not p.alive(), 30,
                       "sluice waiting for the attach's lock")
            conn.commit()
        finally:
            conn.close()
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.stop(p)
        self.assertIn("the partitions of \"public\".\"sa\" changed between the listing of the tables and the "
                      "backfill's snapshot", p.stderr_text())
        pg.execute("ALTER TABLE sa DETACH PARTITION sa_1")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "sa", ["id", "part"])

    def test_detached_while_its_backfill_runs(self):
        """The root's backfill while streaming has a chunk durable when
        sluice is killed; a partition whose rows that chunk holds is then
        detached.  The next run must not resume after the chunk (its rows
        of the detached partition would stay): the root is backfilled
        again from the start, behind a new marker."""
        pg = self.pg
        pg.execute("CREATE TABLE dr (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                   "PARTITION BY LIST (part)")
        for k in (0, 1):
            pg.execute(f"CREATE TABLE dr_{k} PARTITION OF dr FOR VALUES IN ({k})")
        pg.execute("INSERT INTO dr SELECT g, k, g FROM generate_series(1, 20000) g, generate_series(0, 1) k")
        s = self.sluice(stream="drb", tables="public.dr", max_file_seconds=1,
                        extra={"source": {"backfill_chunk_rows": 100}})
        self.catch_up(s)
        self.kill_after_a_durable_chunk(s, "public.dr")
        pg.execute("ALTER TABLE dr DETACH PARTITION dr_1")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "dr", ["id", "part"])

    def test_partitions_as_tables(self):
        """Leaves selected without their root are tables of their own."""
        pg = self.pg
        pg.execute("CREATE TABLE lv (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
        pg.execute("CREATE TABLE lv_a PARTITION OF lv FOR VALUES FROM (0) TO (100)")
        pg.execute("CREATE TABLE lv_b PARTITION OF lv FOR VALUES FROM (100) TO (200)")
        pg.execute("INSERT INTO lv SELECT g, 'v' FROM generate_series(0, 199) g")
        s = self.sluice(stream="leaves", tables="public.lv_a, public.lv_b")
        self.catch_up(s)
        pg.execute("UPDATE lv SET v = 'w' WHERE id % 10 = 0")
        pg.execute("DELETE FROM lv WHERE id = 150")
        pg.execute("INSERT INTO lv VALUES (150, 'new')")
        self.catch_up(s)
        recs = self.read(s)
        self.assertEqual({r["object"] for r in recs}, {"public_lv_a", "public_lv_b"})
        self.assertTableMatches(recs, "public", "lv_a", ["id"])
        self.assertTableMatches(recs, "public", "lv_b", ["id"])

    def test_publication_without_partition_root(self):
        """A pre-existing publication that publishes partitions under their
        own names is refused by check and run, with the fix spelled out."""
        pg = self.pg
        pg.execute("CREATE TABLE pr (id int PRIMARY KEY) PARTITION BY RANGE (id)")
        pg.execute("CREATE TABLE pr_a PARTITION OF pr FOR VALUES FROM (0) TO (100)")
        pg.execute("CREATE PUBLICATION pr_pub FOR TABLE pr")
        s = self.sluice(stream="prs", tables="public.pr", extra={"stream": {"publication": "pr_pub"}})
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('ALTER PUBLICATION "pr_pub" SET (publish_via_partition_root = true)', r.stderr)
        # a partition selected alone while the publication carries its root
        # through publish_via_partition_root: refused by both, too
        pg.execute("CREATE PUBLICATION pr_root FOR TABLE pr WITH (publish_via_partition_root = true)")
        leaf = self.sluice(stream="prleaf", tables="public.pr_a", extra={"stream": {"publication": "pr_root"}})
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = leaf.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('"public"."pr_a" as changes of public.pr', r.stderr)
        # an insert-only publication misses updates and deletes
        pg.execute("CREATE TABLE plain_t (id int PRIMARY KEY)")
        pg.execute("CREATE PUBLICATION ins_only FOR TABLE plain_t WITH (publish = 'insert')")
        io = self.sluice(stream="insonly", tables="public.plain_t", extra={"stream": {"publication": "ins_only"}})
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = io.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn("does not publish updates", r.stderr)
        pg.execute("ALTER PUBLICATION pr_pub SET (publish_via_partition_root = true)")
        pg.execute("INSERT INTO pr VALUES (1)")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "pr", ["id"])


class CreatedAgainWhileBackfillingTest(AgentRuns, PgTestCase):

    def test_table_created_again_while_it_backfills(self):
        """A table of the stream whose backfill while streaming has chunks
        durable when sluice is killed is dropped and created again with
        other rows: the output holds the new table's rows and none of the
        old one's (the MariaDB test of the same name found the old table's
        first chunk kept there; here the new OID makes it a new table)."""
        pg = self.pg
        pg.execute("CREATE TABLE dcr (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO dcr SELECT g, 'old' FROM generate_series(1, 1000) g")
        s = self.sluice(stream="dcrun", tables="public.dcr", max_file_seconds=1,
                        extra={"source": {"backfill_chunk_rows": 100}})
        self.catch_up(s)
        self.kill_after_a_durable_chunk(s, "public.dcr")
        pg.execute("DROP TABLE dcr")
        pg.execute("CREATE TABLE dcr (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO dcr SELECT g, 'new' FROM generate_series(2001, 2100) g")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "public", "dcr", ["id"])
        self.assertEqual(len(pg.sql("SELECT 1 FROM dcr")), 100)


class TableIdentityTest(PgTestCase):

    def test_created_again_while_listed(self):
        """A table dropped and created again (one transaction) while sluice
        lists and describes the tables is the new table, read from one
        snapshot: never the old OID described as a table without columns
        (merge mode refused it as having no unique NOT NULL key, exit 3,
        found by test_property's DDL)."""
        import threading
        pg = self.pg
        ddl = ["DROP TABLE IF EXISTS rl", "CREATE TABLE rl (id int PRIMARY KEY, v text)"]
        for sql in ddl:
            pg.execute(sql)
        s = self.sluice(stream="relist", tables="public.rl", write_mode="merge")
        stop = threading.Event()

        def recreate():
            conn = pg.connect(autocommit=False)
            try:
                cur = conn.cursor()
                while not stop.is_set():
                    for sql in ddl:
                        cur.execute(sql)
                    conn.commit()
            finally:
                conn.close()

        th = threading.Thread(target=recreate)
        th.start()
        try:
            results = [s.run("check", timeout=60) for _ in range(25)]
        finally:
            stop.set()
            th.join()
        bad = [r.describe() for r in results if r.rc != 0]
        self.assertEqual(bad, [], f"{len(bad)} of {len(results)} checks failed, the first:\n" + "".join(bad[:1]))

    def test_renamed_after_the_checkpoint(self):
        """A table renamed (and its name given to a new table) after the
        stream's checkpoint, with a change before the rename: the stream
        started again reads that change's Relation message under the old
        name, while the catalog has the new one.  That is the known table,
        not a rename to restart for (the stream restarted for it forever,
        found by test_property's DDL); both tables end equal to the source."""
        pg = self.pg
        pg.execute("CREATE TABLE rn (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rn SELECT g, 'old' FROM generate_series(1, 10) g")
        s = self.sluice(stream="rnck", tables="public.rn*")
        self.catch_up(s)
        pg.execute("UPDATE rn SET v = 'changed' WHERE id = 1")
        pg.execute("BEGIN; ALTER TABLE rn RENAME TO rn_old; CREATE TABLE rn (id int PRIMARY KEY, v text); COMMIT")
        pg.execute("INSERT INTO rn VALUES (100, 'new')")
        pg.execute("UPDATE rn_old SET v = 'later' WHERE id = 2")
        r = self.catch_up(s, timeout=60)
        self.assertLessEqual(r.stderr.count("restarting the stream"), 1, r.stderr)
        recs = self.read(s)
        self.assertTableMatches(recs, "public", "rn", ["id"])
        self.assertTableMatches(recs, "public", "rn_old", ["id"])

    def test_dropped_and_created_again(self):
        """A table dropped and created again under the same name is a new
        table: backfilled as new, after a marker that clears the old rows, so
        the state rebuilt from the output equals the new table; a table
        dropped for good gets a TRUNCATE marker; a renamed table starts a new
        object under its new name."""
        pg = self.pg
        for t in ("rc", "gone", "moved"):
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            pg.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.sluice(stream="ident", tables="public.rc, public.gone, public.moved*")
        self.catch_up(s)
        before = self.read(s)
        p = s.start("run")
        from harness import wait_until
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        pg.execute("DROP TABLE rc")
        pg.execute("CREATE TABLE rc (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rc SELECT g, 'new' FROM generate_series(100, 104) g")
        pg.execute("DROP TABLE gone")
        pg.execute("ALTER TABLE moved RENAME TO moved2")
        pg.execute("UPDATE moved2 SET v = 'after' WHERE id = 1")
        wait_until(lambda: "restarting the stream" in p.stderr_text() or not p.alive(), 60, "the restart")
        pg.execute("INSERT INTO rc VALUES (105, 'later')")
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(__import__("signal").SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        self.catch_up(s)
        recs = self.read(s)
        from harness import rebuild
        self.assertEqual(rebuild(recs, ["id"], table=("public", "rc")),
                         {**{(i,): {"id": i, "v": "new"} for i in range(100, 105)}, (105,): {"id": 105, "v": "later"}})
        self.assertTableMatches(recs, "public", "moved2", ["id"])
        self.assertEqual(rebuild(records_for(recs, "public", "gone"), ["id"], table=("public", "gone")), {})
        self.assertEqual(rebuild(records_for(recs, "public", "moved"), ["id"], table=("public", "moved")), {})
        gone = records_for(recs, "public", "gone")
        self.assertEqual(changes(sorted(gone, key=csn))[-1], "TRUNCATE")
        # each marker sorts strictly after the state it ends (the backfill
        # of the first run, at the stream's position then) and strictly
        # before the records that rebuild the table
        seen = {r["uuid"] for r in before}
        for t in ("rc", "gone", "moved"):
            old = records_for(before, "public", t)
            self.assertEqual(len(old), 20)
            new = [r for r in records_for(recs, "public", t) if r["uuid"] not in seen]
            marks = [r for r in new if change_type(r) == "TRUNCATE"]
            self.assertEqual(len(marks), 1, (t, [(csn(r), r["uuid"], r["read_method"], r["source_metadata"]) for r in marks]))
            assert_marker_between(self, old, marks[0], [r for r in new if r is not marks[0]])


    def test_renamed_between_runs_after_changes(self):
        """The table changes after the stream's checkpoint, then is renamed
        and a new table takes its name, all while sluice is stopped.  The
        next run resumes before the rename, so the log names the renamed
        table by its old name: its changes logged before the rename are
        skipped (it is backfilled as a new table), and its changes after
        the run started are followed.  The stream restarted on that old name
        forever before (the property harness's seed 309)."""
        pg = self.pg
        pg.execute("CREATE TABLE mv (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO mv SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.sluice(stream="mvb", tables="public.mv*", max_file_seconds=1)
        self.catch_up(s)
        pg.execute("UPDATE mv SET v = 'before the rename' WHERE id <= 5")
        pg.execute("DELETE FROM mv WHERE id = 6")
        pg.execute("ALTER TABLE mv RENAME TO mv_old")
        pg.execute("CREATE TABLE mv (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO mv SELECT g, 'new' FROM generate_series(100, 104) g")
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        pg.execute("UPDATE mv_old SET v = 'after the start' WHERE id IN (1, 7)")
        pg.execute("INSERT INTO mv_old VALUES (50, 'inserted after the start')")
        pg.execute("INSERT INTO mv VALUES (105, 'new later')")
        # read by this run, which skipped the table's first changes
        wait_until(lambda: any(r["payload"]["id"] == 50 for r in records_for(self.read(s), "public", "mv_old"))
                   or not p.alive(), 60, "the changes after the start")
        self.assertTrue(p.alive(), p.stderr_text())
        self.assertIn('skipping the changes of "public"."mv_old" logged before it was renamed from "public"."mv"',
                      p.stderr_text())
        self.assertNotIn("restarting the stream", p.stderr_text())
        p.signal(__import__("signal").SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        self.catch_up(s, timeout=60)
        recs = self.read(s)
        for t in ("mv", "mv_old"):
            self.assertTableMatches(recs, "public", t, ["id"])
        self.assertEqual(pg.sql("SELECT count(*) FROM mv_old WHERE v = 'after the start'"), [(2,)])

    def test_dropped_between_runs_after_changes(self):
        """The table changes after the stream's checkpoint, then is dropped
        and created again under its name, all while sluice is stopped.  The
        next run resumes before the drop, so the log has the dropped
        table's changes under a name the stream selects and an OID it does
        not know: they are skipped, none written under the name, and the
        new table is backfilled."""
        pg = self.pg
        pg.execute("CREATE TABLE dbr (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO dbr SELECT g, 'old' FROM generate_series(1, 5) g")
        s = self.sluice(stream="dbr", tables="public.dbr")
        self.catch_up(s)
        pg.execute("UPDATE dbr SET v = 'before the drop' WHERE id <= 2")
        pg.execute("INSERT INTO dbr VALUES (6, 'before the drop')")
        pg.execute("DROP TABLE dbr")
        pg.execute("CREATE TABLE dbr (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO dbr SELECT g, 'new' FROM generate_series(100, 102) g")
        r = self.catch_up(s)
        self.assertIn('skipping the changes of "public"."dbr" (OID', r.stderr)
        recs = records_for(self.read(s), "public", "dbr")
        self.assertEqual([r["payload"] for r in recs if r["payload"] and r["payload"]["v"] == "before the drop"], [])
        self.assertTableMatches(recs, "public", "dbr", ["id"])

    def test_created_again_between_runs(self):
        """The stream stops right after its initial backfill, so its
        position is still the snapshot's, the CSN of the table's rows; the
        table is dropped and created again before the next run.  The marker
        of its new backfill sorts strictly after every old record and
        strictly before every new one, and the output rebuilds the new
        table exactly (it once kept the 20 old rows: the marker had the old
        rows' CSN)."""
        pg = self.pg
        pg.execute("CREATE TABLE rcb (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rcb SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.sluice(stream="identb", tables="public.rcb")
        self.catch_up(s)
        old = records_for(self.read(s), "public", "rcb")
        self.assertEqual(sorted(r["payload"]["id"] for r in old), list(range(1, 21)))
        pg.execute("DROP TABLE rcb")
        pg.execute("CREATE TABLE rcb (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rcb SELECT g, 'new' FROM generate_series(100, 104) g")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "rcb")
        olds = {r["uuid"] for r in old}
        new = [r for r in recs if r["uuid"] not in olds]
        marks = [r for r in new if change_type(r) == "TRUNCATE"]
        self.assertEqual(len(marks), 1, "one marker")
        after = [r for r in new if r is not marks[0]]
        assert_marker_between(self, old, marks[0], after)
        from harness import rebuild
        self.assertEqual(rebuild(recs, ["id"]), {(i,): {"id": i, "v": "new"} for i in range(100, 105)})


class ReplayIdentityTest(WithS3, PgTestCase):

    def held_sluice(self, stream, tables):
        """An agent writing to S3 through a HoldingProxy: (agent, proxy)."""
        proxy = HoldingProxy(self.s3.endpoint)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=stream, tables=tables, s3=self.s3, prefix=stream, codec="null", max_file_seconds=1)
        s.extra.setdefault("destination", {})["endpoint"] = proxy.url
        s.write_config()
        return s, proxy

    def test_replay_past_a_rename_or_drop_keeps_csns(self):
        """A run wrote a transaction over two tables to S3 and was killed
        before its checkpoint moved (a proxy holds the PUT's answer); then
        the first table was renamed, or dropped, and created again.  The
        next run reads the transaction again, the first table under a name
        or OID it no longer follows: the other table's changes keep their
        sequence numbers, so each uuid is one record.  The dropped table's
        changes went unread, and the next changes took their numbers: two
        records with one uuid (the property harness's seed 311, s3)."""
        pg = self.pg
        for how in ("rename", "drop"):
            with self.subTest(how=how):
                a, b = f"kc_{how}_a", f"kc_{how}_b"
                for t in (a, b):
                    pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
                    pg.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 5) g")
                s, proxy = self.held_sluice(f"kc{how}", f"public.{a}*, public.{b}")
                s.catch_up(self)
                proxy.arm_match(lambda method, path, body: method == "PUT" and f"/public_{b}/" in path
                                and path.endswith(".avro"))
                p = s.start("run")
                conn = pg.connect(autocommit=False)
                cur = conn.cursor()
                cur.execute(f"UPDATE {a} SET v = 'tx' WHERE id IN (1, 2)")
                cur.execute(f"UPDATE {b} SET v = 'tx' WHERE id IN (1, 2)")
                cur.execute(f"INSERT INTO {b} VALUES (6, 'tx')")
                conn.commit()
                conn.close()
                wait_until(proxy.held.is_set, 120, f"the PUT of {b}'s file")
                p.kill9()
                p.wait_result(30)
                proxy.pass_through()
                pg.wait_slot_inactive(s.slot)
                if how == "rename":
                    pg.execute(f"ALTER TABLE {a} RENAME TO {a}_old")
                else:
                    pg.execute(f"DROP TABLE {a}")
                pg.execute(f"CREATE TABLE {a} (id int PRIMARY KEY, v text)")
                s.catch_up(self)
                recs = read_avro_tree(s.output_tree(), codec="null")
                by_uuid = {}
                for r in records_for(recs, "public", b):
                    by_uuid.setdefault(r["uuid"], set()).add(repr((csn(r), change_type(r), r["payload"])))
                self.assertEqual({u: x for u, x in by_uuid.items() if len(x) > 1}, {})
                self.assertGreater(len(by_uuid), len(records_for(recs, "public", b)) // 2 - 1)
                self.assertTableMatches(recs, "public", b, ["id"])
                # not yet the new table a: the records of the old one that
                # the killed run wrote sort above its marker (issue 17)
                pg.execute(f"SELECT pg_drop_replication_slot('{s.slot}')")

    def test_created_again_after_a_kill(self):
        """A run wrote changes of a table to S3 and was killed before its
        checkpoint moved (a proxy holds the PUT's answer); then the table
        was dropped and created again.  The next run skips the old table's
        changes (its OID is gone) and backfills the new one behind a
        marker, which sorts above every record the killed run wrote: the
        output rebuilds the new table exactly.  The marker stood just above
        the checkpoint's position before, below those records, which
        survived beside the new table (the property harness's seeds 108 and
        317; issue 17)."""
        pg = self.pg
        t = "kc_again"
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 5) g")
        s, proxy = self.held_sluice("kcagain", f"public.{t}")
        s.catch_up(self)
        proxy.arm_match(lambda method, path, body: method == "PUT" and f"/public_{t}/" in path
                        and path.endswith(".avro"))
        p = s.start("run")
        pg.execute(f"INSERT INTO {t} SELECT g, 'killed' FROM generate_series(10, 14) g")
        pg.execute(f"UPDATE {t} SET v = 'killed' WHERE id = 1")
        wait_until(proxy.held.is_set, 120, f"the PUT of {t}'s file")
        p.kill9()
        p.wait_result(30)
        proxy.pass_through()
        pg.wait_slot_inactive(s.slot)
        pg.execute(f"DROP TABLE {t}")
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'new' FROM generate_series(100, 102) g")
        s.catch_up(self)
        recs = records_for(read_avro_tree(s.output_tree(), codec="null"), "public", t)
        killed = [r for r in recs if change_type(r) != "TRUNCATE" and r["payload"]["v"] == "killed"]
        self.assertEqual(sorted(r["payload"]["id"] for r in killed), [1, 10, 11, 12, 13, 14])
        from harness import rebuild
        self.assertEqual(rebuild(recs, ["id"]), {(i,): {"id": i, "v": "new"} for i in range(100, 103)})
        marks = sorted(csn(r) for r in recs if change_type(r) == "TRUNCATE")
        self.assertEqual(len(marks), 1, marks)
        self.assertGreater(marks[0], max(csn(r) for r in killed))
        pg.execute(f"SELECT pg_drop_replication_slot('{s.slot}')")


class PublicationScopeTest(PgTestCase):

    def test_only_selected_tables_are_written(self):
        """A FOR ALL TABLES publication, a publication shared by two
        streams, and an inheritance child not selected: each stream writes
        exactly the tables it selects."""
        pg = self.pg
        pg.execute("CREATE TABLE sel (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE parent (id int PRIMARY KEY, v text)")
        pg.execute("CREATE TABLE child (id int PRIMARY KEY, v text) INHERITS (parent)")
        pg.execute("CREATE PUBLICATION all_pub FOR ALL TABLES")
        a = self.sluice(stream="scope_a", tables="public.sel, public.parent",
                        extra={"stream": {"publication": "all_pub"}})
        self.catch_up(a)
        # two streams sharing one (new) publication
        b = self.sluice(stream="scope_b", tables="public.sel", extra={"stream": {"publication": "shared"}})
        c = self.sluice(stream="scope_c", tables="public.other", extra={"stream": {"publication": "shared"}})
        self.catch_up(b)
        self.catch_up(c)
        for t in ("sel", "other", "parent", "child"):
            pg.execute(f"INSERT INTO {t} SELECT g, 'x' FROM generate_series(1, 5) g")
        pg.execute("UPDATE child SET v = 'y'")
        logs = [self.catch_up(x).stderr for x in (a, b, c)]
        # what the publication carried beyond the selection was skipped, and counted:
        # a: 5 inserts of other, 5 inserts and 5 updates of child; b, c: the other's 5
        for log, n in zip(logs, (15, 5, 5)):
            self.assertIn(f"skipped {n} changes of tables that the publication carries", log)
        ra, rb, rc = self.read(a), self.read(b), self.read(c)
        self.assertEqual({r["object"] for r in ra}, {"public_sel", "public_parent"})
        self.assertEqual({r["object"] for r in rb}, {"public_sel"})
        self.assertEqual({r["object"] for r in rc}, {"public_other"})
        self.assertTableMatches(ra, "public", "sel", ["id"])
        self.assertEqual(len(records_for(ra, "public", "parent")), 5, "the parent's own rows only")
        self.assertTableMatches(rb, "public", "sel", ["id"])
        self.assertTableMatches(rc, "public", "other", ["id"])


class KeylessTest(PgTestCase):

    def test_keyless_table_is_refused_and_the_application_keeps_working(self):
        pg = self.pg
        pg.execute("CREATE TABLE nokey (a int, b text)")
        pg.execute("CREATE TABLE nothing (id int PRIMARY KEY, b text)")
        pg.execute("ALTER TABLE nothing REPLICA IDENTITY NOTHING")
        pg.execute("INSERT INTO nokey VALUES (1, 'x')")
        for t in ("nokey", "nothing"):
            s = self.sluice(stream=f"kl_{t}", tables=f"public.{t}")
            for cmd in (("check",), ("run", "--until-caught-up")):
                r = s.run(*cmd)
                self.assertEqual(r.rc, 3, r.describe())
                self.assertIn(f'table "public"."{t}" has no replica identity', r.stderr)
                self.assertIn("REPLICA IDENTITY FULL", r.stderr)
                self.assertIn(f"exclude_tables = public.{t}", r.stderr)
            # nothing was published: the application's writes still work
            pg.execute(f"UPDATE {t} SET b = 'y'")
            pg.execute(f"DELETE FROM {t}")

    def test_replica_identity_full_without_key(self):
        """REPLICA IDENTITY FULL and no key: replicated; the records name no
        primary key in backfill and CDC alike, identical rows get distinct
        uuids, and an update gives the old row (UPDATE-DELETE) and the new."""
        pg = self.pg
        pg.execute("CREATE TABLE twins (a int, b text)")
        pg.execute("ALTER TABLE twins REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO twins VALUES (1, 'same'), (1, 'same'), (2, 'x')")
        s = self.sluice(stream="twins", tables="public.twins")
        self.catch_up(s)
        pg.execute("INSERT INTO twins VALUES (3, 'z')")
        pg.execute("UPDATE twins SET b = 'w' WHERE a = 2")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "twins")
        self.assertEqual({tuple(r["source_metadata"]["primary_keys"]) for r in recs}, {()})
        bf = [r for r in recs if r["read_method"] == "postgresql-backfill"]
        self.assertEqual(len(bf), 3)
        self.assertEqual(len({r["uuid"] for r in bf}), 3, "identical rows, distinct uuids")
        # Without a key the whole row is the identity: the update names the
        # row it replaced, then the new one, at one position.
        upd = [(r["source_metadata"]["change_type"], r["payload"]["a"], r["payload"]["b"]) for r in recs
               if r["source_metadata"]["change_type"].startswith("UPDATE")]
        self.assertEqual(upd, [("UPDATE-DELETE", 2, "x"), ("UPDATE-INSERT", 2, "w")])


class KeyOverrideTest(PgTestCase):
    """A table's key from key_columns, or from its replica identity index."""

    def test_key_columns(self):
        pg = self.pg
        pg.execute("CREATE TABLE kc (a int NOT NULL, b text, c int)")
        pg.execute("ALTER TABLE kc REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO kc VALUES (1, 'x', 10), (2, 'y', 20)")
        s = self.sluice(stream="kc", tables="public.kc", extra={"stream": {"key_columns": "public.kc.a"}})
        self.catch_up(s)
        pg.execute("UPDATE kc SET b = 'z' WHERE a = 1")     # the key stays
        pg.execute("UPDATE kc SET a = 3 WHERE a = 2")       # the key changes
        pg.execute("DELETE FROM kc WHERE a = 1")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "kc")
        self.assertEqual({tuple(r["source_metadata"]["primary_keys"]) for r in recs}, {("a",)})
        cdc = [(r["source_metadata"]["change_type"], r["payload"]["a"], r["payload"]["b"]) for r in recs
               if r["read_method"] == "postgresql-cdc-wal"]
        self.assertEqual(cdc, [("UPDATE-INSERT", 1, "z"), ("UPDATE-DELETE", 2, "y"), ("UPDATE-INSERT", 3, "y"),
                               ("DELETE", 1, "z")])
        self.assertTableMatches(recs, "public", "kc", ["a"])

    def test_key_columns_errors(self):
        pg = self.pg
        pg.execute("CREATE TABLE kce (a int PRIMARY KEY, b text)")
        for kc, words in (("public.kce.nosuch", 'table "public"."kce" has no column "nosuch"'),
                          ("public.other.a", 'key_columns entry "public.other.a" names no table the stream selects')):
            s = self.sluice(stream="kce", tables="public.kce", extra={"stream": {"key_columns": kc}})
            for cmd in (("check",), ("run", "--until-caught-up")):
                r = s.run(*cmd)
                self.assertEqual(r.rc, 2, r.describe())
                self.assertIn(words, r.stderr)
        s = self.sluice(stream="kce2", tables="public.kce", extra={"stream": {"key_columns": "public.kce"}})
        r = s.run("check")
        self.assertEqual(r.rc, 2, r.describe())
        self.assertRegex(r.stderr, r"sluice\.ini:\d+: .*key_columns.*SCHEMA\.TABLE\.COLUMN")

    def test_replica_identity_index_is_the_key(self):
        pg = self.pg
        pg.execute("CREATE TABLE ri (code text NOT NULL, v int)")
        pg.execute("CREATE UNIQUE INDEX ri_code ON ri (code)")
        pg.execute("ALTER TABLE ri REPLICA IDENTITY USING INDEX ri_code")
        pg.execute("INSERT INTO ri VALUES ('a', 1), ('b', 2)")
        s = self.sluice(stream="ri", tables="public.ri")
        self.catch_up(s)
        pg.execute("UPDATE ri SET code = 'c' WHERE code = 'b'")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "ri")
        self.assertEqual({tuple(r["source_metadata"]["primary_keys"]) for r in recs}, {("code",)})
        self.assertEqual([r["source_metadata"]["change_type"] for r in recs if r["read_method"] == "postgresql-cdc-wal"],
                         ["UPDATE-DELETE", "UPDATE-INSERT"])
        self.assertTableMatches(recs, "public", "ri", ["code"])


class KeysThatAreKeysTest(PgTestCase):
    """A key must be one: merge mode refuses a table without a unique NOT
    NULL key (REPLICA IDENTITY FULL is none), key_columns may not name a
    nullable column, and the replica identity must hold the key, at start
    and while streaming."""

    def assert_refused(self, s, *words, cmds=(("check",), ("run", "--until-caught-up"))):
        for cmd in cmds:
            r = s.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            for w in words:
                self.assertIn(w, r.stderr)

    def make_keyed_twice(self, name, rows):
        """A table with a primary key (id) and a unique NOT NULL column (u,
        index NAME_u)."""
        self.pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, u int NOT NULL, a text)")
        self.pg.execute(f"CREATE UNIQUE INDEX {name}_u ON {name} (u)")
        self.pg.execute(f"INSERT INTO {name} VALUES {rows}")

    def test_merge_refuses_replica_identity_full_without_key(self):
        pg = self.pg
        pg.execute("CREATE TABLE dupes (id int, v text)")
        pg.execute("ALTER TABLE dupes REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO dupes VALUES (2, 'dup'), (2, 'dup'), (3, 'dup3')")
        s = self.sluice(stream="dupes", tables="public.dupes", write_mode="merge")
        self.assert_refused(s, 'table "public"."dupes" has no unique NOT NULL key', "add a primary key",
                            "key_columns = public.dupes.COLUMN")
        # append mode keeps every copy, and a delete of one copy removes one
        a = self.sluice(stream="dupes_a", tables="public.dupes")
        self.catch_up(a)
        pg.execute("DELETE FROM dupes WHERE ctid = (SELECT min(ctid) FROM dupes WHERE id = 2)")
        self.catch_up(a)
        rows = sorted((r["source_metadata"]["change_type"], r["payload"]["id"], r["payload"]["v"])
                      for r in records_for(self.read(a), "public", "dupes"))
        self.assertEqual(rows, [("DELETE", 2, "dup"), ("INSERT", 2, "dup"), ("INSERT", 2, "dup"),
                                ("INSERT", 3, "dup3")])
        self.assertEqual(sorted(pg.sql("SELECT id, v FROM dupes")), [(2, "dup"), (3, "dup3")])

    def test_key_columns_on_a_nullable_column(self):
        pg = self.pg
        pg.execute("CREATE TABLE nk (id int, u int UNIQUE, v text)")
        pg.execute("ALTER TABLE nk REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO nk VALUES (1, NULL, 'a'), (2, 20, 'b')")
        for mode in ("merge", "append"):
            s = self.sluice(stream=f"nk_{mode}", tables="public.nk", write_mode=mode,
                            extra={"stream": {"key_columns": "public.nk.u"}})
            self.assert_refused(s, 'key column "u" of table "public"."nk"', "nullable",
                                "ALTER TABLE public.nk ALTER COLUMN u SET NOT NULL")

    def test_replica_identity_on_another_index_is_refused(self):
        pg = self.pg
        self.make_keyed_twice("d6", "(1, 10, 'x'), (2, 20, 'y'), (3, 30, 'z')")
        pg.execute("ALTER TABLE d6 REPLICA IDENTITY USING INDEX d6_u")
        for mode in ("append", "merge"):
            s = self.sluice(stream=f"d6_{mode}", tables="public.d6", write_mode=mode)
            self.assert_refused(s, 'table "public"."d6" is keyed by (id), but its replica identity is (u)',
                                "ALTER TABLE public.d6 REPLICA IDENTITY DEFAULT")
        # keyed by its replica identity, deletes and key changes are exact
        s = self.sluice(stream="d6_u", tables="public.d6", extra={"stream": {"key_columns": "public.d6.u"}})
        self.catch_up(s)
        pg.execute("DELETE FROM d6 WHERE id = 3")
        pg.execute("UPDATE d6 SET id = id + 100")
        pg.execute("UPDATE d6 SET u = 11 WHERE u = 10")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "d6")
        cdc = [(r["source_metadata"]["change_type"], r["payload"]["id"], r["payload"]["u"]) for r in recs
               if r["read_method"] == "postgresql-cdc-wal"]
        self.assertEqual(cdc, [("DELETE", None, 30), ("UPDATE-INSERT", 101, 10), ("UPDATE-INSERT", 102, 20),
                               ("UPDATE-DELETE", None, 10), ("UPDATE-INSERT", 101, 11)])
        self.assertTableMatches(recs, "public", "d6", ["u"])

    def test_replica_identity_changed_while_streaming(self):
        pg = self.pg
        self.make_keyed_twice("d7", "(1, 10, 'x'), (2, 20, 'y')")
        s = self.sluice(stream="d7", tables="public.d7", max_file_seconds=1)
        p = s.start("run")
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        pg.execute("UPDATE d7 SET a = 'x2' WHERE id = 1")
        wait_until(lambda: any(r["read_method"] == "postgresql-cdc-wal"
                               for r in records_for(self.read(s), "public", "d7")) or not p.alive(), 60, "the update")
        pg.execute("ALTER TABLE d7 REPLICA IDENTITY USING INDEX d7_u")
        pg.execute("DELETE FROM d7 WHERE id = 2")
        r = p.wait_result(60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('the replica identity of table "public"."d7" no longer holds its key (id)', r.stderr)
        self.assertIn("ALTER TABLE public.d7 REPLICA IDENTITY DEFAULT", r.stderr)
        # the update is written; the delete, which names no id, is not
        recs = records_for(self.read(s), "public", "d7")
        self.assertEqual([(r["source_metadata"]["change_type"], r["payload"]["id"], r["payload"]["a"])
                          for r in recs if r["read_method"] == "postgresql-cdc-wal"], [("UPDATE-INSERT", 1, "x2")])


class ToastKeyChangeTest(PgTestCase):

    def test_key_change_keeps_unchanged_toast_value(self):
        """update t set id = 100 where id = 1 on a row with a large
        (TOASTed, incompressible) text: the UPDATE-INSERT lists the text as
        unchanged, and the documented rule rebuilds it from the row the
        UPDATE-DELETE just before it removed."""
        pg = self.pg
        pg.execute("CREATE TABLE tk (id int PRIMARY KEY, doc text, n int)")
        big = "string_agg(md5(g::text || {}), '') FROM generate_series(1, 400) g"
        pg.execute(f"INSERT INTO tk SELECT 1, (SELECT {big.format(1)}), 0")
        pg.execute(f"INSERT INTO tk SELECT 2, (SELECT {big.format(2)}), 0")
        s = self.sluice(stream="tk", tables="public.tk")
        self.catch_up(s)
        pg.execute("UPDATE tk SET id = 100 WHERE id = 1")
        pg.execute("UPDATE tk SET n = n + 1, id = 200 WHERE id = 2")
        pg.execute("UPDATE tk SET n = n + 1 WHERE id = 200")
        self.catch_up(s)
        recs = records_for(self.read(s), "public", "tk")
        ins = [r for r in recs if r["source_metadata"]["change_type"] == "UPDATE-INSERT"]
        self.assertTrue(ins and all(r["source_metadata"]["unchanged_columns"] == ["doc"] for r in ins),
                        [r["source_metadata"]["unchanged_columns"] for r in ins])
        self.assertTrue(all(r["payload"]["doc"] is None for r in ins))
        self.assertTableMatches(recs, "public", "tk", ["id"])


# Every type's minimum and maximum as PostgreSQL accepts them, as SQL
# literals; the expected values in the files are computed by the server.
EDGE_DDL = """
CREATE TABLE edge_t (
  id int PRIMARY KEY,
  d date, ts timestamp, tz timestamptz, t time,
  i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
  n numeric(1000,0), s numeric(1000,1000), b bool, u uuid
)"""
EDGE_ROWS = [
    (1, "'4714-11-24 BC'", "'4714-11-24 00:00:00 BC'", "'4714-11-24 00:00:00+00 BC'", "'00:00:00'",
     "-32768", "-2147483648", "-9223372036854775808", "'-3.4028235e38'", "'-1.7976931348623157e308'",
     "('-' || repeat('9', 1000))::numeric", "('-0.' || repeat('9', 1000))::numeric", "false", "'00000000-0000-0000-0000-000000000000'"),
    (2, "'5874897-12-31'", "'294276-12-31 23:59:59.999999'", "'294276-12-31 23:59:59.999999+00'", "'24:00:00'",
     "32767", "2147483647", "9223372036854775807", "'3.4028235e38'", "'1.7976931348623157e308'",
     "repeat('9', 1000)::numeric", "('0.' || repeat('9', 1000))::numeric", "true", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"),
    (3, "'infinity'", "'infinity'", "'infinity'", "'23:59:59.999999'",
     "0", "0", "0", "'1.4e-45'", "'4.9e-324'", "0", "0", "true", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
    (4, "'-infinity'", "'-infinity'", "'-infinity'", "'00:00:00.000001'",
     "1", "-1", "-1", "'-Infinity'", "'NaN'", "1", "('0.' || repeat('0', 999) || '1')::numeric", "false",
     "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
]


class ValueEdgeTest(PgTestCase):

    def expected(self):
        """Per id: the raw values the files must hold, from the server."""
        rows = self.pg.sql("""
            SELECT id,
              CASE WHEN d = 'infinity' THEN 2932896 WHEN d = '-infinity' THEN -719162
                   ELSE d - date '1970-01-01' END,
              CASE WHEN ts = 'infinity' THEN 253402300799999999 WHEN ts = '-infinity' THEN -62135596800000000
                   ELSE (extract(epoch FROM ts) * 1000000)::numeric END,
              CASE WHEN tz = 'infinity' THEN 253402300799999999 WHEN tz = '-infinity' THEN -62135596800000000
                   ELSE (extract(epoch FROM tz) * 1000000)::numeric END,
              (extract(epoch FROM t) * 1000000)::bigint,
              i2, i4, i8, n::text, s::text, b, u::text
            FROM edge_t""")
        out = {}
        for r in rows:
            i, d, ts, tz, t, i2, i4, i8, n, sc, b, u = r
            # past int64 microseconds: the documented clamp
            out[i] = {"d": int(d), "ts": min(int(ts), INT64_MAX), "tz": min(int(tz), INT64_MAX), "t": t,
                      "i2": i2, "i4": i4, "i8": i8, "n": n, "s": sc, "b": b, "u": u}
        return out

    def check(self, recs, offset):
        import decimal
        mine = (lambda i: i < 100) if offset == 0 else (lambda i: i >= 100)
        want = {i - offset: w for i, w in self.expected().items() if mine(i)}
        got = {r["payload"]["id"] - offset: r["payload"] for r in recs if mine(r["payload"]["id"])}
        self.assertEqual(sorted(got), sorted(want))
        for i, w in want.items():
            g = got[i]
            for k in ("d", "ts", "tz", "t", "i2", "i4", "i8", "b", "u"):
                self.assertEqual(g[k], w[k], f"id {i} column {k}")
            for k in ("n", "s"):
                self.assertEqual(g[k], decimal.Decimal(w[k]), f"id {i} column {k}")
                self.assertEqual(g[k].as_tuple().exponent, decimal.Decimal(w[k]).as_tuple().exponent)
        # floats: exact bits, specials kept
        import math
        import struct
        f = {r["payload"]["id"] - offset: (r["payload"]["f4"], r["payload"]["f8"]) for r in recs
             if mine(r["payload"]["id"])}
        self.assertEqual(struct.pack("<f", f[1][0]), struct.pack("<f", -3.4028235e38))
        self.assertEqual(f[1][1], -1.7976931348623157e308)
        self.assertEqual(f[2][1], 1.7976931348623157e308)
        self.assertEqual(struct.pack("<f", f[3][0]), struct.pack("<f", 1.4e-45))
        self.assertEqual(f[3][1], 5e-324)
        self.assertEqual(f[4][0], float("-inf"))
        self.assertTrue(math.isnan(f[4][1]))

    def test_every_type_at_its_limits(self):
        pg = self.pg
        pg.execute(EDGE_DDL)
        cols = "id, d, ts, tz, t, i2, i4, i8, f4, f8, n, s, b, u"
        values = ",\n".join("(" + ", ".join(str(x) for x in r) + ")" for r in EDGE_ROWS)
        pg.execute(f"INSERT INTO edge_t ({cols}) VALUES {values}")
        s = self.sluice(stream="edge", tables="public.edge_t")
        r = self.catch_up(s)
        self.check(read_raw(s.out), 0)
        # the clamp is not silent
        self.assertIn("is beyond the last instant 64-bit microseconds since 1970 can hold", r.stderr)
        # the same values through CDC
        pg.execute(f"INSERT INTO edge_t ({cols}) SELECT id + 100, d, ts, tz, t, i2, i4, i8, f4, f8, n, s, b, u "
                   "FROM edge_t")
        r = self.catch_up(s)
        self.assertIn("is beyond the last instant", r.stderr)
        self.check(read_raw(s.out), 100)


if __name__ == "__main__":
    unittest.main()
