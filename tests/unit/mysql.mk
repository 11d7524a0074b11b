# Unit tests of the MySQL/MariaDB binlog decoding library (sources/mysql/):
# GTID positions and sets (test_mysql_gtid), event framing and table maps
# (test_mysql_binlog), row images and values (test_mysql_rows), binary JSON
# (test_mysql_json), the DDL statement classifier (test_mysql_ddl), and events captured from a real MariaDB 10.11
# (test_mysql_capture, reading tests/unit/data/mariadb-10.11/).  The events
# are built by a test-side encoder (mysql_enc.c) written independently of
# the decoder.
if HAVE_CMOCKA
MYSQL_TEST_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(ZLIB_LIBS) $(CMOCKA_LIBS)
MYSQL_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(ZLIB_CFLAGS) -DSLUICE_SRCDIR='"$(abs_top_srcdir)"'
MYSQL_ENC = %D%/mysql_enc.c %D%/mysql_enc.h

check_PROGRAMS += %D%/test_mysql_gtid %D%/test_mysql_binlog %D%/test_mysql_rows \
	%D%/test_mysql_json %D%/test_mysql_capture %D%/test_mysql_ddl
TESTS += %D%/test_mysql_gtid %D%/test_mysql_binlog %D%/test_mysql_rows %D%/test_mysql_json \
	%D%/test_mysql_capture %D%/test_mysql_ddl

%C%_test_mysql_ddl_SOURCES = %D%/test_mysql_ddl.c
%C%_test_mysql_ddl_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS) $(MARIADB_CFLAGS)
%C%_test_mysql_ddl_LDADD = $(MYSQL_TEST_LDADD)

%C%_test_mysql_gtid_SOURCES = %D%/test_mysql_gtid.c
%C%_test_mysql_gtid_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS)
%C%_test_mysql_gtid_LDADD = $(MYSQL_TEST_LDADD)

%C%_test_mysql_binlog_SOURCES = %D%/test_mysql_binlog.c $(MYSQL_ENC)
%C%_test_mysql_binlog_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS)
%C%_test_mysql_binlog_LDADD = $(MYSQL_TEST_LDADD)

%C%_test_mysql_rows_SOURCES = %D%/test_mysql_rows.c $(MYSQL_ENC)
%C%_test_mysql_rows_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS)
%C%_test_mysql_rows_LDADD = $(MYSQL_TEST_LDADD)

%C%_test_mysql_json_SOURCES = %D%/test_mysql_json.c $(MYSQL_ENC)
%C%_test_mysql_json_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS)
%C%_test_mysql_json_LDADD = $(MYSQL_TEST_LDADD)

%C%_test_mysql_capture_SOURCES = %D%/test_mysql_capture.c
%C%_test_mysql_capture_CPPFLAGS = $(MYSQL_TEST_CPPFLAGS)
%C%_test_mysql_capture_LDADD = $(MYSQL_TEST_LDADD)
endif
EXTRA_DIST += %D%/data

# The MySQL replay test: a binlog stream recorded from a real MariaDB 10.11
# (tests/replay/mysql/, made by record.py there with tests/tools/my_record)
# through the MySQL source, the decoder and the pipeline, compared with a
# reviewed expected output and with the server's final state.  No server needed.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_my_replay
TESTS += %D%/test_my_replay
%C%_test_my_replay_SOURCES = %D%/test_my_replay.c
%C%_test_my_replay_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(MARIADB_CFLAGS)
%C%_test_my_replay_LDADD = $(AGENT_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
EXTRA_DIST += tests/replay/mysql
CLEANFILES += my_replay.actual.txt

# The key texts of the MySQL source's backfill while streaming
# (sources/mysql/my_backfill.c): tokens, key order, the "after" condition.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_my_keys
TESTS += %D%/test_my_keys
%C%_test_my_keys_SOURCES = %D%/test_my_keys.c
%C%_test_my_keys_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(MARIADB_CFLAGS)
%C%_test_my_keys_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# The MySQL snapshot's text-protocol values (sources/mysql/my_backfill.c):
# each parser at its edges, and the same values as the binary protocol's.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_my_text
TESTS += %D%/test_my_text
%C%_test_my_text_SOURCES = %D%/test_my_text.c
%C%_test_my_text_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(MARIADB_CFLAGS)
%C%_test_my_text_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
