# sources: the source interface (source.h), the registry, the PostgreSQL
# source (sources/postgres/: catalog, replication connection, pgoutput
# decoder, COPY snapshot reader), and the MySQL/MariaDB binlog decoding
# library and source (sources/mysql/: event framing, row images, GTIDs, the
# binlog client, catalog, snapshot reader and the source's operations).
noinst_LIBRARIES += libslsources.a
libslsources_a_SOURCES = %D%/source.h %D%/registry.c %D%/source_conf.c %D%/source_conf.h \
	%D%/source_util.c \
	%D%/postgres/pg_internal.h %D%/postgres/pg_source.h %D%/postgres/pg_source.c %D%/postgres/pg_conf.c \
	%D%/postgres/pg_catalog.c %D%/postgres/pg_repl.c %D%/postgres/pg_slot.c %D%/postgres/pg_wait.c \
	%D%/postgres/pg_privs.c %D%/postgres/pg_pubcheck.c %D%/postgres/pg_rewrite.c \
	%D%/postgres/pg_backfill.c %D%/postgres/pg_backfill.h %D%/postgres/pg_chunks.c \
	%D%/postgres/pg_text.c %D%/postgres/pg_text.h %D%/postgres/pg_binary.c %D%/postgres/pg_binary.h \
	%D%/postgres/pgoutput.c %D%/postgres/pgoutput.h \
	%D%/mysql/binlog_event.c %D%/mysql/binlog_event.h \
	%D%/mysql/row_image.c %D%/mysql/row_image.h \
	%D%/mysql/mysql_charset.c %D%/mysql/mysql_charset.h \
	%D%/mysql/mysql_json.c %D%/mysql/mysql_json.h \
	%D%/mysql/gtid.c %D%/mysql/gtid.h \
	%D%/mysql/my_internal.h %D%/mysql/my_source.h %D%/mysql/my_source.c %D%/mysql/my_conf.c %D%/mysql/my_conn.c %D%/mysql/my_catalog.c \
	%D%/mysql/my_ddl.c %D%/mysql/my_dump.c %D%/mysql/my_backfill.c \
	%D%/mysql/my_pos.c %D%/mysql/my_tables.c %D%/mysql/my_server_pos.c %D%/mysql/my_stream.c \
	%D%/mysql/my_maps.c %D%/mysql/my_query.c %D%/mysql/my_watermark.c
libslsources_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS) $(MARIADB_CFLAGS) $(ZLIB_CFLAGS)
SOURCES_LIBS = libslsources.a $(LIBPQ_LIBS) $(MARIADB_LIBS) $(ZLIB_LIBS)
