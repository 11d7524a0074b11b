"""
tests/integration/test_ch_cluster.py: the clickhouse destination with
`cluster` (doc/clickhouse.md, "Clusters"): two throwaway ClickHouse 18.16
servers, replicas of one shard of the cluster "pair", coordinated by a
throwaway ZooKeeper (Debian's `zookeeper`), all on loopback ports.

sluice writes to the first server only, in merge mode; every statement that
makes or alters something goes ON CLUSTER, so the second server gets the
database, the ReplicatedReplacingMergeTree tables and the view too, and
replication brings it the rows: its view equals the source after inserts,
updates, deletes, a key change and a column added at the source.

Opt-in: runs only with SLUICE_TEST_CLUSTER=1 (see setUpClass).  Then it skips
when zookeeper or clickhouse-server is missing (scripts/deps.sh installs
both; with CI=true a missing zookeeper fails).
"""

import os
import shutil
import signal
import socket
import subprocess
import unittest

from ch_harness import CH_SERVER, CONFIG, ChTestCase, ClickHouseServer, clickhouse_available
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
    <remote_servers><{cluster}><shard><internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>{tcp1}</port></replica>
        <replica><host>127.0.0.1</host><port>{tcp2}</port></replica>
    </shard></{cluster}></remote_servers>
    <macros><shard>01</shard><replica>{replica}</replica></macros>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>{interserver}</interserver_http_port>
</yandex>
"""


class ReplicaServer(ClickHouseServer):
    """A ClickHouse 18.16 server that is one replica of the cluster: its
    tcp port (ports[replica]) and interserver port (ports[2 + replica], which
    replicas fetch parts from; without one a replica never becomes active)
    are chosen beforehand, so that both servers' configurations can name
    both."""

    def __init__(self, replica, zk, ports):
        self.replica, self.zk, self.ports = replica, zk, ports
        super().__init__()

    def _start(self):
        self.tcp_port = self.ports[self.replica]
        cfg = CONFIG.format(dir=self.tmpdir, http_port=self.port, tcp_port=self.tcp_port, tls="")
        cfg = cfg.replace("</yandex>\n", CLUSTER_CONFIG.format(zk=self.zk.port, cluster=CLUSTER,
                                                              tcp1=self.ports[0], tcp2=self.ports[1],
                                                              replica=f"r{self.replica}",
                                                              interserver=self.ports[2 + self.replica]))
        with open(os.path.join(self.tmpdir, "config.xml"), "w") as f:
            f.write(cfg)
        self._launch([CH_SERVER, f"--config-file={self.tmpdir}/config.xml"],
                     os.path.join(self.tmpdir, "log", "stdout.log"), os.path.join(self.tmpdir, "log", "server.err.log"),
                     "Address already in use")


class ClickHouseClusterTest(ChTestCase):
    @classmethod
    def setUpClass(cls):
        # Opt-in for now: in CI runs on 2 loaded CPUs the first replica
        # crashed (ClickHouse 18.16's DDL worker, after ZooKeeper closed its
        # first session: it listened before it served).  ZooKeeperServer now
        # waits until it serves; the test goes back into the default suite
        # once CI has shown that holds.
        if os.environ.get("SLUICE_TEST_CLUSTER") != "1":
            raise unittest.SkipTest("set SLUICE_TEST_CLUSTER=1 to run the two-replica cluster test")
        missing = zookeeper_available()
        if missing and os.environ.get("CI") == "true":
            raise RuntimeError(f"{missing}: CI runs this test (scripts/deps.sh installs zookeeper)")
        skip_unless(pg_available() or clickhouse_available() or missing)
        if os.environ.get("SLUICE_CH_ENGINE") == "26":
            raise unittest.SkipTest("two clickhouse-server 18.16 replicas (tests/tools/clickhouse26 has one engine)")
        cls.pg = PgServer(cls.pg_settings)
        cls.addClassCleanup(cls.pg.close)
        cls.pg.start()
        cls.zk = ZooKeeperServer()
        cls.addClassCleanup(cls.zk.close)
        cls.zk.start()
        ports = [free_port() for _ in range(4)]   # tcp, then interserver http, of each
        cls.replicas = []
        for i in range(2):
            r = ReplicaServer(i, cls.zk, ports)
            cls.addClassCleanup(r.close)
            r.start()
            cls.replicas.append(r)
        cls.ch = cls.replicas[0]

    def test_replicated_merge(self):
        pg = self.pg
        pg.execute("CREATE TABLE rc (id int PRIMARY KEY, v text, n int); "
                   "INSERT INTO rc SELECT g, md5(g::text), g FROM generate_series(1, 200) g")
        s = self.sluice(stream="rc", tables="public.rc", database="rc db", write_mode="merge",
                        dest={"cluster": CLUSTER, "batch_seconds": "0.1"})
        r = s.run("check", env=self.env())
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn(f'cluster "{CLUSTER}" has 2 servers: tables are made ON CLUSTER, Replicated, at '
                      f'/clickhouse/tables/{{shard}}/{{database}}/{{table}}', r.stdout)
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


if __name__ == "__main__":
    unittest.main()
