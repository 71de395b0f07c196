# systemd units.  Generated at make time, not by configure, so that
# ExecStart= carries the fully expanded $(sbindir) (it contains ${prefix})
# and ListenSequentialPacket= the --with-default-socket path.  They are
# built even when not installed, so that the tests can verify them.
SYSTEMD_UNITS = systemd/ibverbsd.service systemd/ibverbsd.socket
EXTRA_DIST += systemd/ibverbsd.service.in systemd/ibverbsd.socket.in
CLEANFILES += $(SYSTEMD_UNITS)
noinst_DATA = $(SYSTEMD_UNITS)
if HAVE_SYSTEMD_UNITS
systemdsystemunit_DATA = $(SYSTEMD_UNITS)
endif

# distcheck installs as an ordinary user: keep the units inside its prefix.
AM_DISTCHECK_CONFIGURE_FLAGS = \
	--with-systemdsystemunitdir=$$dc_install_base/lib/systemd/system

systemd_edit = $(SED) \
	-e 's|@sbindir[@]|$(sbindir)|g' \
	-e 's|@IBVERBSD_DEFAULT_SOCKET[@]|$(IBVERBSD_DEFAULT_SOCKET)|g'

systemd/ibverbsd.service: $(srcdir)/systemd/ibverbsd.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && rm -f $@ $@.tmp && \
	$(systemd_edit) $(srcdir)/systemd/ibverbsd.service.in >$@.tmp && \
	mv -f $@.tmp $@

systemd/ibverbsd.socket: $(srcdir)/systemd/ibverbsd.socket.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && rm -f $@ $@.tmp && \
	$(systemd_edit) $(srcdir)/systemd/ibverbsd.socket.in >$@.tmp && \
	mv -f $@.tmp $@
