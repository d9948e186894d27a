/* SPDX-License-Identifier: MIT */
/*
 * lock.h - futex words shared between processes (lock.c): the rings' locks
 * (any transport's), the registry's and segments' wait words.
 */
#ifndef SHUNT_LOCK_H
#define SHUNT_LOCK_H
#include <pthread.h>
#include <stdint.h>

/*
 * A thread inside a lock of shunt's (a ring's, a mutex of the library's)
 * is in a critical section: a handler of the application's that ran there
 * and called into shunt (a write on the connection whose lock its thread
 * holds, a close that takes the descriptor table's mutex) would wait for
 * itself.  The kernel runs handlers only between system calls, where
 * none of its socket locks are held; so the shim's signal trampoline
 * (src/shim/signal.c) holds back a handler due while the depth is above
 * zero - the signal blocked and queued again - and the last unlock lets
 * it in (shunt_crit_flush).  Enter before a lock is taken (a signal
 * between the take and the count would find it held and the depth zero),
 * leave after it is given back.
 */
extern __thread __attribute__((tls_model("initial-exec"))) int shunt_crit_depth;
extern __thread __attribute__((tls_model("initial-exec"))) int shunt_crit_deferred;
extern void (*shunt_crit_flush_fn)(void); /* signal.c's: the held-back signals let in */
static inline void shunt_crit_enter(void)
{
	shunt_crit_depth++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
/* The signals held back so far come in (the depth is zero). */
static inline void shunt_crit_let_in(void)
{
	if (__builtin_expect(shunt_crit_deferred, 0) && shunt_crit_flush_fn)
		shunt_crit_flush_fn();
}
static inline void shunt_crit_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (--shunt_crit_depth <= 0) {
		shunt_crit_depth = 0;
		shunt_crit_let_in();
	}
}
/* A system call that may block for as long as the peer likes, made with a
 * lock held (a moved connection's socket, move.c): handlers run in it
 * as in the kernel's own call - held back, one that ends the wait (an
 * alarm's siglongjmp out of a blocked write) would never run.  One that
 * calls into shunt meanwhile meets its thread's lock (the window's cost).
 * Those held back so far come in now. */
static inline int shunt_crit_open(void)
{
	int d = shunt_crit_depth;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	shunt_crit_depth = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	shunt_crit_let_in();
	return d;
}
static inline void shunt_crit_close(int depth)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	shunt_crit_depth = depth;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
/* The library's own mutexes: pthread's, counted as above (take: its
 * lock or trylock). */
static inline int shunt_mutex_take(pthread_mutex_t *m, int (*take)(pthread_mutex_t *))
{
	int r;

	shunt_crit_enter();
	if ((r = take(m)))
		shunt_crit_leave();
	return r;
}
static inline int shunt_mutex_lock(pthread_mutex_t *m)
{
	return shunt_mutex_take(m, pthread_mutex_lock);
}
static inline int shunt_mutex_trylock(pthread_mutex_t *m)
{
	return shunt_mutex_take(m, pthread_mutex_trylock);
}
static inline int shunt_mutex_unlock(pthread_mutex_t *m)
{
	int r = pthread_mutex_unlock(m);

	shunt_crit_leave();
	return r;
}

void shunt_lock(_Atomic uint32_t *l);
/* The lock, or -ETIMEDOUT after timeout_ns (0: no bound, as shunt_lock):
 * holders never sleep with it (conn.c), so a longer wait means a dead
 * holder - taken over once the kernel says it is gone (lock.c) - or a
 * peer that wrote the word (a lock word in shared memory is the peer's to
 * scribble on). */
int shunt_lock_bounded(_Atomic uint32_t *l, uint64_t timeout_ns);
void shunt_unlock(_Atomic uint32_t *l);
int shunt_trylock(_Atomic uint32_t *l); /* 0 if taken */
void shunt_lock_forget_self(pid_t pid); /* in a forked child: its thread id is new (its pid) */
extern int shunt_lock_probe_off;        /* no kill(2) to look for a dead holder (sandbox) */
void shunt_futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns);
void shunt_futex_wake(_Atomic uint32_t *w, int n);

#endif
