/*
 * Shared by the unit tests that read the reference capture (capture.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "capture.h"

void capture_load(const char *name, struct pcap *p)
{
	const char *top = getenv("top_srcdir");
	char path[4096], err[256];

	snprintf(path, sizeof(path), "%s/tests/data/%s",
		 top && *top ? top : IBVD_TEST_SRCDIR, name);
	ck_assert_msg(pcap_read(path, p, err, sizeof(err)) == 0, "%s", err);
}

uint8_t *exact_copy(const uint8_t *src, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(b);
	memcpy(b, src, n);
	return b;
}
