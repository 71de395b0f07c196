# unit tests (engine): the doorbell / sleep protocol of the context page
# (daemon/engine/doorbell.c, compiled into the test).
check_PROGRAMS += tests/unit/test_doorbell
TESTS += tests/unit/test_doorbell

tests_unit_test_doorbell_SOURCES = tests/unit/test_doorbell.c \
	daemon/engine/doorbell.c daemon/engine/internal.h
tests_unit_test_doorbell_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_doorbell_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_doorbell_LDADD = $(UNIT_LIBS) -lpthread

# The per-tenant bandwidth bucket (daemon/core/rate.c) on a fake clock.
check_PROGRAMS += tests/unit/test_rate
TESTS += tests/unit/test_rate
tests_unit_test_rate_SOURCES = tests/unit/test_rate.c \
	daemon/core/rate.c daemon/core/rate.h
tests_unit_test_rate_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_rate_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_rate_LDADD = $(UNIT_LIBS)

# The engine's copies between memory tiers (daemon/engine/memory.c), and
# its recovery from files truncated under an MR's mapping.
check_PROGRAMS += tests/unit/test_memory
TESTS += tests/unit/test_memory
tests_unit_test_memory_SOURCES = tests/unit/test_memory.c \
	daemon/engine/memory.c daemon/engine/internal.h \
	daemon/engine/watch/copy_watch.c daemon/engine/watch/copy_watch.h \
	daemon/engine/watch/copy_describe.c daemon/core/thread.c
tests_unit_test_memory_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_memory_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_memory_LDADD = $(UNIT_LIBS) -lpthread

# The copy watch's looking thread (daemon/engine/watch/copy_describe.c):
# its stop, with the futex calls wrapped to hold the window before a sleep.
check_PROGRAMS += tests/unit/test_copy_watch
TESTS += tests/unit/test_copy_watch
tests_unit_test_copy_watch_SOURCES = tests/unit/test_copy_watch.c \
	daemon/engine/watch/copy_watch.c daemon/engine/watch/copy_watch.h \
	daemon/engine/watch/copy_describe.c daemon/core/thread.c
tests_unit_test_copy_watch_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_copy_watch_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_copy_watch_LDFLAGS = -Wl,--wrap=ibvd_copy_futex
tests_unit_test_copy_watch_LDADD = $(UNIT_LIBS) -lpthread

# Ring arenas (daemon/verbs/rings/arena.c): carving, reuse, limits, lifetime.
check_PROGRAMS += tests/unit/test_arena
TESTS += tests/unit/test_arena
tests_unit_test_arena_SOURCES = tests/unit/test_arena.c \
	daemon/verbs/rings/arena.c daemon/verbs/rings/arena.h
tests_unit_test_arena_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_arena_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_arena_LDADD = $(UNIT_LIBS)

# The engine's copy-then-validate of staged send WQEs (daemon/engine/wqe.c)
# against the QP's staging block, with stubs for the registries.
check_PROGRAMS += tests/unit/test_wqe
TESTS += tests/unit/test_wqe
tests_unit_test_wqe_SOURCES = tests/unit/test_wqe.c \
	daemon/engine/wqe.c daemon/engine/memory.c daemon/engine/internal.h \
	daemon/engine/watch/copy_watch.c daemon/engine/watch/copy_watch.h \
	daemon/engine/watch/copy_describe.c daemon/core/thread.c
tests_unit_test_wqe_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_wqe_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_wqe_LDADD = $(UNIT_LIBS) -lpthread

# CQEs into a CQ ring and their purge (daemon/engine/completion.c): spans
# across the 2^32 wrap, heads a lap back or impossible, overruns.
check_PROGRAMS += tests/unit/test_completion
TESTS += tests/unit/test_completion
tests_unit_test_completion_SOURCES = tests/unit/test_completion.c \
	daemon/engine/completion.c daemon/engine/internal.h
tests_unit_test_completion_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/daemon
tests_unit_test_completion_CFLAGS = $(UNIT_CFLAGS) -pthread
tests_unit_test_completion_LDADD = $(UNIT_LIBS) -lpthread
