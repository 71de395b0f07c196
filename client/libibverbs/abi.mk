# Export table of libibverbs: version script, ENOSYS/EOPNOTSUPP stubs,
# compat twins, string/rate helpers.
LIBIBVERBS_ABI_SOURCES += client/libibverbs/placeholder.c
