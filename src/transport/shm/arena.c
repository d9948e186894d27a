/* SPDX-License-Identifier: MIT */
/*
 * arena.c - segment pools shared by one pair of processes.
 *
 * On this class of machine a page fault on shared memory costs ~12 us and
 * unmapping a touched region ~25 us: a fresh segment per connection made
 * connection setup 5x slower than TCP.  So the first connection between two
 * processes creates an arena of SHUNT_ARENA_SLOTS segments that both map
 * once; a later connection takes a free segment (CAS on in_use), whose pages
 * are already mapped on both sides.  A segment is free when both sides'
 * owner counts (processes holding the connection: fork adds one) are 0.
 * An arena lives until neither side uses it and its peer process is gone.
 *
 * A server that forks (a postmaster forking a backend for each connection
 * it accepted, a pre-forked worker) shares its arenas with the child, and
 * an arena's doorbells are shared by its segments: every process waiting
 * in poll or epoll on one of its connections wakes at every ring for any
 * other (pgbench -S, 8 clients, each backend a process: 0.71x TCP's
 * transactions a second; the same with an arena for each connection:
 * 1.08-1.13x).  So a server that forks while it holds a connection (the
 * child holds it too) takes no new segment in that connection's arena
 * while any process holds one of it: the next connection takes another
 * arena.  Once none does (the child ended its connection), the arena is
 * taken again - it is still mapped on both sides, so a forking server's
 * short connections cost no new memfd, doorbells, message, mapping and
 * page faults each (twenty-eighth session: before, each made an arena).
 * Only the process that made an arena takes segments of it: a forked
 * child's copies are its parent's, an exec's adopted ones nobody's.  Of a
 * client's forked arenas the SHUNT_ARENA_KEEP newest stay open; older
 * ones are "closed" (their header tells the client) and unmapped on
 * either side once that side holds none of it.  Threads that wait on
 * connections of one arena still share its doorbells
 * (docs/architecture.md, "Known limits").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "arena.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/msg.h"

/* a client's forked arenas a server keeps open (the concurrent
 * connections of a pgbench -C -c 8, and the ends its backends are in) */
#define SHUNT_ARENA_KEEP 8

static struct arena *arenas;
static _Atomic int closed_left; /* client: a closed arena is still mapped: look again */
static _Atomic int dead_look;   /* client: a new server's arena came: are the others' alive? */
static int reap_dead_locked(void);
static void arena_free_locked(struct arena **pp);
static int may_unmap(struct arena *a);
static void reap_closed_locked(void);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t seg_size(uint32_t rs)
{
	return SHUNT_SEG_HDR_SIZE + 2 * (size_t)rs;
}

struct shunt_seg_hdr *arena_seg(struct arena *a, unsigned seg)
{
	return (struct shunt_seg_hdr *)((char *)a->hdr + SHUNT_ARENA_HDR_SIZE + seg * seg_size(a->ring_size));
}

/* fds: memfd, client's doorbell, server's doorbell (taken on success). */
static int map_arena(const int *fds, uint64_t id, int side, uint64_t peer, struct arena **out)
{
	int memfd = fds[0];
	struct stat st;
	struct arena *a;
	void *m;
	int seals;

	if (fstat(memfd, &st))
		return -errno;
	/* Sealed against shrinking by its creator, or the peer could truncate
	 * it under our mapping: every access after that would SIGBUS. */
	seals = fcntl(memfd, F_GET_SEALS);
	if ((size_t)st.st_size < SHUNT_ARENA_HDR_SIZE || !S_ISREG(st.st_mode) || seals < 0 ||
	    !(seals & F_SEAL_SHRINK)) {
		shunt_log("arena refused: not a sealed shared-memory file");
		return -EPROTO;
	}
	/* the doorbells are written at every wake-up: a pipe or a socket
	 * in their place could block us or carry our writes elsewhere */
	if (fds[1] == fds[2] || !fd_is_eventfd(fds[1]) || !fd_is_eventfd(fds[2])) {
		shunt_log("arena refused: its doorbells are not eventfds");
		return -EPROTO;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (m == MAP_FAILED)
		return -errno;
	if (shunt_arena_hdr_check(m, id, (size_t)st.st_size) || !(a = calloc(1, sizeof *a))) {
		munmap(m, (size_t)st.st_size);
		return -EPROTO;
	}
	a->id = id;
	a->side = side;
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	a->memfd = fd_hide(memfd);
	a->bell[0] = fd_hide(fds[1]);
	a->bell[1] = fd_hide(fds[2]);
	a->hdr = m;
	a->len = (size_t)st.st_size;
	a->ring_size = a->hdr->ring_size;
	a->peer = peer ? peer : a->hdr->proc[!side];
	if (side == 0) /* the server's answers may name it in the slot again */
		__atomic_store_n(&a->hdr->client_unmapped, 0, __ATOMIC_RELEASE);
	a->closes_seen = __atomic_load_n(&a->hdr->closes, __ATOMIC_ACQUIRE);
	a->uid = side ? (uint32_t)getuid() : UINT32_MAX;
	a->client_uid = UINT32_MAX;
	a->next = arenas;
	arenas = a;
	*out = a;
	return 0;
}

static int create_arena(uint64_t peer, struct arena **out)
{
	uint32_t rs = shunt_cfg.ring_size;
	struct shunt_arena_hdr h = { .magic = SHUNT_ARENA_MAGIC, .version = SHUNT_WIRE_VERSION,
				     .id = shunt_fault_arena_id(shunt_random64() | 1), .nslots = SHUNT_ARENA_SLOTS,
				     .ring_size = rs, .proc = { peer, shunt_proc_id() },
				     .client_unmapped = 1 /* until it maps it */ };
	int fds[3] = { real.memfd_create("shunt-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING),
			real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) };
	int r = -ENOMEM;

	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
		r = -EMFILE;
	else if (!ftruncate(fds[0], (off_t)shunt_arena_size(rs)) &&
		 pwrite(fds[0], &h, sizeof h, 0) == (ssize_t)sizeof h &&
		 (shunt_fault_ring_unsealed() ||
		  !fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)))
		r = map_arena(fds, h.id, 1, peer, out);
	if (!r) {
		(*out)->epoch = shunt_forks();
		shunt_fault_ring_pipebell((*out)->bell); /* tests: a hostile peer's doorbells */
	}
	if (r)
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0)
				real.close(fds[i]);
	return r;
}

static int take_seg(struct arena *a, unsigned *seg)
{
	for (unsigned i = 0; i < SHUNT_ARENA_SLOTS; i++) {
		struct shunt_seg_hdr *h = arena_seg(a, i);
		uint32_t use = __atomic_load_n(&h->in_use, __ATOMIC_RELAXED);
		/* even: free; the take and the free each add one (wire.h) */
		if ((use & 1) || !__atomic_compare_exchange_n(&h->in_use, &use, use + 1, 0,
							      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		*seg = i;
		return 0;
	}
	return -ENOSPC;
}

/* A segment handed out again starts empty: cursors, flags and locks at 0. */
static void init_seg(struct arena *a, unsigned seg, uint64_t nonce)
{
	struct shunt_seg_hdr *h = arena_seg(a, seg);

	memset(h->ring, 0, sizeof h->ring);
	h->magic = SHUNT_SEG_MAGIC;
	h->version = SHUNT_WIRE_VERSION;
	h->ring_size = a->ring_size;
	h->hdr_size = SHUNT_SEG_HDR_SIZE;
	h->nonce = nonce;
	__atomic_store_n(&h->owner[0], 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->owner[1], 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->unclosed[0], 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->unclosed[1], 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->confirm_waiter, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->confirm, 0, __ATOMIC_RELEASE);
}

/* Did this process make the arena?  A forked child's copies are its
 * parent's (their forks count is not its own), an exec's adopted ones
 * another image's (0): only its maker takes segments in it, opens it again
 * and closes it. */
static int mine(const struct arena *a)
{
	return a->epoch == shunt_forks();
}

/* Forked: a connection of it went to a forked child with it - whose
 * waiters and the next connection's would wake each other on its
 * doorbells while both live. */
static int forked(const struct arena *a)
{
	return __atomic_load_n(&a->forked, __ATOMIC_RELAXED);
}

/* No process holds a segment of it (its maker is its only taker: the
 * segments past `hi` were never taken). */
static int quiet(struct arena *a)
{
	for (unsigned i = 0; i < a->hi; i++)
		if (__atomic_load_n(&arena_seg(a, i)->in_use, __ATOMIC_ACQUIRE) & 1)
			return 0;
	return 1;
}

static void close_locked(struct arena *a)
{
	if (!__atomic_load_n(&a->hdr->closed, __ATOMIC_RELAXED))
		__atomic_store_n(&a->hdr->closed, 1, __ATOMIC_RELEASE);
}

/* Server side, lock held, before a take for client process `peer`.
 * A forked arena stays open for its client (mapped there) and is taken
 * again once quiet (arena_server_take): a forking server's connections
 * then cost no new memfd, doorbells, message, mapping or faults.  Of one
 * client's forked arenas, the SHUNT_ARENA_KEEP newest stay open; older
 * ones, and those this process did not make that came across an exec
 * (nobody will take them again), are closed - their clients unmap them
 * once they hold none of them.  Arenas this process may not take from and
 * holds nothing of are unmapped here. */
static int sweep_locked(uint64_t peer)
{
	unsigned open = 0;
	int closed = 0;

	for (struct arena **pp = &arenas; *pp;) {
		struct arena *a = *pp;
		if (a->side == 1) {
			int own = mine(a);
			if (a->adopted) {
				close_locked(a);
			} else if (own && forked(a) && a->peer == peer &&
				   !__atomic_load_n(&a->hdr->closed, __ATOMIC_RELAXED) && ++open > SHUNT_ARENA_KEEP) {
				close_locked(a);
				closed = 1;
			}
			if ((!own || __atomic_load_n(&a->hdr->closed, __ATOMIC_RELAXED)) &&
			    !__atomic_load_n(&a->held, __ATOMIC_ACQUIRE)) {
				arena_free_locked(pp);
				continue;
			}
		}
		pp = &a->next;
	}
	return closed;
}

void arena_forked(struct arena *a)
{
	/* (a client's arenas are its servers' to place; in the child the
	 * word is as the parent set it) */
	if (a->side == 1 && !__atomic_load_n(&a->forked, __ATOMIC_RELAXED))
		__atomic_store_n(&a->forked, 1, __ATOMIC_RELAXED);
}

/* May this process take a new segment of a, for client process peer? */
static int takes(struct arena *a, uint64_t peer)
{
	if (a->side != 1 || a->peer != peer || a->ring_size != shunt_cfg.ring_size || !mine(a) ||
	    __atomic_load_n(&a->hdr->closed, __ATOMIC_RELAXED))
		return 0;
	if (!forked(a))
		return 1;
	if (!quiet(a))
		return 0;
	/* open again: no other process holds a connection of it, so none
	 * waits on its doorbells; the next fork holding one forks it again */
	__atomic_store_n(&a->forked, 0, __ATOMIC_RELAXED);
	return 1;
}

int arena_server_take(uint64_t peer, uint64_t nonce, struct arena **out, unsigned *seg, int *send_fds)
{
	struct arena *a;
	int r = 0, created = 0, closed;

	shunt_mutex_lock(&lock);
	closed = sweep_locked(peer);
	for (a = arenas; a; a = a->next)
		if (takes(a, peer) && !take_seg(a, seg))
			break;
	if (!a) {
		reap_dead_locked();
		r = create_arena(peer, &a);
		if (!r)
			r = take_seg(a, seg);
		created = !r;
	}
	if (!r) {
		/* an answer in the slot names only an arena the client maps
		 * (the word is the client's: a lie costs it its connections) */
		*send_fds = created || __atomic_load_n(&a->hdr->client_unmapped, __ATOMIC_ACQUIRE);
		init_seg(a, *seg, nonce);
		if (closed) /* the answer names a: its client looks for those */
			__atomic_add_fetch(&a->hdr->closes, 1, __ATOMIC_RELEASE);
		if (*seg >= a->hi)
			a->hi = *seg + 1;
		__atomic_add_fetch(&a->held, 1, __ATOMIC_RELAXED);
		*out = a;
	}
	shunt_mutex_unlock(&lock);
	return r;
}

uint32_t arena_server_client_uid(uint64_t peer)
{
	uint32_t uid = UINT32_MAX;

	shunt_mutex_lock(&lock);
	for (struct arena *a = arenas; a && uid == UINT32_MAX; a = a->next)
		if (a->side == 1 && a->peer == peer && mine(a))
			uid = __atomic_load_n(&a->client_uid, __ATOMIC_RELAXED);
	shunt_mutex_unlock(&lock);
	return uid;
}

static struct arena *find(uint64_t id, int side)
{
	for (struct arena *a = arenas; a; a = a->next)
		if (a->id == id && a->side == side)
			return a;
	return NULL;
}

static void close3(const int *fds)
{
	for (int i = 0; fds && i < 3; i++)
		if (fds[i] >= 0)
			real.close(fds[i]);
}

/* Arena ids are the maker's to choose, and a shared directory's members
 * see them (a slot's answer names one): an arena sent under the id of one
 * mapped here must be that one - the same memfd, not another process's
 * made with its id.  Else a member that once served this process could
 * plant an arena under the id a server of ours is about to send again (it
 * sends one a client unmapped anew), write the offer's nonce into it (the
 * slot shows it), and the client, finding the id mapped, would attach
 * there: its connection to that server read and answered by the member
 * (tests/security/dir.sh, 1i).  A resend of the same arena (an exec'd
 * sibling mapped it, its server thought it unmapped) is the same file. */
static int same_arena(const struct arena *a, const int *fds)
{
	struct stat st;

	if (!fds)
		return 1; /* (named, not sent: the one mapped here) */
	if (fds[0] < 0)
		return 0; /* sent, and refused on arrival (msgsock.c) */
	if (!fstat(fds[0], &st) && st.st_dev == a->dev && st.st_ino == a->ino)
		return 1;
	shunt_warn("arena %llx: another process's arena was sent under its id: refused",
		   (unsigned long long)a->id);
	return 0;
}

/* The user who sent arena a (client side), as a message that carried it
 * says: mapped first, or a resend (the same memfd) by another user - the
 * server changed its own since - is that user's now; the same arena named
 * by a message without it proves nothing about who holds it, and changes
 * nothing. */
static void note_sender(struct arena *a, const int *fds, const uint32_t *uid)
{
	if (uid && fds)
		__atomic_store_n(&a->uid, *uid, __ATOMIC_RELAXED);
}

static int get_or_map(uint64_t id, int *fds, const uint32_t *uid, int side, struct arena **out, int adopt)
{
	struct arena *a;
	int r = 0;

	shunt_mutex_lock(&lock);
	a = find(id, side);
	if (a && !same_arena(a, fds)) {
		close3(fds);
		r = -EPROTO;
	} else if (a) {
		uint32_t closes = __atomic_load_n(&a->hdr->closes, __ATOMIC_ACQUIRE);
		close3(fds); /* already mapped (an exec'd sibling, a resend) */
		if (side == 0)
			note_sender(a, fds, uid);
		if (side == 0 && closes != a->closes_seen) {
			/* its server closed others: they go once no offer of
			 * ours is in flight (ours is: arena_offer_end) */
			a->closes_seen = closes;
			__atomic_store_n(&closed_left, 1, __ATOMIC_RELAXED);
		}
	} else if (!fds || fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
		close3(fds);
		r = -EPROTO;
	} else {
		/* a client of many short-lived servers: at the last offer's end
		 * (may_unmap), the servers of the others are looked at */
		__atomic_store_n(&dead_look, 1, __ATOMIC_RELAXED);
		reap_closed_locked(); /* ... and of forking ones */
		r = map_arena(fds, id, side, 0, &a);
		if (r)
			close3(fds);
		else if (side == 0)
			note_sender(a, fds, uid);
	}
	if (!r) {
		a->adopted |= adopt; /* across an exec: others may hold it */
		__atomic_add_fetch(&a->held, 1, __ATOMIC_RELAXED);
		*out = a;
	}
	shunt_mutex_unlock(&lock);
	return r;
}

int arena_client_get(uint64_t id, int *fds, const uint32_t *uid, struct arena **out)
{
	return get_or_map(id, fds, uid, 0, out, 0);
}

int arena_adopt(uint64_t id, int *fds, int side, struct arena **out)
{
	return get_or_map(id, fds, NULL, side, out, 1);
}

/* Returns 1 if that was this side's last owner (in any process). */
int arena_drop_owner(struct arena *a, unsigned seg, int side)
{
	struct shunt_seg_hdr *h = arena_seg(a, seg);
	/* The use we end, read while we are still one of its owners: nobody
	 * frees the segment before that, so this is the use these owners
	 * count (odd; a take and a free each add one). */
	uint32_t use = __atomic_load_n(&h->in_use, __ATOMIC_ACQUIRE);

	/* Of two sides dropping their last owner at once, at least one sees
	 * the other's 0 (seq_cst); both may, and both try to free.  The free
	 * names the use it ends: had it been 1 -> 0, a late one could land
	 * after the first had freed the segment and a server thread had taken
	 * it again for a new connection - freeing that connection's segment
	 * under it, for the next taker to re-initialise (the client then found
	 * another nonce there: a cut connection, once in ~150 runs of 64
	 * threads a side; or two connections on one pair of rings). */
	if (__atomic_sub_fetch(&h->owner[side], 1, __ATOMIC_SEQ_CST))
		return 0;
	shunt_fault_seg_free(); /* tests: widen the windows, here and below */
	if (__atomic_load_n(&h->owner[!side], __ATOMIC_SEQ_CST) == 0 && (use & 1)) {
		shunt_fault_seg_free();
		__atomic_compare_exchange_n(&h->in_use, &use, use + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
	return 1;
}

void arena_release(struct arena *a, unsigned seg, int side)
{
	arena_drop_owner(a, seg, side);
	arena_put(a);
}

/* Unmap an arena nobody here holds (lock held); pp points at its link. */
static void arena_free_locked(struct arena **pp)
{
	struct arena *a = *pp;

	*pp = a->next;
	/* (a client's: may_unmap said so to the servers already; one we
	 * made: nobody takes a segment of it again - its client may unmap) */
	if (a->side == 1 && mine(a))
		close_locked(a);
	munmap(a->hdr, a->len);
	fd_close_internal(a->memfd);
	bell_forget(a->bell[0]); /* out of our threads' poll sets first */
	bell_forget(a->bell[1]);
	fd_close_internal(a->bell[0]);
	fd_close_internal(a->bell[1]);
	free(a);
}

/* Our offers in flight (client.c): an answer to one may name any arena
 * of ours in its slot, so none is unmapped meanwhile. */
static _Atomic int offers_in_flight;

/* May this process stop mapping a (lock held, nobody here holds it)?  A
 * server's, yes.  A client's only while no offer of ours is in flight: a
 * server answers in the slot when the arena's client_unmapped says we map
 * it, so the word is set first and the offers counted after (both
 * sequentially consistent, as arena_offer_begin's count before its slot):
 * an offer begun after the count is answered by message, with the arena's
 * descriptors; one begun before keeps the arena, and the word goes back.
 * Before, a client that judged its server gone (its liveness file not
 * made yet: shunt_proc_alive) unmapped an idle arena that a server thread
 * was naming in a slot that moment: the connection was cut (rdv_offer_settle,
 * one run in about twenty of 64 threads a side). */
static int may_unmap(struct arena *a)
{
	if (a->side != 0)
		return 1;
	__atomic_store_n(&a->hdr->client_unmapped, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&offers_in_flight, __ATOMIC_SEQ_CST))
		return 1;
	__atomic_store_n(&a->hdr->client_unmapped, 0, __ATOMIC_SEQ_CST);
	return 0;
}

/* A server keeps an idle arena for its peer's next connection; once that
 * peer is gone the arena is unmapped - here, before a new one is made, so
 * a server of many short-lived clients holds one arena per live client
 * (issue #13, item 9), whatever order the two ended in.  A client's is
 * unmapped only while no offer of ours is in flight (may_unmap), and a
 * client maps a new arena in the middle of its offer: 1 when such a dead
 * server's arena was left, for the last offer's end (arena_offer_end).
 * Before, a client of a server that serves each connection in a new
 * process (a child that accepts, then exits) kept every child's arena:
 * 16 MiB of address space and three descriptors per connection
 * (tests/behave/seteuid_back's loop). */
static int reap_dead_locked(void)
{
	int left = 0;

	for (struct arena **pp = &arenas; *pp;) {
		if (!__atomic_load_n(&(*pp)->held, __ATOMIC_ACQUIRE) &&
		    (shunt_fault_peer_gone() || !shunt_proc_alive((*pp)->peer))) {
			if (may_unmap(*pp)) {
				arena_free_locked(pp);
				continue;
			}
			left = 1;
		}
		pp = &(*pp)->next;
	}
	return left;
}

/* Client side: the arenas their servers closed (they forked) and we hold
 * nothing of - no answer will name them again: unmapped at our last
 * connection's end there, or when the next arena comes, not when that
 * server process ends (a postmaster lives for months). */

static void reap_closed_locked(void)
{
	int left = 0;

	if (shunt_sandboxed)
		return;
	if (__atomic_load_n(&dead_look, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&offers_in_flight, __ATOMIC_SEQ_CST)) /* (else may_unmap says no) */
		__atomic_store_n(&dead_look, reap_dead_locked(), __ATOMIC_RELAXED);
	for (struct arena **pp = &arenas; *pp;) {
		struct arena *a = *pp;
		if (a->side == 0 && __atomic_load_n(&a->hdr->closed, __ATOMIC_ACQUIRE)) {
			/* (not while an offer of ours is in flight: may_unmap) */
			if (!__atomic_load_n(&a->held, __ATOMIC_ACQUIRE) && may_unmap(a)) {
				arena_free_locked(pp);
				continue;
			}
			left = 1;
		}
		pp = &a->next;
	}
	__atomic_store_n(&closed_left, left, __ATOMIC_RELAXED);
}

/* ... now, unless sandboxed (no munmap or close of ours under a filter)
 * or in a signal handler (the interrupted thread may hold the lock: left
 * for later). */
static void reap_closed(void)
{
	if (shunt_sandboxed || shunt_in_handler())
		return;
	shunt_mutex_lock(&lock);
	reap_closed_locked();
	shunt_mutex_unlock(&lock);
}

/*
 * Memory limits an arena's mapping may meet: RLIMIT_AS (the address space:
 * an arena takes 16 MiB of it at the default ring size) and, in a process
 * that called mlockall(MCL_FUTURE), RLIMIT_MEMLOCK - every new mapping is
 * locked then, its whole length counted, and refused beyond the limit
 * without CAP_IPC_LOCK.  Where either may refuse one, a look before each
 * offer: the same mapping's length, reserved without access and given
 * back (two system calls; none in a process without such limits).  A
 * refusal keeps the connection plain (resource-limit) - before, the
 * server's answer named an arena the client could not map and the
 * connection was ended (tests/behave/mem_limits).
 */
static _Atomic int as_limited = -1; /* -1: not looked at yet */
static _Atomic int future_locked_seen;

void arena_limits_changed(int future_locked)
{
	__atomic_store_n(&as_limited, -1, __ATOMIC_RELAXED);
	if (future_locked >= 0)
		__atomic_store_n(&future_locked_seen, future_locked, __ATOMIC_RELAXED);
}

int arena_mappable(void)
{
	int as = __atomic_load_n(&as_limited, __ATOMIC_RELAXED);
	size_t len = SHUNT_ARENA_HDR_SIZE + SHUNT_ARENA_SLOTS * seg_size(shunt_cfg.ring_size);
	struct rlimit rl;
	void *m;

	if (as < 0) {
		as = !getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY;
		__atomic_store_n(&as_limited, as, __ATOMIC_RELAXED);
	}
	if (!as && !__atomic_load_n(&future_locked_seen, __ATOMIC_RELAXED))
		return 1;
	if (shunt_sandboxed)
		return 0; /* (no call of ours to look) */
	m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	munmap(m, len);
	return 1;
}

void arena_offer_begin(void)
{
	__atomic_add_fetch(&offers_in_flight, 1, __ATOMIC_SEQ_CST);
}

/* The last offer in flight ended: closed arenas left mapped while it
 * was (may_unmap) - an answer that told us of them (hdr->closes) - go. */
void arena_offer_end(void)
{
	if (!__atomic_sub_fetch(&offers_in_flight, 1, __ATOMIC_SEQ_CST) &&
	    (__atomic_load_n(&closed_left, __ATOMIC_RELAXED) ||
	     __atomic_load_n(&dead_look, __ATOMIC_RELAXED)))
		reap_closed();
}

int arena_drop_unused(void)
{
	int n = 0;

	shunt_mutex_lock(&lock);
	for (struct arena **pp = &arenas; *pp;) {
		if (!__atomic_load_n(&(*pp)->held, __ATOMIC_ACQUIRE) && may_unmap(*pp)) {
			arena_free_locked(pp);
			n++;
		} else {
			pp = &(*pp)->next;
		}
	}
	shunt_mutex_unlock(&lock);
	return n;
}

/* The last connection of an arena here closed: it stays mapped for the
 * peer's next one, until a new arena finds its peer gone (reap_dead_locked:
 * asking at every close cost three system calls a connection).  No lock:
 * only a holder lowers the count, and nothing here touches the arena after
 * (an unmap that sees 0 under the lock may follow at once); a count is
 * raised only under the lock, with the look-up that found the arena. */
void arena_put(struct arena *a)
{
	/* read first: once our count is gone the arena may be unmapped */
	int side = a->side;
	uint32_t closed = side == 0 && __atomic_load_n(&a->hdr->closed, __ATOMIC_ACQUIRE);

	if (!__atomic_sub_fetch(&a->held, 1, __ATOMIC_RELEASE) && side == 0 &&
	    (closed || __atomic_load_n(&closed_left, __ATOMIC_RELAXED)))
		reap_closed();
}

SHUNT_CHILD_PATH void arena_atfork_child(void)
{
	shunt_mutex_reset(&lock);
	SHUNT_RESET(offers_in_flight, 0); /* the parent's */
}

void arena_hold_more(struct arena *a, unsigned seg, int side)
{
	__atomic_add_fetch(&arena_seg(a, seg)->unclosed[side], 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&arena_seg(a, seg)->owner[side], 1, __ATOMIC_SEQ_CST);
}

int arena_close_begin(struct arena *a, unsigned seg, int side)
{
	/* (a word the peer can write: a lie decides only the end of its own
	 * connection - a reset or a FIN) */
	return __atomic_sub_fetch(&arena_seg(a, seg)->unclosed[side], 1, __ATOMIC_SEQ_CST) == 0;
}

int arena_let_go_shared(struct arena *a, unsigned seg, int side)
{
	_Atomic uint32_t *unclosed = &arena_seg(a, seg)->unclosed[side];
	uint32_t u = __atomic_load_n(unclosed, __ATOMIC_SEQ_CST);

	/* (owners >= unclosed: a holder's close begins before its owner goes) */
	do
		if (u <= 1)
			return -EAGAIN;
	while (!__atomic_compare_exchange_n(unclosed, &u, u - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	arena_drop_owner(a, seg, side);
	return 0;
}
