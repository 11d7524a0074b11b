noinst_LIBRARIES += libslbackfill.a
libslbackfill_a_SOURCES = %D%/pg_backfill.c %D%/pg_backfill.h
libslbackfill_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS)
BACKFILL_LIBS = libslbackfill.a $(LIBPQ_LIBS)
