# Man pages: the daemon and ibvctl in 8, the config in 5, the overview in 7,
# the wrapper in 1.  Never ibv_*(3): those belong to libibverbs-dev.
dist_man_MANS += man/ibverbsd.8 man/ibverbsd.conf.5 man/ibverbsd.7 \
	man/ibvctl.8 man/ibvctl-statistic.8 man/ibvctl-limit.8 \
	man/ibverbsd-run.1
