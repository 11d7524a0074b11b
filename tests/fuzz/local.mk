# The libFuzzer targets (configure --enable-fuzzers, CC=clang; scripts/fuzz.sh
# builds them in _build-fuzz and runs them): one per decoder of outside
# input, each a program whose main is libFuzzer's.  doc/testing.md, "Fuzzing".
if ENABLE_FUZZERS
FUZZ_TARGETS = %D%/fuzz_pgoutput %D%/fuzz_binlog %D%/fuzz_config %D%/fuzz_ocf %D%/fuzz_ch_rowbin %D%/fuzz_manifest
noinst_PROGRAMS += $(FUZZ_TARGETS)
FUZZER_LINK = $(AM_LDFLAGS) -fsanitize=fuzzer
FUZZER_UTIL = %D%/fuzz.h %D%/fuzz_util.c

%C%_fuzz_pgoutput_SOURCES = %D%/fuzz_pgoutput.c $(FUZZER_UTIL)
%C%_fuzz_pgoutput_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_pgoutput_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a

%C%_fuzz_binlog_SOURCES = %D%/fuzz_binlog.c $(FUZZER_UTIL)
%C%_fuzz_binlog_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_binlog_LDADD = $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a

%C%_fuzz_config_SOURCES = %D%/fuzz_config.c $(FUZZER_UTIL)
%C%_fuzz_config_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_config_LDADD = $(AGENTCFG_LIBS)

%C%_fuzz_ocf_SOURCES = %D%/fuzz_ocf.c $(FUZZER_UTIL)
%C%_fuzz_ocf_CPPFLAGS = $(AM_CPPFLAGS) $(AVRO_CFLAGS)
%C%_fuzz_ocf_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_ocf_LDADD = $(SINKS_LIBS) $(SCHEMA_LIBS) libslcommon.a

%C%_fuzz_ch_rowbin_SOURCES = %D%/fuzz_ch_rowbin.c $(FUZZER_UTIL)
%C%_fuzz_ch_rowbin_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_ch_rowbin_LDADD = $(SINKS_LIBS) $(SCHEMA_LIBS) libslcommon.a

%C%_fuzz_manifest_SOURCES = %D%/fuzz_manifest.c $(FUZZER_UTIL)
%C%_fuzz_manifest_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
%C%_fuzz_manifest_LDFLAGS = $(FUZZER_LINK)
%C%_fuzz_manifest_LDADD = $(SINKS_LIBS) $(SCHEMA_LIBS) libslcommon.a
endif
EXTRA_DIST += %D%/seeds.py %D%/lsan-ocf.supp
