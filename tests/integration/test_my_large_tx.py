"""
tests/integration/test_my_large_tx.py: a 1,000,000-row MySQL/MariaDB
transaction arrives whole, and sluice's peak memory does not grow with the
transaction's size (it stays below the peak of a run over a 10-row
transaction plus 64 MB).  SLUICE_LARGE_TX_ROWS sets the size.
"""

import os
import sys
import unittest

from harness import csn_position, csn_seq
from harness_mysql import MyTestCase, binlog_pos_value

N = int(os.environ.get("SLUICE_LARGE_TX_ROWS", "1000000"))
SLACK_KB = 64 * 1024


def _keep(rec):
    sm = rec["source_metadata"]
    p = rec["payload"]
    return (rec["uuid"], sm["table"], sm["change_type"], rec["read_method"], sm["change_sequence_number"],
            p.get("id"), p.get("v"))


class LargeTransactionTest(MyTestCase):
    my_settings = {"max_binlog_cache_size": "4G", "binlog_cache_size": "1M"}

    def test_million_row_transaction(self):
        my = self.my
        my.execute("CREATE DATABASE big")
        my.execute("CREATE TABLE big.t (id bigint PRIMARY KEY, v int NOT NULL, pad varchar(10))")
        s = self.sluice(stream="big", tables="big.t", max_file_bytes="16MB")
        self.catch_up(s)
        my.execute("INSERT INTO big.t SELECT seq, seq % 1000, 'p' FROM big.seq_1_to_10")
        small = self.catch_up(s, sample_hwm=True)
        f0, p0 = my.master_status()
        my.execute(f"INSERT INTO big.t SELECT seq, seq % 1000, 'p' FROM big.seq_11_to_{N + 10}")
        f1, p1 = my.master_status()
        large = self.catch_up(s, timeout=600, sample_hwm=True)
        print(f"\n    peak RSS of sluice, 10-row vs {N}-row transaction: "
              f"wait4 ru_maxrss {small.maxrss_kb / 1024:.1f} MB vs {large.maxrss_kb / 1024:.1f} MB, "
              f"VmHWM {small.hwm_kb / 1024:.1f} MB vs {large.hwm_kb / 1024:.1f} MB "
              f"(large run: wall {large.wall_s:.1f}s, cpu {large.cpu_s:.1f}s)", file=sys.stderr)
        rows = [r for r in self.read(s, keep=_keep, workers=2) if r[1] == "t"]
        self.assertEqual(len(rows), N + 10)
        self.assertEqual({r[2] for r in rows}, {"INSERT"})
        self.assertEqual(len({r[0] for r in rows}), N + 10)
        self.assertEqual(sorted(r[5] for r in rows), list(range(1, N + 11)))
        self.assertEqual([r for r in rows if r[6] != r[5] % 1000][:5], [])
        bigtx = [r for r in rows if r[5] > 10]
        positions = {csn_position(r[4]) for r in bigtx}
        self.assertEqual(positions, {binlog_pos_value(f0, p0)}, "one transaction, at its first event")
        seqs = sorted(csn_seq(r[4]) for r in bigtx)
        self.assertEqual(seqs, list(range(1, N + 1)))
        self.assertLess(large.maxrss_kb, small.maxrss_kb + SLACK_KB)
        self.assertGreater(large.hwm_kb, 0)
        self.assertLess(large.hwm_kb, small.hwm_kb + SLACK_KB,
                        f"VmHWM {large.hwm_kb} kB for {N} rows vs {small.hwm_kb} kB for 10 rows")


if __name__ == "__main__":
    unittest.main()
