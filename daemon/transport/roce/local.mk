# daemon/transport/roce/: the RoCEv2 transport.  wire.h is its packet
# codec, a pure library (no I/O) the unit tests and the fuzzer build alone.
daemon_ibverbsd_SOURCES += \
	daemon/transport/roce/wire.h \
	daemon/transport/roce/wire.c \
	daemon/transport/roce/ip.c \
	daemon/transport/roce/icrc.c \
	daemon/transport/roce/crc32.c \
	daemon/transport/roce/crc32.h \
	daemon/transport/roce/be.h
