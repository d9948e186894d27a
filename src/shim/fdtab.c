/* SPDX-License-Identifier: MIT */
/*
 * fdtab.c - fd number -> struct sk.
 *
 * Two levels of 4096-entry chunks, allocated on first use and never freed, so
 * a lookup is two loads and needs no lock; the lock only serialises writers.
 * A lookup takes a reference; a concurrent close() removes the entry and
 * drops the table's reference, the object dies with the last user.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include "shim.h"
#include "epoll_int.h"
#include "real.h"

#define CHUNK_BITS 12
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 4096 /* fds up to 16M */

static struct sk *_Atomic *chunks[NCHUNKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Guards the window between loading a pointer and taking its reference. */
static pthread_rwlock_t life = PTHREAD_RWLOCK_INITIALIZER;

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
		pthread_mutex_lock(&lock);
		c = chunks[hi];
		if (!c) {
			c = calloc(CHUNK, sizeof *c);
			__atomic_store_n(&chunks[hi], c, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&lock);
	}
	return c ? &c[lo] : NULL;
}

struct sk *fdtab_get(int fd)
{
	struct sk *_Atomic *p = slot(fd, 0);
	struct sk *s;

	if (!p || !__atomic_load_n(p, __ATOMIC_ACQUIRE))
		return NULL;
	pthread_rwlock_rdlock(&life);
	s = __atomic_load_n(p, __ATOMIC_ACQUIRE);
	if (s)
		sk_ref(s);
	pthread_rwlock_unlock(&life);
	return s;
}

void fdtab_set(int fd, struct sk *s)
{
	struct sk *_Atomic *p = slot(fd, 1);
	struct sk *old;

	if (!p) {
		sk_put(s);
		return;
	}
	pthread_rwlock_wrlock(&life);
	old = __atomic_exchange_n(p, s, __ATOMIC_ACQ_REL);
	pthread_rwlock_unlock(&life);
	if (old)
		sk_put(old);
}

struct sk *fdtab_take(int fd)
{
	struct sk *_Atomic *p = slot(fd, 0);
	struct sk *old;

	if (!p || !__atomic_load_n(p, __ATOMIC_ACQUIRE))
		return NULL;
	pthread_rwlock_wrlock(&life);
	old = __atomic_exchange_n(p, NULL, __ATOMIC_ACQ_REL);
	pthread_rwlock_unlock(&life);
	return old;
}

void fdtab_each(void (*fn)(int fd, struct sk *s, void *arg), void *arg)
{
	for (unsigned hi = 0; hi < NCHUNKS; hi++) {
		struct sk *_Atomic *c = __atomic_load_n(&chunks[hi], __ATOMIC_ACQUIRE);
		if (!c)
			continue;
		for (unsigned lo = 0; lo < CHUNK; lo++) {
			struct sk *s = __atomic_load_n(&c[lo], __ATOMIC_ACQUIRE);
			if (s)
				fn((int)(hi * CHUNK + lo), s, arg);
		}
	}
}

struct sk *sk_new(int kind, int domain)
{
	struct sk *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	s->refs = 1;
	s->kind = kind;
	s->domain = domain;
	s->reason = SHUNT_R_PEER_NOT_SHUNT;
	return s;
}

void sk_put(struct sk *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (s->conn)
		conn_free(s->conn);
	if (s->ep)
		ep_free(s->ep);
	if (s->stat)
		stats_free(s->stat);
	free(s);
}

/* ---- shunt's own descriptors ---- */

#define INTERNAL_MAX (1u << 20)
static _Atomic uint64_t internal[INTERNAL_MAX / 64];
static int hide_base = -1;

static void mark(int fd, int on)
{
	uint64_t bit = 1ull << ((unsigned)fd % 64);

	if (fd < 0 || (unsigned)fd >= INTERNAL_MAX)
		return;
	if (on)
		__atomic_fetch_or(&internal[(unsigned)fd / 64], bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&internal[(unsigned)fd / 64], ~bit, __ATOMIC_RELAXED);
}

int fdtab_is_internal(int fd)
{
	if (fd < 0 || (unsigned)fd >= INTERNAL_MAX)
		return 0;
	return !!(__atomic_load_n(&internal[(unsigned)fd / 64], __ATOMIC_RELAXED) &
		  (1ull << ((unsigned)fd % 64)));
}

static int base(void)
{
	struct rlimit rl;

	if (hide_base < 0)
		hide_base = !getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur >= 2048 &&
				    rl.rlim_cur != RLIM_INFINITY ? (int)(rl.rlim_cur / 2) : 0;
	return hide_base;
}

/* A close-on-exec duplicate of fd among shunt's own descriptors, in one call. */
int fd_dup_hidden(int fd)
{
	int n = real.fcntl(fd, F_DUPFD_CLOEXEC, base());

	if (n < 0 && base())
		n = real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (n >= 0)
		mark(n, 1);
	return n;
}

int fd_hide(int fd)
{
	int n;

	if (fd < 0)
		return fd;
	if (base() && fd < hide_base) {
		n = real.fcntl(fd, F_DUPFD_CLOEXEC, hide_base);
		if (n >= 0) {
			real.close(fd);
			fd = n;
		}
	}
	mark(fd, 1);
	return fd;
}

void fd_close_internal(int fd)
{
	if (fd < 0)
		return;
	mark(fd, 0);
	real.close(fd);
}
