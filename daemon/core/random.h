/*
 * Random numbers for names that must not be guessable (QP numbers, MR
 * keys, PSNs, CM comm ids), from the kernel's generator.
 *
 * Layer core/ (daemon/README.md).
 */
#ifndef IBVD_RANDOM_H
#define IBVD_RANDOM_H

#include <stdint.h>

/* A random 32-bit value; never fails (a PRNG before the kernel's is up). */
uint32_t ibvd_random32(void);

#endif
