# sinks: the sink interface, the registry, the Avro encoding and container
# framing every file destination shares (avro/), and the avro_dir sink.
noinst_LIBRARIES += libslsinks.a
libslsinks_a_SOURCES = %D%/sink.h %D%/registry.c %D%/lookup.c \
	%D%/avro/avro_value.c %D%/avro/avro_value.h \
	%D%/avro/avro_schema.c %D%/avro/avro_schema.h \
	%D%/avro/avro_enc.c %D%/avro/avro_enc.h \
	%D%/avro/ocf.c %D%/avro/ocf.h \
	%D%/avro_dir/avro_dir.c %D%/avro_dir/avro_dir.h
libslsinks_a_CPPFLAGS = $(AM_CPPFLAGS) $(LIBDEFLATE_CFLAGS) $(SNAPPY_CFLAGS)
SINKS_LIBS = libslsinks.a $(LIBDEFLATE_LIBS) $(SNAPPY_LIBS)
