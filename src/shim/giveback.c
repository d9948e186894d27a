/* SPDX-License-Identifier: MIT */
/*
 * giveback.c - shunt's descriptors go back to a program that runs out.
 *
 * A shared-memory connection borrows the program's own number of its
 * socket (fdtab.c) - a duplicate of shunt's only once the program's
 * number closed while another of its holders goes on; an arena holds
 * three (its memory and two doorbells), an RDMA connection two (the
 * duplicate, its own doorbell);
 * TCP's connection holds none.  A program that uses all of
 * RLIMIT_NOFILE under TCP would meet EMFILE sooner under shunt (issue #13,
 * item 9).  So when a call of the program's that makes a descriptor
 * (socket, accept, dup, fcntl F_DUPFD, epoll_create, open, openat, pipe,
 * socketpair, eventfd, timerfd_create, signalfd, inotify_init, memfd_create:
 * interpose.c) fails with EMFILE while shunt holds descriptors, idle
 * connections move to TCP at the exact byte - the move made before a
 * descriptor is passed (move.c), with reason `descriptors` - and what they
 * held is closed; the call is made again.  The same happens as soon as a
 * descriptor the program gets lands in its reserve (hidefd.c: the last
 * numbers below the limit, for libc's own calls, which nothing retries).
 * For PRESSURE_NS after, new
 * connections stay plain (reason `descriptors`): each then costs the
 * program what TCP's costs.
 *
 * Idle means: no thread in a call on it (its references are the
 * descriptor table's and epoll sets' only), one descriptor in one
 * process, not shut down (the transport's idle_here), and either both
 * halves on the rings with all we wrote read by the peer, or both on the
 * socket already (its peer gave it back, and what the peer's ring held
 * was read).  The first condition leaves the peer nothing to read from
 * our ring after the move, so its side can be given back too, whenever it
 * needs: a side whose ring still holds bytes for its program needs the
 * ring (and its descriptor) until they are read.  The program's epoll
 * registrations of it become the kernel's own (epoll.c, ep_retire).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include "shim.h"

#define PRESSURE_NS 10000000000ull /* new connections plain after a give-back */
#define BATCH 64                   /* descriptors given back per EMFILE, at least */

#define EMPTY_NS 100000000ull         /* after finding nothing, look again this much later */

static _Atomic uint64_t pressure_until;
static uint64_t empty_at; /* the last look that found nothing to give */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int fd_pressure(void)
{
	uint64_t u = __atomic_load_n(&pressure_until, __ATOMIC_RELAXED);

	return u && shunt_now_ns() < u;
}

struct pick {
	int *fd;
	int n, cap;
};

static int idle(const struct conn *c)
{
	return c->tp->idle_here && c->tp->idle_here(c);
}

/* Every accelerated descriptor, looked at one by one afterwards (under
 * a reference): the table is not held while connections move. */
static void pick_one(int fd, struct sk *s, void *arg)
{
	struct pick *p = arg;
	int *v;

	if (s->kind != SK_CONN)
		return;
	if (p->n == p->cap) {
		if (!(v = realloc(p->fd, (size_t)(p->cap ? 2 * p->cap : 256) * sizeof *v)))
			return;
		p->fd = v;
		p->cap = p->cap ? 2 * p->cap : 256;
	}
	p->fd[p->n++] = fd;
}

/* Both halves on the socket, nothing left in the rings for us to read or
 * for the peer to be sent. */
static int on_socket(struct conn *c)
{
	if (move_held(c))
		return 0; /* bytes for reads through shunt only */
	if (c->passed)
		return 1;
	conn_refresh(c); /* the peer's message, our resend */
	return __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 && !ring_used(&c->rx) &&
	       __atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE) && !move_pending(c);
}

/* We hold one reference of s: 1 if its connection is plain TCP now and
 * shunt's descriptors for it are closed. */
static int give_back_one(int fd, struct sk *s)
{
	struct conn *c = s->conn;
	int blocked = 0, base = 2 + ep_regs_of(fd, s, &blocked);

	if (blocked || __atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) != base)
		return 0; /* in a call, dup'd, or a one-shot report pending */
	if (!conn_moving(c) && !c->mv.rx && !c->passed) {
		if (ring_used(&c->tx) || move_pass(s, SHUNT_R_DESCRIPTORS))
			return 0;
	} else if (!on_socket(c)) {
		return 0;
	}
	return conn_retire(fd, s, SHUNT_R_DESCRIPTORS);
}

/* fd's connection is on its socket, all of it (one reference of s ours):
 * from now on shunt sees a plain TCP socket there (reason why), the
 * connection and its descriptors freed.  A call from now on sees a plain
 * socket; one that came in before (counted) keeps the connection - moved,
 * on its socket: correct either way - and then it stays (0). */
int conn_retire(int fd, struct sk *s, int why)
{
	struct conn *c = s->conn;
	int blocked = 0, base = 2 + ep_regs_of(fd, s, &blocked);

	if (blocked || __atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) != base)
		return 0;
	s->reason = why;
	__atomic_store_n(&s->kind, SK_TCP, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) != base) {
		__atomic_store_n(&s->kind, SK_CONN, __ATOMIC_SEQ_CST);
		return 0;
	}
	ep_retire(fd, s);
	s->conn = NULL;
	conn_free(c);
	stats_update(s, fd);
	return 1;
}

/* A forked child: the give-back's mutex fresh (another thread of the
 * parent may have held it at the fork). */
SHUNT_CHILD_PATH void giveback_atfork_child(void)
{
	shunt_mutex_reset(&lock);
}

/* A descriptor just made for the program landed in its reserve (the last
 * numbers below RLIMIT_NOFILE, hidefd.c): the table is that full, and
 * libc's own calls, which nothing retries, would meet EMFILE next - give
 * back now. */
void fd_room_after(int fd)
{
	if (fd_in_reserve(fd)) /* one compare unless it is there */
		fd_give_back();
}

int fd_give_back(void)
{
	static __thread int inside; /* a call of ours that met EMFILE in here */
	struct pick p = { .fd = NULL };
	int e = errno, freed = 0;

	if (!shunt_active || shunt_sandboxed || inside)
		return 0;
	inside = 1;
	shunt_mutex_lock(&lock);
	__atomic_store_n(&pressure_until, shunt_now_ns() + PRESSURE_NS, __ATOMIC_RELAXED);
	if (empty_at && shunt_now_ns() - empty_at < EMPTY_NS) {
		shunt_mutex_unlock(&lock); /* a program retrying at EMFILE: not a scan each time */
		inside = 0;
		errno = e;
		return 0;
	}
	fd_reserve_mark(1); /* the limit may have moved */
	rdv_offers_settle_all(); /* a pending offer is no connection to give back until it settles */
	fdtab_each(pick_one, &p);
	for (int i = 0; i < p.n && freed < BATCH; i++) {
		struct sk *s = fdtab_get(p.fd[i]);
		if (!s)
			continue;
		if (s->kind == SK_CONN && idle(s->conn))
			freed += give_back_one(p.fd[i], s);
		sk_put(s);
	}
	free(p.fd);
	freed += transports_drop_unused();
	empty_at = freed ? 0 : shunt_now_ns();
	shunt_mutex_unlock(&lock);
	if (freed)
		shunt_log("descriptors: the program ran out; %d of shunt's given back", freed);
	inside = 0;
	errno = e;
	return freed;
}
