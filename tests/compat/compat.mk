# ABI checks against Debian rdma-core 44.0: our client libraries' export
# tables (diffed against the recorded *.symbols, made by list-symbols from
# Debian's libraries), their SONAMEs/DT_NEEDED/version nodes, and ldd -r of
# every program of ibverbs-utils, rdmacm-utils, perftest and qperf.
COMPAT_TESTS = \
	tests/compat/check-symbols \
	tests/compat/check-dynamic \
	tests/compat/check-ldd
TESTS += $(COMPAT_TESTS)
EXTRA_DIST += $(COMPAT_TESTS) tests/compat/list-symbols \
	tests/compat/libibverbs.so.1.symbols tests/compat/librdmacm.so.1.symbols
