"""
tests/integration/workload.py: one seeded workload generator for both
sources (issues 17 and 24).

Workload(seed, source) draws source-neutral operations from
random.Random(seed): inserts, updates, deletes, key changes, transactions
over both tables, rolled-back transactions, TRUNCATE (for PostgreSQL also
inside long transactions), large values (TOASTed in PostgreSQL, a LONGTEXT
in MariaDB) that most updates leave unchanged, and a nullable unique
column.  render() turns an operation into SQL for "pg" or "mariadb";
apply() runs the transactions on a server of the harness (PgServer or
MariaDbServer).

The generator keeps only what it needs to pick targets (the keys it
believes live); it is no model of the expected content: the oracle
(oracle.py) reads the source tables themselves once the source is quiet.
The same seed gives the same operations on either source.

CounterWorkload draws the same operations on tables a test made itself
(id, v, counter: each update adds one to counter), with the mix of
statements, the tables and the key changes as options; Runner runs a
workload on a thread while sluice runs (the kill, outage and backfill
tests).

DDL is off by default (ddl=()); test_property.py turns the kinds of
DDL_KINDS on per cell (DDL_CI), SLUICE_PROPERTY_DDL for hunts.  With a
partition kind (PostgreSQL only) the namespace has a partitioned table wp
too, whose partitions the DDL attaches (a table with rows) and detaches.
"""

import datetime
import decimal
import os
import random
import threading
import time

TABLES = ("wa", "wb")

# DDL the generator emits when asked (ddl=...): see the module comment.
DDL_KINDS = ("add_column", "add_column_default", "add_column_volatile", "drop_column",
             "rename_column", "widen", "recreate", "rename_table", "attach_partition",
             "detach_partition")
# PostgreSQL only: the partitioned table wp (created when asked for), a
# partition attached with its rows, or detached (doc/operations.md,
# "Partitioned tables": the root is backfilled again behind a marker; a
# detached partition is a table of its own)
PARTITION_KINDS = ("attach_partition", "detach_partition")


def qname(source, *parts):
    """A quoted, qualified identifier in the source's dialect."""
    if source == "pg":
        return ".".join('"' + p.replace('"', '""') + '"' for p in parts)
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def table_ddl(source, ns, table):
    """The CREATE TABLE statements of one workload table."""
    q = qname(source, ns, table)
    text, big = ("text", "text") if source == "pg" else ("varchar(40)", "longtext")
    if table == "wa":
        out = [f"CREATE TABLE {q} (id int PRIMARY KEY, u int UNIQUE, n int NOT NULL, "
               f"amount {'numeric' if source == 'pg' else 'decimal'}(12,2), small varchar(40), body {big})"]
        if source == "pg":
            # large values stored out of line: updates that leave them alone
            # send them as unchanged TOAST values
            out.append(f"ALTER TABLE {q} ALTER body SET STORAGE EXTERNAL")
        return out
    if table == "wp":
        return [f"CREATE TABLE {q} (id int, part int, v int NOT NULL, PRIMARY KEY (id, part)) "
                "PARTITION BY LIST (part)"] + partition_ddl(ns, 0, True)
    return [f"CREATE TABLE {q} (k1 int, k2 varchar(20), v int NOT NULL, note {text}, PRIMARY KEY (k1, k2))"]


def partition_ddl(ns, k, attached):
    """The statements that make partition wp_k of ns.wp (PostgreSQL): created
    as a partition, or as a table of its own with 20 rows, then attached."""
    root, q = qname("pg", ns, "wp"), qname("pg", ns, "wp_%d" % k)
    if attached:
        return [f"CREATE TABLE {q} PARTITION OF {root} FOR VALUES IN ({k})"]
    return [f"CREATE TABLE {q} (id int, part int, v int NOT NULL, PRIMARY KEY (id, part))",
            f"INSERT INTO {q} SELECT g, {k}, g FROM generate_series(1, 20) g",
            f"ALTER TABLE {root} ATTACH PARTITION {q} FOR VALUES IN ({k})"]


def create_sql(source, ns, partitions=False):
    """The statements that make the namespace (schema or database) and its
    tables (with partitions, PostgreSQL's wp too)."""
    out = [f"CREATE {'SCHEMA' if source == 'pg' else 'DATABASE'} {qname(source, ns)}"]
    for t in TABLES + (("wp",) if partitions else ()):
        out.extend(table_ddl(source, ns, t))
    return out


class Workload:
    """Seeded transactions for one namespace.  Each transaction is
    (ops, commit): ops are tuples ("insert", table, {column: value}),
    ("update", table, key, {column: value or ("+", n)}), ("delete", table,
    key), ("rekey", table, key, new key), ("truncate", table) or
    ("ddl", kind, table, ...); commit False rolls it back."""

    def __init__(self, seed, source, ns, ddl=(), big_bytes=(3000, 12000)):
        assert source in ("pg", "mariadb")
        unknown = set(ddl) - set(DDL_KINDS)
        assert not unknown, f"unknown DDL kinds {sorted(unknown)}"
        self.seed = seed
        self.source = source
        self.ns = ns
        self.ddl = tuple(k for k in ddl if source == "pg" or k not in PARTITION_KINDS)
        self.partitions = any(k in PARTITION_KINDS for k in self.ddl)
        self.next_part = 1
        self.attached = []          # partitions of wp attached by the DDL
        self.big_bytes = big_bytes
        self.rng = random.Random(seed)
        self.next_id = 1
        self.next_u = 1
        self.next_k2 = 1
        self.live = {"wa": [], "wb": []}
        self.extra_columns = []     # columns the DDL added to wa, in order
        self.renamed = 0
        self.added = 0              # columns the DDL ever added: names never reused
        self.widened = False
        self.counts = {"tx": 0, "rolled_back": 0, "truncate": 0, "long": 0, "multi": 0, "ddl": 0}

    # ---- values

    def big(self):
        n = self.rng.randint(*self.big_bytes)
        return "%x" % self.rng.getrandbits(4 * n) if n else ""

    def amount(self):
        return decimal.Decimal(self.rng.randint(-10 ** 9, 10 ** 9)).scaleb(-2)

    def word(self):
        return "".join(self.rng.choice("abcdefghij") for _ in range(self.rng.randint(0, 12)))

    # ---- operations

    def insert_wa(self, live):
        k = self.next_id
        self.next_id += 1
        u = None
        if self.rng.random() < 0.6:
            u, self.next_u = self.next_u, self.next_u + 1
        body = self.big() if self.rng.random() < 0.4 else (None if self.rng.random() < 0.3 else self.word())
        live["wa"].append((k,))
        return ("insert", "wa", {"id": k, "u": u, "n": 0, "amount": self.amount(), "small": self.word(),
                                 "body": body})

    def insert_wb(self, live):
        k = (self.rng.randint(0, 6), "k%d" % self.next_k2)
        self.next_k2 += 1
        live["wb"].append(k)
        return ("insert", "wb", {"k1": k[0], "k2": k[1], "v": 0, "note": self.word()})

    def pick(self, live, t):
        ids = live[t]
        return ids[self.rng.randrange(len(ids))] if ids else None

    def one(self, live):
        """One random change (never None: an insert when nothing is live)."""
        rng = self.rng
        x = rng.random()
        t = "wa" if rng.random() < 0.65 else "wb"
        key = self.pick(live, t)
        if key is None or x < 0.3:
            return self.insert_wa(live) if t == "wa" else self.insert_wb(live)
        if x < 0.75:
            if t == "wb":
                return ("update", "wb", key, {"v": ("+", 1), "note": self.word()})
            y = rng.random()
            if y < 0.6:      # the large value left unchanged
                return ("update", "wa", key, {"n": ("+", 1), "small": self.word()})
            if y < 0.75:
                return ("update", "wa", key, {"n": ("+", 1), "body": self.big()})
            if y < 0.9:      # the nullable unique column
                u = None
                if rng.random() < 0.6:
                    u, self.next_u = self.next_u, self.next_u + 1
                return ("update", "wa", key, {"n": ("+", 1), "u": u})
            return ("update", "wa", key, {"n": ("+", 1), "amount": self.amount()})
        if x < 0.88:
            live[t].remove(key)
            return ("delete", t, key)
        if t == "wa":
            new = (self.next_id,)
            self.next_id += 1
        else:
            new = (key[0], "k%d" % self.next_k2)
            self.next_k2 += 1
        live[t].remove(key)
        live[t].append(new)
        return ("rekey", t, key, new)

    def ddl_op(self, live):
        """One DDL statement of a kind in self.ddl (see DDL_KINDS)."""
        kind = self.rng.choice(self.ddl)
        if kind in ("drop_column", "rename_column") and not self.extra_columns:
            kind = "add_column"
        if kind.startswith("add_column"):
            self.added += 1
            name = "c%d" % self.added
            self.extra_columns.append(name)
            return ("ddl", kind, "wa", name)
        if kind == "drop_column":
            name = self.extra_columns.pop(self.rng.randrange(len(self.extra_columns)))
            return ("ddl", kind, "wa", name)
        if kind == "rename_column":
            i = self.rng.randrange(len(self.extra_columns))
            old, self.renamed = self.extra_columns[i], self.renamed + 1
            self.extra_columns[i] = "r%d" % self.renamed
            return ("ddl", kind, "wa", old, self.extra_columns[i])
        if kind == "detach_partition" and not self.attached:
            kind = "attach_partition"
        if kind == "attach_partition":
            self.attached.append(self.next_part)
            self.next_part += 1
            return ("ddl", kind, "wp", self.attached[-1])
        if kind == "detach_partition":
            return ("ddl", kind, "wp", self.attached.pop(self.rng.randrange(len(self.attached))))
        if kind == "widen":
            self.widened = True
            return ("ddl", kind, "wa", "small")
        live["wb"] = []
        self.renamed += 1
        return ("ddl", kind, "wb", "wb_old%d" % self.renamed)

    def preload(self, n_wa=80, n_wb=30):
        """The rows written before sluice starts: one transaction."""
        live = self.live
        ops = [self.insert_wa(live) for _ in range(n_wa)] + [self.insert_wb(live) for _ in range(n_wb)]
        return [(ops, True)]

    def transactions(self, n):
        """The next n transactions."""
        out = []
        rng = self.rng
        for _ in range(n):
            live = {t: list(v) for t, v in self.live.items()}
            x = rng.random()
            if self.ddl and x < 0.04:
                op = self.ddl_op(live)
                out.append(([op], True))
                self.counts["ddl"] += 1
                self.counts[op[1]] = self.counts.get(op[1], 0) + 1
                self.live = live
                continue
            if x < 0.07:
                t = rng.choice(TABLES)
                live[t] = []
                self.counts["truncate"] += 1
                if self.source == "pg":
                    # inside a long transaction, with changes before and after it
                    ops = [self.one(live) for _ in range(rng.randint(2, 10))]
                    ops.append(("truncate", t))
                    live[t] = []
                    ops.extend(self.one(live) for _ in range(rng.randint(2, 10)))
                    self.counts["long"] += 1
                else:
                    # MariaDB commits before and after a TRUNCATE of its own
                    ops = [("truncate", t)]
                out.append((ops, True))
                self.live = live
                continue
            nops = rng.randint(40, 120) if x < 0.11 else rng.randint(1, 5)
            self.counts["long"] += nops >= 40
            ops = [self.one(live) for _ in range(nops)]
            commit = rng.random() >= 0.06
            self.counts["multi"] += len({o[1] for o in ops}) > 1
            self.counts["tx"] += 1
            if commit:
                self.live = live
            else:
                self.counts["rolled_back"] += 1
                # the keys drawn stay used: a later insert never takes them
            out.append((ops, commit))
        return out

    # ---- SQL

    def render(self, op):
        """[(sql, params)] of one operation in the source's dialect."""
        src, ns = self.source, self.ns
        kind, t = op[0], op[1]
        if kind == "ddl":
            return [(s, None) for s in render_ddl(src, ns, op)]
        q = qname(src, ns, t)
        keys = self.key_columns(t)
        where = " AND ".join(f"{qname(src, k)} = %s" for k in keys)
        if kind == "insert":
            cols = list(op[2])
            return [(f"INSERT INTO {q} ({', '.join(qname(src, c) for c in cols)}) VALUES "
                     f"({', '.join('%s' for _ in cols)})", [op[2][c] for c in cols])]
        if kind == "update":
            sets, params = [], []
            for c, v in op[3].items():
                if isinstance(v, tuple):
                    sets.append(f"{qname(src, c)} = {qname(src, c)} + %s")
                    params.append(v[1])
                else:
                    sets.append(f"{qname(src, c)} = %s")
                    params.append(v)
            return [(f"UPDATE {q} SET {', '.join(sets)} WHERE {where}", params + list(op[2]))]
        if kind == "delete":
            return [(f"DELETE FROM {q} WHERE {where}", list(op[2]))]
        if kind == "rekey":
            sets = ", ".join(f"{qname(src, k)} = %s" for k in keys)
            bump = self.rekey_bump(t)
            extra = ", " + qname(src, bump) + " = " + qname(src, bump) + " + 1" if bump else ""
            return [(f"UPDATE {q} SET {sets}{extra} WHERE {where}", list(op[3]) + list(op[2]))]
        if kind == "truncate":
            return [(f"TRUNCATE {'' if src == 'pg' else 'TABLE '}{q}", None)]
        raise ValueError(f"unknown operation {op!r}")

    def key_columns(self, t):
        """The key columns of table t, in order."""
        return ("id",) if t == "wa" else ("k1", "k2")

    def rekey_bump(self, t):
        """The column a key change of table t adds one to, or None."""
        return "n" if t == "wa" else None

    def connect(self, server):
        """A connection to the namespace, not in autocommit."""
        if self.source == "pg":
            return server.connect(autocommit=False)
        return server.connect(db=self.ns, autocommit=False)

    def execute(self, conn, txs):
        """Runs transactions on a connection of connect()."""
        cur = conn.cursor()
        trace = os.environ.get("SLUICE_WORKLOAD_TRACE")
        out = open(trace, "a", encoding="utf-8") if trace else None
        try:
            for ops, commit in txs:
                for op in ops:
                    for sql, params in self.render(op):
                        if out:
                            shown = tuple(p[:16] + "..." if isinstance(p, str) and len(p) > 40 else p
                                          for p in (params or ()))
                            out.write(f"{sql} {shown}\n")
                        cur.execute(sql, params)
                if commit:
                    conn.commit()
                else:
                    conn.rollback()
                if out:
                    out.write("COMMIT\n" if commit else "ROLLBACK\n")
        finally:
            if out:
                out.close()

    def apply(self, server, txs):
        """Runs transactions on a PgServer or MariaDbServer."""
        conn = self.connect(server)
        try:
            self.execute(conn, txs)
        finally:
            conn.close()

    def setup(self, server):
        """Creates the namespace and its tables, then the preload."""
        conn = server.connect(autocommit=True)
        try:
            cur = conn.cursor()
            for sql in create_sql(self.source, self.ns, self.partitions):
                cur.execute(sql)
            if self.partitions:
                cur.execute(f"INSERT INTO {qname('pg', self.ns, 'wp')} SELECT g, 0, g FROM generate_series(1, 20) g")
        finally:
            conn.close()
        self.apply(server, self.preload())


def render_ddl(source, ns, op):
    """The statements of a ("ddl", kind, table, ...) operation."""
    kind, t = op[1], op[2]
    q = qname(source, ns, t)
    pg = source == "pg"
    if kind == "add_column":
        return [f"ALTER TABLE {q} ADD COLUMN {qname(source, op[3])} int"]
    if kind == "add_column_default":
        return [f"ALTER TABLE {q} ADD COLUMN {qname(source, op[3])} int NOT NULL DEFAULT 7"]
    if kind == "add_column_volatile":
        expr = "(random() * 1000)::int" if pg else "(FLOOR(RAND() * 1000))"
        return [f"ALTER TABLE {q} ADD COLUMN {qname(source, op[3])} int DEFAULT {expr}"]
    if kind == "drop_column":
        return [f"ALTER TABLE {q} DROP COLUMN {qname(source, op[3])}"]
    if kind == "rename_column":
        return [f"ALTER TABLE {q} RENAME COLUMN {qname(source, op[3])} TO {qname(source, op[4])}"]
    if kind == "widen":
        c = qname(source, op[3])
        return [f"ALTER TABLE {q} ALTER COLUMN {c} TYPE varchar(200)" if pg
                else f"ALTER TABLE {q} MODIFY {c} varchar(200)"]
    if kind in PARTITION_KINDS:
        # and a change through the root, of the rows of every partition
        touch = f"UPDATE {q} SET v = v + 1 WHERE id % 3 = 0"
        if kind == "attach_partition":
            return partition_ddl(ns, op[3], False) + [touch]
        return [f"ALTER TABLE {q} DETACH PARTITION {qname(source, ns, 'wp_%d' % op[3])}", touch]
    if kind == "recreate":
        return [f"DROP TABLE {q}"] + table_ddl(source, ns, t)
    if kind == "rename_table":
        old = qname(source, ns, op[3])
        rename = f"ALTER TABLE {q} RENAME TO {qname(source, op[3])}" if pg else f"RENAME TABLE {q} TO {old}"
        return [rename] + table_ddl(source, ns, t)
    raise ValueError(f"unknown DDL {op!r}")


# ---- load on tables of the tests' own (counter workloads)

class CounterWorkload(Workload):
    """Seeded small transactions on tables the test made, each of the shape
    (id PRIMARY KEY, v text, counter int NOT NULL, ...), that hold the rows
    ids: each statement of a table drawn from tables, an insert (counter 0),
    an update that adds one to counter and sets v, a delete, or a key change
    (id set to a new key, counter + 1), drawn with the weights of mix
    (insert, update, delete, key change); an insert while a table has fewer
    than min_live keys.  With negative_keys, half the key changes go to a
    negative key (before every chunk of a backfill); with stamp, updates
    also set that timestamptz column (PostgreSQL).  Every transaction
    commits; counts["multi"] counts those over more than one table.  The
    operations and their SQL are Workload's: the counters let a test check
    that no update was lost (harness.counter_gaps)."""

    def __init__(self, seed, source, ns, tables, ids, mix=(0.3, 0.55, 0.08, 0.07), min_live=100, ops=(1, 4),
                 negative_keys=False, stamp=None, bump="counter"):
        super().__init__(seed, source, ns)
        self.bump = bump
        self.tables = tuple(tables)
        self.mix = mix
        self.min_live = min_live
        self.nops = ops
        self.negative_keys = negative_keys
        self.stamp = stamp
        self.live = {t: list(ids) for t in self.tables}
        self.next_ids = {t: max(ids, default=0) + 1 for t in self.tables}

    def key_columns(self, t):
        return ("id",)

    def rekey_bump(self, t):
        return self.bump

    def refill(self, t, ids, next_id):
        """After the test emptied table t and wrote the rows ids: the keys
        to pick from, and the first key a later insert takes."""
        self.live[t] = list(ids)
        self.next_ids[t] = next_id

    def new_key(self, t):
        k = self.next_ids[t]
        self.next_ids[t] += 1
        return k

    def forget(self, t, k):
        ids = self.live[t]
        i = ids.index(k)
        ids[i] = ids[-1]
        ids.pop()

    def counter_op(self, t):
        """One statement on table t."""
        rng, live = self.rng, self.live[t]
        x = rng.random() * sum(self.mix)
        ins, upd, dele = self.mix[0], self.mix[0] + self.mix[1], self.mix[0] + self.mix[1] + self.mix[2]
        if x < ins or len(live) < self.min_live:
            k = self.new_key(t)
            live.append(k)
            return ("insert", t, {"id": k, "v": "%032x" % rng.getrandbits(128), "counter": 0})
        k = live[rng.randrange(len(live))]
        if x < upd:
            sets = {"counter": ("+", 1), "v": "%032x" % rng.getrandbits(128)}
            if self.stamp:
                sets[self.stamp] = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc) + \
                    datetime.timedelta(microseconds=rng.randrange(10 ** 16))
            return ("update", t, (k,), sets)
        self.forget(t, k)
        if x < dele:
            return ("delete", t, (k,))
        n = self.new_key(t)
        if self.negative_keys and rng.random() < 0.5:
            n = -n
        live.append(n)
        return ("rekey", t, (k,), (n,))

    def transactions(self, n):
        out = []
        for _ in range(n):
            ops = [self.counter_op(self.rng.choice(self.tables)) for _ in range(self.rng.randint(*self.nops))]
            self.counts["tx"] += 1
            self.counts["multi"] += len({o[1] for o in ops}) > 1
            out.append((ops, True))
        return out


class Runner(threading.Thread):
    """A workload's transactions run on a server one after another (a
    pause between them) until finish(), while sluice runs: start(),
    then finish(), which raises what the load met.  tx counts the
    transactions committed."""

    def __init__(self, server, workload, pause=0.002):
        super().__init__(daemon=True)
        self.server = server
        self.workload = workload
        self.pause = pause
        self.stop_event = threading.Event()
        self.tx = 0
        self.error = None

    def run(self):
        conn = None
        try:
            conn = self.workload.connect(self.server)
            while not self.stop_event.is_set():
                self.workload.execute(conn, self.workload.transactions(1))
                self.tx += 1
                time.sleep(self.pause)
        except Exception as e:  # raised by finish()
            self.error = e
        finally:
            if conn is not None:
                conn.close()

    def finish(self, timeout=60):
        self.stop_event.set()
        self.join(timeout)
        if self.error:
            raise self.error


# ---- a fixed workload whose changes a test counts

def counted_transactions(a, b, other):
    """Fixed transactions on tables keyed by id with a text column v (the
    /metrics tests of both sources), a holding the rows 1..30 and b 1..20:
    on a 7 inserts, 5 updates, a key change and 4 deletes; on b 3 inserts,
    2 updates, a delete and a TRUNCATE; then a transaction of an insert
    into a and 4 into other (a table the stream does not select), and 2
    updates and a delete of other.  change_counts() counts them."""
    def ins(t, ids, v):
        return [("insert", t, {"id": i, "v": v}) for i in ids]
    return [(ops, True) for ops in (
        ins(a, range(101, 108), "new"),
        [("update", a, (i,), {"v": "u"}) for i in range(1, 6)],
        [("rekey", a, (6,), (606,))],
        [("delete", a, (i,)) for i in range(10, 14)],
        ins(b, range(101, 104), "nb"),
        [("update", b, (i,), {"v": "u"}) for i in (1, 2)],
        [("delete", b, (3,))],
        [("truncate", b)],
        ins(a, [900], "tx") + ins(other, range(1, 5), "o"),
        [("update", other, (i,), {"v": "x"}) for i in (1, 2)],
        [("delete", other, (4,))])]


def run_counted(server, source, ns, txs):
    """Runs transactions of tables keyed by id (counted_transactions) on
    server, in namespace ns."""
    CounterWorkload(0, source, ns, (), (), bump=None).apply(server, txs)


def change_counts(txs):
    """{table: {op: n}} of the changes the committed transactions txs make,
    by the op labels of sluice_changes_total (a key change is an
    update_delete and an update).  A TRUNCATE counts once, whatever the
    table held."""
    out = {}
    for ops, commit in txs:
        for op in ops if commit else ():
            n = out.setdefault(op[1], dict(insert=0, update=0, update_delete=0, delete=0, truncate=0))
            if op[0] == "rekey":
                n["update_delete"] += 1
            n[{"rekey": "update"}.get(op[0], op[0])] += 1
    return out
