# ops/: the alerts' hysteresis, the Prometheus exposition, /healthz and the
# webhook payload.
if HAVE_CMOCKA
check_PROGRAMS += %D%/test_ops
TESTS += %D%/test_ops
%C%_test_ops_SOURCES = %D%/test_ops.c
%C%_test_ops_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(JANSSON_CFLAGS)
%C%_test_ops_LDADD = $(OPS_LIBS) $(SCHEMA_LIBS) libslcommon.a $(CMOCKA_LIBS)
endif
