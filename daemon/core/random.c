/*
 * Random numbers name QPs, MRs and PSNs, which must not be guessable, so
 * they come from the kernel's generator, a pool at a time: one system
 * call per RANDOM_POOL_WORDS instead of one each (four per connection
 * set up, about a microsecond each in a virtual machine).  The pool is
 * per thread, and a child of fork() starts without its parent's.
 */
#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "random.h"

#define RANDOM_POOL_WORDS	64

static __thread uint32_t random_pool[RANDOM_POOL_WORDS];
static __thread unsigned int random_left;
static pthread_once_t random_atfork_once = PTHREAD_ONCE_INIT;

static void random_forget(void)
{
	random_left = 0;
}

static void random_atfork(void)
{
	(void)pthread_atfork(NULL, NULL, random_forget);
}

static bool random_refill(void)
{
	(void)pthread_once(&random_atfork_once, random_atfork);
	if (getrandom(random_pool, sizeof(random_pool), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(random_pool))
		return false;
	random_left = RANDOM_POOL_WORDS;
	return true;
}

uint32_t ibvd_random32(void)
{
	static unsigned int seed;

	if (random_left || random_refill())
		return random_pool[--random_left];
	/* Only before the kernel's pool is initialised (early boot). */
	if (!seed)
		seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
	return (uint32_t)rand_r(&seed) << 16 ^ (uint32_t)rand_r(&seed);
}
