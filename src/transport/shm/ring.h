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
#include <sys/uio.h>
#include "shunt/wire.h"

struct ring {
	struct shunt_ring_ctl *ctl;
	uint8_t *data;
	uint32_t size;      /* power of two */
	uint64_t cons_seen; /* writer's cached copy of cons: space known without
			     * touching the reader's cache line (it only grows) */
};

static inline uint64_t ring_used(const struct ring *r)
{
	uint64_t p = __atomic_load_n(&r->ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t c = __atomic_load_n(&r->ctl->cons, __ATOMIC_ACQUIRE);
	return p - c;
}

static inline uint64_t ring_space(const struct ring *r)
{
	return r->size - ring_used(r);
}

/* Copy up to the free space from iov into the ring; returns bytes written. */
size_t ring_writev(struct ring *r, const struct iovec *iov, int iovcnt, size_t max);
/* Copy up to len bytes out of the ring into iov; consume them unless peek. */
size_t ring_readv(struct ring *r, const struct iovec *iov, int iovcnt, size_t max, int peek);
/* Consume n bytes without copying (after a peek, or to discard). */
void ring_consume(struct ring *r, size_t n);

void shunt_lock(_Atomic uint32_t *l);
void shunt_unlock(_Atomic uint32_t *l);
int shunt_trylock(_Atomic uint32_t *l); /* 0 if taken */

#endif
