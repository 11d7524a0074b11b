"""
tests/integration/test_my_clickhouse.py: MariaDB -> sluice -> ClickHouse
(the throwaway servers of harness_mysql.py and ch_harness.py), the MariaDB
side of test_clickhouse.py:

  - every type of test_my_types.py with its edge values (BIGINT UNSIGNED
    max as UInt64, DECIMAL(65,30) as exact text, DATETIME(6), latin1 and
    utf8mb4 text, binary, ENUM/SET, JSON, BIT, YEAR, geometry) reads back
    exactly, through backfill and the binlog, in both write modes, with
    binlog_row_metadata FULL and NO_LOG;
  - append mode has every change, once;
  - merge mode: `<table>_current` equals the source table after inserts,
    updates, deletes, key changes, multi-table transactions and TRUNCATE;
  - a property test: for several fixed seeds, a random workload of inserts,
    updates, deletes, key changes and multi-table transactions, kill -9 of
    sluice at random points and restarts: the merge view equals the source,
    and the append rows reduced per key in CSN order equal it too, with no
    counter gap;
  - ClickHouse stopped for a while under load, then started again: nothing
    lost, the stream not restarted, the binlog connection kept;
  - a column added in the binlog flows through, a dropped one is dropped
    (merge) or kept (append); hostile identifiers.

Every expected value is read from MariaDB with its own SELECT
(ch_harness.my_source_rows_for_ch); ClickHouse is read with the harness's
own RowBinary reader.  SLUICE_TEST_SEED=<seed> runs the property test with
that one seed.
"""

import decimal
import os
import random
import signal
import sys
import time
import unittest

from ch_harness import CH_PASSWORD, MyChTestCase, ch_object, merge_engine_re, rebuild_append
from harness import csn_seq, wait_until
from oracle import check, diff_clickhouse
from test_clickhouse import ch_count, counter_problems

import test_my_types as T
from workload import CounterWorkload, Runner


class MyChTypesTest(MyChTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE types_db")
        cls.my.execute(T.DDL)
        cls.my.execute(T.insert_sql(T.ROWS))

    def test_every_type_both_modes(self):
        """Backfill, then the same rows through the binlog, then updates and
        deletes: every value reads back exactly, in append and merge mode."""
        sa = self.sluice(stream="ty_a", tables="types_db.types_t", database="types_append")
        sm = self.sluice(stream="ty_m", tables="types_db.types_t", database="types_merge", write_mode="merge")
        self.catch_up(sa)
        self.catch_up(sm)
        self.assertChMatches(sm, "types_db", "types_t", ["id"])
        self.assertChMatches(sa, "types_db", "types_t", ["id"], append=True)
        self.my.execute(T.insert_sql(T.ROWS, id_offset=100))
        self.catch_up(sa)
        self.catch_up(sm)
        self.assertChMatches(sm, "types_db", "types_t", ["id"])
        self.assertChMatches(sa, "types_db", "types_t", ["id"], append=True)
        obj = ch_object("types_db", "types_t")
        self.assertEqual(obj, "types__db_types_t")
        rows = self.ch.rows("types_append", obj, final=True)
        self.assertEqual(len(rows), 2 * len(T.ROWS))
        self.assertEqual(sum(csn_seq(r["_csn"].decode()) == 0 for r in rows), len(T.ROWS))
        self.assertEqual({r["_change_type"] for r in rows}, {b"INSERT"})
        # the binlog position fields, as the source's records carry them
        f, _ = self.my.master_status()
        cdc = [r for r in rows if csn_seq(r["_csn"].decode()) > 0]
        self.assertEqual({r["_log_file"] for r in cdc}, {f.encode()})
        self.assertEqual(len({r["_log_position"] for r in cdc}), 1)
        for r in cdc:
            pos = int(r["_csn"].decode().split("-")[0], 16)
            self.assertEqual(r["_log_position"], pos & 0xFFFFFFFF)
            self.assertRegex(r["_gtid"].decode(), r"^0-1-\d+$")
            self.assertEqual(r["_tx_id"], int(r["_gtid"].decode().split("-")[2]))

        # updates of every type (each column set to another row's value), a delete
        self.my.execute("UPDATE types_db.types_t a JOIN types_db.types_t b ON b.id = 102 SET "
                        + ", ".join(f"a.{c} = b.{c}" for c in T.COLS.split(", ")[1:]) + " WHERE a.id = 101")
        self.my.execute("UPDATE types_db.types_t SET c_text = 'changed', c_int = c_int + 1 WHERE id = 103")
        self.my.execute("DELETE FROM types_db.types_t WHERE id = 102")
        self.catch_up(sa)
        self.catch_up(sm)
        self.assertChMatches(sm, "types_db", "types_t", ["id"])
        self.assertChMatches(sa, "types_db", "types_t", ["id"], append=True)

        types = {n: t for n, t, _ in self.ch.columns("types_merge", obj)}
        want = {
            "id": "Int32", "c_tiny": "Nullable(Int32)", "c_uint": "Nullable(Int64)", "c_big": "Nullable(Int64)",
            "c_ubig": "Nullable(UInt64)", "c_dec": "Nullable(String)", "c_dec2": "Nullable(Decimal(10, 2))",
            "c_float": "Nullable(Float32)", "c_double": "Nullable(Float64)", "c_bit1": "Nullable(UInt8)",
            "c_bit10": "Nullable(String)", "c_date": "Nullable(Int32)", "c_dt": "Nullable(Int64)",
            "c_ts": "Nullable(Int64)", "c_time": "Nullable(Int64)", "c_year": "Nullable(Int32)",
            "c_latin1": "Nullable(String)", "c_enum": "Nullable(String)", "c_json": "Nullable(String)",
            "c_geo": "Nullable(String)", "_log_file": "String", "_log_position": "Int64",
            "_gtid": "Nullable(String)", "_version": "UInt64",
        }
        if self.modern:   # doc/clickhouse.md, "Layouts"
            want.update({
                "c_dec": "Nullable(Decimal(65, 30))", "c_bit1": "Nullable(Bool)", "c_date": "Nullable(Date32)",
                "c_dt": "Nullable(DateTime64(6))", "c_dt0": "Nullable(DateTime64(6))",
                "c_ts": "Nullable(DateTime64(6, 'UTC'))", "_uuid": "UUID",
                "_source_timestamp": "DateTime64(6, 'UTC')",
            })
        self.assertEqual({k: types.get(k) for k in want}, want)
        self.assertNotIn("_lsn", types)
        # the edge values, spelled out (the comparison above reads them from MariaDB)
        got = {r["id"]: r for r in self.ch.rows("types_merge", obj + "_current")}
        self.assertEqual(got[2]["c_ubig"], 18446744073709551615)
        if self.modern:     # Decimal(65, 30)
            self.assertEqual(got[2]["c_dec"], decimal.Decimal(T.D65))
            self.assertEqual(got[1]["c_dec"], decimal.Decimal("-" + T.D65))
            self.assertEqual(got[3]["c_dec"], decimal.Decimal("0.000000000000000000000000000001"))
        else:
            self.assertEqual(got[2]["c_dec"], T.D65.encode())
            self.assertEqual(got[1]["c_dec"], b"-" + T.D65.encode())
            self.assertEqual(got[3]["c_dec"], b"0.000000000000000000000000000001")
        self.assertEqual(got[2]["c_dt"], 253402300799999999)
        self.assertEqual(got[2]["c_latin1"], "caf\u00e9 \u20ac \u00df".encode())
        self.assertEqual(got[2]["c_varchar"], "utf8mb4 \U0001F600 \u2713 \u00e9".encode())
        self.assertEqual(got[2]["c_set"], b"a,b,c")
        self.assertEqual(got[2]["c_bit10"], b"\x03\xff")
        self.assertEqual(got[1]["c_binary"], b"\x00" * 4)
        self.assertIsNone(got[4]["c_json"])

        engines = dict(l.split("\t") for l in self.ch.query(
            "SELECT name, engine_full FROM system.tables WHERE database = 'types_merge' FORMAT TSV")
            .decode().splitlines())
        self.assertRegex(engines[obj], merge_engine_re("id", self.modern))

    def test_check(self):
        s = self.sluice(stream="chk", tables="types_db.types_t", database="check_db", write_mode="merge")
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f"stream chk: destination out: ClickHouse {self.ch.version()} answers at {self.ch.url}", r.stdout)
        self.assertIn("stream chk: table types_db.types_t: 36 columns", r.stdout)
        self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr)


class MyChTypesNoMetadataTest(MyChTypesTest):
    """The same with binlog_row_metadata=NO_LOG (MariaDB's default)."""
    my_settings = {"binlog_row_metadata": "NO_LOG"}
    tags = set()       # not in the sanitizer pass (MyChTypesTest is)


class MyChChangesTest(MyChTestCase):
    tags = {"sanitizers"}   # also run in the sanitizer pass

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE app")

    def make_table(self, name, rows=200):
        my = self.my
        my.execute(f"CREATE TABLE app.{name} (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
        my.execute(f"INSERT INTO app.{name} SELECT seq, md5(seq), 0 FROM mysql.seq_1_to_{rows}")

    def workload(self, name, other):
        """Inserts, updates, deletes, key changes, several changes of one key
        in one transaction, a transaction over two tables; returns the
        number of changes of each table."""
        my = self.my
        t = f"app.{name}"
        n = my.execute(f"INSERT INTO {t} SELECT seq, md5(seq), 0 FROM mysql.seq_201_to_300")
        n += my.execute(f"UPDATE {t} SET counter = counter + 1, v = 'u1' WHERE id % 3 = 0")
        n += my.execute(f"DELETE FROM {t} WHERE id % 7 = 0")
        self.key_changes = my.execute(f"UPDATE {t} SET id = id + 1000, counter = counter + 1 WHERE id % 11 = 1")
        n += 2 * self.key_changes
        c = my.connect(autocommit=False)
        cur = c.cursor()
        cur.execute(f"INSERT INTO {t} VALUES (5000, 'a', 0)")
        cur.execute(f"UPDATE {t} SET counter = counter + 1, v = 'b' WHERE id = 5000")
        cur.execute(f"UPDATE {t} SET counter = counter + 1, v = 'c' WHERE id = 5000")
        cur.execute(f"DELETE FROM {t} WHERE id = 5000")
        cur.execute(f"INSERT INTO {t} VALUES (5000, 'd', 0)")
        cur.execute(f"UPDATE {t} SET id = 5001, counter = counter + 1 WHERE id = 5000")
        cur.execute(f"INSERT INTO app.{other} VALUES (1, 'one', 0), (2, 'two', 0)")
        cur.execute(f"UPDATE {t} SET counter = counter + 1 WHERE id = 1001")
        cur.execute(f"UPDATE app.{other} SET id = 3, counter = counter + 1 WHERE id = 2")
        c.commit()
        c.close()
        n += 8
        return n, 4

    def test_append_every_change(self):
        self.make_table("ap")
        self.my.execute("CREATE TABLE app.ap2 (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
        s = self.sluice(stream="ap", tables="app.ap, app.ap2", database="ap")
        self.catch_up(s)
        n, n2 = self.workload("ap", "ap2")
        self.catch_up(s)
        self.my.execute("TRUNCATE TABLE app.ap")
        n += 1
        n += self.my.execute("INSERT INTO app.ap SELECT seq, 'after', 0 FROM mysql.seq_1_to_50")
        n += self.my.execute("UPDATE app.ap SET counter = counter + 1 WHERE id <= 10")
        self.catch_up(s)
        for table, changes, backfilled in (("ap", n, 200), ("ap2", n2, 0)):
            rows = self.ch.rows("ap", ch_object("app", table), final=True)
            self.assertEqual(len(rows), backfilled + changes, f"{table}: every change once, and nothing else")
            self.assertEqual(len({(r["_csn"], r["_uuid"]) for r in rows}), len(rows))
            for r in rows:
                self.assertEqual(r["_is_deleted"], 1 if r["_change_type"] in (b"DELETE", b"UPDATE-DELETE",
                                                                             b"TRUNCATE") else 0)
                pos, seq = r["_csn"].decode().split("-")
                self.assertEqual(r["_version"], int(pos, 16) << 8 | min(int(seq), 255))
            state, problems = rebuild_append(rows, ["id"])
            self.assertEqual(problems, [])
            self.assertEqual(counter_problems(rows, ["id"]), [])
            expected, _kinds = self.source_rows("app", table, ["id"])
            self.assertEqual(state, expected)
        rows = self.ch.rows("ap", "app_ap", final=True)
        by_type = {}
        for r in rows:
            by_type[r["_change_type"]] = by_type.get(r["_change_type"], 0) + 1
        self.assertEqual(by_type[b"TRUNCATE"], 1)
        self.assertEqual(by_type[b"UPDATE-DELETE"], self.key_changes + 1)
        # the two-table transaction: one position, sequence numbers 1 to 12 across both tables
        pos = {r["_csn"].decode().split("-")[0] for r in self.ch.rows("ap", "app_ap2", final=True)}
        self.assertEqual(len(pos), 1)
        both = [r for t in ("app_ap", "app_ap2") for r in self.ch.rows("ap", t, final=True)
                if r["_csn"].decode().split("-")[0] in pos]
        self.assertEqual(sorted(csn_seq(r["_csn"].decode()) for r in both), list(range(1, 13)))

    def test_merge_changes_and_truncate(self):
        self.make_table("mg")
        self.my.execute("CREATE TABLE app.mg2 (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
        s = self.sluice(stream="mg", tables="app.mg, app.mg2", database="mg", write_mode="merge")
        self.catch_up(s)
        self.assertChMatches(s, "app", "mg", ["id"])
        self.workload("mg", "mg2")
        self.catch_up(s)
        self.assertChMatches(s, "app", "mg", ["id"])
        self.assertChMatches(s, "app", "mg2", ["id"])
        # TRUNCATE, then rows in the next transactions (TRUNCATE commits on its own in MariaDB)
        self.my.execute("TRUNCATE TABLE app.mg")
        self.my.execute("INSERT INTO app.mg VALUES (1, 'one', 0), (2, 'two', 0)")
        self.my.execute("INSERT INTO app.mg SELECT seq, 'later', 0 FROM mysql.seq_3_to_40")
        self.catch_up(s)
        self.assertChMatches(s, "app", "mg", ["id"])
        self.assertEqual(ch_count(self.ch, "mg", "app_mg_current"), 40)
        self.assertGreater(ch_count(self.ch, "mg", "app_mg", "_is_deleted = 1", final=not self.modern), 100)
        self.ch.query("OPTIMIZE TABLE mg.app_mg FINAL")
        self.assertChMatches(s, "app", "mg", ["id"])
        self.assertChMatches(s, "app", "mg2", ["id"])


    def test_merge_long_transaction_versions(self):
        """A transaction of 1,300 changes sent in parts (batch_rows = 100):
        every change of it has its own version, in CSN order (binlog
        positions), and deletes in its later parts win over its earlier
        updates of the same keys."""
        self.make_table("lt", rows=600)
        s = self.sluice(stream="lt", tables="app.lt", database="lt", write_mode="merge", dest={"batch_rows": 100})
        self.catch_up(s)
        c = self.my.connect(autocommit=False)
        cur = c.cursor()
        cur.execute("UPDATE app.lt SET counter = counter + 1")
        cur.execute("DELETE FROM app.lt WHERE id <= 400")
        cur.execute("INSERT INTO app.lt VALUES (1, 'one', 7)")
        c.commit()
        c.close()
        self.my.execute("UPDATE app.lt SET counter = counter + 1 WHERE id > 590")
        self.catch_up(s)
        self.assertChMatches(s, "app", "lt", ["id"])
        self.assertEqual(ch_count(self.ch, "lt", "app_lt_current"), 201)
        # every row ClickHouse holds (merged or not): CSN order is version order
        pairs = sorted({(r["_csn"], r["_version"]) for r in self.ch.rows("lt", "app_lt")})
        self.assertGreater(len(pairs), 600)
        bad = [(a, b) for a, b in zip(pairs, pairs[1:]) if a[0] != b[0] and not a[1] < b[1]]
        self.assertEqual(bad[:5], [])

class MyCh26TypesTest(MyChTypesTest):
    """test_every_type_both_modes against the ClickHouse 26 server of the
    tests: the modern layout, every value read back through its engine."""
    ch_engine = "26"
    tags = set()
    test_check = None


class MyCh26ChangesTest(MyChChangesTest):
    """Every change in append mode, and merge with a TRUNCATE, against the
    ClickHouse 26 server of the tests."""
    ch_engine = "26"
    test_merge_long_transaction_versions = None


class MyChSchemaTest(MyChTestCase):

    def test_column_added_then_dropped(self):
        """ADD COLUMN in the binlog flows through to ClickHouse (both modes);
        DROP COLUMN too: dropped in merge mode, kept in append mode (NULL in
        the rows written after), and the stream goes on."""
        my = self.my
        my.execute("CREATE DATABASE sc")
        my.execute("CREATE TABLE sc.t (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
        my.execute("INSERT INTO sc.t SELECT seq, md5(seq), 0 FROM mysql.seq_1_to_20")
        sm = self.sluice(stream="sc_m", tables="sc.t", database="sc_m", write_mode="merge")
        sa = self.sluice(stream="sc_a", tables="sc.t", database="sc_a")
        self.catch_up(sm)
        self.catch_up(sa)
        my.execute("ALTER TABLE sc.t ADD COLUMN extra decimal(8,3)")
        my.execute("INSERT INTO sc.t VALUES (100, 'new', 0, 1.5)")
        my.execute("UPDATE sc.t SET extra = 2.25, counter = counter + 1 WHERE id = 1")
        self.catch_up(sm)
        self.catch_up(sa)
        got = self.assertChMatches(sm, "sc", "t", ["id"])
        self.assertIn("extra", got[0])
        self.assertChMatches(sa, "sc", "t", ["id"], append=True)
        self.assertEqual(self.ch.columns("sc_a", "sc_t")[-1][:2], ("extra", "Nullable(Decimal(8, 3))"))
        my.execute("ALTER TABLE sc.t DROP COLUMN v")
        my.execute("INSERT INTO sc.t VALUES (101, 0, 7)")
        self.catch_up(sm)
        self.catch_up(sa)
        self.assertChMatches(sm, "sc", "t", ["id"])
        self.assertChMatches(sa, "sc", "t", ["id"], append=True)
        payload = lambda db: [n for n, *_ in self.ch.columns(db, "sc_t") if not n.startswith("_")]
        self.assertEqual(payload("sc_m"), ["id", "counter", "extra"])
        self.assertEqual(payload("sc_a"), ["id", "v", "counter", "extra"])
        self.assertEqual({r["v"] for r in self.ch.rows("sc_a", "sc_t", where="id = 101")}, {None})

    def test_ddl_without_changes(self):
        """A column added and one dropped by DDL after which the table has
        no change reach ClickHouse all the same (the binlog's statement
        describes the table anew): merge mode's table and _current have the
        source's columns and rows, append mode's has the new column."""
        my = self.my
        my.execute("CREATE DATABASE nc")
        my.execute("CREATE TABLE nc.t (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
        my.execute("INSERT INTO nc.t SELECT seq, md5(seq), seq FROM mysql.seq_1_to_20")
        sm = self.sluice(stream="nc_m", tables="nc.t", database="nc_m", write_mode="merge")
        sa = self.sluice(stream="nc_a", tables="nc.t", database="nc_a")
        self.catch_up(sm)
        self.catch_up(sa)
        my.execute("ALTER TABLE nc.t ADD COLUMN extra int")
        my.execute("ALTER TABLE nc.t DROP COLUMN v")
        self.catch_up(sm)
        self.catch_up(sa)
        payload = lambda db: [n for n, *_ in self.ch.columns(db, "nc_t") if not n.startswith("_")]
        self.assertEqual(payload("nc_m"), ["id", "counter", "extra"])
        self.assertEqual(payload("nc_a"), ["id", "v", "counter", "extra"])
        got = self.assertChMatches(sm, "nc", "t", ["id"])
        self.assertEqual(len(got), 20)
        self.assertEqual({r["extra"] for r in got}, {None})

    def test_hostile_identifiers(self):
        """A database, a table and columns that need quoting on both sides;
        a column named like a metadata column."""
        my = self.my
        my.execute("CREATE DATABASE `we ird`")
        my.execute("CREATE TABLE `we ird`.`a``b\\c;DROP TABLE t` (id int PRIMARY KEY, `select` text, "
                   "`_version` int, `x.y` int, `_log_file` varchar(5))")
        my.execute("INSERT INTO `we ird`.`a``b\\c;DROP TABLE t` VALUES (1, 's', 7, 8, 'f'), (2, NULL, NULL, 9, NULL)")
        s = self.sluice(stream="hostile", tables="we ird.*", database="hos`tile db", write_mode="merge")
        self.catch_up(s)
        my.execute("UPDATE `we ird`.`a``b\\c;DROP TABLE t` SET `_version` = 70 WHERE id = 1")
        my.execute("DELETE FROM `we ird`.`a``b\\c;DROP TABLE t` WHERE id = 2")
        self.catch_up(s)
        got = self.assertChMatches(s, "we ird", "a`b\\c;DROP TABLE t", ["id"])
        self.assertEqual([(r["__version"], r["__log_file"]) for r in got], [(70, b"f")])
        self.assertTrue(self.ch.table_exists("hos`tile db", "we ird_a`b\\c;DROP TABLE t"))


def kt_workload(seed, db, ids=range(1, 501)):
    """Small random transactions on tables kt and kt2 (id, v, counter) of
    database db, which hold the rows ids: inserts, updates that add one to
    counter, deletes, key changes, and transactions that touch both
    tables."""
    return CounterWorkload(seed, "mariadb", db, ["kt", "kt2"], ids, min_live=50, ops=(1, 5))


class MyChKillTest(MyChTestCase):

    SEEDS = (1, 2, 3)

    def make_tables(self, db, preload=500):
        self.my.execute(f"CREATE DATABASE {db}")
        for t in ("kt", "kt2"):
            self.my.execute(f"CREATE TABLE {db}.{t} (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
            self.my.execute(f"INSERT INTO {db}.{t} SELECT seq, md5(seq), 0 FROM mysql.seq_1_to_{preload}")

    def test_kill9_property(self):
        """For each seed: kill -9 of the merge and append agents at random
        points under a random workload (inserts, updates, deletes, key
        changes, two-table transactions), one TRUNCATE, restarts; at the end
        the merge view equals the source, and the append rows reduced per
        key by CSN equal it too, with no counter gap."""
        env_seed = os.environ.get("SLUICE_TEST_SEED")
        seeds = (int(env_seed),) if env_seed else self.SEEDS
        for seed in seeds:
            with self.subTest(seed=seed):
                self.run_seed(seed)

    def run_seed(self, seed):
        print(f"\n    mariadb clickhouse kill test seed {seed} (SLUICE_TEST_SEED={seed} to repeat)", file=sys.stderr)
        rng = random.Random(seed)
        my = self.my
        db = f"kp{seed}"
        self.make_tables(db)
        dest = {"batch_seconds": "0.1", "batch_rows": "300"}
        sm = self.sluice(stream=f"km{seed}", tables=f"{db}.*", database=f"km{seed}", write_mode="merge", dest=dest)
        sa = self.sluice(stream=f"ka{seed}", tables=f"{db}.*", database=f"ka{seed}", dest=dest)
        load = kt_workload(seed, db)
        wl = Runner(my, load)
        wl.start()
        self.addCleanup(wl.stop_event.set)
        procs = {s: s.start("run", env=self.env()) for s in (sm, sa)}
        kills = rng.randint(3, 5)
        for i in range(kills):
            time.sleep(rng.uniform(0.2, 2.5))
            victim = rng.choice((sm, sa)) if i else sm
            p = procs[victim]
            if not p.alive():
                self.fail(f"sluice exited before kill {i + 1}:\n{p.result().describe()}")
            p.kill9()
            print(f"    kill -9 #{i + 1} of {victim.stream} (workload at {load.counts['tx']} transactions)",
                  file=sys.stderr)
            procs[victim] = victim.start("run", env=self.env())
            if i == 1:
                # a TRUNCATE of one table between two workload transactions
                wl.finish(30)
                my.execute(f"TRUNCATE TABLE {db}.kt")
                my.execute(f"INSERT INTO {db}.kt SELECT seq, 'fresh', 0 FROM mysql.seq_1_to_300")
                load.refill("kt", range(1, 301), 100000)
                wl = Runner(my, load)
                wl.start()
                self.addCleanup(wl.stop_event.set)
        time.sleep(rng.uniform(0.5, 1.5))
        wl.finish()
        self.stop_and_catch_up(procs)
        print(f"    workload: {load.counts['tx']} transactions ({load.counts['multi']} over both tables)",
              file=sys.stderr)
        check(diff_clickhouse("mariadb", my, db, self.ch, sm.ch_database, "merge", self.modern) +
              diff_clickhouse("mariadb", my, db, self.ch, sa.ch_database, "append", self.modern), seed, db)
        for t in ("kt", "kt2"):
            rows = self.ch.rows(sa.ch_database, ch_object(db, t), final=True)
            self.assertEqual(counter_problems(rows, ["id"]), [], t)
            raw = ch_count(self.ch, sa.ch_database, ch_object(db, t))
            print(f"    {t} append: {len(rows)} changes ({raw - len(rows)} repeats not merged yet)", file=sys.stderr)


class MyChOutageTest(MyChTestCase):
    # a server that drops a replica which stops reading for 4 s
    my_settings = {"net_write_timeout": "4"}

    def test_clickhouse_down_under_load(self):
        my = self.my
        my.execute("CREATE DATABASE out_db")
        for t in ("kt", "kt2"):
            my.execute(f"CREATE TABLE out_db.{t} (id int PRIMARY KEY, v varchar(40), counter int NOT NULL)")
            my.execute(f"INSERT INTO out_db.{t} SELECT seq, md5(seq), 0 FROM mysql.seq_1_to_500")
        my.execute("CREATE TABLE out_db.pad (id int AUTO_INCREMENT PRIMARY KEY, pad text)")
        # the smallest queue: it fills during the outage, and the reader then waits for room
        s = self.sluice(stream="out", tables="out_db.*", database="outage", write_mode="merge",
                        extra={"agent": {"queue_bytes": "256KB"}})
        self.catch_up(s)
        wl = Runner(my, kt_workload(7, "out_db"))
        wl.start()
        self.addCleanup(wl.stop_event.set)
        p = s.start("run", env=self.env())
        time.sleep(1.5)

        def dump_threads():
            return [r[0] for r in my.sql("SELECT ID FROM information_schema.PROCESSLIST "
                                         "WHERE COMMAND LIKE 'Binlog Dump%%'")]
        dumper = wait_until(dump_threads, 30, "the binlog dump thread")
        self.ch.pause()
        t0 = time.monotonic()
        # 24 MB of binlog while ClickHouse is down: far more than the queue
        # and the sockets' buffers hold, so the server's dump thread waits
        # to write (longer than net_write_timeout) while sluice waits for room
        for _ in range(8):
            my.execute("INSERT INTO out_db.pad (pad) SELECT repeat('p', 1000) FROM mysql.seq_1_to_3000")
        time.sleep(max(0.0, 15 - (time.monotonic() - t0)))   # longer than receive_timeout (12.5 s)
        self.assertTrue(p.alive(), "sluice exited while ClickHouse was down")
        self.ch.resume()
        print(f"    ClickHouse down for {time.monotonic() - t0:.1f}s, workload at {wl.tx} transactions",
              file=sys.stderr)
        time.sleep(1.5)
        wl.finish()
        t1 = time.monotonic()
        wait_until(lambda: self._matches(s), 120, "ClickHouse to catch up after the outage", interval=0.5)
        print(f"    caught up {time.monotonic() - t1:.1f}s after the workload stopped", file=sys.stderr)
        self.assertEqual(dump_threads(), dumper, "the binlog connection was not kept:\n" + p.stderr_text()[-4000:])
        p.signal(signal.SIGTERM)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertRegex(r.stderr, r'destination "out" unavailable: clickhouse: .*Failed to connect to 127\.0\.0\.1')
        self.assertEqual(r.stderr.count('destination "out" available again after '), 1, r.stderr)
        self.assertNotIn("retrying from the last checkpoint", r.stderr)
        self.assertNotIn(CH_PASSWORD, r.stdout + r.stderr)
        for t in ("kt", "kt2", "pad"):
            self.assertChMatches(s, "out_db", t, ["id"])

    def _matches(self, s):
        return not diff_clickhouse("mariadb", self.my, "out_db", self.ch, s.ch_database, "merge", self.modern)


if __name__ == "__main__":
    unittest.main()
