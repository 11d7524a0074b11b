# The replay test: a pgoutput stream recorded from a real server
# (tests/replay/, made by tests/replay/record.py with tests/tools/pg_record)
# through the PostgreSQL source, the decoder and the pipeline, compared with
# a reviewed expected output.  No server needed.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_pg_replay
TESTS += %D%/test_pg_replay
%C%_test_pg_replay_SOURCES = %D%/test_pg_replay.c
%C%_test_pg_replay_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBPQ_CFLAGS)
%C%_test_pg_replay_LDADD = $(AGENT_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
EXTRA_DIST += tests/replay/README.md tests/replay/record.py tests/replay/workload.rec \
	tests/replay/workload.tables tests/replay/workload.final tests/replay/expected.txt
CLEANFILES += pg_replay.actual.txt
