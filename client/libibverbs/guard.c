/*
 * Copies that survive a shrunk file.  The library copies between an
 * app's registered memory and memory it shares with a peer or the
 * engine (transit rings, staging blocks, a peer's MR by a grant).  Either
 * side may be a file that its owner truncated under the mapping: the
 * missing pages then raise SIGBUS, which would kill the app where a NIC
 * fails the request.  So such a copy runs under a recovery point, and a
 * fault makes it report failure instead; the caller leaves the request
 * to the engine, which fails it as a NIC would (engine/memory.c).
 *
 * That takes a SIGBUS handler, installed at the first guarded copy, which
 * hands every fault that is not ours to what the process had before.  A
 * thread that blocks SIGBUS (a blocked fault kills the process) cannot
 * recover: ibvc_guard_ready says so, and its callers then give it only
 * memory that cannot fault that way (private memory: IBVC_MRTAB_COPY),
 * which it copies unguarded.  Both are learnt once per thread, since
 * asking costs a system call: a thread that blocks SIGBUS only after its
 * first verbs call, or an app that installs its own handler after the
 * library's, is back where a fault ends the process (ibverbsd(7)).
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include "ibvd_verbs.h"

/*
 * This thread's recovery point while it copies.  Volatile: the compiler
 * knows memcpy does not read it and would drop the store before it.
 */
static __thread sigjmp_buf *volatile copy_jump;
static __thread int bus_state;		/* 0: not asked, 1: usable, -1: not */
static struct sigaction before;		/* the process's SIGBUS action */
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	/* A fault of our copy; one sent by kill() is not (si_code <= 0). */
	if (copy_jump && si->si_code > 0)
		siglongjmp(*copy_jump, 1);
	/* Not ours: as the process would have had it. */
	if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction) {
		before.sa_sigaction(sig, si, uc);
		return;
	}
	if (before.sa_handler == SIG_IGN && si->si_code <= 0)
		return;
	if (!(before.sa_flags & SA_SIGINFO) && before.sa_handler != SIG_DFL &&
	    before.sa_handler != SIG_IGN) {
		before.sa_handler(sig);
		return;
	}
	/* What is left ends the process: the default action. */
	sigaction(SIGBUS, &before, NULL);
	if (si->si_code <= 0)
		raise(sig);		/* sent, not a fault */
	/* a fault: the access faults again, now with the old action */
}

static void bus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	/*
	 * No mask to restore on the way out: sigsetjmp need not save it.
	 * The alternate stack, if the process's handler wanted it, for the
	 * faults we pass on (runtimes that watch their stacks).
	 */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
	sigaction(SIGBUS, NULL, &before);
	sa.sa_flags |= before.sa_flags & SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &before);
}

bool ibvc_guard_ready(void)
{
	sigset_t mask;

	if (bus_state == 0) {
		pthread_once(&bus_once, bus_install);
		bus_state = pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 &&
			    !sigismember(&mask, SIGBUS) ? 1 : -1;
	}
	return bus_state > 0;
}

bool ibvc_guarded(void (*fn)(void *arg), void *arg)
{
	sigjmp_buf *volatile outer = copy_jump;
	sigjmp_buf jump;

	if (!ibvc_guard_ready()) {
		fn(arg);
		return true;
	}
	if (sigsetjmp(jump, 0)) {
		copy_jump = outer;
		return false;
	}
	copy_jump = &jump;
	fn(arg);
	copy_jump = outer;
	return true;
}

struct copy_args {
	void *dst;
	const void *src;
	size_t len;
};

static void copy(void *arg)
{
	const struct copy_args *a = arg;

	memcpy(a->dst, a->src, a->len);
}

bool ibvc_guarded_copy(void *dst, const void *src, size_t len)
{
	struct copy_args a = { .dst = dst, .src = src, .len = len };

	return ibvc_guarded(copy, &a);
}
