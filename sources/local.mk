noinst_LIBRARIES += libslsources.a
libslsources_a_SOURCES = %D%/source.h %D%/source_conf.c %D%/source_conf.h \
	%D%/postgres/pgoutput.c %D%/postgres/pgoutput.h \
	%D%/postgres/pg_source.c %D%/postgres/pg_source.h
libslsources_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS)
SOURCES_LIBS = libslsources.a $(LIBPQ_LIBS)
