# Unit tests of common/, schema/, the pgoutput decoder, COPY decoding and checkpoints,
# and of the PostgreSQL text conversion.
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_core
TESTS += tests/unit/test_core
tests_unit_test_core_SOURCES = tests/unit/test_core.c agent/checkpoint.c agent/checkpoint.h
tests_unit_test_core_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBPQ_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_core_LDADD = $(BACKFILL_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a \
	$(CMOCKA_LIBS) $(JANSSON_LIBS) $(LIBPQ_LIBS)
endif

# PostgreSQL text -> typed values (sources/postgres/pg_text.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_pg_text
TESTS += tests/unit/test_pg_text
tests_unit_test_pg_text_SOURCES = tests/unit/test_pg_text.c
tests_unit_test_pg_text_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pg_text_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
