/* SPDX-License-Identifier: MIT */
/*
 * early.c - a connection's first bytes, written before the server's answer.
 *
 * TCP's client writes its request as soon as connect() returns: the kernel
 * made the handshake, the server process need not have run yet.  Ours needs
 * the server's answer (a segment) before a byte can go into a ring, and
 * waiting for it inside connect() cost a short connection two more turns of
 * the two processes than TCP's (issue #13, item 10: 4.3 context switches a
 * connection against TCP's 2.2; 1.7x its CPU time with every CPU busy).
 *
 * So when connect() returns with the connection up - a non-blocking
 * connect() with EINPROGRESS too, once the kernel's handshake is made -
 * its offer stays pending: the program's first writes - while they fit in
 * the slot's early[] area (SHUNT_EARLY_MAX bytes) and the server has not
 * taken them - go there, a poll for room alone is answered at once,
 * SO_ERROR is the socket's and an epoll set may hold the socket as it is
 * (an event loop's turns: poll.c, epoll.c pend_ctl), and any other call
 * on the connection (a read, a poll for bytes, a bigger write, close, dup2
 * over it; fork, exec and exit for all of them) first waits for the
 * answer and attaches: rdv_offer_settle, from fdtab.c's lookups (a
 * blocking read, a poll for bytes alone and epoll_wait for bytes alone
 * in a set holding nothing else first sleep until the reply: client.c
 * rdv_await_reply; epoll_wait for bytes among others, and a poll over
 * several descriptors, wait for the server's wake-up on this process's
 * answer socket instead, and a
 * non-blocking read before the server took the connection is EAGAIN;
 * a call TCP never blocks in waits a fortieth of the answer's wait for
 * the server's claim).  The server copies the early
 * bytes into the ring before it answers, and its answer in the slot is
 * final (server.c): its accept() returns with the request readable, the
 * client's read finds the reply.  The turns are TCP's.
 *
 * Without an answer - a slow or plain accept, a refusal, an answer by
 * message the client could not take - the early bytes go onto the socket
 * before anything else, and the server, plain for this connection, reads
 * them there.  Only in a private directory (a shared one's members could
 * read or write the slot), and for at most PENDING_MAX offers of a process
 * at once (each holds a slot of its port until it settles: below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "rdv.h"
#include "../base/real.h"
#include "../transport/shm/shm.h"

/* Each pending offer holds its port's slot until the program's next call
 * on the connection: a process may leave PENDING_MAX pending, while at
 * most PENDING_PORT_MAX of the port's slots are taken (the others settle
 * inside connect() and hold theirs a moment) - a pool of idle new
 * connections leaves the port's other clients slots to offer in.  With
 * 32 a process, 64 client threads each making short connections had half
 * their offers settled inside connect(), two sleeps each (1.24x TCP's CPU
 * time a connection against 1.10x with 64).  Not more: a connection in
 * an arena the client has not mapped yet is answered by a message, which
 * only a settling call reads - with 128 pending, a client opening 100
 * connections before it read any (tests/behave/spawn_many) filled its
 * socket's queue (10 messages), and the server, blocked on it, gave up
 * (reason handshake); with 64 the connects past them settle and read. */
#define PENDING_MAX 64
#define PENDING_PORT_MAX (SHUNT_REG_SLOTS * 3 / 4)

static _Atomic int pending; /* offers of this process left pending */
/* ... and the connections they are on (each with a reference; no lock:
 * every connect would take it) */
static struct sk *_Atomic pend[PENDING_MAX];

int rdv_offers_pending(void)
{
	return __atomic_load_n(&pending, __ATOMIC_RELAXED);
}

/* A place for one more pending offer on port p (its rdv_early_begin
 * follows), or 0. */
int rdv_early_reserve(const struct portreg *p)
{
	int n = __atomic_load_n(&pending, __ATOMIC_RELAXED);

	if (shunt_dir_shared() || __atomic_load_n(&p->r->reserved, __ATOMIC_RELAXED) > PENDING_PORT_MAX)
		return 0;
	do {
		if (n >= PENDING_MAX)
			return 0;
	} while (!__atomic_compare_exchange_n(&pending, &n, n + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 1;
}

/* ... given back: the offer was not published after all. */
void rdv_early_unreserve(void)
{
	__atomic_sub_fetch(&pending, 1, __ATOMIC_RELAXED);
}

/* The offer, published, stays pending (its place reserved). */
void rdv_early_begin(struct sk *s)
{
	s->offer->counted = 1;
	sk_ref(s);
	for (int i = 0;; i = (i + 1) % PENDING_MAX) { /* a free place: reserved */
		struct sk *none = NULL;
		/* (a look before each CAS: no locked write to every taken one) */
		if (!__atomic_load_n(&pend[i], __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&pend[i], &none, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			s->offer->pend_idx = i;
			return;
		}
	}
}

/* No answer we could take: the bytes the program wrote into the slot
 * head the stream on the socket (the server reads them there) - from our
 * own copy: the slot is shared memory others may write. */
static void send_early(const struct offer *o)
{
	size_t off = 0;

	while (off < o->len) {
		ssize_t n = real.send(o->sockfd, o->mine + off, o->len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) { /* the program's O_NONBLOCK */
			struct pollfd p = { .fd = o->sockfd, .events = POLLOUT };
			(void)!real.poll(&p, 1, 1000);
			continue;
		}
		if (n <= 0)
			return; /* a reset: the program's next call says so */
		off += (size_t)n;
	}
}

static void settle_within(struct sk *s, uint64_t wait_ns)
{
	int e = errno, resend, cut, reason, fd, in_epoll;
	uint32_t sent;
	struct offer *o;

	shunt_mutex_lock(&s->offer_lock);
	o = s->offer;
	if (!o) { /* another thread settled it */
		shunt_mutex_unlock(&s->offer_lock);
		return;
	}
	shm_refused[0] = 0; /* (a refusal in the attach says why, below) */
	reason = rdv_offer_finish(s, o, wait_ns, &resend, &cut);
	if (resend) {
		send_early(o);
	} else if (cut) {
		/* A final answer we cannot take - only a registry or arena
		 * written against the protocol - leaves the server with rings
		 * we never read: end the connection rather than hang it. */
		shunt_warn("connection to port %u: the server's answer names a segment we cannot map (%s%s%s): "
			   "connection ended", (unsigned)s->tuple.server.port, shunt_reason_str((unsigned)reason),
			   shm_refused[0] ? "; " : "", shm_refused);
		real.shutdown(o->sockfd, SHUT_RDWR);
	}
	s->reason = reason;
	fd = o->counted ? o->sockfd : -1; /* pending: said now, not by connect() */
	in_epoll = o->in_epoll;
	sent = o->len;
	/* what settled is visible to whoever sees no offer (fdtab.c) */
	__atomic_store_n(&s->offer, NULL, __ATOMIC_RELEASE);
	shunt_mutex_unlock(&s->offer_lock);
	if (o->counted) {
		__atomic_store_n(&pend[o->pend_idx], NULL, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&pending, 1, __ATOMIC_RELAXED);
		sk_put(s); /* never the last: the caller holds one */
	}
	if (in_epoll) /* its epoll registrations become the connection's */
		ep_pend_settled(o->sockfd, s);
	free(o->mine);
	free(o);
	if (fd >= 0) {
		stats_update(s, fd);
		connect_log(fd, s);
	}
	if (sent && s->stat) /* the program's first bytes (slot or socket) count */
		__atomic_store_n(&s->stat->tx, s->stat->tx + sent, __ATOMIC_RELAXED);
	errno = e;
}

/* The offer settles: the server's answer waited for, as a blocking
 * connect() would have (SHUNT_ACCEPT_WAIT_MS) - or, in a call TCP never
 * blocks in (a non-blocking socket's, or a poll's, epoll's: the program's
 * thread may hold what its server waits for - a lock, another connection's
 * request), about as long as a non-blocking accept() waits for its client
 * (config.h shunt_nonblock_wait_ns: 5 ms by default): a server that has
 * not taken the connection by then gets it plain (SHUNT_R_TIMEOUT), the
 * first bytes resent on its socket.
 * A server that claimed it is answering: that answer is waited for. */
void rdv_offer_settle_nb(struct sk *s)
{
	settle_within(s, shunt_nonblock_wait_ns(&shunt_cfg));
}

void rdv_offer_settle(struct sk *s)
{
	if (s->nonblock)
		rdv_offer_settle_nb(s);
	else
		settle_within(s, shunt_accept_wait_ns(&shunt_cfg));
}

/* An epoll set is about to hold the pending offer's socket as it is
 * (epoll.c): its registration changes when the offer settles.  0 if it
 * has settled already. */
int rdv_offer_mark_epoll(struct sk *s)
{
	int open;

	shunt_mutex_lock(&s->offer_lock);
	open = s->offer != NULL;
	if (open)
		s->offer->in_epoll = 1;
	shunt_mutex_unlock(&s->offer_lock);
	return open;
}

/* ---- a pending offer waited for in an epoll set of many ----
 * A wait for bytes in a set that holds other descriptors (epoll.c) does
 * not settle the offer: the server, once it answered, wakes the set with
 * an empty datagram on our socket, which the set holds (SHUNT_WAIT_EPOLL,
 * server.c slot_answered); each epoll_wait then looks at the set's offers
 * and settles those answered, or past SHUNT_ACCEPT_WAIT_MS.  No call of
 * the event loop's waits for the server's accept. */

/* The end of s's offer's wait for the server (SHUNT_ACCEPT_WAIT_MS). */
static uint64_t offer_end(const struct sk *s)
{
	return s->born_ns + shunt_accept_wait_ns(&shunt_cfg);
}

/* A look at s's pending offer that never waits for its lock: its slot's
 * state (SLOT_*; SLOT_FAILED if the slot is another reservation's now),
 * with `flag` added to its waiters first - or -1: settled, or being
 * settled by another thread (the lock busy), which then does it. */
static int offer_look(struct sk *s, uint32_t flag, int *sockfd)
{
	struct offer *o;
	uint32_t w;
	int st = -1;

	if (shunt_mutex_trylock(&s->offer_lock))
		return -1;
	if ((o = s->offer)) {
		/* the server's CAS to ANSWERED, then its look at the flag:
		 * it sees ours, or we see its answer here */
		if (flag)
			__atomic_fetch_or(&o->sl->client_waiting, flag, __ATOMIC_SEQ_CST);
		w = __atomic_load_n(&o->sl->state, __ATOMIC_SEQ_CST);
		st = SHUNT_SLOT_GEN(w) == o->gen ? (int)SHUNT_SLOT_STATE(w) : SLOT_FAILED;
		if (sockfd)
			*sockfd = o->sockfd;
	}
	shunt_mutex_unlock(&s->offer_lock);
	return st;
}

static int st_waiting(int st)
{
	return st == SLOT_OFFERED || st == SLOT_CLAIMED;
}

/* 1: s's offer waits so (other threads of ours may wait on it too: the
 * flags are bits); 0: settle it now - answered or failed meanwhile, or
 * its lock busy (it is being settled). */
int rdv_offer_wake_me(struct sk *s)
{
	return st_waiting(offer_look(s, SHUNT_WAIT_EPOLL, NULL));
}

/* Is s's offer, so waited for, to be settled now?  1 if the server is
 * done with it (answered, failed) or its wait is over; else 0 and *due
 * lowered to the end of its wait.  0 too while another thread holds it:
 * that one settles it. */
int rdv_offer_due(struct sk *s, uint64_t now, uint64_t *due)
{
	uint64_t end = offer_end(s);
	int st = offer_look(s, 0, NULL);

	if (st < 0)
		return 0;
	if (st_waiting(st) && now < end) {
		if (end < *due)
			*due = end;
		return 0;
	}
	return 1;
}

/* Would a non-blocking read find nothing - the server has not taken the
 * connection yet (its slot still OFFERED), nor written on the socket (a
 * plain one)?  As TCP's would then: EAGAIN, without settling - a read an
 * event loop makes on a stale report (its number given to a new
 * connection) waited for the server's claim.  1 if so, within the offer's
 * wait only: a reader that only ever reads settles it then (a plain
 * server, never claiming, gets the first bytes on its socket). */
int rdv_offer_unclaimed(struct sk *s)
{
	int fd = -1;

	return shunt_now_ns() < offer_end(s) && offer_look(s, 0, &fd) == SLOT_OFFERED && !rdv_tcp_has_input(fd);
}

/* ... settled (by epoll_wait, a non-blocking read): an answer taken at
 * once; past its wait, a server that has not claimed it gets it plain
 * (accept-timeout) at once. */
void rdv_offer_settle_due(struct sk *s)
{
	settle_within(s, shunt_now_ns() >= offer_end(s) ? 0 : shunt_nonblock_wait_ns(&shunt_cfg));
}

/* ... by a blocking read, or a poll for bytes: first asleep until the
 * server's reply, if it comes soon (client.c rdv_await_reply; a poll's
 * time-out, max_ns, may end the sleep sooner), without the offer's lock.
 * 1: a signal came meanwhile. */
int rdv_offer_settle_read(struct sk *s, uint64_t max_ns)
{
	struct shunt_slot *sl = NULL;
	uint32_t gen = 0;
	int sig = 0;

	shunt_mutex_lock(&s->offer_lock);
	if (s->offer) {
		sl = s->offer->sl;
		gen = s->offer->gen;
	}
	shunt_mutex_unlock(&s->offer_lock);
	if (sl)
		sig = rdv_await_reply(sl, gen, max_ns);
	rdv_offer_settle(s);
	return sig;
}

/* A poll's or an epoll_wait's sleep for bytes on a pending offer: as
 * rdv_offer_settle_read, within *timeout_ms (-1: none), which is left with
 * what remains of it - 0 after a signal (the caller reports what is ready,
 * else EINTR), never less than the sleep took, so the call does not end
 * early.  1: a signal came. */
int rdv_offer_settle_poll(struct sk *s, int *timeout_ms)
{
	uint64_t t0 = shunt_now_ns();
	int intr = rdv_offer_settle_read(s, *timeout_ms < 0 ? UINT64_MAX : (uint64_t)*timeout_ms * 1000000ull);
	int spent = (int)((shunt_now_ns() - t0) / 1000000ull);

	if (intr)
		*timeout_ms = 0;
	else if (*timeout_ms > 0)
		*timeout_ms = spent >= *timeout_ms ? 0 : *timeout_ms - spent;
	return intr;
}

/* Would a write go into the slot now - a poll for room is answered yes
 * without settling (TCP's new connection has its whole send buffer)?  1
 * while the program's bytes fit and the server has not taken them. */
int rdv_early_room(struct sk *s)
{
	struct offer *o;
	uint32_t v;
	int room = 0;

	shunt_mutex_lock(&s->offer_lock);
	if ((o = s->offer)) {
		v = __atomic_load_n(&o->early->len, __ATOMIC_ACQUIRE);
		room = !(v & SHUNT_EARLY_TAKEN) && SHUNT_EARLY_LEN(v) == o->len && o->len < SHUNT_EARLY_MAX;
	}
	shunt_mutex_unlock(&s->offer_lock);
	return room;
}

/* A send while the offer is pending: into the slot if the bytes fit and
 * the server has not taken the slot's bytes yet (its copy stops them);
 * else -EAGAIN, the offer settled: the caller sends as on any connection. */
ssize_t rdv_early_send(struct sk *s, const struct iovec *iov, int cnt, int flags, const struct msghdr *ctl)
{
	size_t total = 0;
	struct offer *o;
	uint8_t *m;
	uint32_t v, len;

	if ((flags & ~(MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE)) || (ctl && ctl->msg_controllen) || cnt < 0 ||
	    cnt > IOV_MAX)
		goto settle;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > SHUNT_EARLY_MAX - total)
			goto settle;
		total += iov[i].iov_len;
	}
	shunt_mutex_lock(&s->offer_lock);
	o = s->offer;
	if (!o) {
		shunt_mutex_unlock(&s->offer_lock);
		return -EAGAIN;
	}
	v = __atomic_load_n(&o->early->len, __ATOMIC_ACQUIRE);
	len = SHUNT_EARLY_LEN(v);
	if ((v & SHUNT_EARLY_TAKEN) || len != o->len || total > SHUNT_EARLY_MAX - len) { /* taken, or full */
		shunt_mutex_unlock(&s->offer_lock);
		goto settle;
	}
	if (total && !(m = realloc(o->mine, len + total))) {
		shunt_mutex_unlock(&s->offer_lock);
		goto settle; /* the bytes go as on any connection */
	}
	if (total)
		o->mine = m;
	for (int i = 0, off = 0; i < cnt; off += (int)iov[i].iov_len, i++)
		if (iov[i].iov_len) {
			memcpy(o->early->data + len + off, iov[i].iov_base, iov[i].iov_len);
			memcpy(o->mine + len + off, iov[i].iov_base, iov[i].iov_len);
		}
	/* the server's SHUNT_EARLY_TAKEN makes this fail: it copied only
	 * what was there before */
	if (!__atomic_compare_exchange_n(&o->early->len, &v, v + (uint32_t)total, 0, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED)) {
		shunt_mutex_unlock(&s->offer_lock);
		goto settle;
	}
	o->len = len + (uint32_t)total;
	shunt_mutex_unlock(&s->offer_lock);
	return (ssize_t)total;
settle:
	rdv_offer_settle(s);
	return -EAGAIN;
}

/* A forked child: the offers (settled before the fork, but for one a
 * thread published during it) are the parent's to settle. */
SHUNT_CHILD_PATH void rdv_early_atfork_child(void)
{
	for (int i = 0; i < PENDING_MAX; i++)
		if (pend[i]) {
			pend[i]->offer = NULL; /* (the parent's; leaked here, not freed) */
			pend[i]->reason = SHUNT_R_HANDSHAKE;
			pend[i] = NULL;
		}
	SHUNT_RESET(pending, 0);
}

/* Before fork, exec and exit, and a give-back: every pending offer
 * settles (a child must not find the slot's offer half ours). */
SHUNT_CHILD_PATH void rdv_offers_settle_all(void)
{
	if (!__atomic_load_n(&pending, __ATOMIC_RELAXED))
		return;
	for (int i = 0; i < PENDING_MAX; i++) {
		struct sk *s = __atomic_load_n(&pend[i], __ATOMIC_ACQUIRE);
		/* (settled and reused meanwhile: another's, settled harmlessly) */
		if (s && sk_tryref(s)) {
			rdv_offer_settle(s);
			sk_put(s);
		}
	}
}
