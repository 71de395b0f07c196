# daemon/transport/roce/: the RoCEv2 transport.  wire.h is its packet
# codec, a pure library (no I/O) the unit tests and the fuzzer build alone.
DAEMON_SOURCES += \
	daemon/transport/roce/wire.h \
	daemon/transport/roce/wire.c \
	daemon/transport/roce/ip.c \
	daemon/transport/roce/icrc.c \
	daemon/transport/roce/crc32.c \
	daemon/transport/roce/crc32.h \
	daemon/transport/roce/be.h
DAEMON_SOURCES += \
	daemon/transport/roce/internal.h \
	daemon/transport/roce/roce.c \
	daemon/transport/roce/rc.c \
	daemon/transport/roce/rc_resp.c \
	daemon/transport/roce/packet.c \
	daemon/transport/roce/gso.c \
	daemon/transport/roce/io.c \
	daemon/transport/roce/mcast.c \
	daemon/transport/roce/rx.c
