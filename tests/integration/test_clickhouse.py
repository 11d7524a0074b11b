"""
tests/integration/test_clickhouse.py: PostgreSQL -> sluice -> ClickHouse
(the throwaway 18.16 server of ch_harness.py; ClickHouse 26 with
SLUICE_CH_ENGINE=26).

  - every type of test_pg_types.py reads back exactly, through backfill and
    CDC, in both write modes;
  - append mode has every change, once;
  - merge mode: `<table>_current` equals the source table after inserts,
    updates, deletes, key changes and TRUNCATE;
  - kill -9 of sluice at random points under a workload, and restarts: the
    merge view equals the source, and the append rows rebuild it with no
    counter gap (replays converge);
  - ClickHouse stopped for a while under load, then started again: nothing
    lost, the stream is not restarted, and the replication connection does
    not time out;
  - a column added mid-stream flows through; a dropped one is dropped (merge)
    or kept (append), a renamed one too, an int widened is widened (a
    narrowed one stops the stream: test_ch_refused.py)
    with a message naming the table and the column;
  - unchanged TOAST values survive in merge mode: filled from the batch, from
    ClickHouse, and across key changes;
  - sluice check, hostile identifiers, the password never printed.

The kill test prints its seed; SLUICE_TEST_SEED=<seed> repeats it.
"""

import json
import os
import random
import re
import signal
import sys
import time
import unittest

from ch_harness import (CH_PASSWORD, ChTestCase, HoldingProxy, ch_column, ch_object, merge_engine_re, quote_ident,
                        rebuild_append)
import harness  # noqa: E402
from harness import backfill_running, csn_seq, pick_seed, qident, wait_until
from oracle import check, diff_clickhouse
from workload import CounterWorkload, Runner

import test_pg_types as T
from opsutil import metric, metrics, metrics_port  # noqa: E402
from test_pg_ops import wait_confirmed, wal_lsn  # noqa: E402
from test_pg_changes import CH_CARRIED, assert_silent_ddl_logged, silent_ddl_run, silent_ddl_setup


def ch_count(ch, db, table, where="", final=False):
    sql = f"SELECT count() FROM {quote_ident(db)}.{quote_ident(table)}"
    if final:
        sql += " FINAL"
    if where:
        sql += f" WHERE {where}"
    return int(ch.scalar(sql))


def counter_problems(rows, key_columns, counter="counter"):
    """Each UPDATE-INSERT raises the key's counter by one (the row moves on
    a key change); a gap means a lost change."""
    keys = [ch_column(k) for k in key_columns]
    last, renamed, problems = {}, {}, []
    for r in sorted(rows, key=lambda r: r["_csn"]):
        ct = r["_change_type"].decode()
        key = tuple(r[k] for k in keys)
        pos, seq = r["_csn"].decode().split("-")
        if ct == "TRUNCATE":
            last.clear()
        elif ct == "INSERT":
            last[key] = r[counter]
        elif ct == "UPDATE-DELETE":
            renamed[(pos, int(seq) + 1)] = last.pop(key, None)
        elif ct == "DELETE":
            last.pop(key, None)
        elif ct == "UPDATE-INSERT":
            prev = renamed.pop((pos, int(seq))) if (pos, int(seq)) in renamed else last.get(key)
            if prev is not None and r[counter] != prev + 1:
                problems.append(f"key {key}: counter {prev} -> {r[counter]} at {pos}-{seq}")
            last[key] = r[counter]
    return problems


class ClickHouseTypesTest(ChTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute(T.TYPES_DDL)
        cls.pg.execute(T.insert_sql(T.ROWS))

    def test_every_type_both_modes(self):
        """Backfill, then the same rows again through CDC: every value reads
        back from ClickHouse exactly, in append and in merge mode."""
        sa = self.sluice(stream="ty_a", tables="public.types_t", database="types_append")
        sm = self.sluice(stream="ty_m", tables="public.types_t", database="types_merge", write_mode="merge")
        self.catch_up(sa)
        self.catch_up(sm)
        self.assertChMatches(sm, "public", "types_t", ["id"])
        self.assertChMatches(sa, "public", "types_t", ["id"], append=True)
        self.pg.execute(T.insert_sql(T.ROWS, id_offset=100))
        self.catch_up(sa)
        self.catch_up(sm)
        self.assertChMatches(sm, "public", "types_t", ["id"])
        self.assertChMatches(sa, "public", "types_t", ["id"], append=True)
        obj = ch_object("public", "types_t")
        # append: one row per change (6 backfilled, 6 through CDC)
        rows = self.ch.rows("types_append", obj, final=True)
        self.assertEqual(len(rows), 2 * len(T.ROWS))
        self.assertEqual(sum(csn_seq(r["_csn"].decode()) == 0 for r in rows), len(T.ROWS))
        self.assertEqual({r["_change_type"] for r in rows}, {b"INSERT"})
        types = {n: t for n, t, _ in self.ch.columns("types_merge", obj)}
        want = {
            "id": "Int32",                    # a merge key is not Nullable
            "c_int2": "Nullable(Int32)", "c_int8": "Nullable(Int64)", "c_num": "Nullable(Decimal(12, 2))",
            "c_numfree": "Nullable(String)", "c_f4": "Nullable(Float32)", "c_bool": "Nullable(UInt8)",
            "c_date": "Nullable(Int32)", "c_time": "Nullable(Int64)", "c_ts": "Nullable(Int64)",
            "c_tstz": "Nullable(Int64)", "c_uuid": "Nullable(String)", "c_json": "Nullable(String)",
            "_uuid": "String", "_source_timestamp": "Int64", "_read_timestamp": "Int64",
            "_version": "UInt64", "_is_deleted": "UInt8", "_lsn": "String",
        }
        if self.modern:   # doc/clickhouse.md, "Layouts"
            want.update({
                "c_bool": "Nullable(Bool)", "c_date": "Nullable(Date32)", "c_ts": "Nullable(DateTime64(6))",
                "c_tstz": "Nullable(DateTime64(6, 'UTC'))", "c_uuid": "Nullable(UUID)", "_uuid": "UUID",
                "_source_timestamp": "DateTime64(6, 'UTC')", "_read_timestamp": "DateTime64(6, 'UTC')",
            })
        self.assertEqual({k: types.get(k) for k in want}, want)
        engines = dict(l.split("\t") for l in self.ch.query(
            "SELECT name, engine_full FROM system.tables WHERE database = 'types_merge' FORMAT TSV")
            .decode().splitlines())
        self.assertRegex(engines[obj], merge_engine_re("id", self.modern))
        self.assertEqual(engines[obj + "_current"], "")   # a view

    def test_check(self):
        """sluice check: one line per check, nothing created, no password."""
        s = self.sluice(stream="chk", tables="public.types_t", database="check_db", write_mode="merge")
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f"stream chk: destination out: ClickHouse {self.ch.version()} answers at {self.ch.url} as user "
                      f"\"sluice\"", r.stdout)
        self.assertIn("stream chk: destination out: database \"check_db\" does not exist and will be created",
                      r.stdout)
        self.assertIn("rows ClickHouse refuses go to \"check_db.chk.dead-letter.jsonl\"", r.stdout)
        self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr)
        self.assertEqual(self.ch.scalar("SELECT count() FROM system.databases WHERE name = 'check_db'"), "0")
        # a read-only user, and a wrong password, are refused
        s2 = self.sluice(stream="chk2", tables="public.types_t", dest={"user": "reader", "password_env": None})
        r = s2.run("check")
        self.assertNotEqual(r.rc, 0, r.describe())
        self.assertIn("user \"reader\" is read-only in ClickHouse", r.stderr)
        r = s.run("check", env={"SLUICE_TEST_CH_PASSWORD": "wrong-password"})
        self.assertNotEqual(r.rc, 0, r.describe())
        self.assertIn("does not answer as user \"sluice\"", r.stderr)
        self.assertIn(f"Code: {self.ch.wrong_password_code}", r.stderr)
        self.assertNotIn("wrong-password", r.stdout + r.stderr)
        # a cluster the server does not know (its remote_servers has none): exit 3
        s3 = self.sluice(stream="chk3", tables="public.types_t", database="check_db", write_mode="merge",
                         dest={"cluster": "no such"})
        r = s3.run("check", env=self.env())
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('destination "out": cluster "no such" is not in the server\'s remote_servers '
                      '(system.clusters)', r.stderr)

    def test_hostile_identifiers(self):
        """A schema, a table and columns that need quoting; a column named
        like a metadata column."""
        pg = self.pg
        pg.execute('CREATE SCHEMA "we ird"; CREATE TABLE "we ird"."a`b\\c;DROP TABLE t" '
                   '(id int PRIMARY KEY, "select" text, "_version" int, "x.y" int)')
        pg.execute('INSERT INTO "we ird"."a`b\\c;DROP TABLE t" VALUES (1, \'s\', 7, 8), (2, NULL, NULL, 9)')
        s = self.sluice(stream="hostile", tables="we ird.*", database="hos`tile db", write_mode="merge")
        self.catch_up(s)
        pg.execute('UPDATE "we ird"."a`b\\c;DROP TABLE t" SET "_version" = 70 WHERE id = 1; '
                   'DELETE FROM "we ird"."a`b\\c;DROP TABLE t" WHERE id = 2')
        self.catch_up(s)
        got = self.assertChMatches(s, "we ird", "a`b\\c;DROP TABLE t", ["id"])
        self.assertEqual([r["__version"] for r in got], [70])
        self.assertTrue(self.ch.table_exists("hos`tile db", "we ird_a`b\\c;DROP TABLE t"))


class ClickHouse26TypesTest(ClickHouseTypesTest):
    """test_every_type_both_modes against the ClickHouse 26 server of the
    tests: the modern layout, every value read back through its engine."""
    ch_engine = "26"
    tags = set()
    test_check = None
    test_hostile_identifiers = None


class ClickHouseChangesTest(ChTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    def make_table(self, name, rows=200):
        self.pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text, counter int NOT NULL)")
        self.pg.execute(f"INSERT INTO {name} SELECT g, md5(g::text), 0 FROM generate_series(1, {rows}) g")

    def both_modes(self, name):
        """Table name with 20 rows, and a merge stream (database name_m)
        and an append one (name_a) of it, caught up: (merge, append)."""
        self.make_table(name, rows=20)
        sm = self.sluice(stream=f"{name}_m", tables=f"public.{name}", database=f"{name}_m", write_mode="merge")
        sa = self.sluice(stream=f"{name}_a", tables=f"public.{name}", database=f"{name}_a")
        self.catch_up(sm)
        self.catch_up(sa)
        return sm, sa

    def workload(self, name):
        """Inserts, updates, deletes, key changes, several changes of one key
        in one transaction, a TRUNCATE; returns the number of changes."""
        pg = self.pg
        n = 0
        n += pg.execute(f"INSERT INTO {name} SELECT g, md5(g::text), 0 FROM generate_series(201, 300) g")
        n += pg.execute(f"UPDATE {name} SET counter = counter + 1, v = 'u1' WHERE id % 3 = 0")
        n += pg.execute(f"DELETE FROM {name} WHERE id % 7 = 0")
        n += 2 * pg.execute(f"UPDATE {name} SET id = id + 1000, counter = counter + 1 WHERE id % 11 = 1")
        with pg.connect(autocommit=False) as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO {name} VALUES (5000, 'a', 0)")
            cur.execute(f"UPDATE {name} SET counter = counter + 1, v = 'b' WHERE id = 5000")
            cur.execute(f"UPDATE {name} SET counter = counter + 1, v = 'c' WHERE id = 5000")
            cur.execute(f"DELETE FROM {name} WHERE id = 5000")
            cur.execute(f"INSERT INTO {name} VALUES (5000, 'd', 0)")
            cur.execute(f"UPDATE {name} SET id = 5001, counter = counter + 1 WHERE id = 5000")
        conn.close()
        n += 7
        return n

    def test_append_every_change(self):
        self.make_table("ap")
        s = self.sluice(stream="ap", tables="public.ap", database="ap")
        self.catch_up(s)
        n = self.workload("ap")
        self.catch_up(s)
        self.pg.execute("TRUNCATE ap; INSERT INTO ap SELECT g, 'after', 0 FROM generate_series(1, 50) g")
        n += 51
        self.pg.execute("UPDATE ap SET counter = counter + 1 WHERE id <= 10")
        n += 10
        self.catch_up(s)
        rows = self.ch.rows("ap", "public_ap", final=True)
        self.assertEqual(len(rows), 200 + n, "every change once, and nothing else")
        self.assertEqual(len({(r["_csn"], r["_uuid"]) for r in rows}), len(rows))
        by_type = {}
        for r in rows:
            by_type[r["_change_type"]] = by_type.get(r["_change_type"], 0) + 1
            self.assertEqual(r["_is_deleted"], 1 if r["_change_type"] in (b"DELETE", b"UPDATE-DELETE",
                                                                         b"TRUNCATE") else 0)
        self.assertEqual(by_type[b"TRUNCATE"], 1)
        self.assertGreater(by_type[b"UPDATE-DELETE"], 10)
        state, problems = rebuild_append(rows, ["id"])
        self.assertEqual(problems, [])
        self.assertEqual(counter_problems(rows, ["id"]), [])
        expected, _kinds = self.source_rows("public", "ap", ["id"])
        self.assertEqual(state, expected)
        # versions order every change of a key as its CSN does
        for r in rows:
            pos, seq = r["_csn"].decode().split("-")
            self.assertEqual(r["_version"], int(pos, 16) << 8 | min(int(seq), 255))

    @harness.tag("quick")
    def test_merge_changes_and_truncate(self):
        self.make_table("mg")
        s = self.sluice(stream="mg", tables="public.mg", database="mg", write_mode="merge")
        self.catch_up(s)
        self.assertChMatches(s, "public", "mg", ["id"])
        self.workload("mg")
        self.catch_up(s)
        self.assertChMatches(s, "public", "mg", ["id"])
        # TRUNCATE, with rows after it in the same transaction and in the next
        self.pg.execute("BEGIN; TRUNCATE mg; INSERT INTO mg VALUES (1, 'one', 0), (2, 'two', 0); COMMIT")
        self.pg.execute("INSERT INTO mg SELECT g, 'later', 0 FROM generate_series(3, 40) g")
        self.catch_up(s)
        self.assertChMatches(s, "public", "mg", ["id"])
        self.assertEqual(ch_count(self.ch, "mg", "public_mg_current"), 40)
        # the table keeps the versions: deleted keys are rows with _is_deleted = 1
        # (in the modern layout's ReplacingMergeTree(_version, _is_deleted),
        # FINAL leaves them out: counted without it)
        self.assertGreater(ch_count(self.ch, "mg", "public_mg", "_is_deleted = 1", final=not self.modern), 100)
        self.ch.query("OPTIMIZE TABLE mg.public_mg FINAL")
        self.assertChMatches(s, "public", "mg", ["id"])

    def test_merge_truncate_in_long_transaction(self):
        """A TRUNCATE after more than 255 changes of its transaction, which
        is sent in parts (batch_rows = 100): the rows of its earlier parts are
        older than the TRUNCATE and are gone."""
        self.make_table("lt", rows=3000)
        s = self.sluice(stream="lt", tables="public.lt", database="lt", write_mode="merge",
                        dest={"batch_rows": 100})
        self.catch_up(s)
        self.pg.execute("BEGIN; UPDATE lt SET counter = counter + 1 WHERE id <= 1000; TRUNCATE lt; "
                        "INSERT INTO lt VALUES (1, 'one', 7); COMMIT")
        self.catch_up(s)
        self.assertChMatches(s, "public", "lt", ["id"])
        self.assertEqual(ch_count(self.ch, "lt", "public_lt_current"), 1)
        # and a later change still lands on top
        self.pg.execute("INSERT INTO lt VALUES (2, 'two', 0)")
        self.catch_up(s)
        self.assertChMatches(s, "public", "lt", ["id"])

    def test_columns_added_dropped_renamed_widened(self):
        """ADD COLUMN flows through (ALTER TABLE ... ADD COLUMN, the view made
        again).  A column dropped at the source is dropped in merge mode
        (DROP COLUMN) and kept in append mode, NULL in the rows written
        after; a renamed one is a dropped one and an added one, the table
        backfilled again; int widened to bigint is MODIFY COLUMN.  The stream
        goes on, and both modes equal the source."""
        sm, sa = self.both_modes("sc")
        self.pg.execute("ALTER TABLE sc ADD COLUMN extra numeric(8,3), ADD COLUMN w int")
        self.pg.execute("INSERT INTO sc VALUES (100, 'new', 0, 1.5, 7)")
        self.pg.execute("UPDATE sc SET extra = 2.25, w = 3, counter = counter + 1 WHERE id = 1")
        self.catch_up(sm)
        self.catch_up(sa)
        got = self.assertChMatches(sm, "public", "sc", ["id"])
        self.assertIn("extra", got[0])
        self.assertChMatches(sa, "public", "sc", ["id"], append=True)
        self.assertEqual([c[0] for c in self.ch.columns("sc_a", "public_sc")][-2:], ["extra", "w"])
        self.pg.execute("ALTER TABLE sc DROP COLUMN v")
        self.pg.execute("ALTER TABLE sc RENAME COLUMN extra TO extra2")
        self.pg.execute("ALTER TABLE sc ALTER COLUMN w TYPE bigint")
        self.pg.execute("INSERT INTO sc (id, counter, extra2, w) VALUES (101, 0, 7.5, 5000000000)")
        self.pg.execute("UPDATE sc SET counter = counter + 1 WHERE id = 2")
        rm = self.catch_up(sm)
        ra = self.catch_up(sa)
        self.assertChMatches(sm, "public", "sc", ["id"])
        self.assertChMatches(sa, "public", "sc", ["id"], append=True)
        payload = lambda db: [(n, t) for n, t, *_ in self.ch.columns(db, "public_sc") if not n.startswith("_")]
        self.assertEqual(payload("sc_m"), [("id", "Int32"), ("counter", "Nullable(Int32)"), ("w", "Nullable(Int64)"),
                                           ("extra2", "Nullable(Decimal(8, 3))")])
        self.assertEqual(payload("sc_a"), [("id", "Nullable(Int32)"), ("v", "Nullable(String)"),
                                           ("counter", "Nullable(Int32)"), ("extra", "Nullable(Decimal(8, 3))"),
                                           ("w", "Nullable(Int64)"), ("extra2", "Nullable(Decimal(8, 3))")])
        # append mode: the kept columns are NULL in the rows written since
        # (the insert's, and the backfill's after the rename)
        rows = self.ch.rows("sc_a", "public_sc", where="id = 101")
        self.assertEqual({(r["v"], r["extra"], r["w"]) for r in rows}, {(None, None, 5000000000)})
        self.assertIn('table "sc_m"."public_sc": column "v" dropped (or renamed) at the source: dropped it',
                      rm.stderr)
        self.assertIn('table "sc_m"."public_sc": column "w" widened at the source: modified it to the wider '
                      'type', rm.stderr)
        self.assertIn('table "sc_a"."public_sc": column "v" is no longer in the source table (dropped or '
                      'renamed): kept, NULL in the rows written from now on', ra.stderr)
        self.assertIn('column "extra" was renamed to "extra2"', rm.stderr)

    def test_silent_ddl_merge(self):
        """Merge mode: after DDL that changed the existing rows without a
        change record (columns added with constant defaults, one with a
        volatile default, a column dropped and added again), every existing
        row of the view equals the source, with no later update of those
        rows: the constant defaults are the columns' DEFAULT, which the
        older parts read (no backfill), except those ClickHouse's column
        cannot carry exactly (a float, a date); the others are backfilled
        again behind a marker.  (A column whose type changes at the source
        stops a ClickHouse stream, with a message of its own.)"""
        kinds = ("dc", "df", "dv", "dd")
        names = silent_ddl_setup(self.pg, "ch_", kinds=kinds)
        s = self.sluice(stream="sdm", tables=", ".join(f"public.{t}" for t in names), database="sdm",
                        write_mode="merge")
        self.catch_up(s)
        silent_ddl_run(self.pg, "ch_", kinds=kinds)
        r = self.catch_up(s)
        for t in names:
            with self.subTest(table=t):
                self.assertChMatches(s, "public", t, ["id"])
        assert_silent_ddl_logged(self, "ch_", r.stderr, kinds=kinds, carried=CH_CARRIED)
        # the columns carry it as their DEFAULT
        got = self.ch.query("SELECT name FROM system.columns WHERE database = 'sdm' AND table = 'public_ch_dc' "
                            "AND default_kind = 'DEFAULT' ORDER BY name").decode().split()
        self.assertEqual(got, sorted(["b", "d", "j", "n", "nn", "ok", "t", "tl", "ts", "u"]))

    def test_ddl_without_changes(self):
        """ADD COLUMN c int DEFAULT 7 and DROP COLUMN v while the agent is
        stopped, after a change that the next run replays, with no change of
        the table after them: pgoutput carries no DDL, so the next run gives
        ClickHouse the catalog's version once it passes its start position.
        Merge mode's table drops v and has c with its DEFAULT, which the
        older parts read, and the view equals the source; append mode's
        table has c too (v kept), and its rows rebuild the source."""
        sm, sa = self.both_modes("qd")
        self.pg.execute("UPDATE qd SET counter = counter + 1 WHERE id = 1")
        self.pg.execute("ALTER TABLE qd ADD COLUMN c int DEFAULT 7")
        self.pg.execute("ALTER TABLE qd DROP COLUMN v")
        for s in (sm, sa):
            self.catch_up(s)
        payload = lambda db: [n for n, *_ in self.ch.columns(db, "public_qd") if not n.startswith("_")]
        self.assertEqual(payload("qd_m"), ["id", "counter", "c"])
        self.assertEqual(payload("qd_a"), ["id", "v", "counter", "c"])
        for db in ("qd_m", "qd_a"):
            self.assertEqual(self.ch.scalar(f"SELECT default_kind FROM system.columns WHERE database = '{db}' "
                                            "AND table = 'public_qd' AND name = 'c'"), "DEFAULT", db)
        got = self.assertChMatches(sm, "public", "qd", ["id"])
        self.assertEqual(len(got), 20)
        self.assertEqual({r["c"] for r in got}, {7})
        self.assertChMatches(sa, "public", "qd", ["id"], append=True)

    def test_column_retyped_in_clickhouse(self):
        """A column retyped in ClickHouse by hand stops the stream with a
        message that says ClickHouse changed, not the source."""
        self.make_table("rt", rows=20)
        s = self.sluice(stream="rt", tables="public.rt", database="rt", write_mode="merge")
        self.catch_up(s)
        self.ch.query("ALTER TABLE rt.public_rt MODIFY COLUMN counter Nullable(String)")
        self.pg.execute("UPDATE rt SET counter = counter + 1 WHERE id = 1")
        self.pg.wait_wal_flushed()
        p = s.start("run", env=self.env())
        try:
            wait_until(lambda: 'column "counter"' in p.stderr_text(), 60, "the stream to stop on the column")
        finally:
            p.kill9()
        self.assertIn('table "public_rt": column "counter" was changed in ClickHouse: sluice made it '
                      'Nullable(Int32), which the source table still needs, and ClickHouse now has '
                      'Nullable(String)', p.stderr_text())
        self.assertNotIn("changed at the source", p.stderr_text())

    def test_dropped_and_created_again(self):
        """Merge mode: a table dropped at the source is cleared (its marker,
        a table version without columns, tombstones every row); one dropped
        and created again is backfilled as new, after a marker that clears
        the old rows."""
        pg = self.pg
        for t in ("rc", "gone"):
            pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
            pg.execute(f"INSERT INTO {t} SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.sluice(stream="ident", tables="public.rc, public.gone", database="ident", write_mode="merge")
        self.catch_up(s)
        p = s.start("run", env=self.env())
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 30, "streaming")
        pg.execute("DROP TABLE rc")
        pg.execute("CREATE TABLE rc (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rc SELECT g, 'new' FROM generate_series(100, 104) g")
        pg.execute("DROP TABLE gone")
        wait_until(lambda: "restarting the stream" in p.stderr_text() or not p.alive(), 60, "the restart")
        pg.execute("INSERT INTO rc VALUES (105, 'later')")
        self.assertTrue(p.alive(), p.stderr_text())
        p.signal(signal.SIGTERM)
        self.assertEqual(p.wait_result(60).rc, 0, p.stderr_text())
        self.catch_up(s)
        self.assertChMatches(s, "public", "rc", ["id"])
        self.assertEqual(ch_count(self.ch, "ident", "public_gone_current"), 0)
        # (FINAL leaves deleted keys out in the modern layout: keys counted
        # without it, a replayed marker's tombstones not merged yet)
        if self.modern:
            self.assertEqual(self.ch.scalar("SELECT uniqExact(id) FROM ident.public_gone "
                                            "WHERE _change_type = 'TRUNCATE'"), "21")
        else:
            self.assertEqual(ch_count(self.ch, "ident", "public_gone", "_change_type = 'TRUNCATE'", final=True), 21)

    def test_table_dropped_in_clickhouse(self):
        """A table sluice wrote, dropped in ClickHouse by hand: the stream
        stops with exit 3 and the command that backfills it, instead of making
        it anew with only the rows of later changes; that command fills it."""
        self.make_table("dr", rows=50)
        s = self.sluice(stream="dr", tables="public.dr", database="dr", write_mode="merge")
        self.catch_up(s)
        self.ch.query("DROP TABLE dr.public_dr")
        self.pg.execute("UPDATE dr SET counter = counter + 1 WHERE id = 7")
        self.pg.wait_wal_flushed()
        r = s.run("run", "--until-caught-up", env=self.env(), timeout=120)
        self.assertEqual(r.rc, 3, r.describe())
        cmd = f"sluice backfill -c {os.path.realpath(s.config_path)} --stream dr --table public.dr"
        self.assertIn('table "dr"."public_dr" (of "public"."dr") is gone from ClickHouse, but sluice made and '
                      f'wrote it before (dropped by hand?): the stream alone cannot bring its rows back, so it '
                      f'stops here. Run `{cmd}`', r.stderr)
        self.assertFalse(self.ch.table_exists("dr", "public_dr"))
        r = s.run("backfill", "--stream", "dr", "--table", "public.dr", env=self.env(), timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        self.assertChMatches(s, "public", "dr", ["id"])
        self.assertEqual(ch_count(self.ch, "dr", "public_dr_current"), 50)

    def test_created_again_between_runs(self):
        """Merge mode: a table dropped and created again right after the
        initial backfill, the stream's position still the snapshot's (the
        old rows' CSN).  The marker's version is above every old row's and
        below every new row's, so it tombstones the old rows and keeps the
        new ones."""
        pg = self.pg
        pg.execute("CREATE TABLE rcb (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rcb SELECT g, 'old' FROM generate_series(1, 20) g")
        s = self.sluice(stream="identb", tables="public.rcb", database="identb", write_mode="merge")
        self.catch_up(s)
        old = max(r["_version"] for r in self.ch.rows("identb", "public_rcb", final=True))
        pg.execute("DROP TABLE rcb")
        pg.execute("CREATE TABLE rcb (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO rcb SELECT g, 'new' FROM generate_series(15, 24) g")
        self.catch_up(s)
        self.assertChMatches(s, "public", "rcb", ["id"])
        # The tombstones read without FINAL: the modern layout's FINAL
        # (ReplacingMergeTree(_version, _is_deleted)) hides deleted rows.
        rows = self.ch.rows("identb", "public_rcb", final=False)
        marks = {r["_version"] for r in rows if r["_change_type"] == b"TRUNCATE"}
        self.assertEqual(len(marks), 1, rows)
        mark = marks.pop()
        self.assertGreater(mark, old)
        live = [r for r in self.ch.rows("identb", "public_rcb", final=True) if not r["_is_deleted"]]
        self.assertEqual(sorted(r["id"] for r in live), list(range(15, 25)))
        self.assertTrue(all(r["_version"] > mark for r in live), live)

    def test_interrupted_backfill_append(self):
        """kill -9 in the middle of a backfill whose rows already reached
        ClickHouse (small batches are sent as they fill): the redo deletes the
        interrupted run's rows (ALTER TABLE ... DELETE by _csn range) and
        writes the table again from a new snapshot, each row once.  The
        table is one chunk, so that the kill comes before any of it is
        durable (a kill after a durable chunk resumes instead)."""
        pg = self.pg
        pg.execute("CREATE TABLE bf (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO bf SELECT g, md5(g::text) FROM generate_series(1, 200000) g")
        s = self.sluice(stream="bf", tables="public.bf", database="bf", dest={"batch_rows": "1000"},
                        extra={"source": {"backfill_chunk_rows": "1000000"}})
        p = s.start("run", env=self.env())
        try:
            wait_until(lambda: self.ch.table_exists("bf", "public_bf") and
                       ch_count(self.ch, "bf", "public_bf") > 0, 60, "the first backfill rows in ClickHouse")
        finally:
            p.kill9()
        first = ch_count(self.ch, "bf", "public_bf")
        first_csn = self.ch.scalar("SELECT any(_csn) FROM bf.public_bf")
        self.assertLess(first, 200000, "the backfill finished before the kill")
        pg.wait_slot_inactive(s.slot)
        s.extra["destination"]["batch_rows"] = None   # the redo in big batches
        s.write_config()
        r = self.catch_up(s)
        self.assertIn("removed the rows of an interrupted backfill", r.stderr)
        self.assertEqual(ch_count(self.ch, "bf", "public_bf", f"_csn = '{first_csn}'"), 0)
        # the redo's rows, each once, after its marker (a TRUNCATE record at the snapshot's position - 1)
        rows = self.ch.query("SELECT count(), uniqExact(id), uniqExact(_csn), any(_csn) FROM bf.public_bf FINAL "
                             "WHERE _change_type = 'INSERT' FORMAT TSV").decode().split()
        self.assertEqual(rows[:3], ["200000", "200000", "1"], f"{first} rows before the kill")
        marker = self.ch.scalar("SELECT groupArray(_csn) FROM bf.public_bf FINAL WHERE _change_type = 'TRUNCATE'")
        pos = int(rows[3].split("-")[0], 16)
        self.assertEqual(marker, f"['{pos - 1:016X}-0000000000']")

    def test_killed_after_create_then_column_dropped_merge(self):
        """kill -9 right after the table is made, before any row reaches it
        (SLUICE_FAULT_CH_KILL_AFTER_CREATE); a column is then dropped at the
        source.  The rerun redoes the backfill and drops the column too: the
        record of the columns sluice made was written before the CREATE (a
        table without it stopped the stream, exit 3, on a column that
        "sluice has no record of making", seed 4961)."""
        pg = self.pg
        pg.execute("CREATE TABLE kc (id int PRIMARY KEY, c1 text, v int)")
        pg.execute("INSERT INTO kc SELECT g, 'c' || g, g FROM generate_series(1, 50) g")
        s = self.sluice(stream="kc", tables="public.kc", database="kc", write_mode="merge")
        e = self.env()
        e["SLUICE_FAULT_CH_KILL_AFTER_CREATE"] = "1"
        r = s.run("run", "--until-caught-up", env=e)
        self.assertEqual(r.rc, -9, r.describe())
        self.assertTrue(self.ch.table_exists("kc", "public_kc"))
        self.assertEqual(ch_count(self.ch, "kc", "public_kc"), 0)
        pg.wait_slot_inactive(s.slot)
        pg.execute("ALTER TABLE kc DROP COLUMN c1")
        pg.execute("UPDATE kc SET v = -v WHERE id <= 10")
        pg.execute("INSERT INTO kc VALUES (51, 51)")
        r = self.catch_up(s)
        self.assertIn('table "kc"."public_kc": column "c1" dropped (or renamed) at the source: dropped it',
                      r.stderr)
        self.assertEqual([n for n, *_ in self.ch.columns("kc", "public_kc") if not n.startswith("_")], ["id", "v"])
        self.assertChMatches(s, "public", "kc", ["id"])

    def test_unchanged_toast_merge(self):
        """A large value left out of an UPDATE (unchanged TOAST) survives:
        filled from the same batch, from ClickHouse, and across key
        changes in both."""
        pg = self.pg
        pg.execute("CREATE TABLE toast_t (id int PRIMARY KEY, n int, big text); "
                   "ALTER TABLE toast_t ALTER COLUMN big SET STORAGE EXTERNAL")
        big = lambda i: "".join(f"{(i * 7919 + k) * 2654435761 % 4294967296:08x}" for k in range(1500))  # noqa: E731
        for i in range(1, 7):
            pg.execute(f"INSERT INTO toast_t VALUES ({i}, 0, '{big(i)}')")
        s = self.sluice(stream="toast", tables="public.toast_t", database="toast", write_mode="merge",
                        log_level="debug")
        self.catch_up(s)
        # from ClickHouse: rows written by an earlier run
        pg.execute("UPDATE toast_t SET n = 1 WHERE id = 1")
        # from ClickHouse, after a key change
        pg.execute("UPDATE toast_t SET id = 20, n = 2 WHERE id = 2")
        # within one batch: an insert then updates, and a key change of it
        pg.execute(f"INSERT INTO toast_t VALUES (7, 0, '{big(7)}')")
        pg.execute("UPDATE toast_t SET n = 3 WHERE id = 7")
        pg.execute("UPDATE toast_t SET id = 70, n = 4 WHERE id = 7")
        pg.execute("UPDATE toast_t SET n = 5 WHERE id = 70")
        # two key changes of one row in one transaction
        pg.execute("BEGIN; UPDATE toast_t SET id = 30 WHERE id = 3; UPDATE toast_t SET id = 31, n = 6 "
                   "WHERE id = 30; COMMIT")
        # really set to NULL
        pg.execute("UPDATE toast_t SET big = NULL, n = 7 WHERE id = 4")
        r = self.catch_up(s)
        self.assertNotIn("written as NULL", r.stderr)
        sent = [l for l in r.stderr.splitlines() if "clickhouse: batch sent" in l]
        self.assertTrue(sent, r.stderr[-3000:])
        # rows 1, 2 (key change) and 3 (two key changes) from ClickHouse, 7 and 70 from the batch
        m = re.search(r" (\d+) lookups, (\d+) unchanged values filled, (\d+) missing", sent[-1])
        self.assertTrue(m and int(m.group(1)) >= 1 and m.group(2) == "6" and m.group(3) == "0", sent[-1])
        self.assertChMatches(s, "public", "toast_t", ["id"])
        rows = self.ch.rows("toast", "public_toast_t_current")
        self.assertTrue(all(len(r["big"] or b"") in (0, 12000) for r in rows))
        self.assertEqual(sum(r["big"] is None for r in rows), 1)
        self.assertTrue(all(r["_unchanged_columns"] == [] for r in rows))


    def test_unchanged_toast_after_key_change_replayed(self):
        """A key change whose new row took its unchanged TOAST value from the
        old key's row, replayed after sluice died between ClickHouse's 2xx and
        its checkpoint: the old key's row is a tombstone by then, and the
        replay keeps the value instead of writing NULL over it."""
        self.key_changes_replayed("toast_r", "UPDATE toast_r SET id = 2 WHERE id = 1", None,
                                  lambda big, other: [(2, 0, big)], first_write=lambda big, other: [(2, 0, big)])

    def key_changes_replayed(self, t, first, while_stopped, want, first_write=None):
        """Row 1 of t (a TOAST value) is moved by first (one transaction),
        whose insert reaches ClickHouse before sluice is killed (the proxy
        holds its answer); while_stopped (if any) runs; the replay's batch
        holds both. want(big, other) is the source's rows (id, n, big)
        after; first_write(big, other), if given, ClickHouse's rows before
        the replay."""
        pg = self.pg
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, n int, big text); "
                   f"ALTER TABLE {t} ALTER COLUMN big SET STORAGE EXTERNAL")
        big = "".join(f"{k * 2654435761 % 4294967296:08x}" for k in range(1500))
        other = "".join(f"{k * 40503 % 4294967296:08x}" for k in range(1500))
        pg.execute(f"INSERT INTO {t} VALUES (1, 0, '{big}')")
        proxy = HoldingProxy(self.ch.url)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=t, tables=f"public.{t}", database=t, write_mode="merge", dest={"url": proxy.url})
        self.catch_up(s)
        proxy.arm(big.encode())
        pg.execute(first.format(other=other))
        pg.wait_wal_flushed()
        p = s.start("run", env=self.env())
        try:
            wait_until(proxy.held.is_set, 60, "the key change's insert to reach ClickHouse")
        finally:
            p.kill9()
        proxy.pass_through()
        if first_write:
            rows = self.ch.rows(t, f"public_{t}_current")
            self.assertEqual(sorted((r["id"], r["n"], r["big"]) for r in rows),
                             [(i, n, b.encode()) for i, n, b in first_write(big, other)], "the first write")
        if while_stopped:
            pg.execute(while_stopped)
        r = self.catch_up(s)
        self.assertNotIn("written as NULL", r.stderr)
        self.assertChMatches(s, "public", t, ["id"])
        rows = self.ch.rows(t, f"public_{t}_current")
        self.assertEqual(sorted((r["id"], r["n"], r["big"]) for r in rows),
                         [(i, n, b.encode()) for i, n, b in want(big, other)])

    def test_unchanged_toast_after_key_changes_replayed(self):
        """The replay of a key change ClickHouse has, followed by more key
        changes and an update of the row in the same batch (seed 4509): the
        value comes from the key it moved to first, whose row the first
        write filled in; not NULL from the old key's tombstone, and not
        from the row inserted under the old key since."""
        self.key_changes_replayed(
            "toast_c", "BEGIN; UPDATE toast_c SET id = 2 WHERE id = 1; INSERT INTO toast_c VALUES (1, 9, '{other}'); "
            "COMMIT", "BEGIN; UPDATE toast_c SET id = 3 WHERE id = 2; UPDATE toast_c SET n = 1 WHERE id = 3; "
            "UPDATE toast_c SET id = 4, n = 2 WHERE id = 3; COMMIT",
            lambda big, other: [(1, 9, other), (4, 2, big)])

    def test_unchanged_toast_after_key_change_back_replayed(self):
        """The same with the row moved back to its first key (1 to 2, then 2
        to 1): its fill key is its own, a tombstone by then; 2's row has
        the value."""
        self.key_changes_replayed("toast_b", "UPDATE toast_b SET id = 2 WHERE id = 1",
                                  "UPDATE toast_b SET id = 1, n = 5 WHERE id = 2",
                                  lambda big, other: [(1, 5, big)])


class ClickHouseTlsTest(ChTestCase):
    ch_tls = True

    def test_certificate_verified(self):
        """https: the server's certificate is checked against ca_file and the
        host name; an unknown CA or another host name is refused at once
        (not retried); tls_verify = false accepts it."""
        self.pg.execute("CREATE TABLE tl (id int PRIMARY KEY, v text); INSERT INTO tl VALUES (1, 'a'), (2, 'b')")
        url = self.ch.https_url("localhost")
        good = self.sluice(stream="tls_ok", tables="public.tl", database="tls",
                           dest={"url": url, "ca_file": self.ch.ca_file})
        r = good.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f"answers at {url} as user", r.stdout)
        self.catch_up(good)
        self.assertChMatches(good, "public", "tl", ["id"], append=True)

        cases = (
            ("tls_host", {"url": self.ch.https_url("127.0.0.1"), "ca_file": self.ch.ca_file},
             "no alternative certificate subject name matches target host name '127.0.0.1'"),
            ("tls_ca", {"url": url}, "unable to get local issuer certificate"),
        )
        for stream, dest, why in cases:
            with self.subTest(stream=stream):
                s = self.sluice(stream=stream, tables="public.tl", database="tls2", dest=dest)
                r = s.run("check", env=self.env(), timeout=30)
                self.assertNotEqual(r.rc, 0, r.describe())
                self.assertIn(why, r.stderr)
                # streaming: the first write fails at once, with no retry of its own
                p = s.start("run", env=self.env())
                try:
                    wait_until(lambda: why in p.stderr_text(), 20, "the stream to fail on the certificate")
                finally:
                    p.kill9()
                self.assertNotIn("ms (attempt", p.stderr_text())
        off = self.sluice(stream="tls_off", tables="public.tl", database="tls3",
                          dest={"url": self.ch.https_url("127.0.0.1"), "tls_verify": "false"})
        r = off.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())


def kt_workload(seed, ids=range(1, 2001)):
    """Small random transactions on table kt (id, v, counter), which holds
    the rows ids: inserts, updates that add one to counter, deletes, key
    changes."""
    return CounterWorkload(seed, "pg", "public", ["kt"], ids)


class ClickHouseKeysTest(ChTestCase):
    """Merge mode keys that are keys: a keyless REPLICA IDENTITY FULL table
    is refused, and a row whose key has no value (a NULL that slipped
    through: NOT NULL dropped while the agent runs) goes to the dead-letter
    file while the stream goes on."""

    def test_keyless_full_table_is_refused(self):
        pg = self.pg
        pg.execute("CREATE TABLE dup (id int, v text)")
        pg.execute("ALTER TABLE dup REPLICA IDENTITY FULL")
        pg.execute("INSERT INTO dup VALUES (2, 'dup'), (2, 'dup'), (3, 'dup3')")
        s = self.sluice(stream="dup", tables="public.dup", database="dup", write_mode="merge")
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd, env=self.env())
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('table "public"."dup" has no unique NOT NULL key', r.stderr)
            self.assertIn("key_columns = public.dup.COLUMN", r.stderr)

    def test_replica_identity_on_another_index(self):
        """REPLICA IDENTITY USING INDEX on a unique index other than the
        primary key: refused; keyed by that index (key_columns), deletes and
        key changes are mirrored exactly."""
        pg = self.pg
        pg.execute("CREATE TABLE d6 (id int PRIMARY KEY, u int NOT NULL, a text)")
        pg.execute("CREATE UNIQUE INDEX d6_u ON d6 (u)")
        pg.execute("INSERT INTO d6 VALUES (1, 10, 'x'), (2, 20, 'y'), (3, 30, 'z')")
        pg.execute("ALTER TABLE d6 REPLICA IDENTITY USING INDEX d6_u")
        s = self.sluice(stream="d6", tables="public.d6", database="d6", write_mode="merge")
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn("ALTER TABLE public.d6 REPLICA IDENTITY DEFAULT", r.stderr)
        s = self.sluice(stream="d6u", tables="public.d6", database="d6u", write_mode="merge",
                        extra={"stream": {"key_columns": "public.d6.u"}})
        self.catch_up(s)
        pg.execute("DELETE FROM d6 WHERE id = 3")
        pg.execute("UPDATE d6 SET id = id + 100")
        pg.execute("UPDATE d6 SET u = 11 WHERE u = 10")
        self.catch_up(s)
        self.assertChMatches(s, "public", "d6", ["u"])

    def test_null_key_goes_to_the_dead_letter_file(self):
        pg = self.pg
        pg.execute("CREATE TABLE nn (id int, u int NOT NULL UNIQUE, v text)")
        pg.execute("ALTER TABLE nn REPLICA IDENTITY FULL")
        pg.execute("CREATE TABLE nn_other (id int PRIMARY KEY, v text)")
        pg.execute("INSERT INTO nn VALUES (1, 10, 'a'), (2, 20, 'b')")
        s = self.sluice(stream="nn", tables="public.nn, public.nn_other", database="nn", write_mode="merge",
                        dest={"batch_seconds": "0.1"}, extra={"stream": {"key_columns": "public.nn.u"}})
        p = s.start("run", env=self.env())
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 120, "streaming")
        pg.execute("ALTER TABLE nn ALTER COLUMN u DROP NOT NULL")
        pg.execute("INSERT INTO nn VALUES (5, NULL, 'x')")
        pg.execute("INSERT INTO nn VALUES (6, 60, 'y')")
        pg.execute("INSERT INTO nn_other VALUES (1, 'other')")
        wait_until(lambda: not p.alive() or (self.ch.columns("nn", "public_nn_other_current") and
                                             len(self.ch.rows("nn", "public_nn_other_current")) == 1),
                   60, "the other table's row")
        self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("went to the dead-letter file", r.stderr)
        got = {(x["id"], x["u"], x["v"].decode()) for x in self.ch.rows("nn", "public_nn_current")}
        self.assertEqual(got, set(pg.sql("SELECT id, u, v FROM nn WHERE u IS NOT NULL")))
        self.assertChMatches(s, "public", "nn_other", ["id"])
        with open(os.path.join(s.workdir, "nn.nn.dead-letter.jsonl")) as f:
            lines = [json.loads(x) for x in f]
        self.assertEqual([(x["table"], x["code"], x["change_type"], x["row"]) for x in lines],
                         [("public_nn", 0, "INSERT", {"id": 5, "u": None, "v": "x"})])
        self.assertRegex(lines[0]["csn"], r"^[0-9A-F]{16}-\d{10}$")
        self.assertIn('column "u": a null value in a column that cannot be null', lines[0]["reason"])
        # the next start refuses the nullable key
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('key column "u" of table "public"."nn" (key_columns) is nullable', r.stderr)


class ClickHouseKillTest(ChTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute("CREATE TABLE kt (id int PRIMARY KEY, v text, counter int NOT NULL)")
        cls.pg.execute("INSERT INTO kt SELECT g, md5(g::text), 0 FROM generate_series(1, 2000) g")

    def test_kill9_replays_converge(self):
        """kill -9 of two agents (merge and append) at random points under a
        workload, restarts, one TRUNCATE: the merge view equals the source,
        the append rows rebuild it with no counter gap."""
        seed = pick_seed("clickhouse kill test seed")
        rng = random.Random(seed)
        pg = self.pg
        # small batches, so that kills land between inserts as well as in them
        dest = {"batch_seconds": "0.1", "batch_rows": "500"}
        sm = self.sluice(stream="km", tables="public.kt", database="km", write_mode="merge", dest=dest)
        sa = self.sluice(stream="ka", tables="public.kt", database="ka", dest=dest)
        load = kt_workload(seed)
        wl = Runner(pg, load)
        wl.start()
        self.addCleanup(wl.stop_event.set)
        procs = {s: s.start("run", env=self.env()) for s in (sm, sa)}
        for i in range(4):
            time.sleep(rng.uniform(0.2, 2.0))
            victim = rng.choice((sm, sa)) if i else sm
            p = procs[victim]
            if not p.alive():
                self.fail(f"sluice exited before kill {i + 1}:\n{p.result().describe()}")
            p.kill9()
            print(f"    kill -9 #{i + 1} of {victim.stream} (workload at {wl.tx} transactions)", file=sys.stderr)
            pg.wait_slot_inactive(victim.slot)
            procs[victim] = victim.start("run", env=self.env())
            if i == 1:
                # a TRUNCATE between two workload transactions
                wl.finish(30)
                pg.execute("TRUNCATE kt; INSERT INTO kt SELECT g, 'fresh', 0 FROM generate_series(1, 500) g")
                load.refill("kt", range(1, 501), 100000)
                wl = Runner(pg, load)
                wl.start()
                self.addCleanup(wl.stop_event.set)
        time.sleep(rng.uniform(0.5, 1.5))
        wl.finish()
        self.stop_and_catch_up(procs)
        print(f"    workload: {wl.tx} transactions after the TRUNCATE", file=sys.stderr)
        check(diff_clickhouse("pg", pg, "public", self.ch, "km", "merge", self.modern) +
              diff_clickhouse("pg", pg, "public", self.ch, "ka", "append", self.modern), seed, "km, ka")
        rows = self.ch.rows("ka", "public_kt", final=True)
        self.assertEqual(counter_problems(rows, ["id"]), [])
        raw = ch_count(self.ch, "ka", "public_kt")
        print(f"    append: {len(rows)} changes ({raw - len(rows)} repeats not merged yet)", file=sys.stderr)


class ClickHouseReplayTest(ChTestCase):
    """Older table versions after newer ones in merge mode (doc/clickhouse.md,
    "Older table versions"): a run that replays the log from a position
    before what the table already holds hands the sink the versions of
    those positions after a newer one.  A column the older version lacks
    stays in ClickHouse (NULL in the older change's row): taken for
    dropped, its values would be gone, and it would come back empty once
    the stream passed the DDL that added it."""

    def made(self, t, rows):
        self.pg.execute(f"DROP TABLE IF EXISTS {t}")
        self.pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, c1 text)")
        self.pg.execute(f"INSERT INTO {t} SELECT g, 'a' || g FROM generate_series(1, {rows}) g")
        self.pg.execute(f"ANALYZE {t}")   # 10,000 rows or more: read in chunks (doc/operations.md, "Scale")

    def assert_source(self, db, t, mode="merge"):
        self.assertEqual(diff_clickhouse("pg", self.pg, "public", self.ch, db, mode, self.modern, tables=[t]), [])
        self.assertEqual([c[0] for c in self.ch.columns(db, f"public_{t}") if not c[0].startswith("_")],
                         ["id", "c1", "c2"])

    def killed_held(self, s, proxy, cond, what):
        """Runs s until the insert proxy was armed for is held and cond()
        holds, kills it (-9) and lets the proxy pass everything again."""
        p = s.start("run", env=self.env())
        try:
            wait_until(lambda: (proxy.held.is_set() and cond()) or not p.alive(), 60, what)
            self.assertTrue(p.alive(), p.result().describe() if not p.alive() else "")
        finally:
            p.kill9()
        p.wait_result(30)
        proxy.pass_through()
        self.pg.wait_slot_inactive(s.slot)

    def resumed_after(self, t, mode, ddl):
        """The initial backfill of t (sluice stream and database t) is
        killed after a chunk is durable and rows of a later one reached
        ClickHouse (the proxy holds an insert's answer); then the statements
        of ddl run, each in a transaction of its own.  The next run resumes
        the backfill in a later snapshot and then streams from the slot's
        position, whose first changes come before ddl's ALTER.  Returns
        that run's result and the Sluice."""
        self.made(t, 12000)
        proxy = HoldingProxy(self.ch.url)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=t, tables=f"public.{t}", database=t, write_mode=mode,
                        dest={"url": proxy.url, "batch_rows": "1000"},
                        extra={"source": {"backfill_chunk_rows": "5000"}})
        proxy.arm(b"a10001")   # a row of the third chunk
        self.killed_held(s, proxy, lambda: backfill_running(s, f"public.{t}", "snapshot", 1),
                         "a durable chunk, and the third chunk's insert held")
        for sql in ddl:
            self.pg.execute(sql)
        r = self.catch_up(s)
        self.assertIn("resuming after its last durable chunk", r.stderr)
        return r, s

    def backfill_resumed(self, mode):
        """A column is added after the slot's position, with changes before
        and after it: the resumed backfill's rows have it, the slot's first
        changes have the version before it.  (Append mode keeps a column a
        version lacks anyway.)"""
        pg = self.pg
        t = db = f"chrb_{mode}"
        # the update before the ALTER has the older version
        r, s = self.resumed_after(t, mode, (
            f"UPDATE {t} SET c1 = 'b' || id WHERE id % 1000 = 0", f"ALTER TABLE {t} ADD COLUMN c2 int",
            f"UPDATE {t} SET c2 = id WHERE id > 11990", f"INSERT INTO {t} VALUES (12001, 'new', 12001)"))
        self.assert_source(db, t, mode)
        if mode == "merge":
            self.assertIn('without column "c2", which a later change wrote: the column stays', r.stderr)
        pg.execute(f"UPDATE {t} SET c2 = -c2 WHERE id = 11995")
        self.catch_up(s)
        self.assert_source(db, t, mode)

    def test_backfill_resumed_merge(self):
        self.backfill_resumed("merge")

    def test_backfill_resumed_append(self):
        self.backfill_resumed("append")

    def test_null_under_default_resumed_merge(self):
        """A column added with a DEFAULT that every later change sets NULL:
        the resumed backfill's rows hold NULL in it, and the slot's older
        changes must keep it all the same.  Dropped there and added again
        with the stream's ALTER, those rows would read the DEFAULT (their
        own changes are older than the backfill's, so none writes them
        again).  An older change's row, which no later change wrote, reads
        the DEFAULT as the source does."""
        pg = self.pg
        t = "chrn"
        r, s = self.resumed_after(t, "merge", (
            f"UPDATE {t} SET c1 = 'b' || id WHERE id % 1000 = 0", f"ALTER TABLE {t} ADD COLUMN c2 int DEFAULT 5",
            f"UPDATE {t} SET c2 = NULL WHERE id > 5000", f"INSERT INTO {t} VALUES (12001, 'new', NULL)"))
        self.assertEqual(pg.sql(f"SELECT count(*) FILTER (WHERE c2 IS NULL), count(c2) FROM {t}"), [(7001, 5000)])
        self.assert_source(t, t)
        self.assertIn('without column "c2", which a later change wrote: the column stays', r.stderr)
        pg.execute(f"UPDATE {t} SET c1 = 'x' || id WHERE id IN (3000, 11000)")
        self.catch_up(s)
        self.assert_source(t, t)

    def test_unchanged_toast_of_older_version_replayed(self):
        """The replay of an UPDATE that left a TOAST value out, of the table
        version before an ADD COLUMN that ClickHouse has, with the new
        column written by a later change: its lookup reads the columns of
        its own version (the table has one more, kept), not every column."""
        pg = self.pg
        t = "chrt"
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, n int, big text); "
                   f"ALTER TABLE {t} ALTER COLUMN big SET STORAGE EXTERNAL")
        big = lambda i: "".join(f"{(i * 7919 + k) * 2654435761 % 4294967296:08x}" for k in range(1500))  # noqa: E731
        for i in range(1, 5):
            pg.execute(f"INSERT INTO {t} VALUES ({i}, 0, '{big(i)}')")
        proxy = HoldingProxy(self.ch.url)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=t, tables=f"public.{t}", database=t, write_mode="merge", dest={"url": proxy.url})
        self.catch_up(s)
        for sql in (f"UPDATE {t} SET n = 1 WHERE id <= 2", f"ALTER TABLE {t} ADD COLUMN c2 int",
                    f"UPDATE {t} SET c2 = id WHERE id <= 3", f"INSERT INTO {t} VALUES (99, 0, 'the last row')"):
            pg.execute(sql)
        pg.wait_wal_flushed()
        proxy.arm(b"the last row")
        self.killed_held(s, proxy, lambda: True, "the insert of the last row held")
        r = self.catch_up(s)
        self.assertIn('without column "c2", which a later change wrote: the column stays', r.stderr)
        self.assertNotIn("could not read the rows", r.stderr)
        self.assertNotIn("written as NULL", r.stderr)
        self.assertChMatches(s, "public", t, ["id"])
        rows = self.ch.rows(t, f"public_{t}_current")
        self.assertEqual(sorted((r["id"], r["n"], r["c2"], r["big"]) for r in rows),
                         [(1, 1, 1, big(1).encode()), (2, 1, 2, big(2).encode()), (3, 0, 3, big(3).encode()),
                          (4, 0, None, big(4).encode()), (99, 0, None, b"the last row")])

    def test_drop_replayed_merge(self):
        """A column dropped at the source, its checkpoint behind changes
        after the DROP COLUMN that ClickHouse has (the proxy holds their
        insert's answer): the next run replays the changes from before it,
        which add the column back, and then those after it, of the version
        without it, which must drop it again, their later rows NULL in it
        as a column added back without a DEFAULT reads."""
        pg = self.pg
        t = "chrx"
        self.made(t, 20)
        pg.execute(f"ALTER TABLE {t} ADD COLUMN v int; UPDATE {t} SET v = id")
        proxy = HoldingProxy(self.ch.url)
        self.addCleanup(proxy.close)
        s = self.sluice(stream=t, tables=f"public.{t}", database=t, write_mode="merge", dest={"url": proxy.url})
        self.catch_up(s)
        for sql in (f"UPDATE {t} SET c1 = 'b' || id, v = -v WHERE id <= 5", f"ALTER TABLE {t} DROP COLUMN v",
                    f"UPDATE {t} SET c1 = 'c' || id WHERE id > 15"):
            pg.execute(sql)
        pg.wait_wal_flushed()
        proxy.arm(b"\x03c16")
        self.killed_held(s, proxy, lambda: True, "the insert after the DROP COLUMN held")
        self.assertEqual([c[0] for c in self.ch.columns(t, f"public_{t}") if not c[0].startswith("_")],
                         ["id", "c1"])
        r = self.catch_up(s)
        self.assertIn('added column "v"', r.stderr)   # by the replayed changes before the DROP COLUMN
        self.assertIn('column "v" dropped (or renamed) at the source: dropped it', r.stderr)
        self.assertEqual(diff_clickhouse("pg", pg, "public", self.ch, t, "merge", self.modern, tables=[t]), [])
        self.assertEqual([c[0] for c in self.ch.columns(t, f"public_{t}") if not c[0].startswith("_")],
                         ["id", "c1"])

    def test_default_behind_checkpoint_merge(self):
        """A column added with a constant default while sluice is stopped,
        its checkpoint behind an update ClickHouse has (the proxy holds the
        insert's answer): the next run replays the log from the checkpoint,
        whose changes have the version before it, and the ClickHouse column
        carries the default for the rows no change wrote (a guard of that
        path: it held before the rule of older versions too)."""
        pg = self.pg
        t = "chrd"
        self.made(t, 20)
        proxy = HoldingProxy(self.ch.url)
        self.addCleanup(proxy.close)
        s = self.sluice(stream="chrd", tables=f"public.{t}", database="chrd", write_mode="merge",
                        dest={"url": proxy.url})
        self.catch_up(s)
        pg.execute(f"UPDATE {t} SET c1 = 'b' || id WHERE id <= 5")
        pg.wait_wal_flushed()
        proxy.arm(b"\x02b1")
        self.killed_held(s, proxy, lambda: True, "the update's insert held")
        pg.execute(f"ALTER TABLE {t} ADD COLUMN c2 int DEFAULT 7")
        r = self.catch_up(s)
        self.assertIn('column "c2" was added with a default', r.stderr)
        self.assert_source("chrd", t)
        pg.execute(f"UPDATE {t} SET c2 = -c2 WHERE id = 3")
        self.catch_up(s)
        self.assert_source("chrd", t)


class ClickHouse26ChangesTest(ClickHouseChangesTest):
    """Every change in append mode, merge with a TRUNCATE (also after a long
    transaction: the version map), unchanged TOAST values filled by lookups,
    against the ClickHouse 26 server of the tests (the modern layout)."""
    ch_engine = "26"
    test_columns_added_dropped_renamed_widened = None
    test_column_retyped_in_clickhouse = None
    test_dropped_and_created_again = None
    test_table_dropped_in_clickhouse = None
    test_interrupted_backfill_append = None


class ClickHouse26ReplayTest(ClickHouseReplayTest):
    """Older table versions in merge mode against the ClickHouse 26 server
    of the tests: whether a later change wrote a column (a NULL under a
    DEFAULT too) asks system.columns for the DEFAULT."""
    ch_engine = "26"
    test_backfill_resumed_append = None
    test_backfill_resumed_merge = None
    test_default_behind_checkpoint_merge = None


class ClickHouse26KillTest(ClickHouseKillTest):
    """The kill -9 test against the ClickHouse 26 server of the tests."""
    ch_engine = "26"


MODERN_DDL = """
CREATE TABLE md (id int PRIMARY KEY, at timestamptz, day date, ok boolean, u uuid, amount numeric(12,2),
                 doc jsonb, counter int NOT NULL DEFAULT 0);
INSERT INTO md SELECT g, timestamptz '2024-02-29 12:00:00.5+00' + g * interval '1 hour 1 microsecond',
  date '2024-02-29' + g, g % 2 = 0, md5(g::text)::uuid, (g * 1234.5)::numeric(12,2) * (1 - 2 * (g % 2)),
  jsonb_build_object('g', g), 0 FROM generate_series(1, 300) g;
UPDATE md SET day = '0001-01-01', u = '00112233-4455-6677-8899-aabbccddeeff',
  amount = -9999999999.99, at = '1900-01-01 00:00:00+00' WHERE id = 1;
UPDATE md SET day = '9999-12-31', amount = 9999999999.99, at = '2299-12-31 23:59:59.999999+00' WHERE id = 2;
UPDATE md SET at = NULL, day = NULL, ok = NULL, u = NULL, amount = NULL, doc = NULL WHERE id = 3;
"""


class ClickHouse26ModernTest(ChTestCase):
    """The modern layout on the ClickHouse 26 server of the tests: a merge
    stream of a table with timestamptz, date, boolean, uuid and
    numeric(12,2) columns."""
    ch_engine = "26"

    def modern_changes(self, rng):
        pg = self.pg
        pg.execute("UPDATE md SET counter = counter + 1, ok = NOT ok, at = at + interval '1 second' "
                   "WHERE id % 3 = 0")
        pg.execute("DELETE FROM md WHERE id % 7 = 0 AND id > 3")
        pg.execute("UPDATE md SET id = id + 1000, counter = counter + 1 WHERE id % 11 = 5")
        base = 2000 + rng.randrange(1000) * 100
        pg.execute(f"INSERT INTO md SELECT g, now(), current_date, true, gen_random_uuid(), g, '{{}}', 0 "
                   f"FROM generate_series({base}, {base + 49}) g")

    def test_modern_merge_stream(self):
        """Types and engine of the table sluice makes; the view equals the
        source after updates, deletes, key changes and kill -9s; ClickHouse's
        own text of the values equals PostgreSQL's (UUID byte order)."""
        seed = int(os.environ.get("SLUICE_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\n    modern layout test seed {seed} (SLUICE_TEST_SEED={seed} to repeat)", file=sys.stderr)
        rng = random.Random(seed)
        self.pg.execute(MODERN_DDL)
        s = self.sluice(stream="md", tables="public.md", database="md", write_mode="merge",
                        dest={"batch_seconds": "0.1", "batch_rows": "50"})
        r = self.catch_up(s)
        self.assertIn("tables sluice makes get the modern layout", r.stderr)
        types = {n: t for n, t, _ in self.ch.columns("md", "public_md")}
        self.assertEqual({k: types[k] for k in ("id", "at", "day", "ok", "u", "amount", "doc", "_uuid",
                                                "_source_timestamp", "_read_timestamp", "_is_deleted")}, {
            "id": "Int32", "at": "Nullable(DateTime64(6, 'UTC'))", "day": "Nullable(Date32)",
            "ok": "Nullable(Bool)", "u": "Nullable(UUID)", "amount": "Nullable(Decimal(12, 2))",
            "doc": "Nullable(String)", "_uuid": "UUID", "_source_timestamp": "DateTime64(6, 'UTC')",
            "_read_timestamp": "DateTime64(6, 'UTC')", "_is_deleted": "UInt8"})
        engine = self.ch.scalar("SELECT engine_full FROM system.tables WHERE database = 'md' AND name = 'public_md'")
        self.assertRegex(engine, merge_engine_re("id", modern=True))
        self.assertChMatches(s, "public", "md", ["id"])
        # ClickHouse's text of the values, against PostgreSQL's
        got = {int(l.split("\t")[0]): l.split("\t")[1:] for l in self.ch.query(
            "SELECT id, toString(u), toString(day), toString(at), toString(amount), toString(ok) "
            "FROM md.public_md_current FORMAT TSV").decode().splitlines()}
        self.assertEqual(got[1], ["00112233-4455-6677-8899-aabbccddeeff", "1900-01-01", "1900-01-01 00:00:00.000000",
                                  "-9999999999.99", "false"])
        self.assertEqual(got[2][1:4], ["2299-12-31", "2299-12-31 23:59:59.999999", "9999999999.99"])
        for i, u in self.pg.sql("SELECT id, u::text FROM md WHERE u IS NOT NULL"):
            self.assertEqual(got[i][0], u)
        # changes, with kill -9s between and during them
        for i in range(3):
            self.modern_changes(rng)
            p = s.start("run", env=self.env())
            time.sleep(rng.uniform(0.1, 1.0))
            if not p.alive():
                self.fail(f"sluice exited:\n{p.result().describe()}")
            p.kill9()
            self.pg.wait_slot_inactive(s.slot)
        self.catch_up(s)
        self.assertChMatches(s, "public", "md", ["id"])
        self.assertEqual(ch_count(self.ch, "md", "public_md_current", "_is_deleted != 0"), 0)

    def test_date_clamps_metric(self):
        """Dates outside Date32's range are written as its nearer end and
        counted in sluice_date_clamps_total: three in the backfill, two
        streamed, none for the dates inside the range."""
        pg = self.pg
        pg.execute("CREATE TABLE dc (id int PRIMARY KEY, day date); "
                   "INSERT INTO dc VALUES (1, '0001-01-01'), (2, '1899-12-31'), (3, '2300-01-01'), "
                   "(4, '1900-01-01'), (5, '2299-12-31'), (6, NULL)")
        port = metrics_port()
        s = self.sluice(stream="dc", tables="public.dc", database="dc", write_mode="append",
                        dest={"batch_seconds": "0.1"}, extra={"agent": {"metrics_listen": f"127.0.0.1:{port}"}})
        p = s.start("run", env=self.env())
        wait_until(lambda: "streaming from slot" in p.stderr_text() or not p.alive(), 60, "streaming")
        self.assertTrue(p.alive(), p.stderr_text())
        pg.execute("INSERT INTO dc VALUES (7, '5874897-12-31'), (8, '2024-02-29'), (9, '4713-01-01 BC')")
        target = wal_lsn(pg)
        pg.wait_wal_flushed()
        wait_confirmed(pg, s.slot, target)
        self.assertEqual(metric(metrics(port), "sluice_date_clamps_total", stream="dc"), 5)
        got = dict(tuple(l.split("\t")) for l in self.ch.query(
            "SELECT toString(id), toString(day) FROM dc.public_dc FINAL FORMAT TSV").decode().splitlines())
        self.assertEqual(got, {"1": "1900-01-01", "2": "1900-01-01", "3": "2299-12-31", "4": "1900-01-01",
                               "5": "2299-12-31", "6": "\\N", "7": "2299-12-31", "8": "2024-02-29",
                               "9": "1900-01-01"})
        self.assertEqual(p.stderr_text().count("outside Date32's range"), 1)

    def test_legacy_table_keeps_its_layout(self):
        """A table made with layout = legacy keeps Int64 timestamps when the
        stream runs again with layout = auto on a modern server."""
        self.pg.execute("CREATE TABLE lg (id int PRIMARY KEY, at timestamptz, u uuid); "
                        "INSERT INTO lg VALUES (1, '2024-01-01 00:00:00+00', '00112233-4455-6677-8899-aabbccddeeff')")
        s = self.sluice(stream="lg", tables="public.lg", database="lg", write_mode="merge",
                        dest={"layout": "legacy"})
        self.catch_up(s)
        self.assertEqual(self.ch.columns("lg", "public_lg")[1][1], "Nullable(Int64)")
        del s.extra["destination"]["layout"]    # auto: modern on this server
        s.write_config()
        s2 = s
        self.pg.execute("INSERT INTO lg VALUES (2, '2024-01-02 00:00:00+00', NULL)")
        self.catch_up(s2)
        types = {n: t for n, t, _ in self.ch.columns("lg", "public_lg")}
        self.assertEqual((types["at"], types["u"], types["_source_timestamp"]),
                         ("Nullable(Int64)", "Nullable(String)", "Int64"))
        self.assertRegex(self.ch.scalar("SELECT engine_full FROM system.tables WHERE database = 'lg' AND "
                                        "name = 'public_lg'"), merge_engine_re("id"))
        # the expectations in the legacy layout's terms
        self.ch._modern = False
        try:
            self.assertChMatches(s2, "public", "lg", ["id"])
        finally:
            del self.ch._modern


class ClickHouseOutageTest(ChTestCase):
    # A short wal_sender_timeout: a stream that stopped answering would be cut.
    pg_settings = {"wal_sender_timeout": "4s"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg.execute("CREATE TABLE kt (id int PRIMARY KEY, v text, counter int NOT NULL)")
        cls.pg.execute("INSERT INTO kt SELECT g, md5(g::text), 0 FROM generate_series(1, 2000) g")

    def test_clickhouse_down_under_load(self):
        """ClickHouse killed for 10 s (2.5 times wal_sender_timeout) under
        load: the replication connection is kept, the outage is logged once
        when it starts, every outage_log_interval (1 s here) while it lasts
        and once when it ends (JSON lines with a "destination" field), and
        the table is exact afterwards."""
        pg = self.pg
        s = self.sluice(stream="out", tables="public.kt", database="outage", write_mode="merge",
                        extra={"agent": {"outage_log_interval": "1", "log_format": "json"}})
        self.catch_up(s)
        wl = Runner(pg, kt_workload(7))
        wl.start()
        self.addCleanup(wl.stop_event.set)
        started = pg.slot_info(s.slot)["confirmed_flush_lsn"]
        p = s.start("run", env=self.env())
        wait_until(lambda: pg.slot_info(s.slot)["confirmed_flush_lsn"] > started, 60,
                   "the stream to make changes durable")
        walsender = pg.one("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (s.slot,))
        self.ch.pause()
        t0 = time.monotonic()
        wait_until(lambda: any(int(m) >= 10 for m in CH_STILL_RE.findall("\n".join(json_msgs(p)))), 120,
                   "ClickHouse to be down for 10 s as the log says")
        self.assertTrue(p.alive(), "sluice exited while ClickHouse was down")
        self.ch.resume()
        print(f"    ClickHouse down for {time.monotonic() - t0:.1f}s, workload at {wl.tx} transactions",
              file=sys.stderr)
        wait_until(lambda: any(CH_AVAILABLE in m for m in json_msgs(p)), 120, "the outage's last line")
        wl.finish()
        pg.wait_wal_flushed()
        t1 = time.monotonic()
        wait_until(lambda: self._matches(s), 120, "ClickHouse to catch up after the outage", interval=0.5)
        print(f"    caught up {time.monotonic() - t1:.1f}s after the workload stopped", file=sys.stderr)
        self.assertEqual(pg.one("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (s.slot,)),
                         walsender, "the replication connection was not kept")
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        lines = [json.loads(ln) for ln in r.stderr.splitlines() if ln.startswith("{")]
        out = [ln for ln in lines if "destination" in ln]
        self.assertTrue(out, r.stderr)
        self.assertEqual({ln["destination"] for ln in out}, {"out"})
        self.assertEqual({ln["stream"] for ln in out}, {"out"})
        self.assertTrue(out[0]["msg"].startswith(f'{CH_UNAVAILABLE}clickhouse: '), out[0])
        self.assertIn("Failed to connect to 127.0.0.1", out[0]["msg"])
        self.assertEqual(out[0]["level"], "warning")
        self.assertRegex(out[-1]["msg"], r'^destination "out" available again after (1\d|[2-9]\d|\d{3,}) s$')
        self.assertEqual(out[-1]["level"], "info")
        self.assertGreaterEqual(len(out), 3, out)
        for ln in out[1:-1]:
            self.assertRegex(ln["msg"], CH_STILL_RE)
            self.assertEqual(ln["level"], "warning")
        self.assertNotIn("retrying from the last checkpoint", r.stderr)
        self.assertNotIn("replication timeout", pg.log_tail(400))
        self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr)
        self.assertChMatches(s, "public", "kt", ["id"])

    def _matches(self, s):
        return not diff_clickhouse("pg", self.pg, "public", self.ch, s.ch_database, "merge", self.modern)


def json_msgs(p):
    """The messages of the JSON lines a running sluice wrote so far."""
    return [json.loads(ln)["msg"] for ln in p.stderr_text().splitlines() if ln.startswith("{") and ln.endswith("}")]


CH_UNAVAILABLE = 'destination "out" unavailable: '
CH_AVAILABLE = 'destination "out" available again after '
CH_STILL_RE = re.compile(r'destination "out" still unavailable after (\d+) s: clickhouse: ')


if __name__ == "__main__":
    unittest.main()
