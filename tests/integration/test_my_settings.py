"""
tests/integration/test_my_settings.py: server settings a replica must cope
with.  binlog_checksum=NONE: the dump's first event (the fake ROTATE that
names the file) then comes without checksum bytes, before any format
description says so; sluice backfills, streams across a rotation and
restarts by GTID, and the output equals the source.
"""

from harness import records_for
from harness_mysql import MyTestCase


class ChecksumNoneTest(MyTestCase):
    my_settings = {"binlog_checksum": "NONE"}

    def test_stream_without_checksums(self):
        my = self.my
        self.assertEqual(my.one("SELECT @@global.binlog_checksum"), "NONE")
        my.execute("CREATE DATABASE ck")
        my.execute("CREATE TABLE ck.t (id int PRIMARY KEY, v varchar(20), n bigint unsigned)")
        my.execute("INSERT INTO ck.t VALUES (1, 'one', 1), (2, 'two', 18446744073709551615)")
        s = self.sluice(stream="ck", tables="ck.*")
        r = s.run("check", timeout=60)
        self.assertEqual(r.rc, 0, r.describe())
        self.catch_up(s, timeout=60)
        my.execute("INSERT INTO ck.t VALUES (3, 'three', 3)")
        my.execute("UPDATE ck.t SET v = 'uno' WHERE id = 1")
        my.execute("FLUSH BINARY LOGS")
        my.execute("DELETE FROM ck.t WHERE id = 2")
        self.catch_up(s, timeout=60)
        # a restart: the dump starts by GTID, again with a fake ROTATE first
        my.execute("INSERT INTO ck.t VALUES (4, 'four', 4)")
        self.catch_up(s, timeout=60)
        recs = records_for(self.read(s), "ck", "t")
        self.assertEqual(sorted(r["source_metadata"]["change_type"] for r in recs
                                if r["read_method"] == "mysql-cdc-binlog"),
                         ["DELETE", "INSERT", "INSERT", "UPDATE-INSERT"])
        self.assertEqual(len(recs), len({r["uuid"] for r in recs}), "nothing read twice")
        self.assertTableMatches(recs, "ck", "t", ["id"])


if __name__ == "__main__":
    import unittest
    unittest.main()
