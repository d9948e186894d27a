/* SPDX-License-Identifier: MIT */
/*
 * ring.h - single-producer single-consumer byte ring in shared memory.
 *
 * Cursors are free-running 64-bit byte counts (SMC's producer/consumer
 * cursors without the wrap sequence number), so "used = prod - cons" never
 * needs a wrap flag.  The writer publishes prod with release order after
 * copying; the reader reads prod with acquire order before copying, and the
 * mirror for cons; that is the whole memory-ordering contract.  Producers and
 * consumers on one side are serialised by the futex locks in the control
 * block, so threads and forked processes may share a connection.
 */
#ifndef SHUNT_RING_H
#define SHUNT_RING_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "shunt/wire.h"
#include "../base/lock.h"

/*
 * The control block lives in memory the peer can write (docs/security.md):
 * every cursor read from it is checked before it decides a copy.  The data
 * pointer and the size are ours (checked once at attach), offsets are masked
 * by size - 1, and a copy is never longer than size, so no value the peer
 * writes moves an access outside this ring.  A peer that breaks the rules
 * (prod - cons > size, a cursor going backwards) makes ring_readv and
 * ring_writev return -EPROTO: the caller ends that connection.
 */
struct ring {
	struct shunt_ring_ctl *ctl;
	uint8_t *data;
	uint32_t size;      /* power of two */
	uint64_t cons_seen; /* writer's cached copy of cons: space known without
			     * touching the reader's cache line (it only grows) */
	uint64_t prod_seen; /* reader's last view of prod (it only grows) */
};

/* Bytes readable.  A broken ring reads as "something to do" (1) so that a
 * waiter wakes and the call that follows finds the violation. */
static inline uint64_t ring_used(const struct ring *r)
{
	uint64_t p = __atomic_load_n(&r->ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t c = __atomic_load_n(&r->ctl->cons, __ATOMIC_ACQUIRE);
	return p - c <= r->size ? p - c : 1;
}

static inline uint64_t ring_space(const struct ring *r)
{
	uint64_t p = __atomic_load_n(&r->ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t c = __atomic_load_n(&r->ctl->cons, __ATOMIC_ACQUIRE);
	return p - c <= r->size ? r->size - (p - c) : 1;
}

/* Copy up to the free space from iov into the ring; returns bytes written,
 * or -EPROTO if the cursors are impossible. */
ssize_t ring_writev(struct ring *r, const struct iovec *iov, int iovcnt, size_t max);
/* Copy up to len bytes out of the ring into iov (iov NULL: no copy, as
 * MSG_TRUNC); consume them unless peek.  Returns the bytes read, or
 * -EPROTO if the cursors are impossible. */
ssize_t ring_readv(struct ring *r, const struct iovec *iov, int iovcnt, size_t max, int peek);
/* Consume n bytes without copying (after a peek, or to discard). */
void ring_consume(struct ring *r, size_t n);

#endif
