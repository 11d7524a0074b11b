# sinks: the sink interface, the registry, the Avro encoding and container
# framing every file destination shares (avro/), the file tree of Avro
# containers with its manifests (avro_tree/, over a store), and the avro_dir
# sink (the folder store), and the s3 sink (s3/: the S3 store and a small
# S3 client over libcurl's SigV4).
noinst_LIBRARIES += libslsinks.a
libslsinks_a_SOURCES = %D%/sink.h %D%/registry.c %D%/lookup.c \
	%D%/avro/avro_value.c %D%/avro/avro_value.h \
	%D%/avro/avro_schema.c %D%/avro/avro_schema.h \
	%D%/avro/avro_enc.c %D%/avro/avro_enc.h \
	%D%/avro/ocf.c %D%/avro/ocf.h \
	%D%/avro_tree/store.h %D%/avro_tree/tree.c %D%/avro_tree/tree.h \
	%D%/avro_tree/manifest.c %D%/avro_tree/manifest.h %D%/avro_tree/verify.c \
	%D%/avro_dir/avro_dir.c %D%/avro_dir/avro_dir.h \
	%D%/s3/s3.c %D%/s3/s3.h %D%/s3/s3_client.c %D%/s3/s3_client.h
libslsinks_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBDEFLATE_CFLAGS) $(SNAPPY_CFLAGS) $(JANSSON_CFLAGS) \
	$(AVRO_CFLAGS) $(CURL_CFLAGS) $(NETTLE_CFLAGS)
SINKS_LIBS = libslsinks.a $(LIBDEFLATE_LIBS) $(SNAPPY_LIBS) $(JANSSON_LIBS) $(AVRO_LIBS) $(CURL_LIBS) \
	$(NETTLE_LIBS)
