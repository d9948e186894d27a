/* SPDX-License-Identifier: MIT */
/*
 * fdtab.c - fd number -> struct sk.
 *
 * Two levels of 4096-entry chunks, allocated on first use and never freed, so
 * a lookup is two loads and needs no lock.  A lookup takes a reference; a
 * concurrent close() removes the entry and drops the table's reference, and
 * the object is finished with the last user.  struct sk memory is
 * type-stable (recycled through a free list, never returned to malloc), so
 * a lookup racing with close may touch a dead or recycled object safely: it
 * only takes a reference if the count is not zero and then checks that the
 * table still holds that object (the SLAB_TYPESAFE_BY_RCU pattern).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shim.h"
#include "epoll_int.h"
#include "../base/real.h"

#define CHUNK_BITS 12
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 4096 /* fds up to 16M */

static struct sk *_Atomic *chunks[NCHUNKS];
/* one past the highest descriptor ever given an entry: fdtab_each looks
 * no further (a forked child and an exit look at every entry - every
 * PostgreSQL backend does both - and 4,096 chunk pointers and a chunk of
 * 4,096 entries are 64 KB for a process of a few descriptors) */
static _Atomic unsigned fd_hi;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sk *free_sks;

static struct sk *_Atomic *slot(int fd, int create)
{
	unsigned hi, lo;
	struct sk *_Atomic *c;

	if (fd < 0 || (unsigned)fd >= NCHUNKS * CHUNK)
		return NULL;
	hi = (unsigned)fd >> CHUNK_BITS;
	lo = (unsigned)fd & (CHUNK - 1);
	c = __atomic_load_n(&chunks[hi], __ATOMIC_ACQUIRE);
	if (!c && create) {
		shunt_mutex_lock(&lock);
		c = chunks[hi];
		if (!c) {
			c = calloc(CHUNK, sizeof *c);
			__atomic_store_n(&chunks[hi], c, __ATOMIC_RELEASE);
		}
		shunt_mutex_unlock(&lock);
	}
	return c ? &c[lo] : NULL;
}

int sk_tryref(struct sk *s)
{
	int r = __atomic_load_n(&s->refs, __ATOMIC_ACQUIRE);

	do {
		if (r <= 0)
			return 0;
	} while (!__atomic_compare_exchange_n(&s->refs, &r, r + 1, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return 1;
}

struct sk *fdtab_peek(int fd)
{
	struct sk *_Atomic *p = slot(fd, 0);
	struct sk *s;

	if (!p)
		return NULL;
	for (;;) {
		s = __atomic_load_n(p, __ATOMIC_ACQUIRE);
		if (!s)
			return NULL;
		if (!sk_tryref(s))
			continue; /* dying: the table no longer holds it, or soon won't */
		if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == s)
			return s;
		sk_put(s); /* closed (and maybe reused) meanwhile */
	}
}

/* Every call on a connection but a send that fits the slot (early.c)
 * finds its offer settled. */
static struct sk *settled(struct sk *s, int fd)
{
	if (s && __builtin_expect(__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL, 0))
		rdv_offer_settle(s);
	/* (and a server's CONFIRM if it came: inband.c - the calls that
	 * must know wait for it themselves) */
	if (s && __builtin_expect(__atomic_load_n(&s->hs, __ATOMIC_RELAXED) == HS_CONFIRM, 0))
		inband_confirm_try(s, fd);
	return s;
}

struct sk *fdtab_get(int fd)
{
	return settled(fdtab_peek(fd), fd);
}

/* ---- borrowed numbers (conn.borrowed) ----
 * A connection the rendezvous made uses the program's own descriptor as
 * its socket: no duplicate of ours - a dup and a close less on each side
 * of each connection, and no descriptor of shunt's for it (issue #13,
 * items 9 and 10).  The number is the connection's while this table maps
 * it to the connection.  Whatever ends that - close, close_range, fclose
 * (fdtab_closing), a dup2 or dup3 over it (fdtab_unborrow, before the
 * kernel replaces it) - first either finishes with the socket while the
 * number is still its (the connection's last holder: conn_closing, now),
 * or moves the connection to another number: a duplicate of ours, as
 * before this, else the program's other number for the same socket. */
struct other {
	const struct sk *s;
	int fd, found;
};

static void other_number(int fd, struct sk *s, void *arg)
{
	struct other *o = arg;

	if (s == o->s && fd != o->fd && o->found < 0)
		o->found = fd;
}

static void unborrow(struct sk *s, int fd, int holders)
{
	struct conn *c = s ? s->conn : NULL;
	struct other o = { .s = s, .fd = fd, .found = -1 };
	int d;

	if (!c || s->kind != SK_CONN || !c->borrowed || __atomic_load_n(&c->tcp_fd, __ATOMIC_RELAXED) != fd)
		return;
	if (__atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) > holders) { /* it goes on without this number */
		d = fd_dup_hidden(fd);
		AGAIN_IF_EMFILE(d, fd_dup_hidden(fd));
		if (d >= 0) {
			__atomic_store_n(&c->borrowed, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&c->tcp_fd, d, __ATOMIC_RELEASE);
			return;
		}
		fdtab_each(other_number, &o);
		if (o.found >= 0) {
			__atomic_store_n(&c->tcp_fd, o.found, __ATOMIC_RELEASE);
			return;
		}
		shunt_warn("fd %d: no descriptor left to keep its connection's socket: its last close is now", fd);
	}
	conn_closing(c);
	__atomic_store_n(&c->tcp_fd, -1, __ATOMIC_RELEASE);
}

/* A dup2 or dup3 is about to replace fd (not through close: the kernel
 * does it atomically, and may refuse). */
void fdtab_unborrow(int fd)
{
	struct sk *s = fdtab_peek(fd);

	if (s) {
		/* moved even as its last holder: the kernel may refuse */
		unborrow(s, fd, 0);
		sk_put(s);
	}
}

void fdtab_set(int fd, struct sk *s)
{
	struct sk *_Atomic *p = slot(fd, 1);
	struct sk *old;

	if (!p) {
		sk_put(s);
		return;
	}
	for (unsigned hi = __atomic_load_n(&fd_hi, __ATOMIC_RELAXED); hi <= (unsigned)fd;)
		if (__atomic_compare_exchange_n(&fd_hi, &hi, (unsigned)fd + 1, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			break;
	old = __atomic_exchange_n(p, s, __ATOMIC_ACQ_REL);
	if (old && old->conn && old->conn->borrowed && old->conn->tcp_fd == fd)
		old->conn->tcp_fd = -1; /* closed past the wrappers, and the number given again */
	if (old)
		sk_put(old);
}

struct sk *fdtab_take(int fd)
{
	struct sk *_Atomic *p = slot(fd, 0);

	struct sk *s;

	if (!p || !__atomic_load_n(p, __ATOMIC_ACQUIRE))
		return NULL;
	s = __atomic_exchange_n(p, NULL, __ATOMIC_ACQ_REL);
	return settled(s, fd); /* a close (or dup2 over it): the first bytes reach the server first */
}

struct sk *fdtab_closing(int fd)
{
	struct sk *s = fdtab_take(fd);

	if (s && s->kind == SK_CONN) {
		ep_forget_fd(fd);
		unborrow(s, fd, 1); /* the reference the table gave us */
	}
	return s;
}

SHUNT_CHILD_PATH void fdtab_atfork_child(void)
{
	shunt_mutex_reset(&lock);
}

SHUNT_CHILD_PATH static void each(void (*fn)(int fd, struct sk *s, void *arg), void *arg, int held)
{
	unsigned end = __atomic_load_n(&fd_hi, __ATOMIC_ACQUIRE);

	for (unsigned hi = 0; hi * CHUNK < end; hi++) {
		struct sk *_Atomic *c = __atomic_load_n(&chunks[hi], __ATOMIC_ACQUIRE);
		if (!c)
			continue;
		for (unsigned lo = 0; lo < CHUNK && hi * CHUNK + lo < end; lo++) {
			struct sk *s = __atomic_load_n(&c[lo], __ATOMIC_ACQUIRE);
			if (!s)
				continue;
			if (!held) {
				fn((int)(hi * CHUNK + lo), s, arg);
			} else if (sk_tryref(s)) {
				if (__atomic_load_n(&c[lo], __ATOMIC_ACQUIRE) == s)
					fn((int)(hi * CHUNK + lo), s, arg);
				sk_put(s);
			}
		}
	}
}

SHUNT_CHILD_PATH void fdtab_each(void (*fn)(int fd, struct sk *s, void *arg), void *arg)
{
	each(fn, arg, 0);
}

/* fdtab_each with each entry held for fn's call: for a walk that reads an
 * entry's connection while another thread may close its descriptor (a
 * fork's, an exec's) - that close's last reference freed the connection
 * under fn, and an sk_ref of fn's then revived an entry already let go (a
 * fork among connections in flight over RDMA: freed twice).  fn's own
 * sk_ref keeps the entry past the call; one whose last reference goes
 * with ours is let go here, as its close would have. */
void fdtab_each_held(void (*fn)(int fd, struct sk *s, void *arg), void *arg)
{
	each(fn, arg, 1);
}

/* The descriptors that are accelerated connections now, for a caller
 * that acts on each outside the walk (a move may sleep): their count, the
 * array in *fds (free it), or -ENOMEM. */
struct conn_list {
	int *fd, n, cap;
};

static void conn_collect(int fd, struct sk *s, void *arg)
{
	struct conn_list *l = arg;
	int *v;

	if (s->kind != SK_CONN || l->n < 0)
		return;
	if (l->n == l->cap) {
		if (!(v = realloc(l->fd, sizeof *v * (size_t)(l->cap ? 2 * l->cap : 16)))) {
			l->n = -1;
			return;
		}
		l->fd = v;
		l->cap = l->cap ? 2 * l->cap : 16;
	}
	l->fd[l->n++] = fd;
}

int fdtab_conns(int **fds)
{
	struct conn_list l = { 0 };

	fdtab_each(conn_collect, &l);
	if (l.n < 0) {
		free(l.fd);
		l.fd = NULL;
		l.n = -ENOMEM;
	}
	*fds = l.fd;
	return l.n;
}

/* ---- the free objects ----
 * Each thread keeps a few of the objects it let go (a socket is most
 * often made and closed by one thread), and takes from them first: the
 * process-wide list and its lock - a line every thread of a busy server
 * wrote twice a connection - only past SK_CACHE or with none left.  A
 * thread's are given back when it ends.  A signal handler that closes or
 * makes a socket while its thread is in here (busy) uses the shared list;
 * no object is ever freed to malloc, in either place (type-stable). */
#define SK_CACHE 16
static __thread __attribute__((tls_model("initial-exec"))) struct sk_cache {
	struct sk *head;
	unsigned n;
	volatile sig_atomic_t busy;
	int keyed; /* the destructor set for this thread; -1 once it ran (a
		    * later destructor's close goes to the shared list) */
} sk_cache;
static pthread_key_t sk_key;
static pthread_once_t sk_once = PTHREAD_ONCE_INIT;
static int sk_key_ok;

/* The chain first .. last (linked by next_free) onto the shared list. */
static void free_list_push(struct sk *first, struct sk *last)
{
	shunt_mutex_lock(&lock);
	last->next_free = free_sks;
	free_sks = first;
	shunt_mutex_unlock(&lock);
}

static void sk_cache_gone(void *arg)
{
	struct sk_cache *c = arg;
	struct sk *last = c->head;

	c->busy = 1;
	if (last) {
		while (last->next_free)
			last = last->next_free;
		free_list_push(c->head, last);
	}
	c->head = NULL;
	c->n = 0;
	c->keyed = -1;
	c->busy = 0;
}

static void sk_key_make(void)
{
	sk_key_ok = !pthread_key_create(&sk_key, sk_cache_gone);
}

static struct sk *sk_cache_pop(void)
{
	struct sk_cache *c = &sk_cache;
	struct sk *s;

	if (c->busy || !c->head)
		return NULL;
	c->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	s = c->head;
	c->head = s->next_free;
	c->n--;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	c->busy = 0;
	return s;
}

static int sk_cache_push(struct sk *s)
{
	struct sk_cache *c = &sk_cache;

	if (c->busy || c->n >= SK_CACHE || c->keyed < 0)
		return 0;
	c->busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!c->keyed) { /* its first: given back when the thread ends */
		pthread_once(&sk_once, sk_key_make);
		c->keyed = sk_key_ok && !pthread_setspecific(sk_key, c);
		if (!c->keyed) {
			c->busy = 0;
			return 0;
		}
	}
	s->next_free = c->head;
	c->head = s;
	c->n++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	c->busy = 0;
	return 1;
}

struct sk *sk_new(int kind, int domain)
{
	struct sk *s = sk_cache_pop();

	if (!s) {
		shunt_mutex_lock(&lock);
		s = free_sks;
		if (s)
			free_sks = s->next_free;
		shunt_mutex_unlock(&lock);
	}
	if (!s && !(s = calloc(1, sizeof *s)))
		return NULL;
	/* Everything but the count first; the count last, with release, so a
	 * racing lookup that sees it non-zero sees a whole object. */
	memset((char *)s + sizeof s->refs, 0, sizeof *s - sizeof s->refs);
	s->kind = kind;
	s->domain = domain;
	s->reason = SHUNT_R_PEER_NOT_SHUNT;
	__atomic_store_n(&s->refs, 1, __ATOMIC_RELEASE);
	return s;
}

void sk_put(struct sk *s)
{
	int last = -1;

	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (s->short_port)
		rdv_note_end(s);
	else if (!s->is_client && (s->kind == SK_CONN || s->kind == SK_TCP) && s->has_tuple &&
		 (!s->fork_pid || s->fork_pid == shunt_pid()))
		rdv_note_served(s); /* (not in a forked child: its look at the registry,
				       a shared mapping, would be a page fault a connection) */
	if (__builtin_expect(__atomic_load_n(&s->hs, __ATOMIC_RELAXED) == HS_CONFIRM, 0))
		inband_confirm_drop(s);
	if (s->conn) {
		if (s->kind == SK_CONN)
			conn_closing(s->conn);
		last = conn_free(s->conn);
	}
	if (s->ep)
		ep_free(s->ep);
	if (s->kind == SK_LISTEN && s->listen_port)
		rdv_unlisten(s->listen_port);
	if (s->stat)
		stats_free(s, s->stat, last);
	s->conn = NULL;
	s->ep = NULL;
	s->stat = NULL;
	if (!sk_cache_push(s))
		free_list_push(s, s);
}

/* ---- close_range() and closefrom() ---- */

struct taken {
	unsigned first, last;
	struct sk **v;
	int n, cap;
};

static void take_in_range(int fd, struct sk *s, void *arg)
{
	struct taken *t = arg;
	struct sk **v;

	(void)s;
	if ((unsigned)fd < t->first || (unsigned)fd > t->last)
		return;
	if (t->n == t->cap && (v = realloc(t->v, (size_t)(t->cap ? 2 * t->cap : 16) * sizeof *v))) {
		t->v = v;
		t->cap = t->cap ? 2 * t->cap : 16;
	}
	if ((s = fdtab_closing(fd)) == NULL)
		return;
	if (t->n < t->cap)
		t->v[t->n++] = s; /* let go after the kernel's close, as close() does */
	else
		sk_put(s); /* no memory to keep it: now (an entry left behind would
			    * outlive its descriptor) */
}

/* The kernel's close_range over [first, last] minus shunt's own
 * descriptors: one call per stretch between two of them, so the program
 * makes the same system call it made (a seccomp filter allowing it allows
 * these), and the flags go with the first (CLOSE_RANGE_UNSHARE once).  The
 * connections on the program's closed fds end as close() ends them.
 * CLOSE_RANGE_CLOEXEC closes nothing and shunt's own are close-on-exec
 * already: the whole range goes to the kernel. */
long fd_close_range(unsigned first, unsigned last, unsigned flags,
		    long (*sys_close_range)(unsigned, unsigned, unsigned))
{
	struct taken t = { .first = first, .last = last };
	unsigned lo = first;
	long r = 0;

	/* what the kernel refuses (or only marks) is its to answer, with
	 * nothing taken from the table */
	if (first > last || (flags & ~(unsigned)(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) ||
	    (flags & CLOSE_RANGE_CLOEXEC))
		return sys_close_range(first, last, flags);
	fdtab_each(take_in_range, &t);
	for (unsigned fd = first; r >= 0 && (fd = fd_next_internal(fd, last)) != UINT_MAX; fd++) {
		if (fd > lo) {
			r = sys_close_range(lo, fd - 1, flags);
			flags &= ~(unsigned)CLOSE_RANGE_UNSHARE;
		}
		lo = fd + 1;
	}
	if (r >= 0 && lo <= last)
		r = sys_close_range(lo, last, flags);
	for (int i = 0; i < t.n; i++)
		sk_put(t.v[i]);
	free(t.v);
	return r;
}
