# tests for config: agent/config.c and the key-table engine common/keytab.c (cmocka, TAP through the driver in Makefile.am)
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_config
TESTS += %D%/test_config
%C%_test_config_SOURCES = %D%/test_config.c
%C%_test_config_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
%C%_test_config_LDADD = $(AGENTCFG_LIBS) $(CMOCKA_LIBS)
endif

# The key-table engine and the secret helpers on their own: common/ only.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_keytab
TESTS += %D%/test_keytab
%C%_test_keytab_SOURCES = %D%/test_keytab.c
%C%_test_keytab_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
%C%_test_keytab_LDADD = libslcommon.a $(CMOCKA_LIBS)
endif

# The stream keys a source owns (sl_source_ops.stream_conf_keys).
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_source_keys
TESTS += %D%/test_source_keys
%C%_test_source_keys_SOURCES = %D%/test_source_keys.c
%C%_test_source_keys_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
%C%_test_source_keys_LDADD = $(AGENTCFG_LIBS) $(CMOCKA_LIBS)
endif
