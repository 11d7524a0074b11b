noinst_LIBRARIES += libslschema.a
libslschema_a_SOURCES = %D%/schema.c %D%/schema.h %D%/mask.c %D%/mask.h
libslschema_a_CPPFLAGS = $(AM_CPPFLAGS) $(NETTLE_CFLAGS)
SCHEMA_LIBS = libslschema.a $(NETTLE_LIBS)
