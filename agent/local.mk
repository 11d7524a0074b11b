sluice_SOURCES = %D%/main.c
sluice_LDADD = libslcommon.a
