/* SPDX-License-Identifier: MIT */
/* ring.c - the byte ring (see ring.h for the ordering contract). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "ring.h"

/* Copy between a linear buffer and the ring at a free-running position,
 * splitting at the wrap (at most two memcpy, like SMC's two RDMA writes). */
static void ring_copy(struct ring *r, uint64_t pos, uint8_t *buf, size_t n, int to_ring)
{
	size_t off = pos & (r->size - 1);
	size_t first = r->size - off < n ? r->size - off : n;

	if (to_ring) {
		memcpy(r->data + off, buf, first);
		memcpy(r->data, buf + first, n - first);
	} else {
		memcpy(buf, r->data + off, first);
		memcpy(buf + first, r->data, n - first);
	}
}

static size_t iov_walk(struct ring *r, uint64_t pos, const struct iovec *iov, int iovcnt,
		       size_t n, int to_ring)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < n; i++) {
		size_t take = iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
		ring_copy(r, pos + done, iov[i].iov_base, take, to_ring);
		done += take;
	}
	return done;
}

ssize_t ring_writev(struct ring *r, const struct iovec *iov, int iovcnt, size_t max)
{
	uint64_t prod = __atomic_load_n(&r->ctl->prod, __ATOMIC_RELAXED);
	uint64_t space = r->size - (prod - r->cons_seen);
	size_t n;

	/* The cached cursor can be stale (or from another writer process of
	 * this side): refresh it when it is not enough. */
	if (space < max || prod - r->cons_seen > r->size) {
		uint64_t cons = __atomic_load_n(&r->ctl->cons, __ATOMIC_ACQUIRE);
		/* the reader consumed no more than was written, and never
		 * goes back: anything else is a broken (or hostile) peer */
		if (prod - cons > r->size || cons - r->cons_seen > prod - r->cons_seen)
			return -EPROTO;
		r->cons_seen = cons;
		space = r->size - (prod - cons);
	}
	n = max < space ? max : space;

	if (!n)
		return 0;
	n = iov_walk(r, prod, iov, iovcnt, n, 1);
	__atomic_store_n(&r->ctl->prod, prod + n, __ATOMIC_RELEASE);
	return (ssize_t)n;
}

ssize_t ring_readv(struct ring *r, const struct iovec *iov, int iovcnt, size_t max, int peek)
{
	uint64_t cons = __atomic_load_n(&r->ctl->cons, __ATOMIC_RELAXED);
	uint64_t prod = __atomic_load_n(&r->ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t used = prod - cons;
	size_t n;

	/* at most a ring's worth unread, and the writer never goes back */
	if (used > r->size || prod - r->prod_seen > (uint64_t)1 << 62)
		return -EPROTO;
	r->prod_seen = prod;
	n = max < used ? max : used;
	if (!n)
		return 0;
	if (iov) /* NULL: discard (MSG_TRUNC) */
		n = iov_walk(r, cons, iov, iovcnt, n, 0);
	if (!peek)
		__atomic_store_n(&r->ctl->cons, cons + n, __ATOMIC_RELEASE);
	return (ssize_t)n;
}

void ring_consume(struct ring *r, size_t n)
{
	__atomic_fetch_add(&r->ctl->cons, n, __ATOMIC_RELEASE);
}

/* A three-state futex mutex (0 free, 1 locked, 2 locked with waiters),
 * usable across processes because the word lives in the shared segment. */
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

int shunt_lock_bounded(_Atomic uint32_t *l, uint64_t timeout_ns)
{
	struct timespec start, now, slice = { 0, 50 * 1000 * 1000 };
	uint32_t c = 0;

	if (__atomic_compare_exchange_n(l, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	if (timeout_ns)
		clock_gettime(CLOCK_MONOTONIC, &start);
	if (c != 2)
		c = __atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		futex(l, FUTEX_WAIT, 2, timeout_ns ? &slice : NULL);
		c = __atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE);
		if (!c || !timeout_ns)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((uint64_t)(now.tv_sec - start.tv_sec) * 1000000000ull + (uint64_t)now.tv_nsec -
			    (uint64_t)start.tv_nsec > timeout_ns)
			return -ETIMEDOUT;
	}
	return 0;
}

void shunt_lock(_Atomic uint32_t *l)
{
	shunt_lock_bounded(l, 0);
}

int shunt_trylock(_Atomic uint32_t *l)
{
	uint32_t c = 0;

	return __atomic_compare_exchange_n(l, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ? 0 : -1;
}

void shunt_unlock(_Atomic uint32_t *l)
{
	if (__atomic_exchange_n(l, 0, __ATOMIC_RELEASE) == 2)
		futex(l, FUTEX_WAKE, 1, NULL);
}
