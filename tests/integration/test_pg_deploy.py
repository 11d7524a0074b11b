"""
tests/integration/test_pg_deploy.py: doc/deploy.md, followed literally.

The SQL, the pg_hba.conf lines and the configuration are read out of the
guide (the blocks marked `<!-- deploy-test: NAME -->`) and used as they are;
the test replaces only the paths, the port and the password.  Then:

- `sluice check` passes and `sluice run` replicates both tables (logging no
  warning, on the first run or the next), with a
  non-superuser role that has exactly the documented grants, over a
  scram-sha-256 connection allowed by the documented pg_hba.conf line;
- the role may do no more: a wrong password is refused (exit 3, not
  retried), a physical base backup is rejected, and a table it was not
  granted stays unreadable;
- the systemd unit in the guide is contrib/systemd/sluice.service, and
  `systemd-analyze verify` accepts it without a warning.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

import psycopg2

from harness import PG_BIN, PgTestCase, assert_table_matches, read_avro_tree, records_for

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUIDE = os.path.join(TOP, "doc", "deploy.md")
PASSWORD = "s3cret-for-the-test"


def guide_blocks():
    """{name: text} of the guide's marked code blocks."""
    with open(GUIDE) as f:
        text = f.read()
    found = dict(re.findall(r"<!-- deploy-test: (\w+) -->\n```[a-z]*\n(.*?)```", text, re.S))
    for name in ("role", "publication_grant", "publication", "pg_hba", "config", "systemd"):
        if name not in found:
            raise AssertionError(f"doc/deploy.md has no block marked deploy-test: {name}")
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppDb:
    """The database `app`, for the harness's comparison helpers (.sql, .conn)."""

    def __init__(self, pg, user="postgres"):
        self.conn = psycopg2.connect(host="127.0.0.1", port=pg.port, user=user, dbname="app",
                                     options="-c timezone=UTC")
        self.conn.autocommit = True

    def sql(self, query, params=None):
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description is not None else []

    def execute(self, query, params=None):
        with self.conn.cursor() as cur:
            cur.execute(query, params)


class DeployGuideTest(PgTestCase):

    def test_the_guide_as_written(self):
        pg = self.pg
        b = guide_blocks()

        # the application: its tables belong to their own role, which does
        # not own the database (CREATE PUBLICATION needs CREATE on it)
        pg.execute("CREATE ROLE app_owner LOGIN")
        pg.execute("CREATE DATABASE app")
        app = AppDb(pg)
        self.addCleanup(app.conn.close)
        app.execute("REVOKE CREATE ON DATABASE app FROM PUBLIC")
        app.execute("CREATE SCHEMA sales AUTHORIZATION app_owner")
        app.execute("SET ROLE app_owner")
        app.execute("CREATE TABLE sales.orders (id bigint PRIMARY KEY, customer int, total numeric(12,2), "
                    "placed timestamptz DEFAULT now())")
        app.execute("CREATE TABLE sales.customers (id int PRIMARY KEY, name text)")
        app.execute("CREATE TABLE sales.secrets (id int PRIMARY KEY, card text)")
        app.execute("INSERT INTO sales.customers SELECT g, 'customer ' || g FROM generate_series(1, 20) g")
        app.execute("INSERT INTO sales.orders (id, customer, total) "
                    "SELECT g, g % 20 + 1, g * 10.25 FROM generate_series(1, 100) g")
        app.execute("INSERT INTO sales.secrets VALUES (1, '4111 1111 1111 1111')")

        # 1. the role, as a superuser; 2. the publication, as the tables' owner
        app.execute("RESET ROLE")
        app.execute(b["role"].replace("'change-me'", f"'{PASSWORD}'"))
        app.execute(b["publication_grant"])
        app.execute("SET ROLE app_owner")
        app.execute(b["publication"])
        app.execute("RESET ROLE")

        # 3. pg_hba.conf: the guide's lines above the harness's broad ones
        hba = os.path.join(pg.datadir, "pg_hba.conf")
        with open(hba) as f:
            old = f.read()
        with open(hba, "w") as f:
            f.write(b["pg_hba"] + old)
        pg.execute("SELECT pg_reload_conf()")

        # 4. the configuration: only paths, ports and the password file are ours
        s = self.sluice(stream="orders", tables="sales.orders")
        pwfile = os.path.join(s.workdir, "pg-password")
        with open(pwfile, "w") as f:
            f.write(PASSWORD)
        os.chmod(pwfile, 0o600)
        cfg = (b["config"].replace("/var/lib/sluice", s.state_dir).replace("/srv/sluice", s.out)
               .replace("/etc/sluice/pg-password", pwfile).replace("port = 5432", f"port = {pg.port}")
               .replace("127.0.0.1:9187", f"127.0.0.1:{free_port()}"))
        s.write_config(cfg)

        r = s.run("check")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("all checks passed", r.stdout)
        first = self.catch_up(s)
        app.execute("UPDATE sales.orders SET total = total + 1 WHERE id <= 10")
        app.execute("DELETE FROM sales.orders WHERE id > 95")
        app.execute("INSERT INTO sales.customers VALUES (21, 'new customer')")
        second = self.catch_up(s)
        # a healthy deployment logs no warning, on the first run or any later
        # one (nothing the operator cannot act on, run after run)
        for run in (first, second):
            lines = [json.loads(l) for l in run.stderr.splitlines() if l.strip()]
            self.assertTrue(lines, run.describe())
            self.assertEqual([l for l in lines if l["level"] in ("warning", "error")], [], run.describe())
        recs = read_avro_tree(s.out, self)
        self.assertEqual({r["object"] for r in recs}, {"sales_orders", "sales_customers"})
        assert_table_matches(self, app, records_for(recs, "sales", "orders"), "sales", "orders", ["id"])
        assert_table_matches(self, app, records_for(recs, "sales", "customers"), "sales", "customers", ["id"])
        # the JSON log lines of the guide's config
        self.assertTrue(all(line.startswith("{") for line in r.stderr.splitlines()), r.stderr)

        # the role may do no more than the guide says
        with open(pwfile, "w") as f:
            f.write("wrong password")
        r = s.run("run", "--until-caught-up")
        self.assertEqual(r.rc, 3, r.describe())
        self.assertIn('password authentication failed for user \\"sluice\\"', r.stderr)
        self.assertNotIn("retrying", r.stderr)
        self.assertNotIn("wrong password", r.stderr)
        env = dict(os.environ, PGPASSWORD=PASSWORD)
        bb = subprocess.run([os.path.join(PG_BIN, "pg_basebackup"), "-h", "127.0.0.1", "-p", str(pg.port),
                             "-U", "sluice", "-D", os.path.join(s.workdir, "basebackup"), "-X", "none"],
                            env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(bb.returncode, 0, "a physical base backup was allowed")
        self.assertIn('pg_hba.conf rejects replication connection', bb.stderr)
        as_sluice = psycopg2.connect(host="127.0.0.1", port=pg.port, user="sluice", password=PASSWORD,
                                     dbname="app")
        self.addCleanup(as_sluice.close)
        with as_sluice.cursor() as cur:
            with self.assertRaises(psycopg2.errors.InsufficientPrivilege):
                cur.execute("SELECT * FROM sales.secrets")

    def test_systemd_unit(self):
        unit = os.path.join(TOP, "contrib", "systemd", "sluice.service")
        with open(unit) as f:
            self.assertEqual(guide_blocks()["systemd"], f.read(),
                             "doc/deploy.md and contrib/systemd/sluice.service differ")
        analyze = shutil.which("systemd-analyze")
        if not analyze:
            self.skipTest("systemd-analyze is not installed")
        tmp = os.path.join(self.pg.tmpdir, "sluice.service")
        with open(unit) as f, open(tmp, "w") as out:
            out.write(f.read().replace("/usr/local/bin/sluice", os.path.abspath(os.environ.get(
                "SLUICE_BIN", os.path.join(TOP, "_build", "sluice")))))
        r = subprocess.run([analyze, "verify", tmp], capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_systemd_unit_notifies_and_names_an_installed_guide(self):
        unit = os.path.join(TOP, "contrib", "systemd", "sluice.service")
        with open(unit) as f:
            keys = [line.strip() for line in f if "=" in line and not line.startswith("#")]
        # sd_notify: READY, WATCHDOG (tests/integration/test_pg_liveness.py shows both)
        self.assertIn("Type=notify", keys)
        self.assertTrue([k for k in keys if k.startswith("WatchdogSec=") and int(k.split("=")[1]) > 0], keys)
        self.assertIn("UMask=0027", keys)
        self.assertNotIn("UMask=0077", keys)
        doc = [k.split("=", 1)[1] for k in keys if k.startswith("Documentation=")]
        self.assertEqual(len(doc), 1, keys)
        self.assertTrue(doc[0].startswith("file:///usr/local/"), doc)
        path = doc[0][len("file://"):]
        # `make install` with the default prefix puts the file the unit names there
        build = os.path.dirname(os.path.abspath(os.environ.get("SLUICE_BIN", os.path.join(TOP, "_build", "sluice"))))
        if not os.path.exists(os.path.join(build, "Makefile")):
            self.skipTest(f"no Makefile next to the sluice binary in {build}: cannot run make install")
        dest = tempfile.mkdtemp(prefix="sluice-install-")
        self.addCleanup(shutil.rmtree, dest, True)
        r = subprocess.run(["make", "-s", "-C", build, "install-dist_docDATA", "prefix=/usr/local", f"DESTDIR={dest}"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        installed = dest + path
        self.assertTrue(os.path.isfile(installed), f"{path} is not installed by make install")
        with open(installed) as f, open(os.path.join(TOP, "doc", os.path.basename(path))) as g:
            self.assertEqual(f.read(), g.read())


if __name__ == "__main__":
    unittest.main()
