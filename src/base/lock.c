/* SPDX-License-Identifier: MIT */
/*
 * lock.c - futex words shared between processes: waiting and waking on
 * one, and a lock whose word names its holder's thread (robust to a dead
 * holder and bounded against a word another process wrote).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base.h"
#include "lock.h"

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* Sleep while *w == val, at most ns; wake up to n sleepers (shared words:
 * not FUTEX_PRIVATE, the other side is another process). */
void shunt_futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	futex(w, FUTEX_WAIT, val, &ts);
}

void shunt_futex_wake(_Atomic uint32_t *w, int n)
{
	futex(w, FUTEX_WAKE, (uint32_t)n, NULL);
}

/*
 * The ring locks: a futex word holding the holder's thread id (so a waiter
 * can tell a dead holder from a busy one) and LOCK_WAITERS when someone
 * sleeps on it.  Holders never sleep with a ring lock (conn.c), so a wait
 * past LOCK_PROBE_NS makes the waiter ask the kernel whether the holder
 * still exists; a holder killed inside its few instructions (a forked
 * sharer, SIGKILL) leaves the ring consistent - cursors are published last
 * - and its lock is taken over.  A word the peer wrote (it is in the
 * peer's reach) names a thread that exists or one that does not: the
 * first keeps the bound (the caller ends the connection), the second is
 * taken over; neither hangs the caller.
 */
#define LOCK_WAITERS 0x80000000u
#define LOCK_TID 0x3fffffffu
#define LOCK_PROBE_NS 10000000ull /* 10 ms */

__thread __attribute__((tls_model("initial-exec"))) int shunt_crit_depth;
__thread __attribute__((tls_model("initial-exec"))) int shunt_crit_deferred;
void (*shunt_crit_flush_fn)(void);

int shunt_lock_probe_off; /* a seccomp sandbox: no kill(2) of ours (the shim sets it) */
static __thread __attribute__((tls_model("initial-exec"))) uint32_t self_tid;

/* The word a thread of id tid writes in a lock it holds (1 in a sandbox:
 * no probe of it either; never 0, a free lock's). */
static uint32_t tid_word(pid_t tid)
{
	uint32_t t = shunt_lock_probe_off ? 1 : (uint32_t)tid & LOCK_TID;

	return t ? t : 1;
}

static uint32_t lock_self(void)
{
	/* in a sandbox no system call of ours; gettid(), not
	 * syscall(SYS_gettid): the shim's syscall() reads six arguments, as
	 * libc's does, past the none given */
	if (__builtin_expect(!self_tid, 0))
		self_tid = tid_word(shunt_lock_probe_off ? 1 : gettid());
	return self_tid;
}

/* A forked child is another thread: its id now, before it may enter a
 * sandbox - its only thread's, the process's own (no gettid() of ours:
 * its code page alone was a page fault in every child). */
SHUNT_CHILD_PATH void shunt_lock_forget_self(pid_t pid)
{
	self_tid = tid_word(pid);
}

static int holder_dead(uint32_t v)
{
	pid_t t = (pid_t)(v & LOCK_TID);

	if (shunt_lock_probe_off || !t || (uint32_t)t == self_tid)
		return 0;
	return kill(t, 0) && errno == ESRCH;
}

static uint64_t ns_since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (uint64_t)(b.tv_sec - a->tv_sec) * 1000000000ull + (uint64_t)b.tv_nsec - (uint64_t)a->tv_nsec;
}

int shunt_lock_bounded(_Atomic uint32_t *l, uint64_t timeout_ns)
{
	struct timespec start, slice = { 0, 10 * 1000 * 1000 };
	uint32_t me = lock_self(), c = 0;
	int e;

	shunt_crit_enter();
	if (__builtin_expect(__atomic_compare_exchange_n(l, &c, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 1))
		return 0;
	e = errno;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		uint64_t waited;
		if (!c) { /* free: taken with the waiters' mark (others may sleep) */
			if (__atomic_compare_exchange_n(l, &c, me | LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				break;
			continue;
		}
		if (!(c & LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(l, &c, c | LOCK_WAITERS, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		futex(l, FUTEX_WAIT, c | LOCK_WAITERS, &slice);
		c = __atomic_load_n(l, __ATOMIC_RELAXED);
		if (!c)
			continue;
		waited = ns_since(&start);
		if (waited >= LOCK_PROBE_NS && holder_dead(c)) {
			if (__atomic_compare_exchange_n(l, &c, me | LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				break; /* the holder is gone: its lock is ours */
			continue;
		}
		if (timeout_ns && waited > timeout_ns) {
			shunt_crit_leave();
			errno = e;
			return -ETIMEDOUT;
		}
	}
	errno = e;
	return 0;
}

void shunt_lock(_Atomic uint32_t *l)
{
	shunt_lock_bounded(l, 0);
}

int shunt_trylock(_Atomic uint32_t *l)
{
	uint32_t c = 0;

	shunt_crit_enter();
	if (__atomic_compare_exchange_n(l, &c, lock_self(), 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	shunt_crit_leave();
	return -1;
}

void shunt_unlock(_Atomic uint32_t *l)
{
	if (__atomic_exchange_n(l, 0, __ATOMIC_RELEASE) & LOCK_WAITERS)
		futex(l, FUTEX_WAKE, 1, NULL);
	shunt_crit_leave();
}
