noinst_LIBRARIES += libslschema.a
libslschema_a_SOURCES = %D%/schema.c %D%/schema.h
SCHEMA_LIBS = libslschema.a $(NETTLE_LIBS)
