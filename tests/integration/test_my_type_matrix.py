"""
tests/integration/test_my_type_matrix.py: every MariaDB type placed before
and after number columns of both signednesses, under binlog_row_metadata
FULL, MINIMAL and NO_LOG.  A table map's optional metadata counts some
columns in its signedness bitmap and charset lists and not others: a column
counted wrongly shifts every later column's flags (a YEAR once made a
TINYINT after it unsigned).  So each type T gets a table

    (id, pre_s TINYINT, pre_u INT UNSIGNED, v T, s TINYINT, u INT UNSIGNED,
     b BIGINT, ub BIGINT UNSIGNED, c VARCHAR latin1)

whose number columns hold negative and maximum values, and the same rows
are read by backfill (before the stream starts) and from the binlog
(inserted live): both must equal the source, and each other, value for
value.
"""

from harness import records_for
from harness_mysql import MyTestCase

# (name, column type, a value as SQL, another value as SQL)
TYPES = [
    ("tiny", "tinyint", "-128", "127"),
    ("utiny", "tinyint unsigned", "255", "0"),
    ("small", "smallint", "-32768", "32767"),
    ("usmall", "smallint unsigned", "65535", "1"),
    ("medium", "mediumint", "-8388608", "8388607"),
    ("umedium", "mediumint unsigned", "16777215", "2"),
    ("int", "int", "-2147483648", "2147483647"),
    ("uint", "int unsigned", "4294967295", "3"),
    ("big", "bigint", "-9223372036854775808", "9223372036854775807"),
    ("ubig", "bigint unsigned", "18446744073709551615", "4"),
    ("dec", "decimal(10,2)", "-12345678.91", "0.01"),
    ("udec", "decimal(12,3) unsigned", "999999999.999", "0"),
    ("float", "float", "-1.5", "3.25"),
    ("double", "double", "-2.5e300", "0.1"),
    ("bit1", "bit(1)", "b'1'", "b'0'"),
    ("bit12", "bit(12)", "b'101010101010'", "b'1'"),
    ("year", "year", "2155", "1901"),
    ("date", "date", "'2024-02-29'", "'0001-01-01'"),
    # (TIME outside 0 ... 24 h is a valid long that Python's reader refuses)
    ("time0", "time", "'23:59:59'", "'12:34:56'"),
    ("time3", "time(3)", "'00:00:01.5'", "'23:59:59.999'"),
    ("time6", "time(6)", "'12:00:00.123456'", "'00:00:00.000001'"),
    ("dt0", "datetime", "'9999-12-31 23:59:59'", "'1000-01-01 00:00:00'"),
    ("dt6", "datetime(6)", "'2024-02-29 13:45:00.123456'", "'1970-01-01 00:00:00'"),
    ("ts0", "timestamp NULL DEFAULT NULL", "'2038-01-19 03:14:07'", "'1970-01-01 00:00:01'"),
    ("ts4", "timestamp(4) NULL DEFAULT NULL", "'2024-02-29 13:45:00.1234'", "'2001-01-01 00:00:00'"),
    ("char", "char(5)", "'ab  '", "''"),
    ("varchar", "varchar(20)", "'caf\u00e9 \U0001F600'", "''"),
    ("latin1", "varchar(20) CHARACTER SET latin1", "'\u00e9t\u00e9 \u20ac'", "'x'"),
    ("binary", "binary(4)", "x'01ff'", "x'00000000'"),
    ("varbinary", "varbinary(8)", "x'00ff00'", "x''"),
    ("blob", "blob", "x'deadbeef'", "REPEAT(x'ab', 300)"),
    ("text", "text", "'some text'", "REPEAT('t', 300)"),
    ("enum", "enum('sad','ok','happy')", "'happy'", "'sad'"),
    ("set", "set('a','b','c')", "'a,c'", "''"),
    # in binary, with UTF-8 members (test_my_types.py has the bytes that
    # are not): the map carries the charset with MINIMAL, not the strings
    ("enum_bin", "enum('x','\u00e9','z') CHARACTER SET binary", "'\u00e9'", "'x'"),
    ("set_bin", "set('x','\u00e9','z') CHARACTER SET binary", "'x,\u00e9,z'", "''"),
    ("json", "json", "'{\"k\": [1, 2.5]}'", "'null'"),
    # MariaDB's fixed binary types.  The binlog carries a UUID in text order
    # (version 1 and 4 ones too); 8000...-1000-... has the bytes a guess at
    # a swapped order would take for one
    ("uuid1", "uuid", "'6ccd780c-baba-1026-9564-5b8c656024db'", "'123e4567-e89b-42d3-a456-426614174000'"),
    ("uuid2", "uuid", "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "'00000000-0000-0000-0000-000000000000'"),
    ("uuid3", "uuid", "'01020304-0506-0708-090a-0b0c0d0e0f10'", "'80000000-0000-0000-1000-000000000000'"),
    ("inet4", "inet4", "'192.168.0.1'", "'0.0.0.0'"),
    ("inet6", "inet6", "'::1'", "'2001:db8::ff00:42:8329'"),
    ("inet6b", "inet6", "'::ffff:1.2.3.4'", "'fe80::1:0:0:0'"),
]

NUMS = "s, u, b, ub, c"
# (pre_s, pre_u, s, u, b, ub, c) for the rows with the first value, the
# second value and NULL
OTHERS = [
    ("-1", "4294967295", "-1", "4294967295", "-5", "18446744073709551615", "'\u00e9'"),
    ("-128", "0", "127", "0", "-9223372036854775808", "9223372036854775807", "''"),
    ("-2", "1", "-128", "2147483648", "9223372036854775807", "0", "NULL"),
]


def table_name(name):
    return f"m_{name}"


def create_sql(name, coltype):
    return (f"CREATE TABLE tm.`{table_name(name)}` (id int PRIMARY KEY, pre_s tinyint, pre_u int unsigned, "
            f"v {coltype}, s tinyint, u int unsigned, b bigint, ub bigint unsigned, "
            f"c varchar(10) CHARACTER SET latin1)")


def insert_sql(name, v1, v2, id_offset):
    rows = []
    for i, v in enumerate((v1, v2, "NULL")):
        rows.append(f"({i + 1 + id_offset}, {OTHERS[i][0]}, {OTHERS[i][1]}, {v}, " + ", ".join(OTHERS[i][2:]) + ")")
    return f"INSERT INTO tm.`{table_name(name)}` (id, pre_s, pre_u, v, {NUMS}) VALUES " + ", ".join(rows)


class TypeMatrixTest(MyTestCase):
    my_settings = {"binlog_row_metadata": "FULL"}

    def test_every_type_between_numbers(self):
        my = self.my
        my.execute("CREATE DATABASE tm")
        for name, coltype, v1, v2 in TYPES:
            my.execute(create_sql(name, coltype))
            my.execute(insert_sql(name, v1, v2, 0))
        s = self.sluice(stream="matrix", tables="tm.*")
        self.catch_up(s)
        for name, coltype, v1, v2 in TYPES:
            my.execute(insert_sql(name, v1, v2, 100))
        self.catch_up(s)
        recs = self.read(s)
        failures = []
        for name, coltype, _, _ in TYPES:
            t = table_name(name)
            mine = records_for(recs, "tm", t)
            bf = {r["payload"]["id"]: r["payload"] for r in mine if r["read_method"] == "mysql-backfill-fulldump"}
            cdc = {r["payload"]["id"]: r["payload"] for r in mine if r["read_method"] == "mysql-cdc-binlog"}
            self.assertEqual((sorted(bf), sorted(cdc)), ([1, 2, 3], [101, 102, 103]), t)
            for i in (1, 2, 3):
                a, b = dict(bf[i]), dict(cdc[i + 100])
                a.pop("id")
                b.pop("id")
                if a != b:
                    diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
                    failures.append(f"{coltype} row {i}: backfill vs binlog {diff}")
            try:
                self.assertTableMatches(mine, "tm", t, ["id"])
            except AssertionError as e:
                failures.append(f"{coltype}: {e}")
        self.assertEqual(failures, [], "\n".join(failures))
        # lagging across DDL: rows, then the column moved first, then rows,
        # all while the stream is stopped (without FULL metadata each table
        # is backfilled again; with it, the binlog names the columns)
        for name, coltype, v1, v2 in TYPES:
            my.execute(insert_sql(name, v1, v2, 200))
            my.execute(f"ALTER TABLE tm.`{table_name(name)}` MODIFY v {coltype} FIRST")
            my.execute(insert_sql(name, v2, v1, 300))
        self.catch_up(s)
        recs = self.read(s)
        for name, coltype, _, _ in TYPES:
            try:
                self.assertTableMatches(records_for(recs, "tm", table_name(name)), "tm", table_name(name), ["id"])
            except AssertionError as e:
                failures.append(f"{coltype} across DDL: {e}")
        self.assertEqual(failures, [], "\n".join(failures))


class TypeMatrixMinimalTest(TypeMatrixTest):
    """binlog_row_metadata=MINIMAL: signedness and charsets in the table
    map, names and ENUM/SET strings from the catalog."""
    my_settings = {"binlog_row_metadata": "MINIMAL"}


class TypeMatrixNoLogTest(TypeMatrixTest):
    """binlog_row_metadata=NO_LOG: everything but the types from the catalog."""
    my_settings = {"binlog_row_metadata": "NO_LOG"}


if __name__ == "__main__":
    import unittest
    unittest.main()
