# Unit tests of common/, schema/, the pgoutput decoder, COPY decoding and
# checkpoints (test_core), of the PostgreSQL text conversion (test_pg_text),
# and of the pipeline and its queue with a fake
# source and sink (test_pipeline).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_core tests/unit/test_pipeline
TESTS += tests/unit/test_core tests/unit/test_pipeline
tests_unit_test_core_SOURCES = tests/unit/test_core.c
tests_unit_test_core_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBPQ_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_core_LDADD = $(AGENT_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)

tests_unit_test_pipeline_SOURCES = tests/unit/test_pipeline.c tests/unit/fake_source.c tests/unit/fake_source.h
tests_unit_test_pipeline_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pipeline_LDADD = $(AGENT_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# The watermark window of a backfill chunk (backfill/backfill_chunk.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_backfill_chunk
TESTS += tests/unit/test_backfill_chunk
tests_unit_test_backfill_chunk_SOURCES = tests/unit/test_backfill_chunk.c
tests_unit_test_backfill_chunk_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_backfill_chunk_LDADD = $(AGENT_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# PostgreSQL text -> typed values (sources/postgres/pg_text.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_pg_text
TESTS += tests/unit/test_pg_text
tests_unit_test_pg_text_SOURCES = tests/unit/test_pg_text.c
tests_unit_test_pg_text_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pg_text_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# PostgreSQL binary values -> typed values (sources/postgres/pg_binary.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_pg_binary
TESTS += tests/unit/test_pg_binary
tests_unit_test_pg_binary_SOURCES = tests/unit/test_pg_binary.c
tests_unit_test_pg_binary_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pg_binary_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# Column identities: which DDL changes existing rows (sources/postgres/pg_rewrite.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_pg_rewrite
TESTS += tests/unit/test_pg_rewrite
tests_unit_test_pg_rewrite_SOURCES = tests/unit/test_pg_rewrite.c
tests_unit_test_pg_rewrite_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBPQ_CFLAGS)
tests_unit_test_pg_rewrite_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif

# Column selection and masking (schema/mask.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_mask
TESTS += tests/unit/test_mask
tests_unit_test_mask_SOURCES = tests/unit/test_mask.c
tests_unit_test_mask_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(NETTLE_CFLAGS)
tests_unit_test_mask_LDADD = $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
