# Integration tests: a real daemon on a temporary socket, real clients
# (Debian's unmodified ibverbs-utils among them) as unprivileged uids.
# Each test is an executable bash script sourcing tests/integration/lib.sh.
INTEGRATION_TESTS = \
	tests/integration/devinfo-debian.sh \
	tests/integration/devinfo-ours.sh \
	tests/integration/default-config.sh \
	tests/integration/no-daemon.sh \
	tests/integration/lib-cleanup.sh \
	tests/integration/wire-names.sh \
	tests/integration/daemon-death.sh \
	tests/integration/stalled-daemon.sh \
	tests/integration/bad-input.sh \
	tests/integration/lifecycle.sh \
	tests/integration/reload.sh \
	tests/integration/systemd-units.sh \
	tests/integration/sd-notify.sh \
	tests/integration/socket-activation.sh \
	tests/integration/privilege.sh \
	tests/integration/identity.sh \
	tests/integration/call-privilege.sh \
	tests/integration/peer-pid.sh \
	tests/integration/ibvctl.sh \
	tests/integration/ibvctl-resource.sh \
	tests/integration/ibvctl-cli.sh \
	tests/integration/limit-pages.sh \
	tests/integration/verbs-api.sh
TESTS += $(INTEGRATION_TESTS)

# RoCEv2 devices (issue 10): a daemon in a network namespace with a veth
# pair, its device, port and GID table as Debian's ibv_devinfo, ibvctl and
# a client holding a context (ctxclient-helper) see them.
INTEGRATION_TESTS += tests/integration/roce-device.sh tests/integration/roce-wire.sh
# roce-device.sh's daemon runs with this preload: getifaddrs() fails on
# demand, as for a daemon out of fds.
check_LTLIBRARIES += tests/integration/libfailaddrs.la
tests_integration_libfailaddrs_la_SOURCES = tests/integration/failaddrs.c
tests_integration_libfailaddrs_la_LDFLAGS = -module -avoid-version -shared \
	-rpath $(abs_builddir)
# The RDMA CM across the two namespaces: the IB CM's MADs on QP1.
INTEGRATION_TESTS += tests/integration/roce-cm.sh
# The same two hosts with IPv6 GIDs, link-local and global (roce-ipv6.sh).
INTEGRATION_TESTS += tests/integration/roce-ipv6.sh
# A loopback connection on a RoCE-only daemon (roce-loopback.sh).
INTEGRATION_TESTS += tests/integration/roce-loopback.sh
# The same beside a software device listed first (roce-loopback-soft.sh).
INTEGRATION_TESTS += tests/integration/roce-loopback-soft.sh

# ibv_rc_pingpong -e -t, many runs: no event with nothing behind it.
INTEGRATION_TESTS += tests/integration/pingpong-events-ts.sh

# Keepalives find a silent peer across the wire (rsockets-wire.sh).
INTEGRATION_TESTS += tests/integration/rsockets-wire.sh
# UCX across them, on the wire only (roce-middleware.sh).
INTEGRATION_TESTS += tests/integration/roce-middleware.sh
# XRC across them: XRCETH, the target's SRQ, XRC's opcodes (roce-xrc.sh).
INTEGRATION_TESTS += tests/integration/roce-xrc.sh
# A responder against a peer made by hand: WRITE ranges, responder
# resources, duplicate READs, packets forged from the device's own address.
INTEGRATION_TESTS += tests/integration/roce-responder.sh
check_PROGRAMS += tests/integration/roce-qp-helper
tests_integration_roce_qp_helper_SOURCES = tests/integration/roce-qp.c
tests_integration_roce_qp_helper_LDADD = -libverbs
# roce-verbs-helper (roce-device.sh): a RoCE device's address vectors.
check_PROGRAMS += tests/integration/roce-verbs-helper
tests_integration_roce_verbs_helper_SOURCES = tests/integration/roce-verbs.c
tests_integration_roce_verbs_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_integration_roce_verbs_helper_LDADD = -lrdmacm -libverbs $(CHECK_LIBS)

# direct-helper's stream across the wire, clean and lossy (roce-stream.sh).
INTEGRATION_TESTS += tests/integration/roce-stream.sh

# A link that reorders and duplicates (roce-relay.sh): the two namespaces
# joined by relay-helper through a tap device in each instead of a veth.
INTEGRATION_TESTS += tests/integration/roce-relay.sh
check_PROGRAMS += tests/integration/relay-helper
tests_integration_relay_helper_SOURCES = tests/integration/relay.c

# The wire captured (roce-capture.sh): tshark decodes every packet, and
# our codec's verdict (roce-pcap-check-helper) is that every one parses,
# has a good ICRC and decodes.  ROCE_WIRE_SOURCES: tests/unit/roce.mk.
INTEGRATION_TESTS += tests/integration/roce-capture.sh
check_PROGRAMS += tests/integration/roce-pcap-check-helper
tests_integration_roce_pcap_check_helper_SOURCES = \
	tests/integration/roce-pcap-check.c \
	tests/common/pcap.c tests/common/pcap.h $(ROCE_WIRE_SOURCES)
tests_integration_roce_pcap_check_helper_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/daemon

# A raw protocol client that misbehaves on purpose (bad-input.sh).
check_PROGRAMS += tests/integration/badclient-helper
tests_integration_badclient_helper_SOURCES = tests/integration/badclient.c
tests_integration_badclient_helper_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_integration_badclient_helper_LDADD = common/libibvd_common.la $(PROTOBUF_C_LIBS)

# A root server that drops its privileges after connecting (call-privilege.sh).
check_PROGRAMS += tests/integration/privdrop-helper
tests_integration_privdrop_helper_SOURCES = tests/integration/privdrop.c
tests_integration_privdrop_helper_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
tests_integration_privdrop_helper_LDADD = common/libibvd_common.la -lrdmacm -libverbs \
	$(PROTOBUF_C_LIBS)

# A client's file whose close never returns (a FUSE server that holds
# the daemon's FLUSH, stuckfs-helper) holds up its own uid only.
INTEGRATION_TESTS += tests/integration/stuck-close.sh
INTEGRATION_TESTS += tests/integration/stuck-stat.sh
check_PROGRAMS += tests/integration/stuckfs-helper
tests_integration_stuckfs_helper_SOURCES = tests/integration/stuckfs.c
# A copy of client memory that does not return (the same server holding
# the daemon's READs) is logged with what backs it and how to free it.
INTEGRATION_TESTS += tests/integration/stuck-copy.sh

# An ordinary verbs application holding a context, built against the system
# headers and -libverbs; tests run it through ibverbsd-run.
check_PROGRAMS += tests/integration/ctxclient-helper
tests_integration_ctxclient_helper_SOURCES = tests/integration/ctxclient.c
tests_integration_ctxclient_helper_LDADD = -lrdmacm -libverbs

# Every implemented verb, as a Check program; built and run like
# ctxclient-helper (verbs-api.sh).
check_PROGRAMS += tests/integration/verbs-api-helper
tests_integration_verbs_api_helper_SOURCES = tests/integration/verbs-api.c
tests_integration_verbs_api_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_integration_verbs_api_helper_LDADD = -libverbs $(CHECK_LIBS)

# install-check.sh runs from scripts/test against a `make install`ed prefix.
EXTRA_DIST += $(INTEGRATION_TESTS) tests/integration/lib.sh tests/integration/stuckfs.sh tests/mpi/mpi-pingpong.c tests/mpi/mpi-coll-rma.c \
	tests/integration/roce-hostile.py tests/integration/netns.sh \
	tests/integration/roce-mad-hostile.py tests/integration/roce-responder.py \
	tests/integration/notify-listen.py tests/integration/install-check.sh \
	tests/integration/preload-asyncio.py tests/integration/preload-orphan.py \
	tests/integration/preload-backlog.py tests/integration/preload-keepalive.py \
	tests/integration/tsan.supp

# The verbs data path (issue 3): Check programs and two-process helpers on
# the vt library (vt.c, vt.h), built and run like verbs-api-helper.
INTEGRATION_TESTS += \
	tests/integration/datapath.sh \
	tests/integration/direct.sh \
	tests/integration/direct-events.sh \
	tests/integration/peers.sh

# The direct transport (issue 12), like datapath-helper.
check_PROGRAMS += tests/integration/direct-helper
tests_integration_direct_helper_SOURCES = tests/integration/direct.c \
	tests/integration/direct-stream.c tests/integration/direct-stream.h \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_direct_helper_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/client/libibverbs
tests_integration_direct_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_direct_helper_LDADD = common/libibvd_common.la -libverbs $(CHECK_LIBS) \
	$(PROTOBUF_C_LIBS) -lpthread

check_PROGRAMS += tests/integration/datapath-helper
tests_integration_datapath_helper_SOURCES = tests/integration/datapath.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_datapath_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_datapath_helper_LDADD = -libverbs $(CHECK_LIBS) -lpthread

# On-demand paging (issue 11), like datapath-helper.
INTEGRATION_TESTS += tests/integration/odp.sh tests/integration/dm.sh \
	tests/integration/domain.sh
check_PROGRAMS += tests/integration/domain-helper
tests_integration_domain_helper_SOURCES = tests/integration/domain.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_domain_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_domain_helper_LDADD = -libverbs $(CHECK_LIBS) -lpthread
check_PROGRAMS += tests/integration/dm-helper
tests_integration_dm_helper_SOURCES = tests/integration/dm.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_dm_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_dm_helper_LDADD = -libverbs $(CHECK_LIBS) -lpthread
check_PROGRAMS += tests/integration/odp-helper
tests_integration_odp_helper_SOURCES = tests/integration/odp.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_odp_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_odp_helper_LDADD = -libverbs $(CHECK_LIBS) -lpthread

# MRs on shared memory mapped by the daemon (tier 1).
INTEGRATION_TESTS += tests/integration/mapped.sh
check_PROGRAMS += tests/integration/mapped-helper
tests_integration_mapped_helper_SOURCES = tests/integration/mapped.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_mapped_helper_CFLAGS = $(AM_CFLAGS) -pthread
tests_integration_mapped_helper_LDADD = -libverbs -lpthread

# XRC (domains, XRC SRQs, initiator/target QPs), like odp-helper.
INTEGRATION_TESTS += tests/integration/xrc.sh
check_PROGRAMS += tests/integration/xrc-helper
tests_integration_xrc_helper_SOURCES = tests/integration/xrc.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_xrc_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_xrc_helper_LDADD = -libverbs $(CHECK_LIBS) -lpthread

# A client abusing its own objects' shared memory (abuse.c): only its own
# work may fail.  It reaches into our library's structs for the rings.
INTEGRATION_TESTS += tests/integration/abuse.sh
check_PROGRAMS += tests/integration/abuse-helper
tests_integration_abuse_helper_SOURCES = tests/integration/abuse.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_abuse_helper_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/client/libibverbs
tests_integration_abuse_helper_CFLAGS = $(AM_CFLAGS) -pthread
tests_integration_abuse_helper_LDADD = -libverbs -lpthread

# Sharing a context between processes (ibv_import_device/pd/mr).
INTEGRATION_TESTS += tests/integration/import.sh
check_PROGRAMS += tests/integration/import-helper
tests_integration_import_helper_SOURCES = tests/integration/import.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_import_helper_LDADD = -libverbs

check_PROGRAMS += tests/integration/peers-helper
tests_integration_peers_helper_SOURCES = tests/integration/peers.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_peers_helper_LDADD = -libverbs

# Data-path system tests (issue 3): Debian's pingpongs between two users,
# the syscall-free fast path, thread safety, a hostile client and client
# death.  The helpers are ordinary verbs applications like
# verbs-api-helper, on the vt library.
INTEGRATION_TESTS += \
	tests/integration/pingpong.sh \
	tests/integration/perftest.sh \
	tests/integration/memlock-mode.sh \
	tests/integration/ucx.sh \
	tests/integration/libfabric.sh \
	tests/integration/mpi.sh \
	tests/integration/nosyscall.sh \
	tests/integration/stress.sh \
	tests/integration/hostile.sh \
	tests/integration/client-death.sh

check_PROGRAMS += tests/integration/nosyscall-helper
tests_integration_nosyscall_helper_SOURCES = tests/integration/nosyscall.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_nosyscall_helper_LDADD = -libverbs -lpthread

check_PROGRAMS += tests/integration/stress-helper
tests_integration_stress_helper_SOURCES = tests/integration/stress.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_stress_helper_LDADD = -libverbs -lpthread

check_PROGRAMS += tests/integration/hostile-helper
tests_integration_hostile_helper_SOURCES = tests/integration/hostile.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_hostile_helper_LDADD = -libverbs

# The RDMA connection manager (issue 4): Debian's rdmacm-utils and our rping
# between two uids, the reference's client/server example (cmsum-helper),
# and the librdmacm API as a Check program (cmapi-helper), all ordinary
# librdmacm applications built against the system headers.
INTEGRATION_TESTS += tests/integration/cm.sh
check_PROGRAMS += tests/integration/cmapi-helper
tests_integration_cmapi_helper_SOURCES = tests/integration/cmapi.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_cmapi_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_cmapi_helper_LDADD = -lrdmacm -libverbs $(CHECK_LIBS) -lpthread
check_PROGRAMS += tests/integration/cmsum-helper
tests_integration_cmsum_helper_SOURCES = tests/integration/cmsum.c
tests_integration_cmsum_helper_LDADD = -lrdmacm -libverbs

# rsockets: the rsocket API as a Check program (rsocket-helper), Debian's
# rstream, riostream and rcopy, and nc and iperf3 under LD_PRELOAD of our
# librspreload.so, between two uids (rsockets.sh).
INTEGRATION_TESTS += tests/integration/rsockets.sh
check_PROGRAMS += tests/integration/rsocket-helper
tests_integration_rsocket_helper_SOURCES = tests/integration/rsocket.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_rsocket_helper_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -pthread
tests_integration_rsocket_helper_LDADD = -lrdmacm -libverbs $(CHECK_LIBS) -lpthread
# A plain TCP program run under LD_PRELOAD: ppoll, pselect, sendfile.
check_PROGRAMS += tests/integration/preload-calls-helper
tests_integration_preload_calls_helper_SOURCES = tests/integration/preload-calls.c \
	tests/integration/preload-test.h
# An echo pair waiting with epoll under LD_PRELOAD.
check_PROGRAMS += tests/integration/preload-epoll-helper
tests_integration_preload_epoll_helper_SOURCES = tests/integration/preload-epoll.c \
	tests/integration/preload-test.h
# A forking server under LD_PRELOAD: the child and the inherited sockets.
check_PROGRAMS += tests/integration/preload-fork-helper
tests_integration_preload_fork_helper_SOURCES = tests/integration/preload-fork.c \
	tests/integration/preload-test.h
# A pair talking through fdopen'd stdio streams under LD_PRELOAD.
check_PROGRAMS += tests/integration/preload-stdio-helper
tests_integration_preload_stdio_helper_SOURCES = tests/integration/preload-stdio.c \
	tests/integration/preload-test.h

# Per-tenant quotas (issue 5): every limit kind as two uids at once,
# release on exit and kill -9, live reload (quota.sh).
INTEGRATION_TESTS += tests/integration/quota.sh
# Per-device limits, RLIMIT_MEMLOCK beside the quota, supplementary groups,
# bandwidth (quota-device.sh); ibvctl limit show/set (ibvctl-limit.sh).
INTEGRATION_TESTS += tests/integration/quota-device.sh \
	tests/integration/ibvctl-limit.sh
check_PROGRAMS += tests/integration/quota-helper
tests_integration_quota_helper_SOURCES = tests/integration/quota.c
tests_integration_quota_helper_LDADD = -lrdmacm -libverbs

# Limits on what else a client makes the daemon hold: connections,
# completion channels, multicast attachments and joins, unread CM events,
# log lines; refusals counted in ibvctl limit show refused (limits.sh).
INTEGRATION_TESTS += tests/integration/limits.sh
check_PROGRAMS += tests/integration/limits-helper
tests_integration_limits_helper_SOURCES = tests/integration/limits.c
tests_integration_limits_helper_LDADD = -lrdmacm -libverbs

# ibvctl statistic show: the engine's counters against known workloads.
INTEGRATION_TESTS += tests/integration/statistic.sh

# Fair sharing of the engine (issue 5): chunked transfers between two uids,
# cut short by ERR and destroy; a small SEND overtaking a 256 MiB WRITE; a
# tenant's bandwidth limit (fairness.sh).
INTEGRATION_TESTS += tests/integration/fairness.sh
check_PROGRAMS += tests/integration/fairness-helper
tests_integration_fairness_helper_SOURCES = tests/integration/fairness.c \
	tests/integration/vt.c tests/integration/vt.h
tests_integration_fairness_helper_LDADD = -libverbs

# The chaos soak (issue 13): workers of three uids doing verified RC and UD
# traffic while processes are killed, stopped and restarted, connections
# abandoned, memory registered and deregistered, the daemon reloaded; then
# every quota back to 0 and the daemon's fds and memory back to baseline.
# 30 s here (CHAOS_SECONDS); scripts/chaos-soak runs it for minutes.
INTEGRATION_TESTS += tests/integration/chaos.sh
check_PROGRAMS += tests/integration/chaos-helper
tests_integration_chaos_helper_SOURCES = tests/integration/chaos.c
tests_integration_chaos_helper_LDADD = -lrdmacm -libverbs

# Many QPs in one daemon (scale.sh; bench/scale for the full 65,536):
# scale-helper creates RC QPs with a CQ each and destroys them again.
INTEGRATION_TESTS += tests/integration/scale.sh
check_PROGRAMS += tests/integration/scale-helper
tests_integration_scale_helper_SOURCES = tests/integration/scale.c
tests_integration_scale_helper_LDADD = -libverbs
