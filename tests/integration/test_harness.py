"""
tests/integration/test_harness.py: tests of the harness itself, with no sluice
binary: the throwaway PostgreSQL comes up and always goes away, the output
checker accepts a tree written to the contract by python avro and rejects
each kind of breach, rebuild() folds hand-made records correctly, and
wait_for_log returns while the process runs and fails once it exited.
"""

import datetime
import decimal
import json
import os
import shutil
import subprocess
import tempfile
import unittest
import uuid as uuidlib

import avro.datafile
import avro.io
import avro.schema

import harness
from harness import PgServer

UTC = datetime.timezone.utc
NS = uuidlib.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")

TS = {"type": "long", "logicalType": "timestamp-micros"}


def sluice_like_schema(payload_fields):
    return {
        "type": "record", "name": "public_t", "namespace": "sluice",
        "fields": [
            {"name": "uuid", "type": "string"},
            {"name": "read_timestamp", "type": TS},
            {"name": "source_timestamp", "type": TS},
            {"name": "object", "type": "string"},
            {"name": "read_method", "type": "string"},
            {"name": "stream_name", "type": "string"},
            {"name": "schema_key", "type": "string"},
            {"name": "sort_keys", "type": {"type": "array", "items": "string"}},
            {"name": "source_metadata", "type": {"type": "record", "name": "source_metadata", "fields": [
                {"name": "schema", "type": "string"},
                {"name": "table", "type": "string"},
                {"name": "change_type", "type": "string"},
                {"name": "is_deleted", "type": "boolean"},
                {"name": "primary_keys", "type": {"type": "array", "items": "string"}},
                {"name": "change_sequence_number", "type": "string"},
                {"name": "tx_id", "type": ["null", "long"]},
                {"name": "unchanged_columns", "type": {"type": "array", "items": "string"}},
                {"name": "lsn", "type": ["null", "string"]}]}},
            {"name": "payload", "type": {"type": "record", "name": "payload",
                                         "fields": [{"name": n, "type": ["null", t]} for n, t in payload_fields]}},
        ]}


PAYLOAD = [("id", "long"), ("counter", "long"),
           ("amount", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}),
           ("at", TS)]


def make_rec(pos, seq, ct, payload, method="postgresql-cdc-wal", ts=None, table="t", unchanged=()):
    csn = f"{pos:016X}-{seq:010d}"
    ts = ts or datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    extra = "" if seq else str(payload["id"])
    return {
        "uuid": str(uuidlib.uuid5(NS, f"s1/public.{table}/{csn}/{extra}")),
        "read_timestamp": datetime.datetime.now(UTC),
        "source_timestamp": ts,
        "object": f"public_{table}", "read_method": method, "stream_name": "s1",
        "schema_key": "0123456789abcdef", "sort_keys": csn.split("-"),
        "source_metadata": {"schema": "public", "table": table, "change_type": ct,
                            "is_deleted": ct in ("DELETE", "UPDATE-DELETE"), "primary_keys": ["id"],
                            "change_sequence_number": csn, "tx_id": 7 if seq else None,
                            "unchanged_columns": list(unchanged), "lsn": f"0/{pos:X}"},
        "payload": dict(payload),
    }


def write_file(root, recs, codec="deflate", name=None, stream="s1"):
    """Writes recs into root in the sluice layout; returns the path."""
    first, last = recs[0], recs[-1]
    ts = first["source_timestamp"].astimezone(UTC)
    d = os.path.join(root, stream, first["object"], ts.strftime("%Y/%m/%d/%H/%M"))
    os.makedirs(d, exist_ok=True)
    name = name or (f"{first['source_metadata']['change_sequence_number']}_"
                    f"{last['source_metadata']['change_sequence_number']}_0badcafe.avro")
    path = os.path.join(d, name)
    sch = avro.schema.parse(json.dumps(sluice_like_schema(PAYLOAD)))
    with open(path, "wb") as fh:
        w = avro.datafile.DataFileWriter(fh, avro.io.DatumWriter(), sch, codec=codec)
        for r in recs:
            w.append(r)
        w.close()
    return path


def row(i, counter=0, amount="1.00"):
    return {"id": i, "counter": counter, "amount": decimal.Decimal(amount),
            "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)}


class OutputCheckerTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sluice-harness-test-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def good_tree(self, codec="deflate"):
        bf = [make_rec(0x1000, 0, "INSERT", row(i), method="postgresql-backfill") for i in (1, 2, 3)]
        write_file(self.root, bf, codec)
        tx = [make_rec(0x2000, 1, "UPDATE-INSERT", row(1, 1, "-5.50")),
              make_rec(0x2000, 2, "UPDATE-DELETE", {"id": 2, "counter": None, "amount": None, "at": None}),
              make_rec(0x2000, 3, "UPDATE-INSERT", row(20, 1)),
              make_rec(0x3000, 1, "DELETE", {"id": 3, "counter": None, "amount": None, "at": None}),
              make_rec(0x3100, 1, "INSERT", row(4))]
        write_file(self.root, tx, codec)
        return bf + tx

    def test_reads_a_good_tree_with_every_codec(self):
        for codec in ("null", "deflate", "snappy"):
            with self.subTest(codec=codec):
                shutil.rmtree(self.root)
                os.makedirs(self.root)
                recs = self.good_tree(codec)
                got = harness.read_avro_tree(self.root, codec=codec)
                self.assertEqual(len(got), len(recs))
                self.assertEqual(got[3]["payload"]["amount"], decimal.Decimal("-5.50"))
                self.assertEqual(got[0]["payload"]["at"], datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC))
                self.assertEqual(harness.read_avro_tree(self.root, keep=harness.csn, workers=2),
                                 [harness.csn(r) for r in recs])

    def expect_problem(self, *fragments):
        """read_avro_tree must fail with a message holding one of fragments."""
        with self.assertRaises(AssertionError) as cm:
            harness.read_avro_tree(self.root)
        self.assertTrue(any(f in str(cm.exception) for f in fragments), f"{fragments} not in {cm.exception}")

    def test_hidden_temp_file_is_ignored_and_visible_stray_is_not(self):
        p = write_file(self.root, [make_rec(0x1000, 1, "INSERT", row(1))])
        d = os.path.dirname(p)
        with open(os.path.join(d, ".tmp-123.avro"), "w") as f:
            f.write("partial")
        harness.read_avro_tree(self.root)
        with open(os.path.join(d, "leaked.tmp"), "w") as f:
            f.write("partial")
        self.expect_problem("not .avro")

    def test_file_name_must_match_records(self):
        write_file(self.root, [make_rec(0x1000, 1, "INSERT", row(1))],
                   name="0000000000001000-0000000001_0000000000001000-0000000002_0badcafe.avro")
        self.expect_problem("name says")

    def test_bad_file_name(self):
        write_file(self.root, [make_rec(0x1000, 1, "INSERT", row(1))], name="x.avro")
        self.expect_problem("file name is not")

    def test_bad_layout(self):
        p = write_file(self.root, [make_rec(0x1000, 1, "INSERT", row(1))])
        os.rename(p, os.path.join(os.path.dirname(os.path.dirname(p)), os.path.basename(p)))
        self.expect_problem("not <stream>/<object>")

    def test_time_folder_must_be_first_source_time(self):
        r = make_rec(0x1000, 1, "INSERT", row(1))
        p = write_file(self.root, [r])
        d = os.path.dirname(p)
        os.rename(d, d[:-2] + "59")
        self.expect_problem("time folders")

    def test_backfill_sequence_and_sort_keys(self):
        r = make_rec(0x1000, 1, "INSERT", row(1), method="postgresql-backfill")
        r["sort_keys"] = ["x", "y"]
        write_file(self.root, [r])
        self.expect_problem("backfill row with CSN sequence 1")
        self.expect_problem("sort_keys")

    def test_csn_order_within_file(self):
        write_file(self.root, [make_rec(0x2000, 1, "INSERT", row(1)), make_rec(0x1000, 1, "INSERT", row(2))])
        self.expect_problem("goes backwards")

    def test_truncate_payload_is_null(self):
        write_file(self.root, [make_rec(0x2000, 1, "TRUNCATE", row(1))])
        self.expect_problem("TRUNCATE with non-null")

    def test_truncated_file(self):
        for cut in (1, 16, 20, 40):
            with self.subTest(cut=cut):
                shutil.rmtree(self.root)
                p = write_file(self.root, [make_rec(0x2000, 1, "INSERT", row(i)) for i in range(1, 4)])
                with open(p, "r+b") as f:
                    f.truncate(os.path.getsize(p) - cut)
                self.expect_problem("python avro cannot read it", "sync marker")

    def test_command_line(self):
        self.good_tree()
        import check_output
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.assertEqual(check_output.main([self.root, "--codec", "deflate"]), 0)
            self.assertEqual(check_output.main([self.root, "--codec", "null"]), 1)
        self.assertIn("codec 'deflate', want 'null'", buf.getvalue())


class RebuildTest(unittest.TestCase):
    def test_rebuild_applies_in_csn_order_with_repeats(self):
        recs = [make_rec(0x1000, 0, "INSERT", row(i), method="postgresql-backfill") for i in (1, 2, 3)]
        recs += [make_rec(0x2000, 1, "UPDATE-INSERT", row(1, 1, "-5.50")),
                 make_rec(0x2000, 2, "UPDATE-DELETE", {"id": 2, "counter": None, "amount": None, "at": None}),
                 make_rec(0x2000, 3, "UPDATE-INSERT", row(20, 1)),
                 make_rec(0x3000, 1, "DELETE", {"id": 3, "counter": None, "amount": None, "at": None}),
                 make_rec(0x3100, 1, "INSERT", row(4))]
        again = [dict(r, read_timestamp=datetime.datetime.now(UTC)) for r in recs[3:6]]
        mixed = list(reversed(recs)) + again
        state = harness.rebuild(mixed, ["id"])
        self.assertEqual(sorted(state), [(1,), (4,), (20,)])
        self.assertEqual(state[(1,)]["amount"], decimal.Decimal("-5.50"))
        self.assertEqual(harness.counter_gaps(mixed, ["id"]), [])

    def test_truncate_clears_everything_seen(self):
        recs = [make_rec(0x1000, 1, "INSERT", row(1)), make_rec(0x1000, 2, "INSERT", row(2)),
                make_rec(0x2000, 1, "TRUNCATE", {"id": None, "counter": None, "amount": None, "at": None}),
                make_rec(0x3000, 1, "INSERT", row(3))]
        self.assertEqual(sorted(harness.rebuild(recs, ["id"])), [(3,)])

    def test_dedup_truncate_delivered_again_under_a_later_version(self):
        """A MariaDB TRUNCATE written again after a restart may carry a later
        schema_key and that version's (null) columns: the same change.  Any
        other difference, a marker's included, is one."""
        nulls = {"id": None, "counter": None, "amount": None, "at": None}
        first = make_rec(0x2000, 1, "TRUNCATE", nulls, method="mysql-cdc-binlog")
        again = dict(first, schema_key="fedcba9876543210", payload=dict(nulls, c3=None),
                     read_timestamp=datetime.datetime.now(UTC))
        self.assertEqual(harness.dedup([first, again]), [first])
        for other in (dict(again, source_timestamp=datetime.datetime(2025, 1, 1, tzinfo=UTC)),
                      dict(again, payload=dict(nulls, c3=5))):
            with self.assertRaisesRegex(AssertionError, "two records with uuid"):
                harness.dedup([first, other])
        marker = dict(first, read_method="mysql-backfill-fulldump")
        with self.assertRaisesRegex(AssertionError, "two records with uuid"):
            harness.dedup([marker, dict(again, read_method="mysql-backfill-fulldump")])
        ins = make_rec(0x2000, 1, "INSERT", row(1), method="mysql-cdc-binlog")
        with self.assertRaisesRegex(AssertionError, "two records with uuid"):
            harness.dedup([ins, dict(ins, schema_key="fedcba9876543210")])

    def test_unchanged_columns_keep_old_value(self):
        recs = [make_rec(0x1000, 1, "INSERT", row(1, 0, "9.99")),
                make_rec(0x2000, 1, "UPDATE-INSERT", dict(row(1, 1), amount=None), unchanged=["amount"])]
        self.assertEqual(harness.rebuild(recs, ["id"])[(1,)]["amount"], decimal.Decimal("9.99"))

    def test_unchanged_columns_follow_a_key_change(self):
        # UPDATE-DELETE of key 1, then UPDATE-INSERT of key 5 at the next
        # sequence number of the same transaction: 5 takes 1's amount
        recs = [make_rec(0x1000, 1, "INSERT", row(1, 0, "9.99")),
                make_rec(0x2000, 1, "UPDATE-DELETE", dict(row(1, 0), amount=None)),
                make_rec(0x2000, 2, "UPDATE-INSERT", dict(row(5, 1), amount=None), unchanged=["amount"])]
        state = harness.rebuild(recs, ["id"])
        self.assertEqual(list(state), [(5,)])
        self.assertEqual(state[(5,)]["amount"], decimal.Decimal("9.99"))
        # not adjacent (another transaction): an error, not a guess
        bad = recs[:2] + [make_rec(0x3000, 1, "UPDATE-INSERT", dict(row(5, 1), amount=None), unchanged=["amount"])]
        with self.assertRaisesRegex(AssertionError, "key never seen"):
            harness.rebuild(bad, ["id"])

    def test_same_uuid_different_content_is_an_error(self):
        a = make_rec(0x1000, 1, "INSERT", row(1))
        b = dict(a, payload=row(1, 5))
        with self.assertRaisesRegex(AssertionError, "differ"):
            harness.rebuild([a, b], ["id"])

    def test_same_change_with_new_uuid_is_an_error(self):
        a = make_rec(0x1000, 1, "INSERT", row(1))
        b = dict(a, uuid=str(uuidlib.uuid4()))
        with self.assertRaisesRegex(AssertionError, "different uuids"):
            harness.rebuild([a, b], ["id"])

    def test_counter_gap_is_found(self):
        recs = [make_rec(0x1000, 1, "INSERT", row(1, 0)),
                make_rec(0x2000, 1, "UPDATE-INSERT", row(1, 1)),
                make_rec(0x4000, 1, "UPDATE-INSERT", row(1, 3))]
        # a key change carries the counter on: 1 -> 2 is fine, 1 -> 5 is a gap
        ok = [make_rec(0x1000, 1, "INSERT", row(1, 0)),
              make_rec(0x2000, 1, "UPDATE-DELETE", {"id": 1, "counter": None, "amount": None, "at": None}),
              make_rec(0x2000, 2, "UPDATE-INSERT", row(7, 1))]
        self.assertEqual(harness.counter_gaps(ok, ["id"]), [])
        ok[2] = make_rec(0x2000, 2, "UPDATE-INSERT", row(7, 5))
        self.assertEqual(len(harness.counter_gaps(ok, ["id"])), 1)
        self.assertEqual(len(harness.counter_gaps(recs, ["id"])), 1)
        recs2 = [make_rec(0x2000, 1, "UPDATE-INSERT", row(5, 1))]
        self.assertEqual(len(harness.counter_gaps(recs2, ["id"])), 1)

    def test_counter_chain_before_a_later_backfill(self):
        # a redone backfill at 0x3000: the slot (or the binlog) re-delivers
        # changes from before it; both sources' backfill rows are recognised
        for m in ("postgresql-backfill", "mysql-backfill-fulldump"):
            with self.subTest(read_method=m):
                bf = make_rec(0x3000, 0, "INSERT", row(5, 2), method=m)
                recs = [make_rec(0x2000, 1, "UPDATE-INSERT", row(5, 1)),
                        make_rec(0x2800, 1, "UPDATE-INSERT", row(5, 2)),
                        bf, make_rec(0x4000, 1, "UPDATE-INSERT", row(5, 3))]
                self.assertEqual(harness.counter_gaps(recs, ["id"]), [])
                # the snapshot disagrees with the changes before it: one went missing
                recs[1] = make_rec(0x2800, 1, "UPDATE-INSERT", row(5, 3))
                recs[2] = make_rec(0x3000, 0, "INSERT", row(5, 3), method=m)
                recs[3] = make_rec(0x4000, 1, "UPDATE-INSERT", row(5, 4))
                self.assertEqual(len(harness.counter_gaps(recs, ["id"])), 1)
                recs[2] = make_rec(0x3000, 0, "INSERT", row(5, 4), method=m)
                recs[1] = make_rec(0x2800, 1, "UPDATE-INSERT", row(5, 2))
                recs[3] = make_rec(0x4000, 1, "UPDATE-INSERT", row(5, 5))
                self.assertEqual(len(harness.counter_gaps(recs, ["id"])), 1)
                # a key updated and deleted before the redone backfill's
                # snapshot has no row in it; the marker just before the
                # snapshot replaces the table's state
                gone = [make_rec(0x2000, 1, "UPDATE-INSERT", row(6, 1)),
                        make_rec(0x2800, 1, "DELETE", {"id": 6, "counter": None, "amount": None, "at": None})]
                marker = make_rec(0x2FFF, 0, "TRUNCATE", {"id": 0}, method=m)
                self.assertEqual(harness.counter_gaps(gone + [marker, bf], ["id"]), [])
                self.assertEqual(len(harness.counter_gaps(gone + [bf], ["id"])), 1)
                # after the marker the chain is checked again
                late = make_rec(0x3500, 1, "UPDATE-INSERT", row(6, 1))
                self.assertEqual(len(harness.counter_gaps(gone + [marker, bf, late], ["id"])), 1)


class CompareTest(unittest.TestCase):
    """values_equal is exact: type and value, per column kind."""

    def test_equal_and_not(self):
        D = decimal.Decimal
        ve = harness.values_equal
        naive = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
        cases_equal = [
            ("int", 5, 5), ("bool", True, True), ("float4", 3.14, 3.140000104904175),
            ("float4", float("nan"), float("nan")), ("float8", float("-inf"), float("-inf")),
            ("decimal", D("-1.50"), D("-1.50")), ("numeric", "1.5000", "1.5000"), ("numeric", "2", D("2")),
            ("bytes", b"\x00", b"\x00"), ("date", datetime.date(1, 1, 1), datetime.date(1, 1, 1)),
            ("time", datetime.time(23, 59, 59, 999999), datetime.time(23, 59, 59, 999999)),
            ("timestamp", naive.replace(tzinfo=UTC), naive.replace(tzinfo=UTC)),
            ("timestamptz", datetime.datetime(2000, 1, 1, 5, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
             datetime.datetime(2000, 1, 1, 0, 0, tzinfo=UTC)),
            ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            ("text", "ab   ", "ab   "), ("text", None, None),
        ]
        for kind, e, a in cases_equal:
            with self.subTest(kind=kind, e=e, a=a):
                self.assertIsNone(ve(kind, e, a))
        cases_differ = [
            ("int", 1, True), ("int", 5, 5.0), ("bool", True, 1), ("float4", 3.14, 3.1400003),
            ("float8", 0.0, -0.0), ("float8", float("nan"), 0.0),
            ("decimal", D("1.50"), D("1.5")), ("decimal", D("1.50"), "1.50"), ("numeric", "1.50", "1.5"),
            ("bytes", b"\x00", "\\x00"), ("date", datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1)),
            ("timestamp", naive.replace(tzinfo=UTC), naive), ("timestamp", naive.replace(tzinfo=UTC),
                                                              naive.replace(tzinfo=UTC, microsecond=7)),
            ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            ("text", "ab   ", "ab"), ("text", "", None), ("text", "1", 1),
        ]
        for kind, e, a in cases_differ:
            with self.subTest(kind=kind, e=e, a=a):
                self.assertIsNotNone(ve(kind, e, a))


class WaitForLogTest(unittest.TestCase):
    """wait_for_log: the stderr read once the line is there, while the
    process runs; a failure naming what was awaited when it exits first; a
    TimeoutError at the deadline."""

    def proc(self, script):
        d = tempfile.mkdtemp(prefix="sluice-waitlog-")
        self.addCleanup(shutil.rmtree, d, True)
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        fo, fe = open(out, "wb"), open(err, "wb")
        argv = ["sh", "-c", script]
        p = harness.SluiceProc(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True)
        p._setup(out, err, argv, (fo, fe))
        self.addCleanup(p.kill9)
        return p

    def test_returns_while_the_process_runs(self):
        p = self.proc("echo starting >&2; sleep 0.2; echo 'backfilling t at 0/1' >&2; sleep 5; echo ended >&2; "
                      "sleep 60")
        seen = harness.wait_for_log(p, "backfilling t", 30, "the backfill")
        self.assertTrue(p.alive())
        self.assertEqual(seen, "starting\nbackfilling t at 0/1\n")

    def test_fails_when_the_process_exits_first(self):
        p = self.proc("echo 'backfilled t' >&2; exit 3")
        with self.assertRaises(AssertionError) as cm:
            harness.wait_for_log(p, "backfilling t", 30, "the backfill")
        self.assertIn("sluice exited before the backfill", str(cm.exception))
        self.assertIn("exit 3", str(cm.exception))

    def test_fails_when_the_process_exited_after_the_line(self):
        p = self.proc("echo 'backfilling t at 0/1' >&2; exit 1")
        p.wait_result(30)
        with self.assertRaises(AssertionError) as cm:
            harness.wait_for_log(p, "backfilling t", 30, "the backfill")
        self.assertIn("sluice exited after the backfill", str(cm.exception))

    def test_times_out(self):
        p = self.proc("echo starting >&2; sleep 60")
        with self.assertRaises(TimeoutError) as cm:
            harness.wait_for_log(p, "backfilling t", 0.2)
        self.assertIn("waiting for 'backfilling t'", str(cm.exception))
        self.assertTrue(p.alive())


@unittest.skipIf(harness.pg_available(), harness.pg_available())
class PgServerTest(unittest.TestCase):
    def test_start_query_slot_stop(self):
        with PgServer() as pg:
            d, port = pg.tmpdir, pg.port
            self.assertEqual(pg.one("SHOW wal_level"), "logical")
            self.assertEqual(pg.one("SHOW max_slot_wal_keep_size"), "4GB")
            self.assertEqual(pg.one("SHOW fsync"), "off")
            pg.execute("CREATE TABLE t (id int primary key, j jsonb, b bytea, ts timestamp)")
            pg.execute("INSERT INTO t VALUES (1, '{\"a\": 1}', '\\x0102', '2024-01-02 03:04:05.5')")
            self.assertEqual(pg.sql("SELECT id, j FROM t"), [(1, '{"a": 1}')])
            pg.execute("SELECT pg_create_logical_replication_slot('x', 'pgoutput')")
            info = pg.slot_info("x")
            self.assertEqual(info["plugin"], "pgoutput")
            self.assertFalse(info["active"])
            self.assertIsNone(pg.slot_info("nope"))
            exp = harness.expected_rows(pg, "public", "t", ["id"])
            self.assertEqual(exp[(1,)]["b"], b"\x01\x02")
            self.assertEqual(exp[(1,)]["ts"].tzinfo, UTC)
            pid = pg.postmaster_pid()
            self.assertTrue(harness._pid_alive(pid))
            # restart with another setting (a logical slot would stop wal_level=replica)
            pg.execute("SELECT pg_drop_replication_slot('x')")
            pg.set_settings({"wal_level": "replica"})
            pg.restart()
            self.assertEqual(pg.one("SHOW wal_level"), "replica")
            pid = pg.postmaster_pid()
        self.assertFalse(os.path.exists(d))
        self.assertFalse(harness._pid_alive(pid))
        import socket
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.1", port)), 0)

    def test_cleanup_when_the_test_body_fails(self):
        pid = d = None
        try:
            with PgServer() as pg:
                d, pid = pg.tmpdir, pg.postmaster_pid()
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        self.assertFalse(os.path.exists(d))
        self.assertFalse(harness._pid_alive(pid))

    def test_close_all_at_exit(self):
        pg = PgServer()
        pg.start()
        pid, d = pg.postmaster_pid(), pg.tmpdir
        harness.close_all()
        self.assertFalse(os.path.exists(d))
        self.assertFalse(harness._pid_alive(pid))


if __name__ == "__main__":
    unittest.main()
