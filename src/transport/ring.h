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

void shunt_lock(_Atomic uint32_t *l);
/* The lock, or -ETIMEDOUT after timeout_ns (0: no bound, as shunt_lock):
 * holders never sleep with it (conn.c), so a longer wait means a dead
 * holder - taken over once the kernel says it is gone (ring.c) - or a
 * peer that wrote the word (a lock word in shared memory is the peer's to
 * scribble on). */
int shunt_lock_bounded(_Atomic uint32_t *l, uint64_t timeout_ns);
void shunt_unlock(_Atomic uint32_t *l);
int shunt_trylock(_Atomic uint32_t *l); /* 0 if taken */
void shunt_lock_forget_self(void);      /* in a forked child: its thread id is new */
extern int shunt_lock_probe_off;        /* no kill(2) to look for a dead holder (sandbox) */
void shunt_futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns);
void shunt_futex_wake(_Atomic uint32_t *w, int n);

#endif
