# agent: the top floor.  Everything but main() is a library, so that unit
# tests link the pipeline, the queue and the checkpoint store without a server.
noinst_LIBRARIES += libslagent.a
libslagent_a_SOURCES = %D%/stream.c %D%/stream.h %D%/pipeline.c %D%/pipeline.h \
	%D%/queue.c %D%/queue.h \
	%D%/masking.c %D%/masking.h \
	%D%/commands.c %D%/commands.h %D%/checkpoint.c %D%/checkpoint.h %D%/config.h \
	%D%/lock.c %D%/lock.h %D%/runstate.c %D%/runstate.h %D%/monitor.c %D%/monitor.h
libslagent_a_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS) $(MHD_CFLAGS) $(CURL_CFLAGS)
AGENT_LIBS = libslagent.a $(OPS_LIBS) $(JANSSON_LIBS) -lpthread

sluice_SOURCES = %D%/main.c
sluice_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
sluice_LDADD = $(AGENT_LIBS) $(AGENTCFG_LIBS) $(SINKS_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a
