"""
tests/integration/test_deps_profiles.py: scripts/deps.sh installs by
profile, checked with DEPS_DRY_RUN=1 (which installs nothing) and a
dpkg-query that finds no package installed:

- `demo` (what scripts/demo.sh uses): the build dependencies, PostgreSQL 15
  and python3-avro; no MariaDB, ClickHouse, Node or s3rver;
- `all` (the default): those and every test dependency, and the npm step;
- an unknown profile exits 2.
"""

import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
DEPS = os.path.join(TOP, "scripts", "deps.sh")


class DepsProfileTest(unittest.TestCase):

    def dry(self, *args):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "dpkg-query")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\nexit 1\n")
            os.chmod(fake, 0o755)
            env = dict(os.environ, DEPS_DRY_RUN="1", PATH=d + ":" + os.environ["PATH"])
            return subprocess.run(["bash", DEPS, *args], env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=60)

    def would_install(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l for l in r.stdout.splitlines() if ": would install: " in l]
        self.assertEqual(len(line), 1, r.stdout)
        return set(line[0].split(": would install: ")[1].split())

    def test_demo_installs_only_what_the_demo_uses(self):
        got = self.would_install(self.dry("demo"))
        self.assertIn("postgresql-15", got)
        self.assertIn("python3-avro", got)
        self.assertIn("libpq-dev", got)
        for other in ("mariadb-server", "clickhouse-server", "nodejs", "npm", "python3-boto3"):
            self.assertNotIn(other, got)
        self.assertNotIn("npm ci", self.dry("demo").stdout)
        with open(os.path.join(TOP, "scripts", "demo.sh")) as f:
            self.assertIn('"$top/scripts/deps.sh" demo\n', f.read())

    def test_default_installs_everything(self):
        r = self.dry()
        got = self.would_install(r)
        self.assertTrue({"postgresql-15", "python3-avro", "mariadb-server", "clickhouse-server",
                         "python3-boto3"} <= got, got)
        self.assertIn("would run npm ci", r.stdout)
        self.assertEqual(got, self.would_install(self.dry("all")))

    def test_unknown_profile(self):
        r = self.dry("tests")
        self.assertEqual(r.returncode, 2)
        self.assertIn('unknown profile "tests"', r.stderr)


if __name__ == "__main__":
    unittest.main()
