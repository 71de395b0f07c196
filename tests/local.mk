# Every test: Check unit tests, ABI checks, integration tests with a real
# daemon and real (also Debian's unmodified) client programs, fuzz targets
# on their seeds.
include tests/unit/unit.mk
include tests/compat/compat.mk
include tests/integration/integration.mk
include tests/fuzz/fuzz.mk

# The layers of daemon/ (rules in tests/layers.rules): layers.sh checks the
# built daemon's includes and symbols against them; layers-selftest.sh
# shows on a synthetic tree that the checker finds each kind of forbidden
# dependency.
TESTS += tests/layers.sh tests/layers-selftest.sh
EXTRA_DIST += tests/layers.sh tests/layers-selftest.sh tests/layers.rules

# tests/interop/rxe: Debian's programs between ibverbsd and the Linux
# kernel's rxe under qemu.  Not in make check (minutes, qemu, apt-get):
# scripts/test --interop runs it.
EXTRA_DIST += tests/interop/rxe tests/interop/guest-init
# tests/interop/verbs-probe: verbs-probe.c's edge cases on the same guest's
# rxe0 and on ibverbsd, diffed (a report, not a test).
EXTRA_DIST += tests/interop/verbs-probe tests/interop/verbs-probe.c
# tests/interop/datapath-probe: datapath-probe.c's completions, error paths
# first, the same way; both run by tests/interop/probe.sh.
EXTRA_DIST += tests/interop/datapath-probe tests/interop/datapath-probe.c \
	tests/interop/probe.sh
# tests/interop/probe-util.h: what the probes' .c files share.
EXTRA_DIST += tests/interop/probe-util.h
# The scripts stand beside the .c files of their names: make is not to
# build them from those with its built-in rule (distdir would, in a VPATH
# build, whenever a .c file is newer than its script).
tests/interop/verbs-probe tests/interop/datapath-probe: ; @:
# tests/interop/cm-probe.sh: cm-probe.c's librdmacm and rsockets corner
# cases in that guest and against the build's daemon, diffed; by hand.
EXTRA_DIST += tests/interop/cm-probe.sh tests/interop/cm-probe.c
# tests/interop/rxe --wire-probe: wire-probe.c's error cases with the
# requester on one end and the responder on the other, rxe0 and roce0
# across and each alone (a report, not a test).
EXTRA_DIST += tests/interop/wire-probe.c tests/interop/wire-probe.sh
# tests/interop/rxe --cm-wire: cm-wire.c's cases with the server and the
# client each on either side, diffed (a report, not a test).
EXTRA_DIST += tests/interop/cm-wire.c tests/interop/cm-wire.sh
