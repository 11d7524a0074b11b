# bench: programs that print performance figures.  They are built with the
# rest (noinst) but never run by make check: run them by hand, e.g.
#   bench/avro_encode [rows]
noinst_PROGRAMS += %D%/avro_encode
%C%_avro_encode_SOURCES = %D%/avro_encode.c
%C%_avro_encode_LDADD = $(SINKS_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a

noinst_PROGRAMS += %D%/s3_put
%C%_s3_put_SOURCES = %D%/s3_put.c
%C%_s3_put_LDADD = $(SINKS_LIBS) libslcommon.a
