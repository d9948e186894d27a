/* SPDX-License-Identifier: MIT */
/*
 * conn_int.h - between conn.c (the data path) and conn_wait.c (its waits).
 */
#ifndef SHUNT_CONN_INT_H
#define SHUNT_CONN_INT_H
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"

#define REFRESH_INTERVAL_NS 1000000ull /* non-blocking reader: look for FIN */

/* The "wake me" words hold who sleeps: a poll/epoll sleeper on our
 * doorbell, or a blocking call on the word itself (a futex: one system
 * call to sleep, one to wake). */
#define WANT_EFD 1u
#define WANT_FUTEX 2u
#define SLEEP_SLICE_MS 100 /* a futex sleeper looks at the TCP socket this often */
#define STUCK_MS 50        /* both rings full, nothing read: then to TCP (conn_write_stuck) */
#define STUCK_LOOK_MS 20   /* ... looked at this often meanwhile */

struct conn_stuck {
	uint64_t since, rx_cons, tx_cons;
};
int conn_write_stuck(struct conn *c, struct conn_stuck *st);
int conn_settle_wait(struct sk *s, int *deadline, size_t done, uint64_t *sig0);

/* A want word as a futex: sleep on it, wake its sleepers. */
static inline long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* Spin, then sleep until want (POLLIN/POLLOUT) may be satisfied, with the
 * kernel's EINTR rules for recv/send (done: bytes moved so far).  0 to
 * look again, or -EAGAIN (SO_*TIMEO), -EINTR, -EDEADLK (a short write). */
int conn_wait_for(struct sk *s, unsigned want, int *deadline, size_t done, uint64_t *sig0);
void conn_probe_gone(struct conn *c);  /* after the peer's FIN: is it gone? */
#endif
