/*
 * What the unit tests that read the reference capture share: loading a
 * file of tests/data/ under Check, and exact-size copies for the tests of
 * truncated input (so that AddressSanitizer sees any read past the end).
 */
#ifndef IBVD_TEST_CAPTURE_H
#define IBVD_TEST_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "tests/common/pcap.h"

/*
 * $top_srcdir/tests/data/name (the test harness exports top_srcdir;
 * IBVD_TEST_SRCDIR when the program runs by hand) into p, or the test fails.
 */
void capture_load(const char *name, struct pcap *p);

/* A copy of n bytes in a buffer of exactly n; the caller frees it. */
uint8_t *exact_copy(const uint8_t *src, size_t n);

#endif /* IBVD_TEST_CAPTURE_H */
