"""
tests/integration/test_my_changes.py: what the MySQL/MariaDB source emits
for inserts, updates, deletes, key changes, TRUNCATE, several tables in one
transaction, tables without a key, columns added mid-stream, binlog
rotation; the CSN order across it all; a backfill under concurrent writes
with nothing missed or doubled; tables the stream does not select; two
streams with one server_id.
"""

import signal
import threading
import time
import unittest

import harness  # noqa: E402
from harness import assert_marker_between, csn, csn_position, csn_seq, rebuild, records_for, wait_until
from oracle import newest_payload_fields, resolved_state
from harness_mysql import MyTestCase, binlog_pos_value


def ct(r):
    return r["source_metadata"]["change_type"]


def rebuild_rows(recs, obj):
    """{key: payload} of one object, applied in CSN order (TRUNCATE clears)."""
    state = {}
    for r in sorted((r for r in recs if r["object"] == obj), key=csn):
        keys = r["source_metadata"]["primary_keys"]
        k = tuple(r["payload"][c] for c in keys)
        if ct(r) == "TRUNCATE":
            state = {}
        elif ct(r) in ("DELETE", "UPDATE-DELETE"):
            state.pop(k, None)
        else:
            state[k] = r["payload"]
    return state


class ChangesTest(MyTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.my.execute("CREATE DATABASE app")

    @harness.tag("sanitizers", "quick")
    def test_dml_key_change_truncate_positions(self):
        my = self.my
        my.execute("CREATE TABLE app.dml (id int PRIMARY KEY, v varchar(20), counter int NOT NULL DEFAULT 0)")
        my.execute("CREATE TABLE app.other (k int PRIMARY KEY, w text)")
        my.execute("INSERT INTO app.dml VALUES (1, 'one', 0), (2, 'two', 0)")
        s = self.sluice(stream="dml", tables="app.dml, app.other")
        self.catch_up(s)

        def tx(*stmts):
            f0, p0 = my.master_status()
            c = my.connect(autocommit=False)
            cur = c.cursor()
            for st in stmts:
                cur.execute(st)
            c.commit()
            c.close()
            f1, p1 = my.master_status()
            return binlog_pos_value(f0, p0), binlog_pos_value(f1, p1)

        txs = [
            ("ins", tx("INSERT INTO app.dml VALUES (3, 'three', 0)", "INSERT INTO app.dml VALUES (4, 'four', 0)")),
            ("upd", tx("UPDATE app.dml SET v = 'uno', counter = counter + 1 WHERE id = 1")),
            ("del", tx("DELETE FROM app.dml WHERE id = 2")),
            ("pk", tx("UPDATE app.dml SET id = 30, counter = counter + 1 WHERE id = 3")),
            ("multi", tx("INSERT INTO app.other VALUES (1, 'x')", "UPDATE app.dml SET v = NULL WHERE id = 4",
                         "INSERT INTO app.other VALUES (2, 'y')")),
        ]
        my.execute("FLUSH BINARY LOGS")   # a rotation between transactions
        txs.append(("rot", tx("INSERT INTO app.dml VALUES (5, 'five', 0)")))
        txs.append(("trunc", tx("TRUNCATE TABLE app.other")))
        txs.append(("after", tx("INSERT INTO app.other VALUES (3, 'z')")))
        self.catch_up(s)
        recs = self.read(s)
        cdc = sorted((r for r in recs if r["read_method"] == "mysql-cdc-binlog"), key=csn)
        got = [(ct(r), r["source_metadata"]["table"], r["payload"].get("id", r["payload"].get("k"))) for r in cdc]
        self.assertEqual(got, [
            ("INSERT", "dml", 3), ("INSERT", "dml", 4),
            ("UPDATE-INSERT", "dml", 1),
            ("DELETE", "dml", 2),
            ("UPDATE-DELETE", "dml", 3), ("UPDATE-INSERT", "dml", 30),
            ("INSERT", "other", 1), ("UPDATE-INSERT", "dml", 4), ("INSERT", "other", 2),
            ("INSERT", "dml", 5),
            ("TRUNCATE", "other", None),
            ("INSERT", "other", 3),
        ])
        # per transaction: one position inside its binlog range, sequence 1, 2, ...
        i = 0
        for name, (lo, hi) in txs:
            n = {"ins": 2, "upd": 1, "del": 1, "pk": 2, "multi": 3, "rot": 1, "trunc": 1, "after": 1}[name]
            part = cdc[i:i + n]
            i += n
            self.assertEqual(len({csn_position(csn(r)) for r in part}), 1, name)
            pos = csn_position(csn(part[0]))
            self.assertTrue(lo <= pos < hi, f"{name}: {pos:x} outside [{lo:x}, {hi:x})")
            self.assertEqual([csn_seq(csn(r)) for r in part], list(range(1, n + 1)), name)
            self.assertEqual(len({r["source_metadata"]["gtid"] for r in part}), 1)
            self.assertEqual(len({r["source_metadata"]["tx_id"] for r in part}), 1)
        # the rotation shows in the CSN's high half, and plain order holds across it
        self.assertGreater(csn_position(csn(cdc[9])) >> 32, csn_position(csn(cdc[8])) >> 32)
        self.assertEqual([csn(r) for r in cdc], sorted(csn(r) for r in cdc))
        self.assertNotEqual(cdc[9]["source_metadata"]["log_file"], cdc[8]["source_metadata"]["log_file"])
        # images
        by = {(ct(r), r["payload"].get("id")): r for r in cdc if r["source_metadata"]["table"] == "dml"}
        self.assertEqual(by[("UPDATE-INSERT", 1)]["payload"], {"id": 1, "v": "uno", "counter": 1})
        self.assertEqual(by[("DELETE", 2)]["payload"], {"id": 2, "v": "two", "counter": 0})
        self.assertTrue(by[("DELETE", 2)]["source_metadata"]["is_deleted"])
        self.assertEqual(by[("UPDATE-DELETE", 3)]["payload"], {"id": 3, "v": "three", "counter": 0})
        self.assertEqual(by[("UPDATE-INSERT", 30)]["payload"], {"id": 30, "v": "three", "counter": 1})
        self.assertTableMatches(recs, "app", "dml", ["id"])
        self.assertTableMatches(recs, "app", "other", ["k"])

    @harness.tag("sanitizers")
    def test_keyless_and_added_column_and_unselected(self):
        my = self.my
        my.execute("CREATE TABLE app.nokey (a int, b varchar(10))")
        my.execute("CREATE TABLE app.alt (id int PRIMARY KEY, a varchar(10))")
        my.execute("CREATE TABLE app.unsel (id int PRIMARY KEY)")
        s = self.sluice(stream="alt", tables="app.nokey, app.alt")
        self.catch_up(s)
        my.execute("INSERT INTO app.nokey VALUES (1, 'x'), (1, 'x'), (2, NULL)")
        my.execute("UPDATE app.nokey SET b = 'y' WHERE a = 2")
        my.execute("INSERT INTO app.alt VALUES (1, 'a1')")
        my.execute("INSERT INTO app.unsel VALUES (1)")
        my.execute("ALTER TABLE app.alt ADD COLUMN b int DEFAULT 7")
        my.execute("INSERT INTO app.alt VALUES (2, 'a2', 20)")
        my.execute("UPDATE app.alt SET b = 10 WHERE id = 1")
        self.catch_up(s)
        recs = self.read(s)
        nk = sorted(records_for(recs, "app", "nokey"), key=csn)
        self.assertEqual([ct(r) for r in nk], ["INSERT", "INSERT", "INSERT", "UPDATE-DELETE", "UPDATE-INSERT"])
        self.assertEqual(nk[3]["payload"], {"a": 2, "b": None})
        self.assertEqual(nk[4]["payload"], {"a": 2, "b": "y"})
        self.assertEqual(nk[0]["source_metadata"]["primary_keys"], [])
        alt = sorted(records_for(recs, "app", "alt"), key=csn)
        self.assertEqual(alt[0]["payload"], {"id": 1, "a": "a1"})
        # ADD COLUMN ... DEFAULT 7 gave the existing row a value without a
        # row event: the table is backfilled again behind a marker
        # (doc/output.md, "DDL that changes existing rows"); the changes
        # after the DDL are in the backfill's rows or after them
        marks = [i for i, r in enumerate(alt) if ct(r) == "TRUNCATE"]
        self.assertEqual(len(marks), 1, alt)
        after = alt[marks[0] + 1:]
        self.assertIn({"id": 1, "a": "a1", "b": 10}, [r["payload"] for r in after])
        self.assertIn({"id": 2, "a": "a2", "b": 20}, [r["payload"] for r in after])
        self.assertNotEqual(alt[0]["schema_key"], after[0]["schema_key"])
        self.assertTableMatches(recs, "app", "alt", ["id"])
        self.assertEqual(records_for(recs, "app", "unsel"), [])

    def test_ddl_without_changes(self):
        """Columns added, dropped and renamed by DDL after which the table
        has no change reach the output all the same: the binlog's statement
        describes the table anew, and the object's .schema.avsc (the reader
        schema) is the new version's, in a running agent and in a run that
        starts after the DDL (append and merge mode), with every row read
        through it equal to the source.  A renamed column backfills the
        table again: its rows hold the values under the old name."""
        my = self.my
        my.execute("CREATE TABLE app.quiet (id int PRIMARY KEY, a varchar(10), b int)")
        my.execute("INSERT INTO app.quiet SELECT seq, concat('a', seq), seq FROM mysql.seq_1_to_30")
        streams = [self.sluice(stream=f"quiet_{m}", tables="app.quiet", write_mode=m) for m in ("append", "merge")]
        for s in streams:
            self.catch_up(s)
        live = streams[0].start("run")

        def fields(s):
            return sorted(newest_payload_fields(s.out, s.stream, "app_quiet") or {})

        my.execute("ALTER TABLE app.quiet ADD COLUMN c int")
        wait_until(lambda: fields(streams[0]) == ["a", "b", "c", "id"], 60,
                   "the running agent's .schema.avsc has the added column")
        my.execute("ALTER TABLE app.quiet DROP COLUMN a")
        wait_until(lambda: fields(streams[0]) == ["b", "c", "id"], 60,
                   "the running agent's .schema.avsc has the dropped column")
        live.send_signal(signal.SIGTERM)
        self.assertEqual(live.wait(60), 0)
        my.execute("ALTER TABLE app.quiet RENAME COLUMN b TO b2")
        for s in streams:
            # the rename backfills the table again (its rows hold the old name)
            self.catch_up(s)
            self.assertEqual(fields(s), ["b2", "c", "id"])
        for s in streams:
            recs = self.read(s)
            state = resolved_state(rebuild(records_for(recs, "app", "quiet"), ["id"]), s.out, s.stream, "app",
                                   "quiet")
            self.assertEqual(sorted(state.values(), key=lambda r: r["id"]),
                             [{"id": i, "b2": i, "c": None} for i in range(1, 31)], s.stream)

    def test_tables_dropped_renamed_and_swapped(self):
        """The catalog sluice reads is today's, not the statement's: a table
        dropped and created again before sluice reads the DROP, and a
        gh-ost/pt-online-schema-change swap (RENAME TABLE t TO t_old,
        t_new TO t, where t_new was never selected) must still give the
        source's rows exactly.  Also a table renamed away and one dropped
        for good."""
        my = self.my
        my.execute("CREATE TABLE app.dr (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO app.dr VALUES (1, 'a'), (2, 'b')")
        my.execute("CREATE TABLE app.sw (id int PRIMARY KEY, a int)")
        my.execute("INSERT INTO app.sw VALUES (1, 1), (2, 2), (3, 3)")
        my.execute("CREATE TABLE app.gone (id int PRIMARY KEY)")
        my.execute("INSERT INTO app.gone VALUES (1)")
        my.execute("CREATE TABLE app.away (id int PRIMARY KEY)")
        my.execute("INSERT INTO app.away VALUES (1)")
        s = self.sluice(stream="swap", tables="app.dr, app.sw, app.gone, app.away", max_file_seconds=1)
        self.catch_up(s)
        # sluice is stopped: everything below is read from the binlog after
        # the catalog already shows the end state
        my.execute("INSERT INTO app.dr VALUES (3, 'c')")
        my.execute("DROP TABLE app.dr")
        my.execute("CREATE TABLE app.dr (id bigint PRIMARY KEY, w int, v varchar(10))")
        my.execute("INSERT INTO app.dr VALUES (10, 1, 'x')")
        # the online schema change: a shadow table, filled, then swapped in
        my.execute("CREATE TABLE app._sw_gho (id int PRIMARY KEY, a int, b int DEFAULT 5)")
        my.execute("INSERT INTO app._sw_gho (id, a) SELECT id, a FROM app.sw")
        my.execute("UPDATE app.sw SET a = 20 WHERE id = 2")
        my.execute("UPDATE app._sw_gho SET a = 20 WHERE id = 2")
        my.execute("RENAME TABLE app.sw TO app._sw_del, app._sw_gho TO app.sw")
        my.execute("INSERT INTO app.sw VALUES (4, 4, 4)")
        my.execute("UPDATE app.sw SET a = 10 WHERE id = 1")
        my.execute("DROP TABLE app._sw_del")
        my.execute("DROP TABLE app.gone")
        my.execute("ALTER TABLE app.away RENAME TO app.elsewhere")
        r = self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "dr", ["id"])
        self.assertTableMatches(recs, "app", "sw", ["id"])
        self.assertEqual(rebuild_rows(recs, "app_gone"), {})
        self.assertEqual(rebuild_rows(recs, "app_away"), {})
        self.assertEqual(records_for(recs, "app", "elsewhere"), [])
        self.assertIn("was given rows without row events", r.stderr)
        # the next run reads nothing again and backfills nothing again
        n = len(recs)
        self.catch_up(s)
        self.assertEqual(len(self.read(s)), n)
        # and goes on streaming the swapped-in table
        my.execute("DELETE FROM app.sw WHERE id = 3")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "app", "sw", ["id"])

    def test_database_dropped_and_created_again(self):
        """DROP DATABASE, then the database and its tables created again,
        all before sluice reads the DROP: the old rows end at the DROP."""
        my = self.my
        my.execute("CREATE DATABASE dd")
        my.execute("CREATE TABLE dd.t (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO dd.t VALUES (1, 'old'), (2, 'old')")
        s = self.sluice(stream="dd", tables="dd.*")
        self.catch_up(s)
        my.execute("INSERT INTO dd.t VALUES (3, 'old')")
        my.execute("DROP DATABASE dd")
        my.execute("CREATE DATABASE dd")
        my.execute("CREATE TABLE dd.t (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO dd.t VALUES (2, 'new'), (5, 'new')")
        self.catch_up(s)
        recs = records_for(self.read(s), "dd", "t")
        self.assertTableMatches(recs, "dd", "t", ["id"])
        # one marker, strictly between the old table's records and the new one's
        marks = [r for r in recs if ct(r) == "TRUNCATE"]
        self.assertEqual(len(marks), 1, recs)
        assert_marker_between(self, [r for r in recs if r["payload"].get("v") == "old"], marks[0],
                              [r for r in recs if r["payload"].get("v") == "new"])
        my.execute("UPDATE dd.t SET v = 'newer' WHERE id = 5")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "dd", "t", ["id"])

    def test_partitions_truncated_dropped_exchanged(self):
        """ALTER TABLE ... TRUNCATE / DROP / EXCHANGE PARTITION remove or
        bring rows without row events: the tables are backfilled again and
        equal the source.  ADD and REORGANIZE PARTITION keep the rows."""
        my = self.my
        my.execute("CREATE TABLE app.pt (id int PRIMARY KEY, v varchar(10)) PARTITION BY RANGE (id) ("
                   "PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
                   "PARTITION p2 VALUES LESS THAN (30), PARTITION p3 VALUES LESS THAN (40))")
        my.execute("INSERT INTO app.pt SELECT seq, CONCAT('v', seq) FROM app.seq_1_to_35")
        my.execute("CREATE TABLE app.px (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO app.px VALUES (25, 'x25'), (26, 'x26')")
        s = self.sluice(stream="parts", tables="app.pt, app.px")
        self.catch_up(s)
        my.execute("UPDATE app.pt SET v = 'changed' WHERE id IN (1, 12, 31)")
        my.execute("ALTER TABLE app.pt TRUNCATE PARTITION p0")
        my.execute("ALTER TABLE app.pt ADD PARTITION (PARTITION p4 VALUES LESS THAN (50))")
        my.execute("INSERT INTO app.pt VALUES (45, 'new')")
        my.execute("ALTER TABLE app.pt REORGANIZE PARTITION p3, p4 INTO (PARTITION p34 VALUES LESS THAN (50))")
        self.catch_up(s)
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "pt", ["id"])
        my.execute("ALTER TABLE app.pt DROP PARTITION p1")
        my.execute("ALTER TABLE app.pt EXCHANGE PARTITION p2 WITH TABLE app.px")
        my.execute("INSERT INTO app.px VALUES (100, 'after')")
        r = self.catch_up(s)
        self.assertIn("was given rows without row events", r.stderr)
        recs = self.read(s)
        self.assertTableMatches(recs, "app", "pt", ["id"])
        self.assertTableMatches(recs, "app", "px", ["id"])
        self.assertEqual(len(my.sql("SELECT * FROM app.px")), 11)   # p2's rows, and 100

    def test_cascading_foreign_keys_are_warned_about(self):
        """InnoDB applies ON DELETE CASCADE (and SET NULL) inside the engine:
        the binlog has no row event for the child rows.  sluice cannot see
        them, so `check` and `run` say so for each followed child table, by
        constraint; a RESTRICT key is not mentioned."""
        my = self.my
        my.execute("CREATE DATABASE fk")
        my.execute("CREATE TABLE fk.p (id int PRIMARY KEY)")
        my.execute("CREATE TABLE fk.c (id int PRIMARY KEY, pid int, CONSTRAINT c_p FOREIGN KEY (pid) "
                   "REFERENCES fk.p (id) ON DELETE CASCADE ON UPDATE SET NULL)")
        my.execute("CREATE TABLE fk.r (id int PRIMARY KEY, pid int, CONSTRAINT r_p FOREIGN KEY (pid) "
                   "REFERENCES fk.p (id))")
        my.execute("INSERT INTO fk.p VALUES (1), (2)")
        my.execute("INSERT INTO fk.c VALUES (10, 1), (20, 2)")
        s = self.sluice(stream="fk", tables="fk.*")
        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("stream fk: table fk.c: warning: foreign key c_p (ON DELETE CASCADE, ON UPDATE SET NULL) "
                      "changes its rows without binlog row events", r.stdout)
        self.assertNotIn("r_p", r.stdout)
        r = self.catch_up(s)
        self.assertEqual(r.stderr.count("foreign key c_p"), 1, r.stderr)
        my.execute("DELETE FROM fk.p WHERE id = 1")
        self.catch_up(s)
        # the limit the warning is about: the cascaded delete is not seen
        state = rebuild_rows(self.read(s), "fk_c")
        self.assertIn((10,), state)
        self.assertEqual(my.sql("SELECT id FROM fk.c"), [(20,)])

    def test_system_versioned_table_is_refused(self):
        """A system-versioned table's binlog rows carry its history (a
        DELETE is an UPDATE of the hidden row_end): `check` and `run` refuse
        it by name (exit 3) rather than write a wrong mirror, excluding it
        works, and a followed table that becomes versioned stops the stream
        with the same words."""
        my = self.my
        my.execute("CREATE DATABASE ver")
        my.execute("CREATE TABLE ver.plain (id int PRIMARY KEY, a int)")
        my.execute("CREATE TABLE ver.hist (id int PRIMARY KEY, a int) WITH SYSTEM VERSIONING")
        my.execute("INSERT INTO ver.plain VALUES (1, 1)")
        s = self.sluice(stream="ver", tables="ver.*")
        for cmd in (("check",), ("run", "--until-caught-up")):
            r = s.run(*cmd)
            self.assertEqual(r.rc, 3, r.describe())
            self.assertIn('table "ver"."hist" is system-versioned (WITH SYSTEM VERSIONING)', r.stderr)
            self.assertIn("exclude_tables = ver.hist", r.stderr)
        s.extra.setdefault("stream", {})["exclude_tables"] = "ver.hist"
        s.write_config()
        self.catch_up(s)
        my.execute("INSERT INTO ver.plain VALUES (2, 2)")
        self.catch_up(s)
        self.assertTableMatches(self.read(s), "ver", "plain", ["id"])
        p = s.start("run")
        wait_until(lambda: "streaming from" in p.stderr_text() or not p.alive(), 60, "streaming")
        my.execute("ALTER TABLE ver.plain ADD SYSTEM VERSIONING")
        my.execute("DELETE FROM ver.plain WHERE id = 1")
        r = p.wait_result(60)
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('table "ver"."plain" became system-versioned', r.stderr)
        r = s.run("run", "--until-caught-up")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('table "ver"."plain" is system-versioned', r.stderr)
        # nothing after the ALTER was written: the mirror is as before it
        state = rebuild_rows(self.read(s), "ver_plain")
        self.assertEqual(sorted(state), [(1,), (2,)])

    def test_backfill_none_restarts(self):
        """backfill = none: no snapshot rows, and the checkpoint (whose
        tables have no snapshot position) is read again by the next run."""
        my = self.my
        my.execute("CREATE TABLE app.nobf (id int PRIMARY KEY, v varchar(10))")
        my.execute("INSERT INTO app.nobf VALUES (1, 'before')")
        s = self.sluice(stream="nobf", tables="app.nobf", backfill="none")
        self.catch_up(s)
        my.execute("INSERT INTO app.nobf VALUES (2, 'after')")
        self.catch_up(s)
        my.execute("UPDATE app.nobf SET v = 'again' WHERE id = 2")
        self.catch_up(s)
        recs = sorted(records_for(self.read(s), "app", "nobf"), key=csn)
        self.assertEqual([(ct(r), r["payload"]) for r in recs],
                         [("INSERT", {"id": 2, "v": "after"}), ("UPDATE-INSERT", {"id": 2, "v": "again"})])

    def test_backfill_under_concurrent_writes(self):
        """Writes run while the snapshot is taken and read: every change
        lands once, before the snapshot's CSN (in it) or after (streamed)."""
        my = self.my
        my.execute("CREATE TABLE app.busy (id int PRIMARY KEY, counter int NOT NULL, pad varchar(100))")
        my.execute("INSERT INTO app.busy SELECT seq, 0, REPEAT('p', 50) FROM app.seq_1_to_20000")
        stop = threading.Event()
        errors = []

        def workload():
            try:
                c = my.connect()
                cur = c.cursor()
                i = 0
                while not stop.is_set():
                    i += 1
                    cur.execute("UPDATE app.busy SET counter = counter + 1 WHERE id = %s", ((i * 7919) % 20000 + 1,))
                    if i % 5 == 0:
                        cur.execute("INSERT INTO app.busy VALUES (%s, 0, 'new')", (100000 + i,))
                    if i % 11 == 0:
                        cur.execute("DELETE FROM app.busy WHERE id = %s", (100000 + i - 5,))
                c.close()
            except Exception as e:  # noqa
                errors.append(e)
        t = threading.Thread(target=workload, daemon=True)
        t.start()
        try:
            time.sleep(0.3)
            s = self.sluice(stream="busy", tables="app.busy")
            p = s.start("run")
            time.sleep(2.5)
        finally:
            stop.set()
            t.join(30)
        self.assertEqual(errors, [])
        p.signal(15)
        r = p.wait_result(60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s)
        recs = self.read(s, workers=2)
        self.assertGreater(sum(1 for r in recs if r["read_method"] == "mysql-cdc-binlog"), 0)
        self.assertTableMatches(recs, "app", "busy", ["id"])
        self.assertNoCounterGaps(recs, "app", "busy", ["id"])


class ServerIdTest(MyTestCase):

    def test_two_streams_one_server_id(self):
        """Two streams with one server_id: the server ends the first one's
        connection when the second connects; the first then stops with exit
        code 2 and says why, instead of reconnecting and ending the other's
        (and, where the user may run SHOW SLAVE HOSTS, the second refuses
        to start instead).  The remaining one goes on."""
        my = self.my
        my.execute("CREATE DATABASE sid")
        my.execute("CREATE TABLE sid.t (id int PRIMARY KEY)")
        a = self.sluice(stream="a", tables="sid.t")
        b = self.sluice(stream="b", tables="sid.t")
        pa = a.start("run")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "streaming from" not in pa.stderr_text():
            time.sleep(0.1)
        pb = b.start("run")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and pa.alive() and pb.alive():
            my.execute("INSERT INTO sid.t VALUES (%s)", (int(time.monotonic() * 1000) % 1000000000,))
            time.sleep(0.2)
        stopped, other = (pa, pb) if not pa.alive() else (pb, pa)
        r = stopped.wait_result(10)
        self.assertEqual(r.rc, 2, r.describe())
        self.assertIn(f"server_id = {my.server_id_for_sluice}", r.stderr)
        self.assertIn("each stream needs a server_id of its own", r.stderr)
        time.sleep(1)
        self.assertTrue(other.alive(), other.stderr_text())
        other.signal(15)
        self.assertEqual(other.wait_result(60).rc, 0)
        self.assertTableMatches(self.read(b if other is pb else a), "sid", "t", ["id"])


if __name__ == "__main__":
    unittest.main()
