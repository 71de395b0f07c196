/*
 * Copies that survive a fault.  The library copies between an app's
 * registered memory and memory it shares with a peer or the engine
 * (transit rings, staging blocks, a peer's MR by a grant).  Either side
 * may be gone under the mapping: a file its owner truncated (SIGBUS), or
 * a range the app unmapped or protected while its MR stayed registered
 * (SIGSEGV).  Either would kill the app where a NIC, reading pinned
 * pages, fails the request or carries on.  So such a copy runs under a
 * recovery point, and a fault makes it report failure instead; the
 * caller leaves the request to the engine, which fails it as a NIC would
 * (engine/memory.c).
 *
 * That takes handlers for both signals, installed at the first guarded
 * copy, which hand every fault that is not ours to what the process had
 * before.  Ours is one in the memory ibvc_copy is copying, while a
 * recovery point is set.  A thread that blocks either signal (a blocked fault kills the
 * process) cannot recover: ibvc_guard_ready says so, and its callers then
 * copy nothing of the app's memory and leave every such request to the
 * engine.  Both are learnt once per thread, since asking costs a system
 * call: a thread that blocks them only after its first verbs call, or an
 * app that installs its own handler after the library's, is back where a
 * fault ends the process (ibverbsd(7)).
 */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "ibvd_verbs.h"

static const int guarded_signals[] = { SIGBUS, SIGSEGV };
#define N_GUARDED (sizeof(guarded_signals) / sizeof(guarded_signals[0]))

/*
 * This thread's recovery point while it copies.  Volatile: the compiler
 * knows memcpy does not read it and would drop the store before it.
 * initial-exec: the handler runs at every SIGSEGV of the process (a JVM's
 * null checks among them), where a TLS access that allocates (a library
 * dlopen'ed later) could deadlock in malloc.
 */
static __thread sigjmp_buf *volatile copy_jump
	__attribute__((tls_model("initial-exec")));
static __thread int guard_state		/* 0: not asked, 1: usable, -1: not */
	__attribute__((tls_model("initial-exec")));
static struct sigaction before[N_GUARDED]; /* the process's actions */
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static const struct sigaction *action_before(int sig)
{
	size_t i = 0;

	while (i + 1 < N_GUARDED && guarded_signals[i] != sig)
		i++;
	return &before[i];
}

/*
 * Run the process's own handler as the kernel would have: with its mask
 * (and sig, unless SA_NODEFER) blocked, and once only if SA_RESETHAND
 * (the disposition goes back to the default first, ours with it).
 */
static void run_handler(int sig, const struct sigaction *old, siginfo_t *si,
			void *uc)
{
	struct sigaction dfl;
	sigset_t mask, saved;

	mask = old->sa_mask;
	if (!(old->sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	if (old->sa_flags & SA_RESETHAND) {
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
	}
	pthread_sigmask(SIG_BLOCK, &mask, &saved);
	if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
	else
		old->sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* A signal that is not ours: as the process would have had it. */
static void pass_on(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *old = action_before(sig);

	/* sa_handler and sa_sigaction share their storage: one test for both */
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		run_handler(sig, old, si, uc);
		return;
	}
	if (old->sa_handler == SIG_IGN && si->si_code <= 0)
		return;
	/* What is left ends the process: the default action. */
	sigaction(sig, old, NULL);
	if (si->si_code <= 0)
		raise(sig);		/* sent, not a fault */
	/* a fault: the access faults again, now with the old action */
}

/* ---- the copy ------------------------------------------------------------- */

/*
 * The copy ibvc_copy is doing (len 0: none), so that a fault is taken for
 * the copy's only if it is in the memory copied: one of a signal handler
 * that interrupted the copy (a runtime's own SIGSEGV tricks) or of the
 * code around it (a bug, not a gone mapping) is the process's.  Three
 * stores per copy, and memcpy's speed kept.
 */
static __thread const char *copy_src __attribute__((tls_model("initial-exec")));
static __thread const char *copy_dst __attribute__((tls_model("initial-exec")));
static __thread size_t copy_len __attribute__((tls_model("initial-exec")));

void *ibvc_copy(void *dst, const void *src, size_t len)
{
	copy_src = src;
	copy_dst = dst;
	copy_len = len;
	/* the handler, on this thread, sees them before memcpy runs */
	atomic_signal_fence(memory_order_seq_cst);
	memcpy(dst, src, len);
	atomic_signal_fence(memory_order_seq_cst);
	copy_len = 0;
	return dst;
}

static bool within(const char *addr, const char *start, size_t len)
{
	return addr >= start && (size_t)(addr - start) < len;
}

static bool in_copy(const siginfo_t *si)
{
	const char *addr = si->si_addr;
	size_t len = copy_len;

	return len && (within(addr, copy_src, len) || within(addr, copy_dst, len));
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	/* A fault of our copy; one sent by kill() is not (si_code <= 0). */
	if (copy_jump && si->si_code > 0 && in_copy(si))
		siglongjmp(*copy_jump, 1);
	pass_on(sig, si, uc);
}

static void install(int sig, struct sigaction *old)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/*
	 * No mask to restore on the way out: sigsetjmp need not save it.
	 * The alternate stack, if the process's handler wanted it, for the
	 * faults we pass on (runtimes that watch their stacks, and a stack
	 * overflow's SIGSEGV, which has no stack left to run on).
	 */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
	sigaction(sig, NULL, old);
	sa.sa_flags |= old->sa_flags & SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, old);
}

static void guard_install(void)
{
	size_t i;

	for (i = 0; i < N_GUARDED; i++)
		install(guarded_signals[i], &before[i]);
}

bool ibvc_guard_ready(void)
{
	sigset_t mask;
	size_t i;

	if (guard_state == 0) {
		pthread_once(&guard_once, guard_install);
		guard_state = pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 ? 1 : -1;
		for (i = 0; guard_state > 0 && i < N_GUARDED; i++)
			if (sigismember(&mask, guarded_signals[i]))
				guard_state = -1;
	}
	return guard_state > 0;
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
		copy_len = 0;	/* the copy it left stands no more */
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

	ibvc_copy(a->dst, a->src, a->len);
}

bool ibvc_guarded_copy(void *dst, const void *src, size_t len)
{
	struct copy_args a = { .dst = dst, .src = src, .len = len };

	return ibvc_guarded(copy, &a);
}
