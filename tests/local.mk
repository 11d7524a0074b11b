# Unit tests (make check).  Each area adds its programs through its own fragment.
include $(srcdir)/tests/unit/core.mk
include $(srcdir)/tests/unit/avro.mk
include $(srcdir)/tests/unit/config.mk
include $(srcdir)/tests/unit/replay.mk
include $(srcdir)/tests/unit/mysql.mk
include $(srcdir)/tests/unit/ops.mk
include $(srcdir)/tests/fuzz/local.mk

# The avro-c reader the integration tests use as a second, independent reader.
noinst_PROGRAMS += tests/tools/avro_read
tests_tools_avro_read_SOURCES = tests/tools/avro_read.c
tests_tools_avro_read_CPPFLAGS = $(AM_CPPFLAGS) $(AVRO_CFLAGS)
tests_tools_avro_read_LDADD = $(AVRO_LIBS)

# The recorder of the replay tests (tests/replay/record.py runs it): records
# a live pgoutput stream, frame by frame, through the source's own
# replication connection.
noinst_PROGRAMS += tests/tools/pg_record
tests_tools_pg_record_SOURCES = tests/tools/pg_record.c
tests_tools_pg_record_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS)
tests_tools_pg_record_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a

# sluice_test: sluice with test-only sinks added to its sink registry
# (slow_avro_dir, whose flushes take as long as a test asks).  The product
# binary has none of them.
noinst_PROGRAMS += tests/tools/sluice_test
tests_tools_sluice_test_SOURCES = agent/main.c tests/tools/test_registry.c tests/tools/slow_sink.c
tests_tools_sluice_test_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
tests_tools_sluice_test_LDADD = $(sluice_LDADD)

# Without cmocka no unit test is built: make check must not pass with zero tests.
if !HAVE_CMOCKA
check-local:
	@echo "make check: cmocka was not found by configure, so no unit test was built;" >&2; \
	 echo "install libcmocka-dev (scripts/deps.sh does) and run configure again" >&2; \
	 exit 1
endif

# The recorder of the MySQL replay test (tests/replay/mysql/record.py runs it).
noinst_PROGRAMS += tests/tools/my_record
tests_tools_my_record_SOURCES = tests/tools/my_record.c
tests_tools_my_record_CPPFLAGS = $(AM_CPPFLAGS) $(MARIADB_CFLAGS)
tests_tools_my_record_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a
