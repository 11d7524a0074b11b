sluice_SOURCES = %D%/main.c %D%/stream.c %D%/stream.h %D%/checkpoint.c %D%/checkpoint.h %D%/config.h
sluice_CPPFLAGS = $(AM_CPPFLAGS) $(LIBPQ_CFLAGS) $(JANSSON_CFLAGS)
sluice_LDADD = $(AGENTCFG_LIBS) $(SINKS_LIBS) $(BACKFILL_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a \
	$(JANSSON_LIBS) $(LIBPQ_LIBS) -lpthread
