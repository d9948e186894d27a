/* SPDX-License-Identifier: MIT */
/*
 * client.c - connect(): offer in a slot, wait for the answer (now, or at the
 * program's next call: early.c), attach; and
 * which short-lived connections stay plain under load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
#include "rdv.h"
#include "../base/real.h"
#include "../common/msg.h"
#include "../transport/shm/arena.h"
#include "../transport/shm/shm.h"
#include "../common/agent.h"

static _Atomic int connects_in_setup; /* threads in connect_offer (busy_short) */

SHUNT_CHILD_PATH void rdv_client_atfork_child(void)
{
	SHUNT_RESET(connects_in_setup, 0); /* the threads counted are the parent's */
	rdv_early_atfork_child();
}

/* ---- client side ---- */

/* Wait for the TCP handshake of a non-blocking connect, without consuming
 * the socket's pending error (SO_ERROR belongs to the application):
 * bounded by SHUNT_ACCEPT_WAIT_MS (a shunt server that saw our SYN's
 * option waits as long for our word). */
static int wait_established(int fd)
{
	int r = fd_wait(fd, POLLOUT, shunt_now_ns() + shunt_accept_wait_ns(&shunt_cfg), 0);

	return r > 0 && !(r & (POLLERR | POLLHUP)) && (r & POLLOUT);
}

/* The server is plain if it wrote or closed before claiming. */
int rdv_tcp_has_input(int fd)
{
	return fd_wait(fd, POLLIN | POLLRDHUP, 0, 0) > 0;
}

/* The server's answer in the slot: the segment of an arena we map
 * already.  Only our own user can write a private directory's registry;
 * a shared one's members all can, and such an answer is checked in
 * rdv_client_attach (slot_sender_ok). */
static int slot_answer(struct shunt_slot *sl, uint64_t nonce, struct got_msg *got)
{
	uint32_t seg = sl->answer_seg;

	if (seg == SHUNT_SLOT_BY_MSG) /* queued before the state changed */
		return rdv_stash_take(nonce, got) ? 0 : SHUNT_R_HANDSHAKE;
	memset(got, 0, sizeof *got);
	got->m.nonce = nonce;
	got->m.arena = sl->answer_arena;
	got->m.seg = seg; /* checked by shm_attach */
	got->m.slot = SHUNT_MSG_NO_SLOT;
	got->fds[0] = got->fds[1] = got->fds[2] = -1;
	got->in_slot = 1;
	return 0;
}

/* The answer's wait sleeps in slices: 1 ms, then each twice the last, up to
 * 8 ms.  A slice that runs out costs a wake-up and a look at the socket
 * (and at the message socket); under load the server's turn is often
 * milliseconds away. */
#define ANSWER_SLICE_NS 1000000ull
#define ANSWER_SLICE_MAX_NS 8000000ull

/* Wait for the server's answer.  Each state the client may leave is left
 * by one CAS against the server's; any other value, or another
 * generation (a member of a shared directory may write the registry),
 * ends the wait, plain. */
static int client_wait_answer(struct shunt_slot *sl, uint32_t gen, uint64_t nonce, int tcp_fd,
			      const struct shunt_tuple *t, struct got_msg *got, uint64_t start, uint64_t wait_ns,
			      uint64_t spin_ns)
{
	uint64_t slice = ANSWER_SLICE_NS;
	int slept = 0, looked = !t || !shunt_dir_shared(), r;
	unsigned yields = 0;
	uint32_t owner = 0;

	for (;;) {
		uint32_t w = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), st = SHUNT_SLOT_STATE(w);
		uint64_t el = shunt_now_ns() - start;

		if (SHUNT_SLOT_GEN(w) != gen)
			return SHUNT_R_HANDSHAKE;
		if (st == SLOT_ANSWERED) {
			r = slot_answer(sl, nonce, got);
			got->has_owner = looked == 2;
			got->owner = owner;
			return r;
		}
		/* Across users, the server's answer is checked against the
		 * owner of its end of the connection (user_is_server: a
		 * sock_diag look, 3.7 us).  Claimed, the server has accepted
		 * it - its end is its own - and is busy with its answer: a
		 * client that spins has that time to look (the answer's
		 * critical path does not wait for it).  Whoever claimed, the
		 * owner seen is a user with the right to serve the connection
		 * (the listener's, before the accept; the accepter's after),
		 * never one a member chose. */
		if (st == SLOT_CLAIMED && !looked) {
			looked = tcp_owner_uid(&t->server, &t->client, &owner) ? 1 : 2;
			continue;
		}
		if (st == SLOT_FAILED)
			return SHUNT_R_HANDSHAKE;
		if (st == SLOT_DECLINED)
			return SHUNT_R_DESCRIPTORS;
		if (st != SLOT_OFFERED && st != SLOT_CLAIMED)
			return SHUNT_R_HANDSHAKE;
		/* The server is usually microseconds away: spin on the slot
		 * first, then sleep on it in short steps, looking at the TCP
		 * socket between them (a plain server may write first). */
		if (el < spin_ns) {
			__builtin_ia32_pause();
			continue;
		}
		/* (the socket from the first sleep's end on: a plain server's
		 * bytes wait that long, a shunt one's answer does not) */
		if (st == SLOT_OFFERED && (el >= wait_ns || (slept && rdv_tcp_has_input(tcp_fd))) &&
		    rdv_slot_cas(sl, gen, SLOT_OFFERED, SLOT_ABANDONED))
			return el >= wait_ns ? SHUNT_R_TIMEOUT : SHUNT_R_PEER_NOT_SHUNT;
		if (st != SLOT_OFFERED && (el >= CLAIMED_WAIT_NS || (slept && rdv_tcp_has_input(tcp_fd))) &&
		    rdv_slot_cas(sl, gen, st, SLOT_FAILED))
			return SHUNT_R_HANDSHAKE;
		/* The server is most often queued for a CPU, the one we hold
		 * among them (an event loop's epoll_ctl right after its
		 * connect settles here): give it up a few times before a
		 * sleep and a wake-up (8 threads a side, epoll clients: 1.43x
		 * -> 1.29x TCP's CPU a connection; blocking ones at 64 a
		 * side, whose writes settle here when the server took the
		 * request: 1.07x -> 1.01x) */
		if (yields++ < YIELDS_OFFER) {
			sched_yield();
			continue;
		}
		/* the flag first: a server answering now either sees it or
		 * changes the state before the futex looks */
		__atomic_fetch_or(&sl->client_waiting, SHUNT_WAIT_ANSWER, __ATOMIC_SEQ_CST);
		shunt_futex_wait(&sl->state, w, slice);
		if (slice < ANSWER_SLICE_MAX_NS)
			slice *= 2;
		/* our pending offers' answers by message fill our socket's
		 * queue (10 messages) while we wait here, and a server blocked
		 * on a full one answers nobody: read them between sleeps */
		if (slept && rdv_offers_pending())
			rdv_msg_pump();
		slept = 1;
	}
}

/* This process's turn to spin for the server (core.c), taken at start
 * for SPIN_MSG_NS, or 0: sleep at once - with more connects in set-up than
 * CPUs a spinning client takes the CPU its server needs. */
static int server_spin_turn(uint64_t start)
{
	return __atomic_load_n(&connects_in_setup, __ATOMIC_RELAXED) <= shunt_ncpus
		       ? shunt_spin_begin(SPIN_MSG_NS, start) : 0;
}

/* The wait for the answer, with the turn to spin taken for its spin and
 * given back however it ends. */
static int client_wait_msg(struct shunt_slot *sl, uint32_t gen, uint64_t nonce, int tcp_fd,
			   const struct shunt_tuple *t, struct got_msg *got, uint64_t wait_ns)
{
	uint64_t start = shunt_now_ns();
	int turn = server_spin_turn(start), r;

	r = client_wait_answer(sl, gen, nonce, tcp_fd, t, got, start, wait_ns, turn ? SPIN_MSG_NS : 0);
	shunt_spin_end(turn);
	return r;
}

/* A blocking read is the call that settles a pending offer (early.c): it
 * waits for the server's reply, not for its answer alone.  Asleep on the
 * slot with SHUNT_WAIT_DATA, it is woken by the reply (or the server's
 * shutdown, its close: server.c slot_answered, shm.c shm_push) - one sleep
 * where there were two, the answer's and then the reply's, as TCP's
 * client sleeps once.  For REPLY_WAIT_NS at most, in one sleep: the
 * answer's wait, which follows (client_wait_answer), looks at the socket
 * and the time-outs in 1 ms slices - slices that ran out under load cost
 * each a wake-up and two system calls (64 threads a side on 2 CPUs: a
 * fifth of the connections, 1.39x TCP's CPU time a connection; without
 * them 1.08x).  Not in the slot's wait itself, which holds the offer's
 * lock: another thread's call on the connection (its request, with this
 * one a reader started first) settles it meanwhile, asking for the answer
 * (SHUNT_WAIT_ANSWER, a bit of the word beside ours).  A signal ends
 * the sleep: 1 then, else 0.  A poll's time-out (max_ns) may end it sooner. */
#define REPLY_WAIT_NS 20000000ull

int rdv_await_reply(struct shunt_slot *sl, uint32_t gen, uint64_t max_ns)
{
	uint64_t start = shunt_now_ns(), sig0 = shunt_signals_seen();
	uint64_t limit = max_ns < REPLY_WAIT_NS ? max_ns : REPLY_WAIT_NS;
	/* with a CPU to spare the answer comes while we spin: the read then
	 * spins on the ring (conn_wait.c) */
	int turn = server_spin_turn(start);
	unsigned yields = 0;

	for (;;) {
		uint32_t w = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), st = SHUNT_SLOT_STATE(w);
		uint64_t el = shunt_now_ns() - start;

		if (shunt_signals_seen() != sig0) { /* (first: an answer is no reply) */
			shunt_spin_end(turn);
			return 1;
		}
		if (SHUNT_SLOT_GEN(w) != gen || (st != SLOT_OFFERED && st != SLOT_CLAIMED) || el >= limit)
			break;
		if (turn && el < SPIN_MSG_NS) {
			__builtin_ia32_pause();
			continue;
		}
		shunt_spin_end(turn);
		turn = 0;
		/* Yields first, as the answer's wait: the server's accept,
		 * its read and its reply may all fit in them (blocking clients,
		 * every connection offered: 32 a side 0.97x -> 0.85x TCP's CPU
		 * a connection, 64 a side 1.04x -> 0.92x) - not in the run
		 * queues where short connections stay plain (busy_short), in
		 * which each yield is one more turn for nothing (128 a side,
		 * about 100 runnable threads on 2 CPUs: 1.08x -> 1.19x) */
		if (yields++ < YIELDS_OFFER &&
		    shunt_cpus_runnable(start + el) < (long)shunt_cfg.busy_runnable * shunt_ncpus) {
			sched_yield();
			continue;
		}
		/* a server answering now either sees the flag or changes the
		 * state before the futex looks (its CAS, then its look) */
		__atomic_fetch_or(&sl->client_waiting, SHUNT_WAIT_DATA, __ATOMIC_SEQ_CST);
		shunt_futex_wait(&sl->state, w, limit - el);
	}
	shunt_spin_end(turn);
	return 0;
}

/* Is the sender of an accept message the server of this connection?  Our
 * own user always is (only it can reach our socket in a private directory);
 * another user of a shared directory must own the server's end of the TCP
 * connection (the accepting process's user: peercred.c) - else a member
 * could take our connections to a plain server (and answer for it). */
static int user_is_server(const struct sk *s, int fd, const struct got_msg *g, uint32_t uid)
{
	struct shunt_tuple t;
	uint32_t owner;

	if (uid == (uint32_t)geteuid())
		return 1;
	if (!shunt_dir_shared())
		return 0;
	if (g->has_owner && g->owner == uid) /* (else: looked at too early) */
		return 1;
	if (s->has_tuple == SK_TUPLE_BOTH) /* (our offer's: no look) */
		t = s->tuple;
	else if (rdv_sock_tuple(fd, &t.client, &t.server))
		return 0;
	return !tcp_owner_uid(&t.server, &t.client, &owner) && owner == uid;
}

static int sender_is_server(const struct sk *s, int fd, const struct got_msg *g)
{
	return g->in_slot || (g->has_uid && user_is_server(s, fd, g, g->uid));
}

/* An answer in a shared directory's slot, which every member may write,
 * names a segment of arena a (mapped here) and carries our offer's nonce
 * there (shm_attach checks it): only the processes that map a - we and
 * the one that sent it to us - can have written it.  So it is the
 * server's answer if that sender's user (recorded as a came: arena.c)
 * owns the server's end of this connection, as a message's sender must.
 * A member that once served us for real (we map its arena) and claims
 * our offer to another user's server fails here (tests/security/dir.sh
 * 1j).  Our own user's arena needs no look, as its messages need none. */
static int slot_sender_ok(const struct sk *s, int fd, const struct got_msg *g, struct arena *a)
{
	uint32_t uid = __atomic_load_n(&a->uid, __ATOMIC_RELAXED);

	if (!shunt_dir_shared())
		return 1;
	if (uid != UINT32_MAX && user_is_server(s, fd, g, uid))
		return 1;
	shunt_warn("answer in the offer slot names arena %llx, sent by uid %d, who does not own this "
		   "connection's server: refused", (unsigned long long)a->id, uid == UINT32_MAX ? -1 : (int)uid);
	return 0;
}

/* The client's decision in the segment's confirm word (1 attached, 2
 * declined), once, against the server's time-out; a server asleep on the
 * word (confirm_waiter, set before it sleeps) is woken.  0 if the word was
 * decided already. */
static int confirm_decide(struct shunt_seg_hdr *h, uint32_t v)
{
	uint32_t pending = 0;

	if (!__atomic_compare_exchange_n(&h->confirm, &pending, v, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_ACQUIRE))
		return 0;
	if (__atomic_load_n(&h->confirm_waiter, __ATOMIC_SEQ_CST))
		shunt_futex_wake(&h->confirm, 1);
	return 1;
}

/* Attach the segment the accept message names, on the program's own
 * number of the socket (borrowed: fdtab.c).  If we cannot, decline
 * through the segment's confirm word when we can reach it (the server then
 * falls back at once), else the server times out to TCP. */
int rdv_client_attach(struct sk *s, int fd, uint64_t nonce, struct got_msg *g)
{
	int has_arena = !!(g->m.flags & SHUNT_MSG_F_ARENA), r = 0;
	struct arena *a;
	struct conn *c = NULL;

	if (!sender_is_server(s, fd, g)) {
		shunt_warn("accept message from uid %d, who does not own this connection's server: refused",
			   g->has_uid ? (int)g->uid : -1);
		rdv_close_fds(g->fds, has_arena ? 3 : 0);
		return SHUNT_R_HANDSHAKE;
	}
	/* An answer in the slot names an arena we map (we keep every one
	 * while an offer is in flight, and say when we unmap one: arena.c);
	 * an answer by message carries the arena unless it is mapped here. */
	if (arena_client_get(g->m.arena, has_arena ? g->fds : NULL, g->has_uid ? &g->uid : NULL, &a))
		return SHUNT_R_HANDSHAKE;
	if (g->in_slot && !slot_sender_ok(s, fd, g, a))
		r = SHUNT_R_HANDSHAKE;
	else if (shm_attach(&c, a, g->m.seg, 0, fd, 1, &nonce))
		r = SHUNT_R_RESOURCE;
	if (r) {
		if (g->m.seg < SHUNT_ARENA_SLOTS && arena_seg(a, g->m.seg)->nonce == nonce)
			confirm_decide(arena_seg(a, g->m.seg), 2);
		arena_put(a); /* the server drops our owner when it sees the decline */
		return r;
	}
	if (!confirm_decide(shm_of(c)->seg, 1)) {
		/* the server timed out first and dropped our owner; the
		 * stream goes on on the socket */
		conn_discard(c);
		return SHUNT_R_HANDSHAKE;
	}
	s->conn = c;
	s->kind = SK_CONN;
	s->reason = SHUNT_R_NONE;
	return 0;
}

/* ---- short-lived connections under load ----
 *
 * Setting a connection up takes two processes scheduled in turn: a slot,
 * the server's answer, the client's confirmation.  With a CPU free each
 * side spins through its turn and the set-up is faster than TCP's (one
 * thread: 1.2-1.7x); with many more threads than CPUs each turn is a
 * sleep and a wake-up that waits in a long run queue, and a burst of short
 * connections queued on them: connect + one byte + close ran at a third of
 * TCP's rate (issue #13, item 10).  Linux SMC learned the same ("skipped
 * under load": 247 -> 34,488 short connections a second).  So each port's
 * registry keeps a score of its connections' lifetimes: one that ended
 * within SHUNT_SHORT_MS adds 1 (up to 255), a longer one halves it (under
 * load a short one's end may be late now and then).  While it is
 * SHORT_RUN_MIN or more, a new connection stays plain (reason busy-short)
 * - its set-up is TCP's - when the host has 40 or more runnable threads a
 * CPU (SHUNT_BUSY_RUNNABLE; spin.c: the kernel's count, looked at every
 * 10 ms).  Measured on 2 CPUs (docs/benchmarks.md, twenty-fifth session),
 * CPU time a connect + byte each way + close against TCP's, both sides N
 * threads: an offered connection 0.90-0.93x at 8 a side (about 11
 * runnable), 0.86x at 32 (about 38), 0.89-0.92x at 64 (about 69),
 * 1.04-1.09x at 128 (about 100), 1.09x at 256; a plain one,
 * interposition's 1.05-1.08x.  The mark was 16 while a set-up slept
 * twice (1.15x at 32 a side, 1.35-1.4x at 64: twenty-second session)
 * and until the reader's first wait gave its CPU up before it slept
 * (rdv_await_reply: 32 a side, the default 1.07x -> 0.86x, 64 a side
 * 1.08x -> 0.89x, 128 a side 1.05x -> 1.12x, where offered and plain
 * connections mix).  A process with an epoll set keeps the old mark
 * (EPOLL_RUNNABLE_MAX): its connections, settled in epoll_ctl and waited
 * for on the arena's doorbell (which every connection of the arena rings:
 * all its threads' sets wake), cost 1.36-1.51x TCP's CPU offered at 8-64
 * threads a side, 1.07-1.12x plain.  Before, any two connects in set-up at once in a process
 * (or 4 runnable threads on 2 CPUs) kept a port plain: right when every
 * wait was a futex sleep, 3-8% dearer than needed since the server yields
 * to its client (server.c await_offer).  A lone thread on CPUs that are
 * merely busy is accelerated: the case spinning serves (1.4x TCP's rate).
 * Plain ones report their lifetimes too, so the port is accelerated again
 * once its connections live longer, or when the burst is over.
 * SHUNT_BUSY_SHORT=0 turns the rule off (tests of other behaviour, which
 * expect every connection accelerated on a host other jobs may load). */
#define SHORT_RUN_MIN 16

static int busy_short(const struct portreg *p)
{
	long mark = shunt_cfg.busy_runnable;

	if (mark > EPOLL_RUNNABLE_MAX && ep_in_use())
		mark = EPOLL_RUNNABLE_MAX;
	return shunt_cfg.busy_short && __atomic_load_n(&p->r->short_run, __ATOMIC_RELAXED) >= SHORT_RUN_MIN &&
	       shunt_cpus_runnable(shunt_now_ns()) >= mark * shunt_ncpus;
}

/* A server that forks a process for each connection (the port's
 * fork_run: server.c rdv_note_served) pays for an accepted connection's
 * set-up in a new process each time: the child faults in the arena's
 * pages it touches (a fork copies no entry of a shared mapping) and each
 * side's turn is a wake-up of the other - with a byte or a request each
 * way, 0.71x TCP's rate against 0.85x for the same connections left plain
 * (docs/benchmarks.md, fiftieth session; with this rule, 0.60x -> 0.67x
 * and 0.68x -> 0.73x with 1 and 8 client threads, plain 0.71x and 0.74x
 * in the same run: fifty-first session).  So a short-lived port's
 * connections to such a server stay plain (reason fork-short) whatever
 * the load.  Lifetimes are scored as busy-short's: once the connections
 * live longer than SHUNT_SHORT_MS they are accelerated again - a
 * session's backend that lives for seconds gains from its rings.
 * SHUNT_BUSY_SHORT=0 turns this rule off too. */
#define FORK_RUN_MIN 8

static int fork_short(const struct portreg *p)
{
	return shunt_cfg.busy_short && __atomic_load_n(&p->r->fork_run, __ATOMIC_RELAXED) >= FORK_RUN_MIN &&
	       __atomic_load_n(&p->r->short_run, __ATOMIC_RELAXED) >= SHORT_RUN_MIN;
}

/* While threads wait for a CPU, a short connection's life is stretched by
 * its turns in the queue (128 threads on 2 CPUs: a connect-request-close
 * often takes over 10 ms), and halving the score for each such one kept
 * 4-5% of a burst offered - at 2.5 times a plain set-up's cost.  Then only
 * a life ten times the mark counts as long; a keep-alive pool's
 * connections live far longer than that. */
#define CROWDED_LONG 10

/* The last close of a client's connection that took part. */
void rdv_note_end(struct sk *s)
{
	struct portreg *p = rdv_reg_peek(s->short_port);
	uint64_t now, life;
	uint32_t v;

	if (!p)
		return;
	/* racy read-modify-writes: a lost update between two closers does
	 * not matter, and the value is advice */
	v = __atomic_load_n(&p->r->short_run, __ATOMIC_RELAXED);
	now = shunt_now_ns();
	life = now - s->born_ns;
	if (life < SHUNT_SHORT_MS * 1000000ull) {
		if (v < 255)
			__atomic_store_n(&p->r->short_run, v + 1, __ATOMIC_RELAXED);
	} else if (life >= SHUNT_SHORT_MS * 1000000ull * (shunt_cpus_crowded(now) ? CROWDED_LONG : 1)) {
		if (v)
			__atomic_store_n(&p->r->short_run, v / 2, __ATOMIC_RELAXED);
	}
}

/* Something a server waiting for its offer must look at was published
 * (an offer, a plain connection's tuple, client port `port`): the futex
 * word of the port's bucket moves, and the servers asleep on it - counted
 * before they sleep (await_offer) - wake; the others sleep on. */
static void offers_changed(struct portreg *p, uint16_t port)
{
	struct shunt_offer_wait *w = rdv_offer_wait(p, port);

	__atomic_add_fetch(&w->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->waiters, __ATOMIC_SEQ_CST))
		shunt_futex_wake(&w->seq, INT32_MAX);
}

/* A busy-short connection's tuple, once its connect returned (0 or
 * EINPROGRESS: the port is bound either way): a server that accepts it
 * while other clients' offers are in CONNECTING finds it here instead of
 * waiting for them (issue #13, item 10: 64 threads a side waited 75-110
 * us on average for each plain connection, some for milliseconds).  Advice
 * only, like the score: a member of a shared directory who writes records
 * can only make connections plain. */
#define PLAIN_FRESH_NS 100000000ull

static void plain_announce(struct portreg *p, int fd, const struct shunt_addr *dst,
			   const struct sockaddr *addr, struct sk *s)
{
	struct shunt_tuple tu;

	if (rdv_is_any(dst))
		return;
	if (!__atomic_load_n(&p->r->reserved, __ATOMIC_SEQ_CST)) {
		/* nobody in CONNECTING for a server to wait on: no need to
		 * ask the kernel for our port (server.c accept_unoffered) */
		memset(&s->tuple.client, 0, sizeof s->tuple.client);
		s->tuple.server = *dst;
		s->has_tuple = SK_TUPLE_REMOTE;
		return;
	}
	if (rdv_sock_tuple_known(fd, &tu.client, &tu.server, addr))
		return;
	s->tuple = tu; /* `shunt ss` (stats.c) needs no look of its own */
	s->has_tuple = SK_TUPLE_BOTH;
	rdv_plain_record(p, &tu);
}

/* Connection t is plain: a record in the registry's plain[] (by its
 * client: busy-short; by its server: it took the connection before the
 * offer came, server.c).  0, or -EBUSY if another writer was on the
 * record (then none is written: whoever waits for it waits as before). */
int rdv_plain_record(struct portreg *p, const struct shunt_tuple *t)
{
	struct shunt_plain_rec *r;
	uint32_t seq;

	r = &p->r->plain[__atomic_fetch_add(&p->r->plain_head, 1, __ATOMIC_RELAXED) % SHUNT_REG_PLAIN];
	seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
	if (seq & 1 || !__atomic_compare_exchange_n(&r->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return -EBUSY; /* another writer wraps onto it */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	r->stamp_ns = shunt_now_ns();
	r->tuple = *t;
	__atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
	offers_changed(p, t->client.port); /* a server asleep for it looks again */
	return 0;
}

/* Did this connection's client (or server) announce it plain, less than
 * max_age ago (0: ever)? */
static int plain_rec_is(struct shunt_plain_rec *r, const struct shunt_tuple *t, uint64_t now,
			uint64_t max_age)
{
	uint32_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE), s2;
	struct shunt_tuple tu;
	uint64_t stamp;

	if (s1 & 1 || !s1)
		return 0;
	stamp = r->stamp_ns;
	tu = r->tuple;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
	return s1 == s2 && (!max_age || now - stamp < max_age) && rdv_tuple_eq(&tu, t);
}

int rdv_plain_seen(struct portreg *p, const struct shunt_tuple *t, uint64_t now)
{
	for (unsigned i = 0; i < SHUNT_REG_PLAIN; i++)
		if (plain_rec_is(&p->r->plain[i], t, now, PLAIN_FRESH_NS))
			return 1;
	return 0;
}

/* ... in a record written since plain_head read `since` (the records
 * taken from then to now; all of them past a wrap), however long ago: a
 * client preempted before its publication for longer than PLAIN_FRESH_NS
 * still finds its server's record. */
static int plain_seen_since(struct portreg *p, const struct shunt_tuple *t, uint32_t since)
{
	uint32_t n = __atomic_load_n(&p->r->plain_head, __ATOMIC_ACQUIRE) - since;

	if (!n)
		return 0; /* nothing written: no look at the records at all */
	for (uint32_t k = 0; k < n && k < SHUNT_REG_PLAIN; k++)
		if (plain_rec_is(&p->r->plain[(since + k) % SHUNT_REG_PLAIN], t, 0, 0))
			return 1;
	return 0;
}

static int connect_offer(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len,
			 struct portreg *p, const struct shunt_addr *dst);

/* Called instead of the real connect() for TCP sockets.  Returns what the
 * real connect returned (0 or -errno); the decision lands in s. */
int rdv_connect(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len)
{
	struct shunt_addr dst;
	struct portreg *p;
	uint64_t nonce;
	int ret, live, may, deferred = 0, reuseport = 0, skip;

	s->is_client = 1;
	if (shunt_addr_from_sockaddr(&dst, addr) || !shunt_active)
		return rdv_sys(real.connect(fd, addr, len));
	s->reason = shunt_off_reason ? shunt_off_reason : SHUNT_R_POLICY;
	if (shunt_off_reason || !shunt_config_port_allowed(&shunt_cfg, dst.port))
		return rdv_sys(real.connect(fd, addr, len));
	if (fd_pressure()) { /* out of descriptors a moment ago (giveback.c) */
		s->reason = SHUNT_R_DESCRIPTORS;
		return rdv_sys(real.connect(fd, addr, len));
	}
	s->reason = SHUNT_R_PEER_NOT_SHUNT;
	p = shunt_cfg.local ? rdv_reg_get(dst.port, 0, 0) : NULL;
	if (p && (skip = fork_short(p) ? SHUNT_R_FORK_SHORT : busy_short(p) ? SHUNT_R_BUSY_SHORT : 0)) {
		s->reason = skip;
		s->short_port = dst.port;
		s->born_ns = shunt_now_ns();
		ret = rdv_sys(real.connect(fd, addr, len));
		if (!ret || ret == -EINPROGRESS)
			plain_announce(p, fd, &dst, addr, s);
		return ret;
	}
	live = p && rdv_reg_live(p);
	if (p && !live && (p = rdv_reg_get(dst.port, 0, 1))) /* its listeners gone: a new file? */
		live = rdv_reg_live(p);
	may = live && rdv_reg_may_match(p, &dst, &deferred, &reuseport);
	if (may && !deferred && reuseport && !rdv_reg_group_ours(p, &dst)) {
		/* a socket of the port's SO_REUSEPORT group that shunt does not
		 * serve may be the kernel's pick: no offer (wire.h) */
		s->reason = SHUNT_R_REUSEPORT;
		ret = rdv_sys(real.connect(fd, addr, len));
		if (!ret || ret == -EINPROGRESS)
			plain_announce(p, fd, &dst, addr, s);
		return ret;
	}
	if (!may || deferred) {
		/* Not a local shunt server, or one whose listener waits for the
		 * first byte on the socket (TCP_DEFER_ACCEPT: Apache's default
		 * AcceptFilter, nginx's "deferred") - a byte an offer never
		 * sends, so its client waited for a claim that came only after
		 * it gave up (5 ms, or 200 ms, a connection): the agent, if any,
		 * signals in the SYN, and the PROPOSAL is that first byte.
		 * The in-band handshake runs here, in connect(), once the kernel
		 * made the connection (the network's round trip: a shunt server
		 * that saw our option waits for the PROPOSAL that long).  Then a
		 * non-blocking connect - a call TCP never blocks in - waits for
		 * the server's answer, which comes once its application took the
		 * connection, as a non-blocking socket's first call waits for a
		 * local server's claim (5 ms), not as a blocking connect() does
		 * (SHUNT_ACCEPT_WAIT_MS): an event loop is not held while its
		 * server is slow to accept (then plain, reason hs-timeout). */
		int marked = agent_mark_client(fd), st;
		uint64_t answer_ns;

		ret = rdv_sys(real.connect(fd, addr, len));
		if (marked == -ENOENT && deferred) /* a local shunt server we cannot reach */
			s->reason = SHUNT_R_UNSUPPORTED;
		else if (marked == -ENOENT) /* nobody to ask a peer on another host */
			s->reason = rdv_is_other_host(fd, &dst) ? SHUNT_R_NO_AGENT : SHUNT_R_PEER_NOT_SHUNT;
		else if (marked)
			s->reason = SHUNT_R_RESOURCE; /* no storage for it: no option sent */
		if (marked || (ret && ret != -EINPROGRESS) ||
		    (ret == -EINPROGRESS && !wait_established(fd))) {
			/* No verdict to wait for: a shunt server that saw our
			 * option waits for no PROPOSAL either (inband.c). */
			if (!marked)
				s->reason = ret == -EINPROGRESS ? SHUNT_R_CONNECT_SLOW : s->reason;
			return ret;
		}
		answer_ns = ret == -EINPROGRESS ? shunt_nonblock_wait_ns(&shunt_cfg) : shunt_accept_wait_ns(&shunt_cfg);
		st = agent_take(fd, &nonce);
		s->reason = st == SHUNT_AG_CLIENT_PEER_OK ? inband_client(s, fd, nonce, answer_ns) : agent_reason_of(st);
		return ret;
	}
	__atomic_add_fetch(&connects_in_setup, 1, __ATOMIC_RELAXED);
	ret = connect_offer(fd, s, addr, len, p, &dst);
	__atomic_sub_fetch(&connects_in_setup, 1, __ATOMIC_RELAXED);
	s->short_port = dst.port;
	s->born_ns = shunt_now_ns();
	return ret;
}

/* A local shunt server listens on the port: offer it the connection.
 * A private directory's slot answer is final (the server does not wait
 * for us), so nothing
 * may fail after it but what the server did wrong: the connection's
 * socket is the program's own number (fdtab.c), nothing to make.  The
 * answer is waited for here, or - when the connection is up and we may
 * write its first bytes into the slot - at the program's first call that
 * needs it (early.c). */
static int connect_offer(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len,
			 struct portreg *p, const struct shunt_addr *dst)
{
	struct shunt_slot *sl;
	uint64_t nonce, sock_id;
	struct shunt_tuple tu;
	struct offer *o;
	uint32_t gen, heads;
	int ret, leave;

	s->reason = SHUNT_R_RESOURCE;
	if (!arena_mappable()) { /* (the answer is final: an arena we could not map ended it) */
		static int told;
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			shunt_warn("the process's memory limits (RLIMIT_AS; mlockall(MCL_FUTURE) within "
				   "RLIMIT_MEMLOCK) leave no room for a shared-memory arena: its connections "
				   "stay plain TCP (reason resource-limit)");
		return rdv_sys(real.connect(fd, addr, len));
	}
	if (rdv_csock_get(&sock_id))
		return rdv_sys(real.connect(fd, addr, len));
	arena_offer_begin();
	if (!(sl = rdv_slot_reserve(p, sock_id, &nonce, dst, &gen))) {
		arena_offer_end();
		return rdv_sys(real.connect(fd, addr, len));
	}
	/* a plain[] record about this connection comes after its SYN */
	heads = __atomic_load_n(&p->r->plain_head, __ATOMIC_ACQUIRE);
	ret = rdv_sys(real.connect(fd, addr, len));
	if (ret && ret != -EINPROGRESS)
		goto fail;
	if (ret == -EINPROGRESS && !wait_established(fd)) {
		s->reason = SHUNT_R_CONNECT_SLOW;
		goto fail;
	}
	/* Build the tuple aside: a server scanning CONNECTING slots reads
	 * tuple.server meanwhile and must never see it half rewritten. */
	if (rdv_sock_tuple_known(fd, &tu.client, &tu.server, rdv_is_any(dst) ? NULL : addr)) {
		s->reason = SHUNT_R_HANDSHAKE;
		goto fail;
	}
	sl->tuple.client = tu.client;
	if (memcmp(&sl->tuple.server, &tu.server, sizeof tu.server))
		sl->tuple.server = tu.server;
	s->tuple = tu;
	s->has_tuple = SK_TUPLE_BOTH;
	o = malloc(sizeof *o);
	if (!o) {
		s->reason = SHUNT_R_RESOURCE;
		goto fail;
	}
	*o = (struct offer){ .p = p, .sl = sl, .early = &p->r->early[sl - p->r->slots],
			     .nonce = nonce, .gen = gen, .sockfd = fd };
	/* (a non-blocking connect's too: its handshake is made - above -
	 * and the program polls for room, writes and polls for the reply) */
	leave = (!ret || ret == -EINPROGRESS) && rdv_early_reserve(p);
	__atomic_store_n(&o->early->len, leave ? SHUNT_EARLY_PENDING : 0, __ATOMIC_RELAXED);
	shunt_fault_publish(); /* tests only (fault.c) */
	if (!rdv_slot_cas(sl, gen, SLOT_CONNECTING, SLOT_OFFERED)) {
		/* not ours any more (a member of a shared directory wrote it) */
		s->reason = SHUNT_R_HANDSHAKE;
		goto unpublished;
	}
	/* The server may have accepted the connection before we published
	 * (a non-blocking accept(), or we were preempted past its wait) and
	 * taken it plain: then it says so in plain[] before it looks at the
	 * slots one last time.  Our publication, then our look at plain[];
	 * its record, then its look at the slots: one of us sees the other,
	 * and the slot's CAS (its claim, our abandon) decides. */
	offers_changed(p, tu.client.port);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (plain_seen_since(p, &tu, heads) && rdv_slot_cas(sl, gen, SLOT_OFFERED, SLOT_ABANDONED)) {
		s->reason = SHUNT_R_SERVER_FIRST;
		goto unpublished;
	}
	s->offer = o;
	if (leave) {
		s->reason = SHUNT_R_NONE; /* pending */
		rdv_early_begin(s);
	} else {
		rdv_offer_settle(s); /* now: no first bytes to carry */
	}
	return ret;
unpublished:
	if (leave)
		rdv_early_unreserve();
	free(o);
fail:
	rdv_slot_free(p, sl, gen);
	arena_offer_end();
	return ret;
}

/* The server's answer to the offer o (its accept waited for wait_ns at
 * most: then the connection is plain, SHUNT_R_TIMEOUT), and our attach;
 * the slot freed.
 * Returns the decision (SHUNT_R_NONE: accelerated); if it is not, the
 * first bytes we wrote into the slot are the caller's to send
 * (*resend: from o->mine - the freed slot may hold another offer's
 * bytes by then), or - a final answer we could not take - the connection
 * is the server's and is to be ended (*cut). */
int rdv_offer_finish(struct sk *s, struct offer *o, uint64_t wait_ns, int *resend, int *cut)
{
	struct got_msg got;
	int reason = client_wait_msg(o->sl, o->gen, o->nonce, o->sockfd,
				     s->has_tuple == SK_TUPLE_BOTH ? &s->tuple : NULL, &got, wait_ns),
	    final = 0;

	*resend = *cut = 0;
	if (!reason) {
		/* the server waits for no confirmation (in a shared directory
		 * it waits: a slot answer we refuse there goes plain) */
		final = (got.in_slot && !shunt_dir_shared()) || o->counted;
		/* (an answer in the slot carries no descriptors: an arena
		 * not mapped here fails the attach, HANDSHAKE) */
		reason = rdv_client_attach(s, o->sockfd, o->nonce, &got);
	}
	if (!reason)
		shm_of(s->conn)->sock_clean = 1; /* no handshake bytes on its socket */
	if (reason && final)
		*cut = 1;
	else if (reason)
		*resend = 1; /* the server reads the socket from its first byte */
	rdv_slot_free(o->p, o->sl, o->gen);
	arena_offer_end();
	return reason;
}
