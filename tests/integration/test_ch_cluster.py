"""
tests/integration/test_ch_cluster.py: the clickhouse destination with
`cluster` (doc/clickhouse.md, "Clusters"): two throwaway ClickHouse 18.16
servers coordinated by a throwaway ZooKeeper (Debian's `zookeeper`), all on
loopback ports.

ClickHouseClusterTest: the two servers are replicas of one shard.  sluice
writes to the first server only, in merge mode; every statement that makes
or alters something goes ON CLUSTER, so the second server gets the
database, the ReplicatedReplacingMergeTree tables and the view too, and
replication brings it the rows: its view equals the source after inserts,
updates, deletes, a key change and a column added at the source.

ClickHouseShardsTest: the two servers are two shards of one replica each,
and the streams have distributed = true (doc/clickhouse.md, "Distributed
tables"): a merge and an append stream under a random workload, each
killed with -9; the views read through the Distributed tables equal the
source, and each shard holds exactly the keys its hash names.

Both run in the default suite; they skip when zookeeper or
clickhouse-server is missing (scripts/deps.sh installs both; with CI=true a
missing zookeeper fails).
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

from ch_harness import (CH_SERVER, CONFIG, ChTestCase, ClickHouseServer, clickhouse_available,
                        rebuild_append)
from harness import PgServer, ServerBase, _pid_alive, free_port, pg_available, skip_unless, wait_until

ZK_JAR = "/usr/share/java/zookeeper.jar"
CLUSTER = "pair"


def zookeeper_available():
    if not os.path.isfile(ZK_JAR):
        return f"zookeeper not found ({ZK_JAR}; apt-get install zookeeper)"
    if not shutil.which("java"):
        return "java not found (apt-get install zookeeper brings it)"
    return None


class ZooKeeperServer(ServerBase):
    """A throwaway standalone ZooKeeper on a loopback port."""
    kind = "zookeeper"

    def _setup(self):
        os.makedirs(os.path.join(self.tmpdir, "data"), exist_ok=True)
        self.proc = None

    def _start(self):
        cfg = os.path.join(self.tmpdir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime=2000\ndataDir={self.tmpdir}/data\nclientPort={self.port}\n"
                    f"clientPortAddress=127.0.0.1\nadmin.enableServer=false\n")
        out = open(os.path.join(self.tmpdir, "zookeeper.log"), "ab")
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-cp", ZK_JAR, "-Dzookeeper.admin.enableServer=false",
                                      "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     cwd=self.tmpdir, start_new_session=True)
        out.close()

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}")
            # Listening is not serving: until its database is loaded it closes
            # every session, and ClickHouse 18.16 then crashes in its DDL
            # worker.  The "srvr" command (the one four-letter word ZooKeeper
            # 3.8 allows by default) answers with the mode once it serves.
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1) as c:
                    c.sendall(b"srvr")
                    c.settimeout(2)
                    data = b""
                    while True:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                return b"Mode:" in data
            except OSError:
                return False
        wait_until(up, 60, "zookeeper to serve", interval=0.2)

    def _stop(self, mode):
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        wait_until(lambda: not _pid_alive(p.pid), 30, "zookeeper to exit")


CLUSTER_CONFIG = """
    <zookeeper><node><host>127.0.0.1</host><port>{zk}</port></node></zookeeper>
    <remote_servers><{cluster}>{shards}</{cluster}></remote_servers>
    <macros><shard>{shard}</shard><replica>{replica}</replica></macros>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>{interserver}</interserver_http_port>
</yandex>
"""


class ReplicaServer(ClickHouseServer):
    """A ClickHouse 18.16 server of a cluster of n servers: replica `i` of
    one shard (sharded=False: the servers are the replicas of shard 01) or
    the one replica of shard 0<i+1> (sharded=True).  Its tcp port (ports[i])
    and interserver port (ports[n + i], which replicas fetch parts from;
    without one a replica never becomes active) are chosen beforehand, so
    that every server's configuration can name every server."""

    def __init__(self, i, zk, ports, sharded=False, cluster=CLUSTER):
        self.replica, self.zk, self.ports = i, zk, ports
        self.sharded, self.cluster = sharded, cluster
        super().__init__()

    def _start(self):
        n = len(self.ports) // 2
        self.tcp_port = self.ports[self.replica]
        hosts = [f"<replica><host>127.0.0.1</host><port>{p}</port></replica>" for p in self.ports[:n]]
        if self.sharded:
            shards = "".join(f"<shard><internal_replication>true</internal_replication>{h}</shard>" for h in hosts)
        else:
            shards = f"<shard><internal_replication>true</internal_replication>{''.join(hosts)}</shard>"
        cfg = CONFIG.format(dir=self.tmpdir, http_port=self.port, tcp_port=self.tcp_port, tls="")
        cfg = cfg.replace("</yandex>\n", CLUSTER_CONFIG.format(
            zk=self.zk.port, cluster=self.cluster, shards=shards,
            shard=f"0{self.replica + 1}" if self.sharded else "01", replica=f"r{self.replica}",
            interserver=self.ports[n + self.replica]))
        with open(os.path.join(self.tmpdir, "config.xml"), "w") as f:
            f.write(cfg)
        self._launch([CH_SERVER, f"--config-file={self.tmpdir}/config.xml"],
                     os.path.join(self.tmpdir, "log", "stdout.log"), os.path.join(self.tmpdir, "log", "server.err.log"),
                     "Address already in use")


def start_cluster(cls, sharded):
    """Starts the servers of a test class: PostgreSQL (cls.pg), ZooKeeper
    (cls.zk) and two ClickHouse 18.16 servers (cls.replicas, cls.ch the
    first): replicas of one shard, or with sharded one shard each."""
    missing = zookeeper_available()
    if missing and os.environ.get("CI") == "true":
        raise RuntimeError(f"{missing}: CI runs this test (scripts/deps.sh installs zookeeper)")
    skip_unless(pg_available() or clickhouse_available() or missing)
    if os.environ.get("SLUICE_CH_ENGINE") == "26":
        raise unittest.SkipTest("two clickhouse-server 18.16 servers (tests/tools/clickhouse26 has one engine)")
    cls.pg = PgServer(cls.pg_settings)
    cls.addClassCleanup(cls.pg.close)
    cls.pg.start()
    cls.zk = ZooKeeperServer()
    cls.addClassCleanup(cls.zk.close)
    cls.zk.start()
    ports = [free_port() for _ in range(4)]   # tcp, then interserver http, of each
    cls.replicas = []
    for i in range(2):
        r = ReplicaServer(i, cls.zk, ports, sharded=sharded)
        cls.addClassCleanup(r.close)
        r.start()
        cls.replicas.append(r)
    cls.ch = cls.replicas[0]


class ClickHouseClusterTest(ChTestCase):
    @classmethod
    def setUpClass(cls):
        start_cluster(cls, sharded=False)

    def test_replicated_merge(self):
        pg = self.pg
        pg.execute("CREATE TABLE rc (id int PRIMARY KEY, v text, n int); "
                   "INSERT INTO rc SELECT g, md5(g::text), g FROM generate_series(1, 200) g")
        s = self.sluice(stream="rc", tables="public.rc", database="rc db", write_mode="merge",
                        dest={"cluster": CLUSTER, "batch_seconds": "0.1"})
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'cluster "{CLUSTER}" has 2 servers in 1 shard: tables are made ON CLUSTER, Replicated, at '
                      '/clickhouse/tables/{shard}/{database}/{table}\n', r.stdout)
        self.catch_up(s)
        pg.execute("UPDATE rc SET v = 'u' WHERE id % 3 = 0; DELETE FROM rc WHERE id % 7 = 0; "
                   "UPDATE rc SET id = id + 1000 WHERE id % 11 = 5; ALTER TABLE rc ADD COLUMN extra int; "
                   "UPDATE rc SET extra = id WHERE id % 2 = 0; INSERT INTO rc VALUES (5000, 'new', 1, 2)")
        self.catch_up(s)
        for i, ch in enumerate(self.replicas):
            engine = ch.scalar("SELECT engine_full FROM system.tables WHERE database = 'rc db' AND name = 'public_rc'")
            self.assertEqual(engine.replace("\\'", "'"),   # TSV escapes the quotes
                             "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rc db/public_rc', "
                             "'{replica}', _version) ORDER BY id SETTINGS index_granularity = 8192")
            self.assertEqual(ch.scalar("SELECT engine FROM system.tables WHERE database = 'rc db' AND "
                                       "name = '_sluice_columns'"), "ReplicatedReplacingMergeTree")
            if i:
                ch.query("SYSTEM SYNC REPLICA `rc db`.public_rc")
            self.ch = ch
            self.assertChMatches(s, "public", "rc", ["id"])
        self.ch = self.replicas[0]


class ClickHouseShardsTest(ChTestCase):
    """distributed = true on a cluster of two shards (one 18.16 server each,
    ZooKeeper for the Replicated engines): rows go through a Distributed
    table, sharded by a hash of the key."""

    @classmethod
    def setUpClass(cls):
        start_cluster(cls, sharded=True)

    def test_distributed_streams(self):
        """A merge stream (two tables: an int key under a random workload
        with key changes, and a numeric key with TOAST values left unchanged
        by updates, a TRUNCATE and a column added) and an append stream, both with
        distributed = true, each killed with -9 once: the merge views, read
        through the Distributed tables on either server, equal the source;
        the append rows rebuild it with no lost change; every key's rows are
        on the shard its hash names, and both shards hold some."""
        from test_clickhouse import counter_problems
        from workload import CounterWorkload, Runner
        seed = int(os.environ.get("SLUICE_TEST_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\n    distributed test seed {seed} (SLUICE_TEST_SEED={seed} to repeat)", file=sys.stderr)
        rng = random.Random(seed)
        pg = self.pg
        pg.execute("CREATE TABLE dk (id int PRIMARY KEY, v text, counter int); "
                   "INSERT INTO dk SELECT g, md5(g::text), 0 FROM generate_series(1, 1000) g; "
                   "CREATE TABLE dn (k numeric(8,2) PRIMARY KEY, v text, big text); "
                   "INSERT INTO dn SELECT g / 4.0, 'v' || g, (SELECT string_agg(md5(g::text || x::text), '') "
                   "FROM generate_series(1, 100) x) FROM generate_series(1, 120) g")
        dest = {"cluster": CLUSTER, "distributed": "true", "batch_seconds": "0.1", "batch_rows": "300"}
        sm = self.sluice(stream="dm", tables="public.dk, public.dn", database="dm", write_mode="merge", dest=dest)
        sa = self.sluice(stream="da", tables="public.dk", database="da", dest=dest)
        r = sm.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'cluster "{CLUSTER}" has 2 servers in 2 shards: tables are made ON CLUSTER, Replicated, at '
                      '/clickhouse/tables/{shard}/{database}/{table}; rows go through Distributed tables to every '
                      'shard', r.stdout)
        wl = Runner(pg, CounterWorkload(seed, "pg", "public", ["dk"], range(1, 1001)))
        wl.start()
        self.addCleanup(wl.stop_event.set)
        procs = {s: s.start("run", env=self.env()) for s in (sm, sa)}
        for i, victim in enumerate((sm, sa)):
            time.sleep(rng.uniform(1.0, 2.5))
            if i == 0:
                # updates that leave the TOAST value out: filled through the Distributed table
                pg.execute("UPDATE dn SET v = v || 'u' WHERE k * 4 % 3 = 0; DELETE FROM dn WHERE k * 4 % 7 = 0")
            p = procs[victim]
            if not p.alive():
                self.fail(f"sluice exited before its kill:\n{p.result().describe()}")
            p.kill9()
            print(f"    kill -9 of {victim.stream} (workload at {wl.tx} transactions)", file=sys.stderr)
            pg.wait_slot_inactive(victim.slot)
            procs[victim] = victim.start("run", env=self.env())
        pg.execute("UPDATE dn SET v = v || 'w' WHERE k * 4 % 5 = 0")
        pg.execute("TRUNCATE dn; INSERT INTO dn SELECT g / 4.0, 'again' || g, repeat('x', 3000) "
                   "FROM generate_series(100, 160) g")
        # a column added: the local tables ALTERed, the Distributed table and the view made again
        pg.execute("ALTER TABLE dn ADD COLUMN extra int; UPDATE dn SET v = 'after', extra = 7 WHERE k * 4 % 2 = 0")
        time.sleep(rng.uniform(0.3, 1.0))
        wl.finish()
        self.stop_and_catch_up(procs)
        print(f"    workload: {wl.tx} transactions", file=sys.stderr)

        for ch in self.replicas:
            self.assertEqual(ch.scalar("SELECT engine FROM system.tables WHERE database = 'dm' AND "
                                       "name = 'public_dk_local'"), "ReplicatedReplacingMergeTree")
            for db, shard_key in (("dm", "id"), ("da", "_uuid, _csn")):
                self.assertEqual(ch.scalar(f"SELECT engine_full FROM system.tables WHERE database = '{db}' AND "
                                           "name = 'public_dk'").replace("\\'", "'"),
                                 f"Distributed('{CLUSTER}', '{db}', 'public_dk_local', cityHash64({shard_key}))")
            self.ch = ch   # the views on either server read every shard
            self.assertChMatches(sm, "public", "dk", ["id"])
            self.assertChMatches(sm, "public", "dn", ["k"])
        self.ch = self.replicas[0]
        rows = self.ch.rows("da", "public_dk", final=True)
        state, problems = rebuild_append(rows, ["id"])
        self.assertEqual(problems, [])
        self.assertEqual(counter_problems(rows, ["id"]), [])
        expected, _kinds = self.source_rows("public", "dk", ["id"])
        self.assertTrue(state == expected, "the append rows do not rebuild the source table")

        # Each shard holds the keys its hash names (weights 1 and 1: shard
        # n gets the hashes whose remainder by 2 is n - 1), and some of them.
        for db, table, key in (("dm", "public_dk_local", "cityHash64(id)"),
                               ("dm", "public_dn_local", "cityHash64(toString(k))"),
                               ("da", "public_dk_local", "cityHash64(_uuid, _csn)")):
            held = [int(ch.scalar(f"SELECT count() FROM `{db}`.{table}")) for ch in self.replicas]
            wrong = [int(ch.scalar(f"SELECT count() FROM `{db}`.{table} WHERE {key} % 2 != {i}"))
                     for i, ch in enumerate(self.replicas)]
            print(f"    {db}.{table}: {held[0]} and {held[1]} rows on the two shards", file=sys.stderr)
            self.assertEqual(wrong, [0, 0], f"{db}.{table}: rows on a shard their key does not name")
            self.assertTrue(all(held), f"{db}.{table}: a shard holds no rows: {held}")


if __name__ == "__main__":
    unittest.main()
