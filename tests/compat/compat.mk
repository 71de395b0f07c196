# ABI checks against Debian rdma-core 44.0.
EXTRA_DIST += tests/compat/list-symbols tests/compat/libibverbs.so.1.symbols tests/compat/librdmacm.so.1.symbols
