# Unit tests of common/, schema/, the pgoutput decoder, COPY decoding and checkpoints.
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_core
TESTS += tests/unit/test_core
tests_unit_test_core_SOURCES = tests/unit/test_core.c agent/checkpoint.c agent/checkpoint.h
tests_unit_test_core_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBPQ_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_core_LDADD = $(BACKFILL_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a \
	$(CMOCKA_LIBS) $(JANSSON_LIBS) $(LIBPQ_LIBS)
endif
