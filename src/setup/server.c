/* SPDX-License-Identifier: MIT */
/*
 * server.c - accept(): find the client's offer, claim it, answer with a
 * segment, wait for the confirmation; and the in-band handshake's shared
 * memory (a path the registry cannot see).
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

/* ---- server side ---- */

/* Find this connection's offer (*w: its state word, OFFERED).  *busy
 * says whether a client of ours may still be between reserving its slot
 * and publishing its tuple to the address we accepted on (a plain client
 * never reserves, so it never waits for this):
 * - BUSY_WAIT: one reserved before `start` (after our accept() returned)
 *   and not CONNECTING_FRESH_NS ago: it may be the one we accepted, whose
 *   reservation came before its SYN - wait for it;
 * - BUSY_TELL: one we do not wait for but whose client may still be ours
 *   and publish late - its reservation went stale while we waited (a
 *   client preempted that long), or its time is after `start` (not ours,
 *   unless a client that lost the slot's CAS to ours wrote its own time
 *   over ours: registry.c) - we record the connection plain before we
 *   give up (await_offer). */
#define BUSY_WAIT 1
#define BUSY_TELL 2

static struct shunt_slot *find_offer(struct portreg *p, const struct shunt_tuple *t, uint64_t start,
				     int *busy, unsigned *idx, uint32_t *w)
{
	uint64_t now = shunt_now_ns();
	unsigned used = __atomic_load_n(&p->r->slots_used, __ATOMIC_ACQUIRE);

	*busy = 0;
	for (unsigned i = 0; i < used && i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &p->r->slots[i];
		uint32_t sw = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), st = SHUNT_SLOT_STATE(sw);
		uint64_t stamp;

		if (st == SLOT_CONNECTING && sl->tuple.server.port == t->server.port &&
		    !memcmp(sl->tuple.server.ip, t->server.ip, 16)) {
			stamp = __atomic_load_n(&sl->stamp_ns, __ATOMIC_RELAXED);
			if (stamp < start && now - stamp < CONNECTING_FRESH_NS)
				*busy |= BUSY_WAIT;
			else if (stamp >= start || start - stamp < CONNECTING_FRESH_NS)
				*busy |= BUSY_TELL;
		}
		if (st == SLOT_OFFERED && rdv_tuple_eq(&sl->tuple, t)) {
			*idx = i;
			*w = sw;
			return sl;
		}
	}
	return NULL;
}

/* Claim the offer found in state word w: OFFERED -> CLAIMED, in its
 * generation (the fields read after w are that reservation's: its client
 * wrote them before it published; a slot reused meanwhile has another
 * generation, and the CAS fails). */
static int claim(struct shunt_slot *sl, uint32_t w, uint64_t *nonce, uint64_t *sock_id, uint64_t *netns)
{
	uint64_t n = sl->nonce, id = sl->sock_id, ns = sl->netns;

	if (!rdv_slot_cas(sl, SHUNT_SLOT_GEN(w), SLOT_OFFERED, SLOT_CLAIMED))
		return 0;
	*nonce = n;
	*sock_id = id;
	*netns = ns;
	return 1;
}

/* The answer is in: CLAIMED -> ANSWERED in our offer's generation (the
 * client may have given up meanwhile, -> FAILED; or - we stalled past
 * its wait - the slot is another offer's now: then no), and the client
 * woken if asleep - or, asleep in a read (SHUNT_WAIT_DATA) and answered in
 * the slot, by our connection's first wake-up of its reader (shm.c
 * shm_push: our reply, shutdown or close). */
static int slot_answered(struct shunt_slot *sl, uint32_t gen, struct conn *c, int by_msg, uint64_t sock_id)
{
	uint32_t why;

	if (!rdv_slot_cas(sl, gen, SLOT_CLAIMED, SLOT_ANSWERED))
		return 0;
	/* a wake of a slot that was freed and reused is spurious, harmless;
	 * the word's bits are its waiters' (two threads of the client may
	 * wait: a read, another call), a bit we do not know one to wake now */
	why = __atomic_load_n(&sl->client_waiting, __ATOMIC_SEQ_CST);
	if ((why & ~(SHUNT_WAIT_DATA | SHUNT_WAIT_EPOLL)) || ((why & SHUNT_WAIT_DATA) && by_msg))
		shunt_futex_wake(&sl->state, INT32_MAX);
	else if (why & SHUNT_WAIT_DATA)
		shm_wake_owed(c, &sl->state);
	if ((why & SHUNT_WAIT_EPOLL) && !by_msg) /* (an accept message wakes the set itself) */
		rdv_send_wake(sock_id);
	return 1;
}

/* We give the client's claimed offer up (SLOT_FAILED, SLOT_DECLINED): a
 * client asleep on the slot - for our answer, or a read for our reply -
 * wakes to go plain now; it slept on until its 20 ms were up, and our
 * reply waited on its socket that long (a dovecot login process, whose
 * accept messages cannot reach a client from its chroot: every greeting
 * 20 ms late).  An epoll set waiting for the reply holds the socket, where
 * the reply comes. */
static void slot_refuse(struct shunt_slot *sl, uint32_t gen, uint32_t to)
{
	if (rdv_slot_cas(sl, gen, SLOT_CLAIMED, to) &&
	    (__atomic_load_n(&sl->client_waiting, __ATOMIC_SEQ_CST) & ~SHUNT_WAIT_EPOLL))
		shunt_futex_wake(&sl->state, INT32_MAX);
}

/* Before a seccomp filter goes in (core.c), while a futex wake-up is
 * still ours to make: the offers already made to our listener at listen
 * (netns: its network namespace) - published before its record said off
 * - are refused, waking their clients, which go plain at once.  In the
 * sandbox its accept() makes no call of ours, and each such client
 * waited for a claim (200 ms) before its first bytes left the slot.  One
 * published after this look, by a client that read the record just
 * before it said off, still waits. */
void rdv_offers_refuse(struct portreg *p, const struct shunt_addr *listen, uint64_t netns)
{
	unsigned used = __atomic_load_n(&p->r->slots_used, __ATOMIC_ACQUIRE);
	int any = rdv_is_any(listen);
	uint64_t nonce, sock_id, ns;

	for (unsigned i = 0; i < used && i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &p->r->slots[i];
		uint32_t sw = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);

		if (SHUNT_SLOT_STATE(sw) != SLOT_OFFERED || sl->netns != netns ||
		    sl->tuple.server.port != listen->port || (!any && memcmp(sl->tuple.server.ip, listen->ip, 16)))
			continue;
		if (claim(sl, sw, &nonce, &sock_id, &ns))
			slot_refuse(sl, SHUNT_SLOT_GEN(sw), SLOT_FAILED);
	}
}

/* The server's side of the segment's confirm word: decline (0 -> 2)
 * unless the client decided first.  The word's decided value: 2 if we
 * declined (or the client did), 1 if the client attached. */
static uint32_t server_decline(struct conn *c)
{
	uint32_t v = 0;

	if (__atomic_compare_exchange_n(&shm_of(c)->seg->confirm, &v, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 2;
	return v;
}

static int server_wait_confirm(struct conn *c, int tcp_fd, uint64_t wait_ns)
{
	_Atomic uint32_t *confirm = &shm_of(c)->seg->confirm;
	uint64_t start = shunt_now_ns(), spin = (uint64_t)(shunt_cfg.spin_ns > 0 ? shunt_cfg.spin_ns : 0);
	uint32_t v;
	/* The client is inside connect(), a few microseconds from answering:
	 * spin for the data path's budget if this process has a turn, then
	 * sleep on the word (with more threads than cores the client may need
	 * this very CPU). */
	int turn = spin ? shunt_spin_begin(spin, start) : 0;

	if (!turn)
		spin = 0;
	for (unsigned i = 0; !(v = __atomic_load_n(confirm, __ATOMIC_ACQUIRE)); i++) {
		if ((i & 63) || shunt_now_ns() - start < spin) {
			__builtin_ia32_pause();
			continue;
		}
		shunt_spin_end(turn);
		turn = 0;
		if (shunt_now_ns() - start > wait_ns || rdv_tcp_has_input(tcp_fd)) {
			v = server_decline(c);
			break;
		}
		/* asleep until the client's decision wakes us (1 ms steps:
		 * the socket is looked at between them); the flag first, so a
		 * client deciding now either sees it or we see its word */
		__atomic_store_n(&shm_of(c)->seg->confirm_waiter, 1, __ATOMIC_SEQ_CST);
		shunt_futex_wait(confirm, 0, 1000000);
	}
	shunt_spin_end(turn);
	return v == 1;
}

/* The client's first bytes (early.c), into the ring it writes, before we
 * answer: its attach finds them there as its own.  No byte more after
 * this; bytes it could not add go through the ring.  -EPROTO for a length
 * the client cannot have written. */
static int take_early(struct shunt_early *e, struct conn *c)
{
	uint32_t len = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);

	while (!(len & SHUNT_EARLY_TAKEN) &&
	       !__atomic_compare_exchange_n(&e->len, &len, len | SHUNT_EARLY_TAKEN, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	len = SHUNT_EARLY_LEN(len);
	if (len > SHUNT_EARLY_MAX || len > c->rx.size)
		return -EPROTO;
	memcpy(c->rx.data, e->data, len);
	__atomic_store_n(&c->rx.ctl->prod, (uint64_t)len, __ATOMIC_RELEASE);
	return 0;
}

/* In a shared directory, an offer for this tuple could be any member's:
 * the segment goes only to a process of the user who owns the client's
 * end of the TCP connection.  A message goes to its c<id> socket, which
 * must be that user's (nobody else can replace that user's file in a
 * sticky directory - but once its owner removed it, anyone may make one
 * of that name): client_is, *uid its owner.  An answer in the slot goes
 * to the process that maps the arena, which went to that socket when its
 * owner was checked: that owner must own this connection's end
 * (client_still, no look at the file). */
static int client_is(const struct shunt_tuple *t, uint64_t sock_id, uint32_t *uid)
{
	char name[SHUNT_DIR_NAME_MAX];
	struct stat st;
	uint32_t owner;

	shunt_dir_name(name, 'c', sock_id);
	if (!fstatat(shunt_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(st.st_mode) &&
	    !tcp_owner_uid(&t->client, &t->server, &owner) && owner == (uint32_t)st.st_uid) {
		*uid = owner;
		return 1;
	}
	shunt_warn("offer for %s's connection names another user's socket: refused", name);
	return 0;
}

static int client_still(const struct shunt_tuple *t, uint64_t sock_id, uint32_t uid)
{
	uint32_t owner;

	if (!tcp_owner_uid(&t->client, &t->server, &owner) && owner == uid)
		return 1;
	shunt_warn("offer for process %016llx's connection: its end is not its user's: refused",
		   (unsigned long long)sock_id);
	return 0;
}

/* Take a segment for the client process sock_id, attach our side, take
 * the client's first bytes (early: its slot's, NULL for none) and tell the
 * client: through the slot sl when the client maps that arena, else - a
 * new arena's descriptors, the in-band handshake (sl NULL) - by an accept
 * message.  0 and *out (*final: answered in a private directory's slot -
 * the client attaches, nothing to wait for), or the fallback reason.
 * In a shared directory the client checks a slot answer against the user
 * that sent it the arena (client.c slot_sender_ok), which may refuse it:
 * we wait for its word there as for a message's, and if our user is no
 * longer the one it knows the arena by (we changed ours since we sent it)
 * the answer goes by message with the arena again. */
static int server_offer(int fd, const struct shunt_tuple *t, uint64_t sock_id, struct shunt_slot *sl,
			uint32_t gen, struct shunt_early *early, unsigned idx, uint64_t nonce, struct conn **out,
			int *final)
{
	int send_fds, by_msg, pending, r, checked = !t || !shunt_dir_shared();
	uint32_t cuid = UINT32_MAX, known;
	struct arena *a;
	unsigned seg;
	struct conn *c;

	/* (no arena made for an offer that fails the check) */
	if (!checked && arena_server_client_uid(sock_id) == UINT32_MAX) {
		if (!client_is(t, sock_id, &cuid))
			return SHUNT_R_HANDSHAKE;
		checked = 1;
	}
	if (arena_server_take(sock_id, nonce, &a, &seg, &send_fds))
		return SHUNT_R_RESOURCE;
	if (shunt_dir_shared() && __atomic_load_n(&a->uid, __ATOMIC_RELAXED) != (uint32_t)getuid())
		send_fds = 1;
	/* (the arena taken: its own socket's owner, as it was sent) */
	known = __atomic_load_n(&a->client_uid, __ATOMIC_RELAXED);
	if (!checked && !(send_fds || known == UINT32_MAX ? client_is(t, sock_id, &cuid)
							  : client_still(t, sock_id, known))) {
		arena_drop_owner(a, seg, 0);
		arena_release(a, seg, 1);
		return SHUNT_R_HANDSHAKE;
	}
	by_msg = !sl || send_fds;
	/* a client that left its offer pending confirms only at its next
	 * call: its answer is final, however it goes (early.c) */
	pending = early && !shunt_dir_shared() &&
		  (__atomic_load_n(&early->len, __ATOMIC_ACQUIRE) & SHUNT_EARLY_PENDING);
	/* the socket: the program's own number (fdtab.c, borrowed numbers) */
	if (shm_attach(&c, a, seg, 1, fd, 1, &nonce)) {
		arena_drop_owner(a, seg, 0);
		arena_release(a, seg, 1);
		return SHUNT_R_RESOURCE;
	}
	if (early && !shunt_dir_shared() && take_early(early, c)) {
		arena_drop_owner(a, seg, 0);
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	shunt_fault_answer_stall(); /* tests only (fault.c) */
	/* an answer in the slot is final: never into a slot reused while we
	 * stalled (its client gave up and freed it; a new offer is there).
	 * (A stall of ours between this look and the two stores below,
	 * through the client's whole 5 s wait and another offer's claim,
	 * would write over that offer's answer: its client's attach then
	 * finds our nonce in the segment, and it ends the connection.) */
	if (sl && !by_msg && __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != (gen | SLOT_CLAIMED)) {
		arena_drop_owner(a, seg, 0);
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	if (sl) {
		sl->answer_arena = a->id;
		sl->answer_seg = by_msg ? SHUNT_SLOT_BY_MSG : seg;
	}
	r = by_msg ? rdv_send_accept(sock_id, idx, nonce, a, seg, send_fds) : 0;
	if (!r && send_fds) { /* (the message's credentials: its real uid) */
		__atomic_store_n(&a->uid, (uint32_t)getuid(), __ATOMIC_RELAXED);
		__atomic_store_n(&a->client_uid, cuid, __ATOMIC_RELAXED);
	}
	if (r ||
	    /* our CLAIMED -> ANSWERED failed: the client gave up (-> FAILED;
	     * an answer by message may have reached it all the same: the
	     * confirm word decides, as always) */
	    (sl && !slot_answered(sl, gen, c, by_msg, sock_id) && server_decline(c) != 1)) {
		arena_drop_owner(a, seg, 0);
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	shm_of(c)->sock_clean = sl != NULL; /* no handshake bytes on its socket */
	*final = (!by_msg && !shunt_dir_shared()) || pending;
	shunt_log("fd %d: answered %s", fd,
		  !by_msg ? "in the offer slot" : send_fds ? "by message, with the arena" : "by message");
	*out = c;
	return 0;
}

/* The client's decision, through the segment's confirm word. */
static int server_commit(struct sk *s, int fd, struct conn *c, uint64_t wait_ns)
{
	if (!server_wait_confirm(c, fd, wait_ns)) {
		arena_drop_owner(shm_of(c)->arena, shm_of(c)->segno, 0); /* the client never took its share */
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	s->conn = c;
	s->kind = SK_CONN;
	return SHUNT_R_NONE;
}

static int server_build(struct sk *s, int fd, unsigned idx, struct shunt_slot *sl, uint32_t gen,
			struct shunt_early *early, uint64_t nonce, uint64_t sock_id)
{
	struct conn *c;
	int final = 0, r = server_offer(fd, &s->tuple, sock_id, sl, gen, early, idx, nonce, &c, &final);

	if (r) {
		slot_refuse(sl, gen, SLOT_FAILED);
		s->reason = r;
		return 0;
	}
	if (final) { /* the client attaches (client.c) */
		s->conn = c;
		s->kind = SK_CONN;
		s->reason = SHUNT_R_NONE;
		return 0;
	}
	s->reason = server_commit(s, fd, c, CONFIRM_WAIT_NS);
	return 0;
}

/* ---- in-band shared memory ----
 * Both ends on one host with one SHUNT_DIR, reached through a path the
 * registry cannot see (DNAT, a container port mapping): the in-band
 * handshake (inband.c) names the client process and the option's nonce,
 * and the segment travels as above, with the confirm word as the one
 * decision point. */
uint64_t rdv_domain(void)
{
	static uint64_t d;
	struct stat st;

	/* 0 means unknown and matches nothing (inband.c). */
	if (!d && shunt_dirfd >= 0 && !fstat(shunt_dirfd, &st))
		d = (uint64_t)st.st_ino ^ ((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ull);
	return d;
}

int rdv_inband_ready(uint64_t *sock_id)
{
	return rdv_csock_get(sock_id);
}

int rdv_inband_offer(int fd, uint64_t sock_id, uint64_t nonce, struct conn **c)
{
	int final;

	return server_offer(fd, NULL, sock_id, NULL, 0, NULL, SHUNT_MSG_NO_SLOT, nonce, c, &final);
}

int rdv_inband_commit(struct sk *s, int fd, struct conn *c, uint64_t wait_ns)
{
	return server_commit(s, fd, c, wait_ns);
}

/* Client: the accept message the ACCEPT announced is already queued on our
 * socket (the server sends it first); take it and attach. */
int rdv_inband_attach(struct sk *s, int fd, uint64_t nonce, uint64_t deadline)
{
	struct got_msg got;

	if (rdv_msg_await(nonce, &got, deadline))
		return SHUNT_R_HANDSHAKE;
	return rdv_client_attach(s, fd, nonce, &got);
}

/* No local offer: if the SYN carried our option, the client's PROPOSAL is
 * on its way and is answered here, before the application sees the socket. */
static int server_agent_path(const struct sk *ls, int fd, struct sk *s)
{
	int had = inband_syn_had_option(ls, fd);

	if (had)
		s->reason = inband_server(s, fd, ls->nonblock, had == 2);
	return 0;
}


/* The offer for this connection, claimed; NULL if there is none: no offer
 * and no client of ours in the middle of its connect to this address. */
static struct shunt_slot *await_offer(struct portreg *p, const struct shunt_tuple *t, int nonblock,
				      unsigned *idx, uint32_t *gen, uint64_t *nonce, uint64_t *sock_id,
				      uint64_t *netns)
{
	uint64_t start = shunt_now_ns();
	struct shunt_offer_wait *w = rdv_offer_wait(p, t->client.port);
	struct shunt_slot *sl;
	int busy, turn = -1, told = 0, nb_done = 0; /* a non-blocking accept's wait is over */
	unsigned yields = 0;

	for (;;) {
		uint32_t seq = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE), sw = 0;
		uint64_t el = shunt_now_ns() - start;
		sl = find_offer(p, t, start, &busy, idx, &sw);
		if (sl && claim(sl, sw, nonce, sock_id, netns)) {
			*gen = SHUNT_SLOT_GEN(sw);
			break;
		}
		if (sl)
			continue; /* the slot changed under us: look again */
		if (!busy || told || rdv_plain_seen(p, t, start + el))
			break;
		/* Giving up - no client left to wait for, or a non-blocking
		 * accept() waited its 5 ms: the connection is plain, and we say
		 * so in plain[] before a last look at the slots.  A client
		 * that publishes after that look finds the record and stays
		 * plain at once (reason server-first) instead of waiting for
		 * a claim that never comes (its 200 ms); one that published
		 * before it is claimed now (client.c connect_offer). */
		if (!(busy & BUSY_WAIT) || (nonblock && turn == 0 && (el > NONBLOCK_OFFER_NS || nb_done))) {
			if (rdv_plain_record(p, t))
				break; /* (no record: the client waits as before) */
			told = 1;
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			continue;
		}
		/* The client publishes microseconds after its connect returned:
		 * spin if this process has a turn (a CPU of its own), then
		 * give the CPU up a few times, then sleep until the next offer
		 * (its client wakes us).  With more threads than cores the
		 * client is most often waiting for this very CPU: its SYN's
		 * answer woke us on it, and we took it over.  A yield lets it
		 * publish with no sleep and no wake-up (8 threads a side on 2
		 * CPUs, every connection offered: 37,300 -> 32,400 context
		 * switches for 16,000 connections, TCP's 36,600; CPU time a
		 * connection 1.03-1.05x TCP's -> 0.95-0.97x).  In long run
		 * queues too since the client's first read sleeps once
		 * (client.c rdv_await_reply): 32 a side 1.05x -> 0.96x, 64 a
		 * side 1.09-1.11x -> 1.03-1.06x (before it, yields there cost:
		 * 1.36x -> 1.42x). */
		if (turn < 0)
			turn = shunt_spin_begin(SPIN_OFFER_NS, start + el);
		if (turn > 0 && el < SPIN_OFFER_NS) {
			__builtin_ia32_pause();
			continue;
		}
		shunt_spin_end(turn);
		turn = 0;
		if (yields++ < YIELDS_OFFER) {
			sched_yield();
			continue;
		}
		/* A non-blocking accept() waits NONBLOCK_OFFER_NS at most in
		 * all, and not in long run queues (NONBLOCK_RUNNABLE_MAX: an
		 * event loop's accept holds its other connections).  Its client is inside
		 * connect(), microseconds from its offer, but often preempted
		 * by us (the SYN's answer woke us on its CPU), and with the
		 * CPUs busy it waits a scheduler slice for its turn: with two
		 * spinning jobs, haproxy.sh took a fresh curl's connection plain
		 * (server-first) in 1 run of 6 after the three yields alone (2
		 * of 6 in CI), and asleep here for 1 ms in all in 6 of 6, 2 ms 4
		 * of 6, 5 ms none.  Asleep, we leave the CPU to the client and
		 * its publication wakes us.  TCP's accept() would not wait at
		 * all: the price of an accelerated connection, bounded. */
		if (nonblock && (el >= NONBLOCK_OFFER_NS ||
				 shunt_cpus_runnable(start + el) >= (long)NONBLOCK_RUNNABLE_MAX * shunt_ncpus)) {
			nb_done = 1;
			continue;
		}
		/* counted first: a client that bumps the word after we read seq
		 * makes the wait return at once, one that bumps it before sees
		 * us counted and wakes us */
		__atomic_add_fetch(&w->waiters, 1, __ATOMIC_SEQ_CST);
		shunt_futex_wait(&w->seq, seq, nonblock ? NONBLOCK_OFFER_NS - el : 1000000);
		__atomic_sub_fetch(&w->waiters, 1, __ATOMIC_SEQ_CST);
	}
	shunt_spin_end(turn);
	return sl;
}

/* No slot of the port reserved: no client of ours offers this connection
 * (it reserves before its SYN leaves, so the count we read after accept()
 * includes it), so neither our own address nor the slots need reading -
 * under load most connections to a short-lived port are plain (busy-short)
 * and this is their whole set-up: TCP's system calls, nothing added.  The
 * local address is left to `shunt ss` (stats.c). */
static int accept_unoffered(const struct sk *ls, struct sk *s, const struct sockaddr *peer)
{
	struct portreg *p;

	if (!peer || !ls->listen_port || !shunt_cfg.local ||
	    !shunt_config_port_allowed(&shunt_cfg, ls->listen_port) ||
	    !(p = rdv_reg_get(ls->listen_port, 1, 0)) ||
	    __atomic_load_n(&p->r->reserved, __ATOMIC_SEQ_CST) ||
	    shunt_addr_from_sockaddr(&s->tuple.client, peer))
		return 0;
	memset(&s->tuple.server, 0, sizeof s->tuple.server);
	s->tuple.server.port = ls->listen_port;
	s->has_tuple = SK_TUPLE_REMOTE;
	return 1;
}

/* The last close here of an accepted connection: score how its port's
 * connections are served (client.c fork_short).  Closed by the process
 * that forked while it held it - a server that forks a process for each
 * connection closes its copy once the child has it (PostgreSQL's
 * postmaster, inetd, socat's fork, Python's ForkingMixIn) - it adds 1; one
 * the accepting process served itself halves the score (a server that
 * forked once while it held connections - redis's BGSAVE - soon loses
 * it); a forked child's close says nothing.  Racy read-modify-writes,
 * like short_run's: advice. */
void rdv_note_served(struct sk *s)
{
	struct portreg *p = rdv_reg_peek(s->tuple.server.port);
	uint32_t v;

	if (!p)
		return;
	v = __atomic_load_n(&p->r->fork_run, __ATOMIC_RELAXED);
	if (s->fork_pid == shunt_pid()) {
		if (v < 255)
			__atomic_store_n(&p->r->fork_run, v + 1, __ATOMIC_RELAXED);
	} else if (v) { /* (a forked child does not call: fdtab.c sk_put) */
		__atomic_store_n(&p->r->fork_run, v / 2, __ATOMIC_RELAXED);
	}
}

int rdv_accept(const struct sk *ls, int fd, struct sk *s, const struct sockaddr *peer)
{
	struct shunt_tuple t;
	struct portreg *p;
	struct shunt_slot *sl;
	uint64_t nonce, sock_id, netns;
	unsigned idx = 0;
	uint32_t gen = 0;
	int off = shunt_off_reason;

	s->is_client = 0;
	s->reason = off ? off : SHUNT_R_POLICY;
	/* Off since its listener registered (io_uring, a chroot; core.c):
	 * an offer a client made before the record said so is refused at
	 * once, not left to its wait for a claim, and a PROPOSAL declined.
	 * In a seccomp sandbox no call of ours: such a client waits (its
	 * 200 ms, or the server's first bytes). */
	if (!shunt_active || (off && ((!ls->listen_port && !ls->ag_listen) || shunt_sandboxed)))
		return 0;
	if (!off) /* (a listener unregistered: no client could offer) */
		s->reason = ls->listen_unreg ? SHUNT_R_UNSAFE_DIR : SHUNT_R_PEER_NOT_SHUNT;
	if (accept_unoffered(ls, s, peer))
		return server_agent_path(ls, fd, s);
	if (peer && ls->listen_port && !rdv_is_any(&ls->listen_addr)) {
		/* bound to one address: ours, with no system call to ask */
		t.server = ls->listen_addr;
		if (shunt_addr_from_sockaddr(&t.client, peer))
			return 0;
	} else if (rdv_sock_tuple_known(fd, &t.server, &t.client, peer)) {
		return 0;
	}
	s->tuple = t;
	s->has_tuple = SK_TUPLE_BOTH;
	if (!shunt_config_port_allowed(&shunt_cfg, t.server.port)) {
		s->reason = SHUNT_R_POLICY;
		return 0;
	}
	p = shunt_cfg.local ? rdv_reg_get(t.server.port, 1, 0) : NULL;
	if (!p)
		return server_agent_path(ls, fd, s);
	sl = await_offer(p, &t, ls->nonblock || off, &idx, &gen, &nonce, &sock_id, &netns);
	if (!sl)
		return server_agent_path(ls, fd, s); /* a shunt client from another host? */
	if (off) {
		slot_refuse(sl, gen, SLOT_FAILED);
		rdv_listen_refused(ls);
		return 0;
	}
	if (rdv_is_loopback(&t.server) && netns != shunt_netns_ino()) {
		slot_refuse(sl, gen, SLOT_FAILED);
		s->reason = SHUNT_R_NETNS;
		return 0;
	}
	if (fd_pressure()) { /* out of descriptors a moment ago (giveback.c) */
		slot_refuse(sl, gen, SLOT_DECLINED);
		s->reason = SHUNT_R_DESCRIPTORS;
		return 0;
	}
	return server_build(s, fd, idx, sl, gen, &p->r->early[idx], nonce, sock_id);
}
