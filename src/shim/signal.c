/* SPDX-License-Identifier: MIT */
/*
 * signal.c - knowing that a signal handler ran.
 *
 * A blocking recv() on TCP sleeps in the kernel, which fails it with EINTR
 * when a handler runs (or restarts it, with SA_RESTART).  shunt's blocking
 * calls first spin in user space, where a handler runs unseen: a one-shot
 * alarm() meant to interrupt a read would be lost and the read would block
 * on.  So the shim wraps the application's handlers of asynchronous signals
 * with a trampoline that counts deliveries and remembers the last signal;
 * a blocking call that sees the count move behaves as the kernel would.
 * Synchronous fault signals (SEGV, BUS, ILL, FPE, TRAP, SYS) are left
 * alone: they never interrupt a sleep, and runtimes rely on them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "shim.h"
#include "../base/real.h"


static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static struct sigaction app[NSIG];   /* what the application installed */
static _Atomic int wrapped[NSIG];
static _Atomic uint64_t delivered;
static _Atomic int last_sig;
static __thread int handling; /* wrapped handlers running on this thread */

/* In a handler, only async-signal-safe work: the thread it interrupted may
 * hold any lock (a handler that jumps out leaves this set: safe too). */
SHUNT_CHILD_PATH int shunt_in_handler(void)
{
	return handling > 0;
}

uint64_t shunt_signals_seen(void)
{
	return __atomic_load_n(&delivered, __ATOMIC_ACQUIRE);
}

/* Restart a call interrupted by the last handled signal? (SA_RESTART) */
int shunt_signal_restarts(void)
{
	int sig = __atomic_load_n(&last_sig, __ATOMIC_RELAXED);

	if (sig <= 0 || sig >= NSIG || !wrapped[sig])
		return -1; /* unknown: the caller decides */
	return !!(app[sig].sa_flags & SA_RESTART);
}

/*
 * A handler due while this thread holds a lock of shunt's (lock.h): held
 * back, as the kernel holds a signal back until its system call is done.
 * The signal stays blocked when the trampoline returns (its saved mask,
 * which sigreturn restores, says so) and is queued again to this thread
 * with its own siginfo; the last unlock unblocks it (flush_deferred) and
 * the kernel delivers it then, with a context of its own - or, were the
 * signal already pending again, once, as the kernel merges a standard
 * signal that is blocked.  Counted now: a blocking call of ours that
 * sees the count move gives its partial result or EINTR, with the
 * handler run first (its lock given back on the way out).  The calls are
 * a signal's path only, and not made in a sandbox (its filter need not
 * allow them): there the handler runs at once, as before.
 */
static __thread __attribute__((tls_model("initial-exec"))) sigset_t deferred;

static void flush_deferred(void)
{
	sigset_t s = deferred;
	int e = errno;

	sigemptyset(&deferred);
	shunt_crit_deferred = 0;
	pthread_sigmask(SIG_UNBLOCK, &s, NULL); /* delivered here, the depth zero */
	errno = e;
}

static int defer(int sig, siginfo_t *si, ucontext_t *uc)
{
	sigset_t one;
	int e = errno;

	sigemptyset(&one);
	sigaddset(&one, sig);
	/* SA_NODEFER: the signal is not blocked in its handler, and queued
	 * again it would come back at once */
	if ((app[sig].sa_flags & SA_NODEFER) && pthread_sigmask(SIG_BLOCK, &one, NULL))
		goto no;
	if (syscall(SYS_rt_tgsigqueueinfo, shunt_pid(), gettid(), sig, si)) {
		if (app[sig].sa_flags & SA_NODEFER)
			pthread_sigmask(SIG_UNBLOCK, &one, NULL);
		goto no; /* (the queue's limit): run now, as before */
	}
	sigaddset(&uc->uc_sigmask, sig);
	sigaddset(&deferred, sig);
	shunt_crit_deferred = 1;
	errno = e;
	return 1;
no:
	errno = e;
	return 0;
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *a = &app[sig];

	__atomic_store_n(&last_sig, sig, __ATOMIC_RELAXED);
	__atomic_add_fetch(&delivered, 1, __ATOMIC_RELEASE);
	if (shunt_crit_depth > 0 && !shunt_sandboxed && uc && defer(sig, si, uc))
		return;
	handling++;
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, si, uc);
	else if (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN)
		a->sa_handler(sig);
	handling--;
}

__attribute__((constructor)) static void signal_init(void)
{
	shunt_crit_flush_fn = flush_deferred;
}

static int synchronous(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
	       sig == SIGTRAP || sig == SIGSYS;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction mine, prev_app;
	int was, r;

	if (!real_sigaction)
		*(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
	if (!real_sigaction) {
		errno = ENOSYS;
		return -1;
	}
	if (sig <= 0 || sig >= NSIG || synchronous(sig) || sig == SIGKILL || sig == SIGSTOP)
		return real_sigaction(sig, act, old);
	was = wrapped[sig];
	prev_app = app[sig];
	if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN) {
		mine = *act;
		mine.sa_flags |= SA_SIGINFO;
		mine.sa_sigaction = trampoline;
		app[sig] = *act;
		wrapped[sig] = 1;
		r = real_sigaction(sig, &mine, old);
	} else {
		r = real_sigaction(sig, act, old);
		if (!r && act)
			wrapped[sig] = 0;
	}
	if (r) {
		app[sig] = prev_app;
		wrapped[sig] = was;
		return r;
	}
	/* Report what the application installed, not our trampoline. */
	if (old && was && old->sa_sigaction == trampoline)
		*old = prev_app;
	return 0;
}

/* glibc's signal() and sysv_signal() reach sigaction internally, past us. */
EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sa.sa_flags = SA_RESTART; /* BSD semantics, as glibc's signal() */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, sig);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}
