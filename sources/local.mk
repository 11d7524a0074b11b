# sources: the source interface (source.h), the registry, and the PostgreSQL
# source (sources/postgres/: catalog, replication connection, pgoutput
# decoder, COPY snapshot reader).
noinst_LIBRARIES += libslsources.a
libslsources_a_SOURCES = %D%/source.h %D%/registry.c %D%/source_conf.c %D%/source_conf.h \
	%D%/source_util.c \
	%D%/postgres/pg_internal.h %D%/postgres/pg_source.c \
	%D%/postgres/pg_catalog.c %D%/postgres/pg_repl.c %D%/postgres/pg_slot.c %D%/postgres/pg_wait.c \
	%D%/postgres/pg_privs.c \
	%D%/postgres/pg_backfill.c %D%/postgres/pg_backfill.h \
	%D%/postgres/pg_text.c %D%/postgres/pg_text.h \
	%D%/postgres/pgoutput.c %D%/postgres/pgoutput.h
libslsources_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS)
SOURCES_LIBS = libslsources.a $(LIBPQ_LIBS)
