noinst_LIBRARIES += libslcommon.a
libslcommon_a_SOURCES = %D%/buf.c %D%/buf.h %D%/log.c %D%/log.h %D%/util.c %D%/util.h \
	%D%/keytab.c %D%/keytab.h %D%/secret.c %D%/secret.h %D%/keyslots.c %D%/keyslots.h \
	%D%/outage.c %D%/outage.h %D%/strmap.c %D%/strmap.h
