#ifndef IBVD_TEST_DIRECT_STREAM_H
#define IBVD_TEST_DIRECT_STREAM_H

#include <stdint.h>

/* direct-helper stream: see direct-stream.c.  Returns the exit status. */
int direct_stream(unsigned int seconds, uint32_t seed, unsigned int nflows);

#endif
