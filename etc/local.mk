# The shipped default configuration, a conffile in $(sysconfdir)/ibverbsd.
# Every key is documented in ibverbsd.conf(5): JSON has no comments.
ibverbsdconfdir = $(sysconfdir)/ibverbsd
dist_ibverbsdconf_DATA = etc/ibverbsd.conf
