noinst_LIBRARIES += libslsources.a
libslsources_a_SOURCES = %D%/source.h \
	%D%/postgres/pg_text.c %D%/postgres/pg_text.h \
	%D%/postgres/pgoutput.c %D%/postgres/pgoutput.h \
	%D%/postgres/pg_source.c %D%/postgres/pg_source.h
libslsources_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS)
SOURCES_LIBS = libslsources.a $(LIBPQ_LIBS)
