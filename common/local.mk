# Code shared by the daemon, the client libraries and the tools.  Built as a
# PIC convenience library so it can go into the shared client libraries too.
noinst_LTLIBRARIES += common/libibvd_common.la
common_libibvd_common_la_SOURCES = \
	common/frame.c common/frame.h \
	common/conn.c common/conn.h \
	common/abandoned.c common/abandoned.h \
	common/log.c common/log.h \
	common/util.h \
	common/ring.h common/barrier.h \
	common/transit.c common/transit.h \
	common/lease.c common/lease.h \
	common/verbs_msg.c common/verbs_msg.h \
	common/cm_qp.h
nodist_common_libibvd_common_la_SOURCES = proto/ibverbsd.pb-c.c proto/ibverbsd.pb-c.h
common_libibvd_common_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS)
common_libibvd_common_la_LIBADD = $(PROTOBUF_C_LIBS)
