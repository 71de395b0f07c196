# Every test: Check unit tests, ABI checks, integration tests with a real
# daemon and real (also Debian's unmodified) client programs.
include tests/unit/unit.mk
include tests/compat/compat.mk
include tests/integration/integration.mk
