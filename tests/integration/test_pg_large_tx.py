"""
tests/integration/test_pg_large_tx.py: a 1,000,000-row transaction arrives
whole, and sluice's peak memory does not grow with the transaction's size
(it stays below the peak of a run over a 10-row transaction plus 64 MB).
"""

import os
import sys
import unittest

from harness import PgTestCase, csn_position, csn_seq

N = int(os.environ.get("SLUICE_LARGE_TX_ROWS", "1000000"))
SLACK_KB = 64 * 1024


def _keep(rec):
    sm = rec["source_metadata"]
    p = rec["payload"]
    return (rec["uuid"], sm["table"], sm["change_type"], rec["read_method"], sm["change_sequence_number"],
            p.get("id"), p.get("v"))


class LargeTransactionTest(PgTestCase):

    def test_million_row_transaction(self):
        pg = self.pg
        pg.execute("CREATE TABLE big (id int8 PRIMARY KEY, v int4 NOT NULL, pad text)")
        s = self.sluice(stream="big", tables="public.big", max_file_bytes="16MB")
        self.catch_up(s)  # empty backfill; creates the slot

        pg.execute("INSERT INTO big SELECT g, g % 1000, 'p' FROM generate_series(1, 10) g")
        small = self.catch_up(s, sample_hwm=True)

        lsn_before = pg.current_lsn()
        pg.execute("INSERT INTO big SELECT g, g %% 1000, 'p' FROM generate_series(11, %s) g", (N + 10,))
        lsn_after = pg.current_lsn()
        large = self.catch_up(s, timeout=400, sample_hwm=True)

        print(f"\n    peak RSS of sluice, 10-row vs {N}-row transaction: "
              f"wait4 ru_maxrss {small.maxrss_kb / 1024:.1f} MB vs {large.maxrss_kb / 1024:.1f} MB, "
              f"VmHWM {small.hwm_kb / 1024:.1f} MB vs {large.hwm_kb / 1024:.1f} MB "
              f"(large run: wall {large.wall_s:.1f}s, cpu {large.cpu_s:.1f}s)", file=sys.stderr)

        rows = self.read(s, keep=_keep, workers=2)
        rows = [r for r in rows if r[1] == "big"]
        self.assertEqual(len(rows), N + 10, "one record per inserted row, no repeats")
        self.assertEqual({r[2] for r in rows}, {"INSERT"})
        self.assertEqual({r[3] for r in rows}, {"postgresql-cdc-wal"})
        self.assertEqual(len({r[0] for r in rows}), N + 10, "uuids are unique")
        ids = sorted(r[5] for r in rows)
        self.assertEqual(ids, list(range(1, N + 11)))
        bad = [r for r in rows if r[6] != r[5] % 1000]
        self.assertEqual(bad[:5], [])
        bigtx = [r for r in rows if r[5] > 10]
        positions = {csn_position(r[4]) for r in bigtx}
        self.assertEqual(len(positions), 1, "the whole transaction shares one commit position")
        pos = positions.pop()
        self.assertTrue(lsn_before <= pos <= lsn_after)
        seqs = [csn_seq(r[4]) for r in bigtx]
        self.assertEqual(len(set(seqs)), len(seqs), "sequence numbers are distinct")
        self.assertGreaterEqual(min(seqs), 1)
        # in statement order
        by_seq = sorted(bigtx, key=lambda r: csn_seq(r[4]))
        self.assertEqual([r[5] for r in by_seq[:3]] + [r[5] for r in by_seq[-2:]], [11, 12, 13, N + 9, N + 10])
        self.assertEqual(pg.one("SELECT count(*) FROM big"), N + 10)

        # ru_maxrss from wait4 (floored at the Python parent's RSS, see
        # harness.SluiceProc._sample_hwm) and the sampled VmHWM must both hold
        self.assertLess(large.maxrss_kb, small.maxrss_kb + SLACK_KB,
                        f"ru_maxrss {large.maxrss_kb} kB for {N} rows vs {small.maxrss_kb} kB for 10 rows")
        self.assertGreater(large.hwm_kb, 0, "VmHWM was sampled")
        self.assertLess(large.hwm_kb, small.hwm_kb + SLACK_KB,
                        f"VmHWM {large.hwm_kb} kB for {N} rows vs {small.hwm_kb} kB for 10 rows")


if __name__ == "__main__":
    unittest.main()
