# The shipped default configuration, a conffile in $(sysconfdir)/ibverbsd.
# Every key is documented in ibverbsd.conf(5): JSON has no comments.
ibverbsdconfdir = $(sysconfdir)/ibverbsd
dist_ibverbsdconf_DATA = etc/ibverbsd.conf

# The daemon, its clients and the socket unit take their default socket
# from --with-default-socket; the installed config names the same one.
install-data-hook: install-conf-socket
install-conf-socket:
	$(SED) -i -e 's|"/run/ibverbsd/ibverbsd.sock"|"$(IBVERBSD_DEFAULT_SOCKET)"|' \
		$(DESTDIR)$(ibverbsdconfdir)/ibverbsd.conf
.PHONY: install-conf-socket
