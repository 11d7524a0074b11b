# tests for avro: value conversion, schema and record encoding, container
# files, the avro_dir sink (with manifests and verify), a read-back with
# Debian's Python Avro reader, and the s3 sink and its client.
if HAVE_CMOCKA
# The tables are PostgreSQL's (their records carry lsn); binlog-shaped
# position fields come from the fake source descriptor (fake_source.c).
AVRO_TEST_LDADD = $(SINKS_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a $(AVRO_LIBS) \
	$(JANSSON_LIBS) $(CMOCKA_LIBS)
AVRO_TEST_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(AVRO_CFLAGS) $(JANSSON_CFLAGS) $(ZSTD_CFLAGS)
AVRO_TESTLIB = %D%/avro_testlib.c %D%/avro_testlib.h %D%/fake_source.c %D%/fake_source.h

check_PROGRAMS += %D%/test_avro_value %D%/test_avro_enc %D%/test_avro_ocf %D%/test_avro_dir \
	%D%/test_avro_python
TESTS += %D%/test_avro_value %D%/test_avro_enc %D%/test_avro_ocf %D%/test_avro_dir \
	%D%/test_avro_python

%C%_test_avro_value_SOURCES = %D%/test_avro_value.c $(AVRO_TESTLIB)
%C%_test_avro_value_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_avro_value_LDADD = $(AVRO_TEST_LDADD)

%C%_test_avro_enc_SOURCES = %D%/test_avro_enc.c $(AVRO_TESTLIB)
%C%_test_avro_enc_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_avro_enc_LDADD = $(AVRO_TEST_LDADD)

%C%_test_avro_ocf_SOURCES = %D%/test_avro_ocf.c $(AVRO_TESTLIB)
%C%_test_avro_ocf_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_avro_ocf_LDADD = $(AVRO_TEST_LDADD)

%C%_test_avro_dir_SOURCES = %D%/test_avro_dir.c $(AVRO_TESTLIB)
%C%_test_avro_dir_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_avro_dir_LDADD = $(AVRO_TEST_LDADD)

# The S3 client's exact requests against a local libmicrohttpd server, and
# the s3 sink over it.
check_PROGRAMS += %D%/test_s3
TESTS += %D%/test_s3
%C%_test_s3_SOURCES = %D%/test_s3.c $(AVRO_TESTLIB)
%C%_test_s3_CPPFLAGS = $(AVRO_TEST_CPPFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS)
%C%_test_s3_LDADD = $(AVRO_TEST_LDADD) $(MHD_LIBS) -lpthread

# Not cmocka: it prints its own TAP, so that a missing python3-avro is a SKIP.
%C%_test_avro_python_SOURCES = %D%/test_avro_python.c $(AVRO_TESTLIB)
%C%_test_avro_python_CPPFLAGS = $(AVRO_TEST_CPPFLAGS) -DSLUICE_SRCDIR='"$(abs_top_srcdir)"'
%C%_test_avro_python_LDADD = $(AVRO_TEST_LDADD)
endif
EXTRA_DIST += %D%/avro_pycheck.py

# tests for the clickhouse sink without a server: the merge version, RowBinary,
# layouts and SQL, errors, dead-letter lines (test_ch_codec); the sink against
# a local HTTP server that records every request (test_ch_sink).
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_ch_codec
TESTS += %D%/test_ch_codec
%C%_test_ch_codec_SOURCES = %D%/test_ch_codec.c $(AVRO_TESTLIB)
%C%_test_ch_codec_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_ch_codec_LDADD = $(AVRO_TEST_LDADD)

check_PROGRAMS += %D%/test_ch_sink
TESTS += %D%/test_ch_sink
%C%_test_ch_sink_SOURCES = %D%/test_ch_sink.c %D%/fake_http.c %D%/fake_http.h $(AVRO_TESTLIB)
%C%_test_ch_sink_CPPFLAGS = $(AVRO_TEST_CPPFLAGS) $(ZLIB_CFLAGS)
%C%_test_ch_sink_LDADD = $(AVRO_TEST_LDADD) $(ZLIB_LIBS) -lpthread
endif
EXTRA_DIST += %D%/golden

# The iceberg sink's metadata JSON against a golden file written from the
# Iceberg specification, its schema evolution (widening in place:
# iceberg_widened.metadata.json), its data files' Avro schema,
# merge mode's equality delete file and delete manifest (a second golden file).
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_iceberg_meta
TESTS += %D%/test_iceberg_meta
%C%_test_iceberg_meta_SOURCES = %D%/test_iceberg_meta.c
%C%_test_iceberg_meta_CPPFLAGS = $(AVRO_TEST_CPPFLAGS)
%C%_test_iceberg_meta_LDADD = $(AVRO_TEST_LDADD)
endif
