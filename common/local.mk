noinst_LIBRARIES += libslcommon.a
libslcommon_a_SOURCES = %D%/buf.c %D%/buf.h %D%/log.c %D%/log.h %D%/util.c %D%/util.h
