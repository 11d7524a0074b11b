# sinks: the sink interface, the registry, the avro_dir and clickhouse sinks.
noinst_LIBRARIES += libslsinks.a
libslsinks_a_SOURCES = %D%/sink.h %D%/registry.c %D%/lookup.c \
	%D%/avro_dir/avro_value.c %D%/avro_dir/avro_value.h \
	%D%/avro_dir/avro_schema.c %D%/avro_dir/avro_schema.h \
	%D%/avro_dir/avro_enc.c %D%/avro_dir/avro_enc.h \
	%D%/avro_dir/ocf.c %D%/avro_dir/ocf.h \
	%D%/avro_dir/avro_dir.c %D%/avro_dir/avro_dir.h \
	%D%/clickhouse/clickhouse.h %D%/clickhouse/ch_sink.c \
	%D%/clickhouse/ch_conf.c %D%/clickhouse/ch_conf.h \
	%D%/clickhouse/ch_rowbin.c %D%/clickhouse/ch_rowbin.h \
	%D%/clickhouse/ch_layout.c %D%/clickhouse/ch_layout.h \
	%D%/clickhouse/ch_sql.c %D%/clickhouse/ch_sql.h \
	%D%/clickhouse/ch_http.c %D%/clickhouse/ch_http.h \
	%D%/clickhouse/ch_deadletter.c %D%/clickhouse/ch_deadletter.h
libslsinks_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBDEFLATE_CFLAGS) $(SNAPPY_CFLAGS) $(CURL_CFLAGS) $(ZLIB_CFLAGS)
SINKS_LIBS = libslsinks.a $(LIBDEFLATE_LIBS) $(SNAPPY_LIBS) $(CURL_LIBS) $(ZLIB_LIBS)
