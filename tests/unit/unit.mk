# Check unit tests.  Each area has its own fragment.
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTOBUF_C_CFLAGS)
UNIT_LIBS = common/libibvd_common.la $(CHECK_LIBS) $(PROTOBUF_C_LIBS)
include tests/unit/core.mk
include tests/unit/config.mk
include tests/unit/client.mk
include tests/unit/engine.mk
include tests/unit/roce.mk
include tests/unit/cm.mk
