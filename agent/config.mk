# agent/config.mk: the configuration loader, built as its own library so that
# unit tests can link it without the rest of the agent.  It reads the key
# table of the sources (libslsources.a).
# The program links it with: sluice_LDADD += $(AGENTCFG_LIBS)
noinst_LIBRARIES += libslagentcfg.a
libslagentcfg_a_SOURCES = %D%/config.c %D%/config.h
AGENTCFG_LIBS = libslagentcfg.a $(SOURCES_LIBS) $(SCHEMA_LIBS) libslcommon.a
