/* SPDX-License-Identifier: MIT */
/*
 * fault.c - fault injection for tests, compiled only into
 * build/libshunt-faults.so (-DSHUNT_FAULTS); the real library has none.
 *
 *   SHUNT_FAULT_HS=SEED   every in-band handshake message this process
 *                         sends gets one byte of its body or trailer
 *                         changed (which byte and how follow from SEED), so
 *                         the peer receives a well-framed but hostile
 *                         message: it must decline or ignore it, never
 *                         crash, hang or lose a data byte.
 *   SHUNT_FAULT_RDMA=BYTES   the first RDMA connection of this process
 *                         whose staged bytes reach BYTES has its link's
 *                         queue pair forced into the error state right
 *                         after that post (SHUNT_FAULT_RDMA_ONCE=0: every
 *                         link, once each): a link failure at an exact
 *                         byte, which its connections must survive on TCP.
 *   SHUNT_FAULT_RDMA_STALE=1   a hostile (or broken) peer replaying an
 *                         old key: when a connection writes into a ring an
 *                         earlier connection of this process wrote into, it
 *                         uses that earlier connection's key.  The peer's
 *                         device must refuse it (each connection that takes
 *                         a slot gets a fresh key): the link fails and every
 *                         connection carries on over TCP, intact.
 *   SHUNT_FAULT_RDMA_HOLD=BYTES   bytes past BYTES of every RDMA connection
 *                         of this process are accepted by write() but not
 *                         posted, as if still queued when the process
 *                         ends: until its exit flush (exit(), _exit())
 *                         releases them.  A killed process never does, so
 *                         its peer must not see a clean EOF.
 *   SHUNT_FAULT_RDMA_DIE_MS=MS   MS milliseconds after this process's
 *                         progress thread started (its first link), every link of the process has its
 *                         queue pair forced into the error state, without a
 *                         post: the peer's end learns of it only by posting
 *                         (a host whose device died while idle).
 *   SHUNT_FAULT_RDMA_FOREIGN=1   a hostile RDMA server: each ACCEPT it
 *                         sends names, as the client's queue pair to
 *                         connect, one an earlier PROPOSAL of that client
 *                         offered (the latest that is neither this
 *                         PROPOSAL's nor the one its link reaches), to a
 *                         queue pair of ours that does not exist, at a GID
 *                         no route reaches.  The client's connect of that
 *                         spare fails: it must stay TCP and free the
 *                         spare, never keep it (a queue pair and 16 MiB of
 *                         rings per ACCEPT).
 *   SHUNT_FAULT_RDMA_BIND=N   the Nth memory-window bind this process
 *                         posts finds its link's binder queue pair in the
 *                         error state (a device error): that bind and every
 *                         later one on the link fail.  The link must fail
 *                         with it, so that the next connection makes a new
 *                         one instead of staying TCP.
 *   SHUNT_FAULT_RDMA_STALL=N   the first N closing cursor messages
 *                         (shutdown, the last close) this process posts
 *                         are taken as not acknowledged in time by the
 *                         peer's device (a stopped peer, a congested
 *                         fabric) although they were posted and go: each
 *                         such connection moves to TCP alone, the link
 *                         stays for the others.
 *   SHUNT_FAULT_FO_CUT=BYTES   when a connection of this process moves its
 *                         sending half to TCP (a failover), the process
 *                         sends the failover message and BYTES of what it
 *                         resends, then kills itself (SIGKILL): a sender
 *                         whose write() accepted bytes that never come.
 *                         Its peer must report ECONNRESET, never a clean
 *                         EOF (issue #13, item 5).
 *   SHUNT_FAULT_RING=KIND   a hostile shared-memory peer (issue #12): the
 *                         first send() on this process's first accelerated
 *                         connection writes no data but attacks the segment
 *                         it shares with its peer, then returns as if sent:
 *                           prod      the peer's receive ring claims 8 MiB
 *                           cons      the peer's send ring says more was
 *                                     consumed than written
 *                           back      the peer's receive ring's producer
 *                                     goes backwards after 16 bytes
 *                           lock      the peer's reader and writer locks
 *                                     held for ever
 *                           truncate  ftruncate the arena to 0 (the seals
 *                                     must refuse it; logged)
 *                         and, as a server, unsealed: arenas created
 *                         without seals, pipebell: arenas whose doorbells
 *                         are the two ends of a pipe (the client must
 *                         refuse to map either).
 *   SHUNT_FAULT_ANSWER_STALL_MS=MS   a server stalled (SIGSTOP, swap, a
 *                         paused VM) between claiming an offer and
 *                         answering it: its Nth answer (SHUNT_FAULT_ANSWER_AT,
 *                         default 1; the 2nd between two processes is the
 *                         first in the offer slot) comes MS ms late, after
 *                         the client gave up waiting (5 s).  Both ends must
 *                         agree on TCP, no byte lost.
 *   SHUNT_FAULT_PEER_GONE=1   this process judges every arena's peer gone
 *                         when it reaps arenas (as when the peer's liveness
 *                         file is not made yet): an idle arena a server is
 *                         naming in an offer slot must stay mapped.
 *   SHUNT_FAULT_SEG_FREE_US=US   a side that drops its last owner of a
 *                         segment waits a random 0..US microseconds before
 *                         looking at the other side's count, and again
 *                         between seeing both counts 0 and freeing the
 *                         segment (a thread preempted there): when both
 *                         sides free at once, the late free must not
 *                         release the segment a new connection took
 *                         meanwhile.
 *   SHUNT_FAULT_RESERVE_US=US   a client that has just taken an offer
 *                         slot waits a random 0..US microseconds before
 *                         writing its nonce and tuple into it (a thread
 *                         preempted there): a reservation then looks as it
 *                         did a moment before - on a new registry, a slot
 *                         last used 30 s ago by a process long gone - and
 *                         other clients must neither reap it nor take it.
 *   SHUNT_FAULT_PUBLISH_MS=MS   a client whose connect() returned waits MS
 *                         ms before it publishes its offer (a thread
 *                         preempted there): its server accepts first,
 *                         gives up (at once in a non-blocking accept(),
 *                         after 20 ms in a blocking one) and must tell
 *                         it, so that it stays plain at once (reason
 *                         server-first) instead of after its 200 ms.
 *                         Through the in-band handshake: the client waits
 *                         MS ms before it sends its PROPOSAL, which comes
 *                         after its server's accept() stopped waiting.
 *   SHUNT_FAULT_CONFIRM_MS=MS   a client that took its server's ACCEPT(RDMA)
 *                         waits MS ms before it sends its CONFIRM (a
 *                         slow or stopped client, or one that never
 *                         answers): its server's accept() must not wait
 *                         for it, nor hold up the accepts of others; the
 *                         connection settles at its first call.
 *   SHUNT_FAULT_CONFIRM_READ_MS=MS   a server's blocking read on a socket
 *                         whose client's word after our ACCEPT(RDMA) has
 *                         not come waits MS ms before it sleeps on the
 *                         socket (a thread preempted there): another
 *                         thread's call meanwhile takes the word off the
 *                         socket and attaches the connection, whose bytes
 *                         then never come there - the read must still get
 *                         them.
 *   SHUNT_FAULT_CLOSE_MS=MS   a process closing its last descriptor of a
 *                         shared-memory connection waits MS ms after it
 *                         counted itself among the closers, before it looks
 *                         at the ring (a thread preempted there): two
 *                         processes holding the connection close at once,
 *                         and the last close must still say what TCP's
 *                         says - a reset if bytes were left unread.
 *   SHUNT_FAULT_ARENA_ID=ID   every arena this process makes has id ID
 *                         (0x... or decimal): the id a shared directory's
 *                         member chose for an arena it planted with a
 *                         client, met by this server's (in real life: the
 *                         id of an arena the client unmapped, which the
 *                         server sends again) - tests/security/dir.sh 1i.
 */
#ifdef SHUNT_FAULTS
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"
#include "../common/handshake.h"
#include "../transport/shm/arena.h"
#include "../transport/shm/shm.h"

static const char *ring_kind(void)
{
	const char *v = getenv("SHUNT_FAULT_RING");

	return v && *v ? v : NULL;
}

int shunt_fault_ring_unsealed(void)
{
	const char *k = ring_kind();

	return k && !strcmp(k, "unsealed");
}

int shunt_fault_ring_pipebell(int bell[2])
{
	const char *k = ring_kind();
	int p[2];

	if (!k || strcmp(k, "pipebell") || real.pipe2(p, O_CLOEXEC))
		return 0;
	fd_close_internal(bell[0]);
	fd_close_internal(bell[1]);
	bell[0] = fd_hide(p[0]);
	bell[1] = fd_hide(p[1]);
	return 1;
}

int shunt_fault_ring(struct conn *c)
{
	static _Atomic int fired;
	const char *k = ring_kind();
	struct shunt_ring_ctl *peer_rx, *peer_tx;
	struct shunt_seg_hdr *seg;
	int side = c->side, memfd;

	if (!k || c->tp != &shm_transport || !strcmp(k, "unsealed") || !strcmp(k, "pipebell") ||
	    __atomic_exchange_n(&fired, 1, __ATOMIC_ACQ_REL))
		return 0;
	seg = shm_of(c)->seg;
	memfd = shm_of(c)->arena->memfd;
	/* ring[side] carries our bytes (the peer's receive ring) */
	peer_rx = &seg->ring[side];
	peer_tx = &seg->ring[!side];
	if (!strcmp(k, "prod")) {
		__atomic_store_n(&peer_rx->prod, __atomic_load_n(&peer_rx->cons, __ATOMIC_ACQUIRE) + (8u << 20),
				 __ATOMIC_RELEASE);
	} else if (!strcmp(k, "cons")) {
		/* beyond anything the peer may write before it looks again (a
		 * ring is at most 1 GiB): a lie it cannot take for progress */
		__atomic_store_n(&peer_tx->cons, __atomic_load_n(&peer_tx->prod, __ATOMIC_ACQUIRE) + (2ull << 30),
				 __ATOMIC_RELEASE);
	} else if (!strcmp(k, "back")) {
		uint64_t p = __atomic_load_n(&peer_rx->prod, __ATOMIC_ACQUIRE);
		__atomic_store_n(&peer_rx->prod, p + 16, __ATOMIC_RELEASE);
		usleep(300 * 1000); /* the peer reads those 16 */
		__atomic_store_n(&peer_rx->prod, p + 4, __ATOMIC_RELEASE);
	} else if (!strcmp(k, "lock")) {
		/* held by a live thread (ours) with a waiter's mark: for ever */
		uint32_t v = (uint32_t)getpid() | 0x80000000u;
		__atomic_store_n(&peer_rx->rlock, v, __ATOMIC_RELEASE);
		__atomic_store_n(&peer_tx->wlock, v, __ATOMIC_RELEASE);
	} else if (!strcmp(k, "truncate")) {
		int r = ftruncate(memfd, 0);
		shunt_warn("fault: ftruncate(arena, 0) %s", r ? strerror(errno) : "succeeded");
	} else {
		return 0;
	}
	shunt_warn("fault: attacked the shared ring (%s)", k);
	/* wake the peer so it looks now */
	__atomic_store_n(&peer_rx->rd_want, 0, __ATOMIC_RELEASE);
	return 1;
}

/* A numeric fault setting: 1 and *out when NAME is set and not empty. */
static int fault_num(const char *name, uint64_t *out)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return 0;
	*out = strtoull(v, NULL, 0);
	return 1;
}

/* SHUNT_FAULT_PEER_GONE=1: every arena's peer is judged gone when arenas
 * are reaped (arena.c), as a liveness file not made yet judged it. */
int shunt_fault_peer_gone(void)
{
	uint64_t v = 0;

	return fault_num("SHUNT_FAULT_PEER_GONE", &v) && v;
}

/* SHUNT_FAULT_SEG_FREE_US=US: a random pause of up to US us before a
 * segment's free (arena.c arena_drop_owner). */
/* A random pause of 0..$name microseconds, if set. */
static void fault_pause(const char *name)
{
	static __thread uint32_t x;
	uint64_t us;

	if (!fault_num(name, &us) || !us)
		return;
	if (!x)
		x = (uint32_t)shunt_random64() | 1;
	x ^= x << 13, x ^= x >> 17, x ^= x << 5;
	usleep((useconds_t)(x % (us + 1)));
}

void shunt_fault_seg_free(void)
{
	fault_pause("SHUNT_FAULT_SEG_FREE_US");
}

void shunt_fault_reserve(void)
{
	fault_pause("SHUNT_FAULT_RESERVE_US");
}

static void fault_sleep_ms(uint64_t ms)
{
	nanosleep(&(struct timespec){ (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L }, NULL);
}

void shunt_fault_publish(void)
{
	uint64_t ms;

	if (fault_num("SHUNT_FAULT_PUBLISH_MS", &ms) && ms)
		fault_sleep_ms(ms);
}

void shunt_fault_confirm(void)
{
	uint64_t ms;

	if (fault_num("SHUNT_FAULT_CONFIRM_MS", &ms) && ms)
		fault_sleep_ms(ms);
}

void shunt_fault_confirm_read(void)
{
	uint64_t ms;

	if (fault_num("SHUNT_FAULT_CONFIRM_READ_MS", &ms) && ms)
		fault_sleep_ms(ms);
}

uint64_t shunt_fault_arena_id(uint64_t id)
{
	uint64_t v;

	return fault_num("SHUNT_FAULT_ARENA_ID", &v) && v ? v | 1 : id;
}

void shunt_fault_close(void)
{
	uint64_t ms;

	if (fault_num("SHUNT_FAULT_CLOSE_MS", &ms) && ms)
		fault_sleep_ms(ms);
}

void shunt_fault_answer_stall(void)
{
	static _Atomic uint64_t answers;
	uint64_t ms = 0, at = 1;

	if (!fault_num("SHUNT_FAULT_ANSWER_STALL_MS", &ms) || !ms)
		return;
	fault_num("SHUNT_FAULT_ANSWER_AT", &at);
	if (__atomic_add_fetch(&answers, 1, __ATOMIC_ACQ_REL) == at)
		fault_sleep_ms(ms);
}

int shunt_fault_rdma(uint64_t staged)
{
	static uint64_t at;
	static int armed = -1, once = 1, fired;
	const char *v;

	if (armed < 0) {
		armed = fault_num("SHUNT_FAULT_RDMA", &at);
		v = getenv("SHUNT_FAULT_RDMA_ONCE");
		once = !(v && *v == '0');
	}
	if (!armed || staged < at || (once && fired))
		return 0;
	fired = 1;
	shunt_log("fault: link broken after %llu staged bytes", (unsigned long long)staged);
	return 1;
}

/* Called on every tick of the progress thread, which starts with the
 * process's first link. */
int64_t shunt_fault_fo_cut(void)
{
	const char *v = getenv("SHUNT_FAULT_FO_CUT");

	return v && *v ? (int64_t)strtoull(v, NULL, 10) : -1;
}

int shunt_fault_rdma_die(void)
{
	static uint64_t ms, start;
	static int armed = -1, fired;

	if (armed < 0) {
		armed = fault_num("SHUNT_FAULT_RDMA_DIE_MS", &ms);
		start = shunt_now_ns();
	}
	if (!armed || fired || shunt_now_ns() - start < ms * 1000000ull)
		return 0;
	fired = 1;
	shunt_log("fault: every link dies now, %llu ms after the first", (unsigned long long)ms);
	return 1;
}

int shunt_fault_rdma_stall(void)
{
	static uint64_t n;
	static int armed = -1;
	static _Atomic uint64_t fired;

	if (armed < 0)
		armed = fault_num("SHUNT_FAULT_RDMA_STALL", &n);
	if (!armed || __atomic_fetch_add(&fired, 1, __ATOMIC_RELAXED) >= n)
		return 0;
	shunt_log("fault: a closing cursor message taken as not acknowledged in time");
	return 1;
}

int shunt_fault_rdma_bind(void)
{
	static uint64_t n;
	static int armed = -1;
	static _Atomic uint64_t binds;

	if (armed < 0)
		armed = fault_num("SHUNT_FAULT_RDMA_BIND", &n);
	if (!armed || __atomic_add_fetch(&binds, 1, __ATOMIC_RELAXED) != n)
		return 0;
	shunt_log("fault: bind %llu finds the binder in the error state", (unsigned long long)n);
	return 1;
}

static _Atomic int hold_released;

uint64_t shunt_fault_rdma_hold(uint64_t prod)
{
	static uint64_t at;
	static int armed = -1;

	if (armed < 0)
		armed = fault_num("SHUNT_FAULT_RDMA_HOLD", &at);
	if (!armed || prod <= at || __atomic_load_n(&hold_released, __ATOMIC_ACQUIRE))
		return prod;
	return at;
}

void shunt_fault_rdma_release(void)
{
	__atomic_store_n(&hold_released, 1, __ATOMIC_RELEASE);
}

uint32_t shunt_fault_rdma_key(uint64_t raddr, uint32_t rkey)
{
	static struct ring_key { uint64_t raddr; uint32_t first, now; } seen[64];
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int armed = -1, n;
	uint32_t k = rkey;

	if (armed < 0) {
		const char *v = getenv("SHUNT_FAULT_RDMA_STALE");
		armed = v && *v && *v != '0';
	}
	if (!armed)
		return rkey;
	shunt_mutex_lock(&mu);
	int i;
	for (i = 0; i < n && seen[i].raddr != raddr; i++)
		;
	if (i == n && n < 64)
		seen[n++] = (struct ring_key){ raddr, rkey, rkey };
	else if (i < n && seen[i].first != rkey) {
		if (seen[i].now != rkey)
			shunt_log("fault: a new connection on ring %#llx writes with the old key %#x, not %#x",
				  (unsigned long long)raddr, seen[i].first, rkey);
		seen[i].now = rkey;
		k = seen[i].first;
	}
	shunt_mutex_unlock(&mu);
	return k;
}

void shunt_fault_rdma_foreign(uint32_t proposed, struct shunt_hs_offer *o)
{
	static uint32_t seen[64];
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int armed = -1, n;
	uint32_t name = 0;
	int i;

	if (armed < 0) {
		const char *v = getenv("SHUNT_FAULT_RDMA_FOREIGN");
		armed = v && *v && *v != '0';
	}
	if (!armed)
		return;
	shunt_mutex_lock(&mu);
	for (i = n - 1; i >= 0 && !name; i--)
		if (seen[i] != proposed && seen[i] != o->peer_qpn)
			name = seen[i];
	for (i = 0; i < n && seen[i] != proposed; i++)
		;
	if (i == n) {
		if (n == 64) {
			memmove(seen, seen + 1, sizeof seen - sizeof *seen);
			n--;
		}
		seen[n++] = proposed;
	}
	shunt_mutex_unlock(&mu);
	if (!name)
		return;
	/* ::ffff:192.0.2.1 (TEST-NET-1): no route in the test guests */
	memcpy(o->gid, (uint8_t[16]){ [10] = 0xff, 0xff, 192, 0, 2, 1 }, 16);
	o->qpn = 0xfffff0;
	o->peer_qpn = name;
	shunt_log("fault: an ACCEPT names the client's queue pair %u (its PROPOSAL offered %u)", name,
		  proposed);
}

void shunt_fault_hs(uint8_t *msg, int len)
{
	static uint64_t state;
	static int armed = -1;
	const char *v;
	int span = len - 8; /* after the 8-byte header */

	if (armed < 0) {
		v = getenv("SHUNT_FAULT_HS");
		armed = v && *v;
		state = armed ? strtoull(v, NULL, 0) * 0x9e3779b97f4a7c15ull + 1 : 0;
	}
	if (!armed || span <= 0)
		return;
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	msg[8 + (int)(state % (uint64_t)span)] ^= (uint8_t)(1 + (state >> 32) % 255);
	shunt_log("fault: handshake message of %d bytes mutated", len);
}
#endif
