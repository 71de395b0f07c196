/*
 * Captures as test vectors: a classic pcap file (microsecond or
 * nanosecond timestamps, either byte order) of Ethernet frames, read
 * whole, and the IP packets in it.  A file that is not one, or a frame
 * cut short by the capture's snap length, fails the test (Check).
 */
#ifndef IBVD_TEST_PCAP_H
#define IBVD_TEST_PCAP_H

#include <stddef.h>
#include <stdint.h>

struct pcap_ip {
	const uint8_t *ip;		/* IPv4 or IPv6, VLAN tags skipped */
	size_t len;			/* to the end of the frame */
};

struct pcap {
	uint8_t *file;
	size_t frames;			/* every frame */
	size_t nip;
	struct pcap_ip *ip;		/* the IP packets, in order */
};

/*
 * $top_srcdir/tests/data/name (the test harness exports top_srcdir;
 * IBVD_TEST_SRCDIR when the program runs by hand).
 */
void pcap_load(const char *name, struct pcap *cap);

#endif /* IBVD_TEST_PCAP_H */
