/*
 * Captures for tests: a classic pcap file (microsecond or nanosecond
 * timestamps, either byte order) of Ethernet frames, read whole, and the
 * IP packets in it.  Used by the unit tests (test vectors in tests/data/)
 * and by the integration tests' check programs (captures they make), so
 * it reports errors rather than asserting.
 */
#ifndef IBVD_TEST_PCAP_H
#define IBVD_TEST_PCAP_H

#include <stddef.h>
#include <stdint.h>

struct pcap_ip {
	const uint8_t *ip;		/* IPv4 or IPv6, VLAN tags skipped */
	size_t len;			/* to the end of the frame */
	size_t frame;			/* its frame, from 1 as tshark counts */
};

struct pcap {
	uint8_t *file;
	size_t frames;			/* every frame */
	size_t nip;
	struct pcap_ip *ip;		/* the IP packets, in order */
};

/*
 * Read the capture at path into cap: 0, or -1 with why in err (a file
 * that is not one, another link type, a frame cut short by the capture's
 * snap length or by the end of the file).
 */
int pcap_read(const char *path, struct pcap *cap, char *err, size_t errlen);

void pcap_free(struct pcap *cap);

#endif /* IBVD_TEST_PCAP_H */
