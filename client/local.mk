# Our libibverbs.so.1 and librdmacm.so.1, with Debian rdma-core 44's exact
# SONAMEs, version nodes and export tables (tests/compat/*.symbols).
# libtool: -version-info C:R:A gives libNAME.so.(C-A).A.R, i.e. the Debian
# file names libibverbs.so.1.14.44 and librdmacm.so.1.3.44.
ibverbsdlib_LTLIBRARIES += client/libibverbs.la client/librdmacm.la

LIBIBVERBS_ABI_SOURCES =
LIBIBVERBS_IMPL_SOURCES =
LIBRDMACM_SOURCES =
include client/libibverbs/abi.mk
include client/libibverbs/impl.mk
include client/librdmacm/rdmacm.mk

client_libibverbs_la_SOURCES = $(LIBIBVERBS_ABI_SOURCES) $(LIBIBVERBS_IMPL_SOURCES)
client_libibverbs_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client/libibverbs
client_libibverbs_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -pthread
client_libibverbs_la_LIBADD = common/libibvd_common.la $(PROTOBUF_C_LIBS) -lpthread
client_libibverbs_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -version-info 15:44:14 \
	-Wl,--version-script=$(top_srcdir)/client/libibverbs/libibverbs.map
EXTRA_client_libibverbs_la_DEPENDENCIES = $(top_srcdir)/client/libibverbs/libibverbs.map
EXTRA_DIST += client/libibverbs/libibverbs.map

client_librdmacm_la_SOURCES = $(LIBRDMACM_SOURCES)
client_librdmacm_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/client/librdmacm
client_librdmacm_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -pthread
client_librdmacm_la_LIBADD = client/libibverbs.la common/libibvd_common.la $(PROTOBUF_C_LIBS) -lpthread
client_librdmacm_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -version-info 4:44:3 \
	-Wl,--version-script=$(top_srcdir)/client/librdmacm/librdmacm.map
EXTRA_client_librdmacm_la_DEPENDENCIES = $(top_srcdir)/client/librdmacm/librdmacm.map
EXTRA_DIST += client/librdmacm/librdmacm.map

# librspreload.so: TCP programs on rsockets by LD_PRELOAD, in an rsocket/
# directory of our libdir as Debian has it in its ($(libdir)/rsocket/),
# with Debian's file names (librspreload.so.1.0.0).
rspreloaddir = $(ibverbsdlibdir)/rsocket
rspreload_LTLIBRARIES = client/librspreload.la
client_librspreload_la_SOURCES = client/rspreload/preload.c \
	client/rspreload/preload.h client/rspreload/epoll.c \
	client/rspreload/stdio.c client/rspreload/stat.c
client_librspreload_la_CFLAGS = $(AM_CFLAGS) -pthread
client_librspreload_la_LIBADD = client/librdmacm.la -ldl -lpthread
client_librspreload_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -version-info 1:0:0

# Programs load our libraries by SONAME only; libtool archives would just be
# clutter in a directory users put on LD_LIBRARY_PATH.  (automake installs
# the private libdir with the data, hence the data hook.)
install-data-hook: remove-client-la
remove-client-la:
	rm -f $(DESTDIR)$(ibverbsdlibdir)/libibverbs.la $(DESTDIR)$(ibverbsdlibdir)/librdmacm.la \
	      $(DESTDIR)$(rspreloaddir)/librspreload.la
# Without the archives libtool cannot tell what to uninstall: name it.
uninstall-hook: uninstall-client-libs
uninstall-client-libs:
	cd $(DESTDIR)$(ibverbsdlibdir) 2>/dev/null && \
	rm -f libibverbs.so libibverbs.so.1 libibverbs.so.1.14.44 \
	      librdmacm.so librdmacm.so.1 librdmacm.so.1.3.44 || :
	cd $(DESTDIR)$(rspreloaddir) 2>/dev/null && \
	rm -f librspreload.so librspreload.so.1 librspreload.so.1.0.0 || :
.PHONY: remove-client-la uninstall-client-libs
