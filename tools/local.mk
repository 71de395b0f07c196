# ibvctl, ibverbsd-run, and our ibv_devices/ibv_devinfo.

# ibvctl talks to the daemon's admin service: framing and the connection
# from common/, JSON output with jansson.
bin_PROGRAMS += tools/ibvctl
tools_ibvctl_SOURCES = tools/ibvctl.c tools/ibvctl.h \
	tools/ibvctl_grammar.c tools/ibvctl_print.c
tools_ibvctl_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) $(JANSSON_CFLAGS)
tools_ibvctl_LDADD = common/libibvd_common.la $(PROTOBUF_C_LIBS) $(JANSSON_LIBS)

# The verbs tools link our libibverbs; being installed programs, libtool
# gives them a RUNPATH to $(ibverbsdlibdir), so they find it without the
# wrapper.  They use only the public API and run on Debian's library too.
ibverbsdtool_PROGRAMS += tools/ibv_devices tools/ibv_devinfo
tools_ibv_devices_SOURCES = tools/ibv_devices.c
tools_ibv_devices_LDADD = client/libibverbs.la
tools_ibv_devinfo_SOURCES = tools/ibv_devinfo.c
tools_ibv_devinfo_LDADD = client/libibverbs.la

# ibverbsd-run is generated at make time, not by configure, so that the
# directories are fully expanded (they contain ${prefix}) and follow a
# "make prefix=..." override.
bin_SCRIPTS += tools/ibverbsd-run
CLEANFILES += tools/ibverbsd-run
EXTRA_DIST += tools/ibverbsd-run.in

tools_edit = $(SED) \
	-e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	-e 's|@ibverbsdlibdir[@]|$(ibverbsdlibdir)|g' \
	-e 's|@ibverbsdtooldir[@]|$(ibverbsdtooldir)|g'

tools/ibverbsd-run: $(srcdir)/tools/ibverbsd-run.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools && rm -f $@ $@.tmp && \
	$(tools_edit) $(srcdir)/tools/ibverbsd-run.in >$@.tmp && \
	chmod +x $@.tmp && chmod a-w $@.tmp && mv -f $@.tmp $@

# Our rping (issue 4): the RDMA CM ping-pong, interoperable with Debian's
# rping; ibverbsd-run finds it first on PATH.
ibverbsdtool_PROGRAMS += tools/rping
tools_rping_SOURCES = tools/rping.c
tools_rping_CFLAGS = $(AM_CFLAGS) -pthread
tools_rping_LDADD = client/librdmacm.la client/libibverbs.la -lpthread
