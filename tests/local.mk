# Unit tests (make check).  Each area adds its programs through its own fragment.
include $(srcdir)/tests/unit/core.mk
include $(srcdir)/tests/unit/avro.mk
include $(srcdir)/tests/unit/config.mk

# The avro-c reader the integration tests use as a second, independent reader.
noinst_PROGRAMS += tests/tools/avro_read
tests_tools_avro_read_SOURCES = tests/tools/avro_read.c
tests_tools_avro_read_CPPFLAGS = $(AM_CPPFLAGS) $(AVRO_CFLAGS)
tests_tools_avro_read_LDADD = $(AVRO_LIBS)
