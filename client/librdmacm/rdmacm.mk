# librdmacm: export table and implementation.
LIBRDMACM_SOURCES += client/librdmacm/placeholder.c
