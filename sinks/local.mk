# sinks: the sink interface, the registry, the Avro encoding and container
# framing every file destination shares (avro/), the file tree of Avro
# containers with its manifests (avro_tree/, over a store), and the avro_dir
# sink (the folder store), the s3 sink (s3/: the S3 store and a small
# S3 client over libcurl's SigV4), and the clickhouse sink.
noinst_LIBRARIES += libslsinks.a
libslsinks_a_SOURCES = %D%/sink.h %D%/registry.h %D%/registry.c %D%/lookup.c \
	%D%/avro/avro_value.c %D%/avro/avro_value.h \
	%D%/avro/avro_schema.c %D%/avro/avro_schema.h \
	%D%/avro/avro_enc.c %D%/avro/avro_enc.h \
	%D%/avro/ocf.c %D%/avro/ocf.h %D%/avro/avro_read.c %D%/avro/avro_read.h \
	%D%/avro_tree/store.h %D%/avro_tree/tree.c %D%/avro_tree/tree.h \
	%D%/avro_tree/manifest.c %D%/avro_tree/manifest.h %D%/avro_tree/verify.c \
	%D%/avro_tree/merge.c %D%/avro_tree/merge.h %D%/avro_tree/mirror.c %D%/avro_tree/mirror.h \
	%D%/avro_dir/avro_dir.c %D%/avro_dir/avro_dir.h \
	%D%/s3/s3.c %D%/s3/s3.h %D%/s3/s3_client.c %D%/s3/s3_client.h \
	%D%/clickhouse/clickhouse.h %D%/clickhouse/ch_sink.c \
	%D%/clickhouse/ch_conf.c %D%/clickhouse/ch_conf.h \
	%D%/clickhouse/ch_rowbin.c %D%/clickhouse/ch_rowbin.h \
	%D%/clickhouse/ch_layout.c %D%/clickhouse/ch_layout.h \
	%D%/clickhouse/ch_sql.c %D%/clickhouse/ch_sql.h \
	%D%/clickhouse/ch_http.c %D%/clickhouse/ch_http.h \
	%D%/clickhouse/ch_deadletter.c %D%/clickhouse/ch_deadletter.h \
	%D%/iceberg/iceberg.c %D%/iceberg/iceberg.h %D%/iceberg/ice_meta.c %D%/iceberg/ice_meta.h \
	%D%/iceberg/ice_fill.c %D%/iceberg/ice_fill.h %D%/iceberg/ice_store.c \
	%D%/iceberg/ice_maint.c %D%/iceberg/ice_maint.h \
	%D%/iceberg/ice_stats.c %D%/iceberg/ice_stats.h \
	%D%/iceberg/ice_widen.c %D%/iceberg/ice_widen.h
libslsinks_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBDEFLATE_CFLAGS) $(SNAPPY_CFLAGS) $(ZSTD_CFLAGS) \
	$(JANSSON_CFLAGS) $(AVRO_CFLAGS) $(CURL_CFLAGS) $(NETTLE_CFLAGS) $(ZLIB_CFLAGS)
SINKS_LIBS = libslsinks.a $(LIBDEFLATE_LIBS) $(SNAPPY_LIBS) $(ZSTD_LIBS) $(JANSSON_LIBS) $(AVRO_LIBS) \
	$(CURL_LIBS) $(NETTLE_LIBS) $(ZLIB_LIBS) -lpthread
