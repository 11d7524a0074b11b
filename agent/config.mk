# agent/config.mk: the configuration loader, built as its own library so that
# unit tests can link it without the rest of the agent.  It reads the key
# tables of the sources (libslsources.a) and of the sinks (libslsinks.a,
# through the registry).  The program links it with: sluice_LDADD += $(AGENTCFG_LIBS)
noinst_LIBRARIES += libslagentcfg.a
libslagentcfg_a_SOURCES = %D%/config.c %D%/config.h
AGENTCFG_LIBS = libslagentcfg.a $(SINKS_LIBS) $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a
