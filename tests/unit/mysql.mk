# Unit tests of the MySQL/MariaDB binlog decoding library (sources/mysql/):
# GTID positions and sets (test_mysql_gtid).
if HAVE_CMOCKA
MYSQL_TEST_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)

check_PROGRAMS += %D%/test_mysql_gtid
TESTS += %D%/test_mysql_gtid
%C%_test_mysql_gtid_SOURCES = %D%/test_mysql_gtid.c
%C%_test_mysql_gtid_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
%C%_test_mysql_gtid_LDADD = $(MYSQL_TEST_LDADD)
endif
