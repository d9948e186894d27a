/* SPDX-License-Identifier: MIT */
/* ring.c - the byte ring (see ring.h for the ordering contract). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
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
