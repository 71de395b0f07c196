# Export table of libibverbs: version script, ENOSYS/EOPNOTSUPP stubs,
# compat twins, string/rate helpers.
LIBIBVERBS_ABI_SOURCES += \
	client/libibverbs/exports.h \
	client/libibverbs/stubs.c \
	client/libibverbs/compat_1_0.c \
	client/libibverbs/private.c \
	client/libibverbs/strings.c \
	client/libibverbs/rate.c \
	client/libibverbs/fork.c \
	client/libibverbs/sysfs.c \
	client/libibverbs/marshall.c
