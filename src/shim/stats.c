/* SPDX-License-Identifier: MIT */
/*
 * stats.c - this process's connection table, published for `shunt ss`.
 *
 * One file per process, $SHUNT_DIR/s<id>, mapped shared.  The process holds a
 * shared flock on it for its life: `shunt ss` tells a live process from a
 * dead one by trying an exclusive lock, and removes what the dead left
 * behind (this file and the process's c<id> socket).
 *
 * The file is made on first need - the process's first socket, or a forked
 * child's first byte on an inherited listener - so a process that never
 * touches a socket (a shell's every command under `shunt run`, a worker
 * that only computes) leaves the directory as it found it, and a forked
 * child that ends with _exit() removes its file too (interpose.c).  A
 * forked child serving the connection it was born with - accelerated or
 * plain - makes none: the record stays in its maker's file (stats_free).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"

static struct shunt_stats_file *sf;
/* where this thread's search starts: the record it claimed last (free
 * again once that connection ended, and still in its cache) */
static __thread __attribute__((tls_model("initial-exec"))) unsigned sf_hint;
static int sf_fd = -1;
static char sf_path[SHUNT_DIR_NAME_MAX]; /* its name in the rendezvous directory */
static pthread_mutex_t sf_lock = PTHREAD_MUTEX_INITIALIZER;
int stats_pending = 1; /* no file yet: make it (and adopt) on first need */

static int stats_init(void)
{
	uint64_t id = shunt_proc_name();
	struct shunt_stats_file *m;
	int fd;

	shunt_dir_name(sf_path, 's', id);
	fd = real.openat(shunt_dirfd, sf_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	fchmod(fd, shunt_file_mode() & 0644); /* readable by whoever shares the directory */
	if (ftruncate(fd, sizeof *m) || flock(fd, LOCK_SH))
		goto fail;
	m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	m->magic = SHUNT_STATS_MAGIC;
	m->version = SHUNT_WIRE_VERSION;
	m->pid = (uint32_t)getpid();
	m->nrecs = SHUNT_STATS_RECS;
	prctl(PR_GET_NAME, m->comm);
	__atomic_store_n(&sf, m, __ATOMIC_RELEASE); /* (stats_alloc takes no lock) */
	sf_fd = fd_hide(fd);
	return 0;
fail:
	real.close(fd);
	unlinkat(shunt_dirfd, sf_path, 0);
	return -1;
}

static int mine(const struct shunt_stat_rec *r)
{
	return sf && r >= sf->rec && r < sf->rec + SHUNT_STATS_RECS;
}

static int sf_failed; /* made and failed: not again (a forked child tries its own) */
static int listeners_left; /* inherited listeners to list once the file is made */
static void adopt_inherited(int fd, struct sk *s, void *arg);

/* This process's file, made now if it is not.  Never under a seccomp
 * filter (core.c): the parent's records go on counting. */
static struct shunt_stats_file *stats_file(void)
{
	struct shunt_stats_file *f = __atomic_load_n(&sf, __ATOMIC_ACQUIRE);

	if (f || sf_failed || shunt_sandboxed || shunt_dirfd < 0 || !shunt_active)
		return f;
	shunt_mutex_lock(&sf_lock);
	if (!sf && !sf_failed && stats_init())
		sf_failed = 1;
	shunt_mutex_unlock(&sf_lock);
	if (__atomic_exchange_n(&listeners_left, 0, __ATOMIC_RELAXED))
		fdtab_each(adopt_inherited, NULL); /* (now with a file: listed) */
	return __atomic_load_n(&sf, __ATOMIC_ACQUIRE);
}

void stats_ensure_file(void)
{
	(void)stats_file();
}

/* The child holds the inherited listeners too: list them under its own
 * pid (a socket shared by two processes shows once for each, as in ss -p)
 * - but while the child has no file of its own: a forking server's child
 * that keeps its listener open and serves the connection it was born with
 * (Python's ForkingMixIn) made a file for it alone, 13 system calls and a
 * file made and removed a connection (0.48x TCP's rate, now 0.60x:
 * `setup-floor ... fork-keep`, docs/benchmarks.md).  Its maker lists it
 * meanwhile; the child's first record of its own (an accept on it, a
 * socket) makes the file and lists it then (listeners_left).  Connections,
 * accelerated or plain, stay listed once for all in their maker's file
 * (stats_free): a forking server's child with a plain client made a file
 * for it alone, as above (0.55x TCP's rate under shunt with connections
 * kept plain, `setup-floor ... fork`). */
static void adopt_inherited(int fd, struct sk *s, void *arg)
{
	struct shunt_stat_rec *old = s->stat, *r;

	if (!old || mine(old) || s->kind != SK_LISTEN)
		return;
	if (s->kind == SK_LISTEN && !__atomic_load_n(&sf, __ATOMIC_ACQUIRE)) {
		if (arg) /* (listeners_left: to list once the file is made) */
			__atomic_store_n((int *)arg, 1, __ATOMIC_RELAXED);
		return;
	}
	r = stats_alloc(fd, s);
	if (r) {
		r->tx = old->tx;
		r->rx = old->rx;
	}
	s->stat = r;
}

/* The first need: the inherited sockets listed in this process's file -
 * made for them only if there are any: a forked child serving the
 * accelerated connection it inherited (listed once for all, under its
 * maker) makes no file, and no unlink as it ends (a PostgreSQL backend a
 * connection: 8 system calls and the mapping's faults a fork); a socket of
 * its own, an offer or an arena makes it (stats_alloc, shunt_proc_id). */
void stats_adopt(void)
{
	if (!__atomic_exchange_n(&stats_pending, 0, __ATOMIC_ACQ_REL))
		return;
	if (shunt_sandboxed || shunt_dirfd < 0 || !shunt_active)
		return;
	fdtab_each(adopt_inherited, &listeners_left); /* (the file made at the first: stats_alloc) */
}

SHUNT_CHILD_PATH void stats_atfork_child(void)
{
	/* The parent's file stays mapped (inherited sockets still count into
	 * their records, as the file description is shared) but is no longer
	 * ours to allocate from; closing our copy of the fd leaves the
	 * parent's lock in place. */
	if (sf_fd >= 0)
		fd_close_internal(sf_fd);
	SHUNT_RESET(sf, NULL);
	SHUNT_RESET(sf_fd, -1);
	SHUNT_RESET(sf_failed, 0);
	shunt_mutex_reset(&sf_lock);
	SHUNT_RESET(stats_pending, 1);
	SHUNT_RESET(listeners_left, 0);
}

/* What a socket is now: its mode and, when not accelerated, why. */
void sk_describe(const struct sk *s, unsigned *mode, unsigned *reason)
{
	int moved = s->kind != SK_CONN ? 0 : s->conn->broke ? s->conn->broke : conn_moved_reason(s->conn);

	*mode = s->kind == SK_CONN ? (moved ? SHUNT_M_TCP : (unsigned)s->conn->tp->mode)
		: s->kind == SK_LISTEN ? SHUNT_M_LISTEN : SHUNT_M_TCP;
	*reason = s->kind == SK_CONN ? (unsigned)moved : (unsigned)s->reason;
}

/* An RDMA connection moved to TCP: shunt ss says so from now on. */
void stats_moved(struct sk *s)
{
	unsigned mode, reason;

	if (!s->stat)
		return;
	sk_describe(s, &mode, &reason);
	s->stat->mode = (uint8_t)mode;
	s->stat->reason = (uint8_t)reason;
}

static void fill(struct shunt_stat_rec *r, int fd, struct sk *s)
{
	unsigned mode, reason;

	struct sockaddr_storage a, b;
	socklen_t la = sizeof a, lb = sizeof b;

	r->fd = fd;
	sk_describe(s, &mode, &reason);
	r->mode = (uint8_t)mode;
	r->reason = (uint8_t)reason;
	r->is_client = (uint8_t)s->is_client;
	r->flags = s->has_tuple == SK_TUPLE_REMOTE ? SHUNT_STAT_LOCAL_UNKNOWN : 0;
	if (s->has_tuple) {
		r->tuple = s->tuple;
		return;
	}
	memset(&r->tuple, 0, sizeof r->tuple);
	if (!getsockname(fd, (void *)&a, &la))
		shunt_addr_from_sockaddr(s->is_client ? &r->tuple.client : &r->tuple.server, (void *)&a);
	if (!getpeername(fd, (void *)&b, &lb))
		shunt_addr_from_sockaddr(s->is_client ? &r->tuple.server : &r->tuple.client, (void *)&b);
}

/* In use -> free, unless already freed (or freed and claimed again). */
static int release(struct shunt_stat_rec *r)
{
	uint32_t one = 1;

	return __atomic_compare_exchange_n(&r->used, &one, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* The file full: the records a maker left to forked children that never
 * said they let go (killed, exec'd) go - a live child's is then no longer
 * listed, never a new connection unlisted for them. */
static int reclaim_left(struct shunt_stats_file *f)
{
	int n = 0;

	for (unsigned i = 0; i < SHUNT_STATS_RECS; i++) {
		struct shunt_stat_rec *r = &f->rec[i];

		if ((__atomic_load_n(&r->held, __ATOMIC_RELAXED) & SHUNT_STAT_H_MAKER_LEFT) && release(r))
			n++;
	}
	return n;
}

/* A free record, claimed (0 -> 2: `shunt ss` skips it while it is
 * filled) with no lock, the search starting at the one this thread
 * claimed last - not a scan of every record in use under one lock that
 * every thread's every connection takes (issue #13, items 9 and 10). */
struct shunt_stat_rec *stats_alloc(int fd, struct sk *s)
{
	struct shunt_stats_file *f;
	unsigned start = sf_hint;

	stats_adopt_maybe();
	if (!(f = stats_file()))
		return NULL;
	if (!start) /* a new thread's: spread from the others' */
		start = (unsigned)((uintptr_t)&sf_hint >> 6);
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned k = 0; k < SHUNT_STATS_RECS; k++) {
			unsigned i = (start + k) % SHUNT_STATS_RECS;
			struct shunt_stat_rec *r = &f->rec[i];
			uint32_t z = 0, gen;

			if (__atomic_load_n(&r->used, __ATOMIC_RELAXED) ||
			    !__atomic_compare_exchange_n(&r->used, &z, 2, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				continue;
			sf_hint = i;
			/* (relaxed atomic stores, not assignments: an _Atomic's
			 * assignment is a full barrier each; the release below
			 * publishes them) */
			__atomic_store_n(&r->tx, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&r->rx, 0, __ATOMIC_RELAXED);
			gen = (__atomic_load_n(&r->held, __ATOMIC_RELAXED) >> SHUNT_STAT_H_GEN_SHIFT) + 1;
			__atomic_store_n(&r->held, gen << SHUNT_STAT_H_GEN_SHIFT, __ATOMIC_RELAXED);
			s->stat_gen = gen;
			fill(r, fd, s);
			__atomic_store_n(&r->used, 1, __ATOMIC_RELEASE);
			return r;
		}
		if (!reclaim_left(f))
			break;
	}
	return NULL;
}

void stats_update(struct sk *s, int fd)
{
	if (s->stat)
		fill(s->stat, fd, s);
	else
		s->stat = stats_alloc(fd, s);
}

/* The maker (maker_side) or a forked child let go of a plain socket
 * whose record may be held by the other: the second to let go frees it.
 * Nothing if the record is no longer this socket's (freed and used again:
 * its generation). */
static void left(struct sk *s, struct shunt_stat_rec *r, int maker_side)
{
	uint32_t w = __atomic_load_n(&r->held, __ATOMIC_ACQUIRE), bit, other;

	bit = maker_side ? SHUNT_STAT_H_MAKER_LEFT : SHUNT_STAT_H_CHILD_LEFT;
	other = maker_side ? SHUNT_STAT_H_CHILD_LEFT : SHUNT_STAT_H_MAKER_LEFT;
	do {
		if (w >> SHUNT_STAT_H_GEN_SHIFT != s->stat_gen || __atomic_load_n(&r->used, __ATOMIC_ACQUIRE) != 1)
			return;
	} while (!__atomic_compare_exchange_n(&r->held, &w, w | bit, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	if (w & other)
		release(r);
}

/* An accelerated connection's record goes with its last owner, in
 * whichever process (a forked child serving what its parent accepted
 * frees the parent's record; the parent's close leaves it listed): it is
 * listed once, under the process that made it, for as long as it lives.
 * Any other socket's (last_owner < 0) goes with the process that made it
 * - or, open in its maker at a fork (SHUNT_STAT_H_FORKED), with the
 * second of the maker and a child to let go (a forking server's child
 * serving a plain connection; `shunt ss` lists no connection the kernel
 * no longer has). */
void stats_free(struct sk *s, struct shunt_stat_rec *r, int last_owner)
{
	if (last_owner >= 0) {
		if (last_owner)
			__atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
		return;
	}
	if (s->kind == SK_LISTEN) {
		if (mine(r))
			__atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
	} else if (!mine(r) || (__atomic_load_n(&r->held, __ATOMIC_ACQUIRE) & SHUNT_STAT_H_FORKED)) {
		left(s, r, mine(r));
	} else {
		__atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
	}
}

/* Before a fork (its walk of the table): the child inherits s's record.
 * Marked in the record - the file is shared, so the mark copies no page
 * of the parent's, as a count of forks in its memory did at each. */
void stats_fork_mark(struct sk *s)
{
	struct shunt_stat_rec *r = s->stat;

	if (r && s->kind == SK_TCP && mine(r) &&
	    (__atomic_load_n(&r->held, __ATOMIC_RELAXED) >> SHUNT_STAT_H_GEN_SHIFT) == s->stat_gen)
		__atomic_fetch_or(&r->held, SHUNT_STAT_H_FORKED, __ATOMIC_RELEASE);
}

/* A forked child's exit with a plain socket its maker's file lists: let
 * go of it, as its close would (the kernel closes it now). */
SHUNT_CHILD_PATH void stats_child_exit(struct sk *s)
{
	struct shunt_stat_rec *r = s->stat;

	if (r && s->kind == SK_TCP && !mine(r))
		left(s, r, 0);
}

/* exit() and _exit(): a clean end removes the file - and, now and then,
 * what killed processes left (dirsweep.c; `shunt ss` too). */
SHUNT_CHILD_PATH void stats_exit(void)
{
	if (!shunt_sandboxed && sf && sf->pid == (uint32_t)getpid()) {
		unlinkat(shunt_dirfd, sf_path, 0);
		rdv_dir_sweep();
	}
}

SHUNT_CHILD_PATH __attribute__((destructor)) static void stats_exit_dtor(void)
{
	stats_exit();
}
