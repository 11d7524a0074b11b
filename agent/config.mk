# agent/config.mk: the configuration loader, built as its own library so that
# unit tests can link it without the rest of the agent.
# The program links it with: sluice_LDADD += $(AGENTCFG_LIBS) libslcommon.a
noinst_LIBRARIES += libslagentcfg.a
libslagentcfg_a_SOURCES = %D%/config.c %D%/config.h
AGENTCFG_LIBS = libslagentcfg.a
