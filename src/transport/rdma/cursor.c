/* SPDX-License-Identifier: MIT */
/*
 * cursor.c - an RDMA connection's data path.
 *
 * After a write the bytes are RDMA-WRITten into the peer's receive ring
 * at the same offsets and a cursor message (struct shunt_cdc, SMC-R's CDC)
 * follows on the same queue pair; a received cursor message advances our
 * receive ring's producer and our staging ring's consumer and wakes local
 * sleepers exactly as a shared-memory peer would.  Closing, shutdown and
 * the end of a connection's slot are here too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdma.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/handshake.h"
#include "../../common/failover.h"

int rdma_attach(struct sk *s, int fd, struct rdma_conn *rc, uint64_t raddr, uint32_t rkey, int side)
{
	struct rdma_link *l = rc->link;
	struct rconn *x = calloc(1, sizeof *x);
	int dupfd = fd_dup_hidden(fd), efd;
	uint32_t rs = l->ring_size;
	struct conn *c;
	int moved;

	/* out of descriptors: idle connections give theirs back (giveback.c) */
	AGAIN_IF_EMFILE(dupfd, fd_dup_hidden(fd));
	efd = real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	AGAIN_IF_EMFILE(efd, real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

	if (!x || dupfd < 0 || efd < 0) {
		free(x);
		fd_close_internal(dupfd);
		if (efd >= 0)
			real.close(efd);
		return SHUNT_R_RESOURCE;
	}
	rc->raddr = raddr;
	rc->rkey = rkey;
	c = &x->c;
	rc->c = c;
	x->rc = rc;
	x->pid = shunt_pid();
	x->moved_fd = -1;
	c->efd_mine = fd_hide(efd);
	c->bell_id = bell_new_id();
	conn_init(c, &rdma_transport, x, side, fd_hide(dupfd));
	c->tx = (struct ring){ .ctl = &rc->h->ring[0], .data = rdma_slot_tx(l, rc->slot), .size = rs };
	c->rx = (struct ring){ .ctl = &rc->h->ring[1], .data = rdma_slot_rx(l, rc->slot), .size = rs };
	/* from here cursor messages wake this connection's sleepers */
	shunt_mutex_lock(&l->cq_lock);
	__atomic_store_n(&rc->state, RC_OPEN, __ATOMIC_RELEASE);
	moved = rc->fo_closed;
	shunt_mutex_unlock(&l->cq_lock);
	/* the peer moved before we opened (a fork of the client's right
	 * after its CONFIRM, before our accept() returned): its word found
	 * no connection to ask (on_cdc) - asked now, or our first write
	 * took the peer for gone and sent bytes bare on the socket, where
	 * the peer waits for our failover message (its EPROTO) */
	if (moved)
		rdma_fo_request(c, SHUNT_R_PEER_FAILOVER);
	s->conn = c;
	s->kind = SK_CONN;
	return 0;
}

static uint64_t max64(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_ACQUIRE);

	while (v > o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		;
	return o;
}

static void release(struct rdma_conn *rc)
{
	rdma_slot_put(rc->link, rc->slot);
	rdma_rc_free(rc);
}

/* After a move (CLOSED went with FAILOVER) both applications let go. */
static int apps_let_go(const struct rdma_conn *rc)
{
	return !rc->fo_closed || rc->peer_released;
}

/* Both sides said CLOSED, and both applications let go. */
static int may_release(const struct rdma_conn *rc)
{
	return rc->closed_rcvd && rc->closed_sent && apps_let_go(rc);
}

int rdma_post_word(struct rdma_conn *rc, uint32_t flags, int push_flags)
{
	struct shunt_cdc m = { .ring = rc->raddr, .prod = rc->sent, .tag = rc->tag,
			       .cons = rc->acked, .flags = flags };

	return rdma_push(rc->link, rc->slot, rc->raddr, rc->rkey, rc->sent, rc->sent, &m, push_flags, NULL);
}


/* The peer's application closed it with bytes of ours it never read,
 * and its closing word says no reset: they came after its close (bytes
 * there before it make the word a reset).  TCP's peer answers bytes that
 * reach a closed socket with a reset, which the writer's poll shows at
 * once and its next send reports (EPIPE after the peer's FIN).  One byte
 * on our socket makes the peer's kernel say it, as TCP's would (its
 * socket closes right after the word; a byte there before that sits
 * unread and its close resets).  In a sandbox no system call: the bytes
 * are taken for nobody, as before. */
static void closed_before_ours(struct conn *c)
{
	int e = errno;

	/* (not once our sending half moved: the socket carries our stream) */
	if (!shunt_sandboxed && !c->peer_err && !conn_moving(c))
		(void)!real.send(c->tcp_fd, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	errno = e;
}

/* Called with the link's completion lock held. */
static void on_cdc(struct rdma_link *l, unsigned slot, const struct shunt_cdc *m)
{
	struct rdma_conn *rc = l->slot_ctx[slot];
	struct shunt_ring_ctl *tx, *rx;
	int st;
	struct conn *c;

	if (!rc)
		return;
	if (m->flags & SHUNT_CDC_F_CLOSED)
		rc->closed_rcvd = 1;
	if ((m->flags & (SHUNT_CDC_F_FAILOVER | SHUNT_CDC_F_CLOSED)) ==
	    (SHUNT_CDC_F_FAILOVER | SHUNT_CDC_F_CLOSED))
		rc->fo_closed = 1;
	/* a CLOSED without FAILOVER is the peer application's close (or its
	 * exit): it let go for good, and sends no RELEASED after it - were
	 * our half to move later, our slot must not wait for one (a fork of
	 * ours after the peer's close: a slot lost each time, the link full
	 * after 32) */
	if ((m->flags & SHUNT_CDC_F_RELEASED) ||
	    (m->flags & (SHUNT_CDC_F_FAILOVER | SHUNT_CDC_F_CLOSED)) == SHUNT_CDC_F_CLOSED)
		rc->peer_released = 1;
	st = __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE);
	if (st == RC_CLOSED) {
		if (may_release(rc))
			release(rc);
		return;
	}
	if (m->flags & SHUNT_CDC_F_RELEASED)
		return; /* the peer let go of a moved connection: nothing else in it */
	c = st == RC_OPEN ? rc->c : NULL;
	if (m->flags & SHUNT_CDC_F_FAILOVER) {
		/* the peer writes here no more: its bytes follow on TCP */
		if (c)
			rdma_fo_request(c, SHUNT_R_PEER_FAILOVER);
		return;
	}
	if (c && __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE))
		return; /* our producer is frozen: the TCP stream has the rest */
	tx = &rc->h->ring[0];
	rx = &rc->h->ring[1];
	/* a peer can only move cursors forward, and never past what fits */
	if (m->prod - __atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE) > l->ring_size ||
	    m->cons > __atomic_load_n(&tx->prod, __ATOMIC_ACQUIRE)) {
		if (c) {
			c->peer_err = EPROTO;
			conn_wake_state(c);
		}
		return;
	}
	if (max64(&rx->prod, m->prod) < m->prod && c)
		conn_wake_local(c, POLLIN);
	if (max64(&tx->cons, m->cons) < m->cons && c)
		conn_wake_local(c, POLLOUT);
	if ((m->flags & (SHUNT_CDC_F_RESET | SHUNT_CDC_F_CLOSED)) ==
	    (SHUNT_CDC_F_RESET | SHUNT_CDC_F_CLOSED)) {
		/* closed with our bytes unread: a reset (what came before it
		 * is still read first, as from TCP's queue) */
		if (c) {
			__atomic_store_n(&c->peer_reset, 1, __ATOMIC_RELEASE);
			c->peer_err = ECONNRESET;
			conn_wake_state(c);
		}
	} else if ((m->flags & (SHUNT_CDC_F_FIN | SHUNT_CDC_F_CLOSED)) && !rx->wr_done) {
		__atomic_store_n(&rx->wr_done, 1, __ATOMIC_RELEASE);
		if (c)
			conn_wake_state(c);
	}
	if ((m->flags & (SHUNT_CDC_F_RESET | SHUNT_CDC_F_CLOSED)) == SHUNT_CDC_F_CLOSED && c &&
	    m->cons != __atomic_load_n(&tx->prod, __ATOMIC_ACQUIRE))
		closed_before_ours(c);
	if (m->flags & SHUNT_CDC_F_BLOCKED) {
		/* Answer now if we have read since our last word (a reader
		 * asleep on an empty ring reads no more); a writer posting at
		 * this moment carries our consumer anyway. */
		__atomic_store_n(&rc->peer_blocked, 1, __ATOMIC_RELEASE);
		if (c && !shunt_mutex_trylock(&rc->lock)) {
			if (__atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE) != rc->acked &&
			    !rdma_push_locked(c, 0, 0, NULL))
				__atomic_store_n(&rc->peer_blocked, 0, __ATOMIC_RELEASE);
			shunt_mutex_unlock(&rc->lock);
		}
	}
}

static int down_one(struct rdma_conn *rc, void *arg)
{
	(void)arg;
	rdma_fo_request(rc->c, SHUNT_R_LINK_FAILED);
	return 0;
}

/* The queue pair failed: every connection on it moves to its TCP socket
 * (not one is lost; wire.h 5c). */
static void on_down(struct rdma_link *l)
{
	shunt_log("rdma: link on %s to qp %u failed (completion status %d, opcode %d); its "
		  "connections move to TCP", l->dev->name, l->peer_qpn, l->fail_status, l->fail_op);
	rdma_link_each_open(l, down_one, NULL);
	/* ... and the slots of connections closed here, which waited for the
	 * peer's closing word, go: it will not come now.  Before, they stayed,
	 * and the link with them (freed once no slot is held): a peer process
	 * that ended without its exit path (killed, _exit) left each link it
	 * had for the life of ours (tests/behave/child_servers over RDMA). */
	shunt_mutex_lock(&l->cq_lock);
	for (unsigned s = 0; s < LINK_SLOTS; s++) {
		struct rdma_conn *rc = l->slot_ctx[s];
		if (rc && __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE) == RC_CLOSED)
			release(rc);
	}
	shunt_mutex_unlock(&l->cq_lock);
}

const struct link_ops rdma_link_cb = { on_cdc, on_down };

static _Atomic int backlog_work; /* a connection has a backlog (rdma_backlog_sweep) */

/* Post what the application staged, with a cursor message; rc->lock held. */
int rdma_push_locked(struct conn *c, uint32_t extra, int flags, uint64_t *seq)
{
	struct rdma_conn *rc = rcn(c)->rc;
	struct shunt_cdc m;
	/* the flag first: the writer sets it after its last byte, so a
	 * producer read after seeing it covers every byte (FIN never
	 * overtakes data, whichever thread posts) */
	int fin = __atomic_load_n(&c->tx.ctl->wr_done, __ATOMIC_ACQUIRE) && !rc->fin_sent;
	uint64_t staged = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t prod = shunt_fault_rdma_hold(staged), fseq = 0;
	int r;

	if (prod != staged)
		fin = 0; /* a test holds the rest back */

	if (__atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE))
		return -EPIPE; /* the sending half is on TCP now */
	m = (struct shunt_cdc){ .ring = rc->raddr, .prod = prod, .tag = rc->tag, .flags = extra,
				.cons = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE) };
	if (fin) { /* its completion asked for: a kernel FIN may wait for it */
		m.flags |= SHUNT_CDC_F_FIN;
		flags |= PUSH_SIGNAL;
	}
	if (prod == rc->sent && m.cons == rc->acked && !m.flags) {
		__atomic_store_n(&rc->backlog, 0, __ATOMIC_RELEASE);
		return 0;
	}
	if (__atomic_load_n(&rc->backlog, __ATOMIC_ACQUIRE))
		flags &= ~PUSH_MAY_POLL; /* full a moment ago: no second wait, the progress thread posts */
	r = rdma_push(rc->link, rc->slot, rc->raddr, shunt_fault_rdma_key(rc->raddr, rc->rkey),
		      rc->sent, prod, &m, flags, &fseq);
	if (seq)
		*seq = fseq;
	if (r == -EAGAIN) { /* the send queue is full: the progress thread posts it */
		__atomic_store_n(&rc->backlog, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&backlog_work, 1, __ATOMIC_RELEASE);
	}
	if (r)
		return r; /* a failed link reports itself through its completions */
	__atomic_store_n(&rc->backlog, 0, __ATOMIC_RELEASE);
	rc->sent = prod;
	rc->acked = m.cons;
	if (shunt_fault_rdma(prod))
		rdma_link_break(rc->link);
	if (m.flags & SHUNT_CDC_F_FIN) {
		rc->fin_sent = 1;
		__atomic_store_n(&rc->fin_seq, fseq, __ATOMIC_RELEASE);
	}
	if (m.flags & SHUNT_CDC_F_CLOSED)
		rc->closed_sent = 1;
	return 0;
}

static void push(struct conn *c, uint32_t extra)
{
	shunt_mutex_lock(&rcn(c)->rc->lock);
	rdma_push_locked(c, extra, PUSH_MAY_POLL, NULL);
	shunt_mutex_unlock(&rcn(c)->rc->lock);
}

/* Before the TCP socket says FIN: the cursor message that ends the stream
 * (FIN, CLOSED) must have reached the peer's device, or the peer could see
 * the kernel's FIN first and end its stream short of our last bytes.  Its
 * completion is waited for FIN_WAIT_NS at most (a stopped peer that posts
 * no receives, a fabric that retransmits): past that the connection moves
 * to TCP, alone (rdma-stalled: the link works). */
#define FIN_WAIT_NS 2000000000ull
#define FIN_LOOK_NS 1000000ull /* shutdown(): then the progress thread waits */

_Atomic int rdma_fin_waits; /* connections whose kernel FIN waits (rdma_fin_sweep) */

/* Post with a completion asked for (*seq, if not NULL: its number), then
 * wait up to wait_ns for it: 0, -ETIMEDOUT or -errno.  *late: a test's
 * fault took it for late. */
static int push_and_wait_ns(struct conn *c, uint32_t extra, uint64_t wait_ns, int *late, uint64_t *seq)
{
	struct rdma_conn *rc = rcn(c)->rc;
	uint64_t own;
	int r;

	if (!seq)
		seq = &own;
	*late = 0;
	*seq = 0;
	shunt_mutex_lock(&rc->lock);
	r = rdma_push_locked(c, extra, PUSH_MAY_POLL | PUSH_SIGNAL, seq);
	shunt_mutex_unlock(&rc->lock);
	if (!r && *seq)
		r = (*late = shunt_fault_rdma_stall()) ? -ETIMEDOUT : rdma_link_wait(rc->link, *seq, wait_ns);
	return r;
}

int rdma_push_and_wait(struct conn *c, uint32_t extra)
{
	int late;

	return push_and_wait_ns(c, extra, FIN_WAIT_NS, &late, NULL);
}

/* The closing word completed: is the kernel's FIN owed yet?  While the
 * peer has bytes of ours it has not read (by its last consumer update) its
 * process may still pass the connection to another (SCM_RIGHTS), and we
 * then resend them on the socket, the FIN after them (failover.c): owed
 * (mv.fin) until a move's resend or the socket's close; the peer reads our
 * end off its ring meanwhile, and a send of ours says EPIPE (conn.c).  As
 * shared memory's (shm.c shm_shutdown).  1: owed. */
static int fin_owed(struct conn *c)
{
	if (!ring_used(&c->tx))
		return 0;
	__atomic_store_n(&c->mv.fin, 1, __ATOMIC_RELEASE);
	return 1;
}

static void fin_wait_end(struct rdma_conn *rc)
{
	if (__atomic_exchange_n(&rc->fin_wait, 0, __ATOMIC_ACQ_REL))
		__atomic_sub_fetch(&rdma_fin_waits, 1, __ATOMIC_RELEASE);
}

/* A kernel FIN waiting for its closing word (writer lock held): sent once
 * the device completed the word; past FIN_WAIT_NS (or at the process's end,
 * final) the connection moves instead - the move resends what the peer may
 * lack, then the FIN (the sweep, or the caller).  1 while it still waits. */
int rdma_fin_settle(struct conn *c, int final)
{
	struct rdma_conn *rc = rcn(c)->rc;

	if (!__atomic_load_n(&rc->fin_wait, __ATOMIC_ACQUIRE))
		return 0;
	if (conn_moving(c)) {
		/* moving already: its FIN follows the resent bytes (mv.fin) */
	} else if (!rc->fin_late && __atomic_load_n(&rc->fin_seq, __ATOMIC_ACQUIRE) &&
		   __atomic_load_n(&rc->link->completed, __ATOMIC_ACQUIRE) >=
			   __atomic_load_n(&rc->fin_seq, __ATOMIC_ACQUIRE)) {
		rc->fin_done = 1;
		if (!fin_owed(c))
			move_fin(c);
	} else if (final || shunt_now_ns() - rc->fin_since >= FIN_WAIT_NS) {
		rdma_fo_request(c, SHUNT_R_RDMA_STALLED);
	} else {
		return 1;
	}
	fin_wait_end(rc);
	return 0;
}

static int fin_one(struct rdma_conn *rc, void *arg)
{
	struct conn *c = rc->c;
	struct shunt_ring_ctl *t = c->tx.ctl;

	(void)arg;
	if (!__atomic_load_n(&rc->fin_wait, __ATOMIC_ACQUIRE) || shunt_trylock(&t->wlock))
		return 0; /* an application thread writes: next round */
	if (t == c->tx.ctl) /* else moved before fork meanwhile: its FIN went with it */
		rdma_fin_settle(c, 0);
	shunt_unlock(&t->wlock);
	return 0;
}

static int backlog_one(struct rdma_conn *rc, void *arg)
{
	int *again = arg;

	if (!__atomic_load_n(&rc->backlog, __ATOMIC_ACQUIRE))
		return 0;
	if (shunt_mutex_trylock(&rc->lock)) {
		*again = 1;
		return 0;
	}
	/* no completion polling here: we hold the cq lock */
	if (rdma_push_locked(rc->c, 0, 0, NULL) == -EPIPE)
		__atomic_store_n(&rc->backlog, 0, __ATOMIC_RELEASE); /* moving: the move resends it */
	*again |= __atomic_load_n(&rc->backlog, __ATOMIC_ACQUIRE);
	shunt_mutex_unlock(&rc->lock);
	return 0;
}

/* Progress thread, rdma_lock held, after reaping completions: post what a
 * full send queue refused (a writer never waits for the queue, as TCP's
 * never waits for the peer while its buffer has room). */
void rdma_backlog_sweep(void)
{
	rdma_each_open_flagged(&backlog_work, backlog_one, 1);
}

/* Progress thread, rdma_lock held: the kernel FINs whose words completed. */
void rdma_fin_sweep(void)
{
	if (!__atomic_load_n(&rdma_fin_waits, __ATOMIC_ACQUIRE))
		return;
	rdma_each_open(fin_one, NULL, 0);
}

/* shutdown(SHUT_WR), writer lock held, before the kernel's FIN: every byte
 * must be at the peer first - over RDMA, or moved to TCP if that fails.
 * Like TCP's, it never waits for the peer: past wait_ns the kernel's FIN
 * is the progress thread's to send once the word completed (rdma_fin_settle),
 * and what a moved connection's socket cannot take yet is sent by it too,
 * the FIN after it (1: the kernel's FIN comes later). */
static int shutdown_ns(struct conn *c, uint64_t wait_ns)
{
	struct rdma_conn *rc = rcn(c)->rc;
	int late = 0, r;

	if (__atomic_load_n(&rc->fin_wait, __ATOMIC_ACQUIRE))
		return 1; /* shut already: its FIN still waits */
	r = conn_moving(c) ? -EPIPE : push_and_wait_ns(c, 0, wait_ns, &late, NULL);
	if (!r) {
		rc->fin_done = 1;
		return fin_owed(c);
	}
	/* not completed yet, or not even posted (a full send queue: the
	 * backlog posts it, and sets fin_seq) */
	if ((r == -ETIMEDOUT || r == -EAGAIN) && wait_ns < FIN_WAIT_NS && !conn_moving(c)) {
		rc->fin_since = shunt_now_ns() - wait_ns;
		rc->fin_late = late;
		__atomic_store_n(&c->mv.fin, 1, __ATOMIC_RELEASE);
		if (!__atomic_exchange_n(&rc->fin_wait, 1, __ATOMIC_ACQ_REL))
			__atomic_add_fetch(&rdma_fin_waits, 1, __ATOMIC_RELEASE);
		return 1;
	}
	rdma_fo_tx_begin(c, PUSH_MAY_POLL);
	if (move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) != -EAGAIN)
		return 0;
	__atomic_store_n(&c->mv.fin, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&rdma_fo_work, 1, __ATOMIC_RELEASE);
	return 1;
}

int rdma_conn_shutdown(struct conn *c)
{
	return shutdown_ns(c, FIN_LOOK_NS);
}

int rdma_conn_shutdown_wait(struct conn *c)
{
	return shutdown_ns(c, FIN_WAIT_NS);
}

void rdma_conn_push(struct conn *c)
{
	if (!rcn(c)->moved)
		push(c, 0);
}

/* After a read: tell the writer about the space, lazily (a quarter of the
 * ring), or at once when it said it waits (SMC's write_blocked). */
void rdma_conn_ack(struct conn *c, int force)
{
	struct rdma_conn *rc = rcn(c)->rc;
	uint64_t cons = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE);

	if (rcn(c)->moved)
		return; /* both halves on TCP: no cursor to tell */
	if (__atomic_exchange_n(&rc->peer_blocked, 0, __ATOMIC_ACQ_REL))
		force = 1;
	if (force || cons - rc->acked >= c->rx.size / 4)
		push(c, 0);
}

/* The writer is about to wait for space: the reader must answer every read. */
void rdma_conn_blocked(struct conn *c)
{
	if (!rcn(c)->moved)
		push(c, SHUNT_CDC_F_BLOCKED);
}

int rdma_conn_peer_blocked(struct conn *c)
{
	return !rcn(c)->moved && __atomic_load_n(&rcn(c)->rc->peer_blocked, __ATOMIC_ACQUIRE);
}

void rdma_conn_poll(struct conn *c)
{
	if (!rcn(c)->moved)
		rdma_link_poll(rcn(c)->rc->link);
}

/* What every process holding a connection frees: its descriptors, and the
 * moved region's mapping if it moved before fork or exec. */
static void moved_free(struct conn *c)
{
	if (c->tcp_fd >= 0)
		fd_close_internal(c->tcp_fd);
	fd_close_internal(c->efd_mine);
	if (rcn(c)->moved) {
		munmap(rcn(c)->moved, rcn(c)->moved_len);
		fd_close_internal(rcn(c)->moved_fd);
	}
	free(c->passed);
	free(rcn(c));
}

/* The application asked for an abortive close (SO_LINGER 0: a reset
 * whatever is unread) - the kernel's word for it, not in a sandbox. */
static int linger_zero(struct conn *c)
{
	struct linger lg;
	socklen_t n = sizeof lg;

	return !shunt_sandboxed && !real.getsockopt(c->tcp_fd, SOL_SOCKET, SO_LINGER, &lg, &n) &&
	       lg.l_onoff && !lg.l_linger;
}

/* The last close (conn_closing), or the process's end, with bytes of the
 * peer's unread, or after SO_LINGER 0: TCP resets the connection, so the
 * closing word says so (else the peer would read the word's clean end
 * before the kernel's RST) and the socket goes with a reset too.  Only
 * while the connection is on RDMA here: once moved, the socket's own
 * unread bytes and the same option decide. */
void rdma_conn_closing(struct conn *c)
{
	if (rcn(c)->close_reset || rcn(c)->moved || c->passed || rcn(c)->pid != shunt_pid())
		return; /* (passed: the socket is another process's now) */
	if (!ring_used(&c->rx) && !(__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 && conn_nread(c)) &&
	    !linger_zero(c))
		return;
	rcn(c)->close_reset = 1;
	conn_reset_on_close(c);
}

/* The closing word failed or never completed (writer lock held): the
 * connection moves, and what the socket cannot take yet is a flusher's, as
 * the kernel sends a closed socket's buffer. */
static void close_move(struct conn *c)
{
	rdma_fo_tx_begin(c, PUSH_MAY_POLL);
	if (move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) == -EAGAIN)
		rdma_fo_orphan(c);
	else
		move_fin(c);
}

/* After the closing word: the slot, the socket, the memory. */
static void close_tail(struct conn *c)
{
	struct rdma_conn *rc = rcn(c)->rc;
	struct rdma_link *l = rc->link;
	int now;

	if (rc->fo_closed && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP) {
		/* moved: the peer's slot waits for this word, ours for its */
		shunt_mutex_lock(&rc->lock);
		(void)rdma_post_word(rc, SHUNT_CDC_F_RELEASED, PUSH_MAY_POLL);
		shunt_mutex_unlock(&rc->lock);
	}
	rdma_fo_linger_note(c); /* (the ring is the slot's until the release) */
	shunt_mutex_lock(&l->cq_lock);
	__atomic_store_n(&rc->state, RC_CLOSED, __ATOMIC_RELEASE);
	rc->c = NULL;
	now = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP ||
	      (rc->closed_rcvd && apps_let_go(rc));
	if (now)
		release(rc);
	shunt_mutex_unlock(&l->cq_lock);
	rdma_fo_linger(c);
	moved_free(c);
}

/* Closes whose closing word the progress thread still awaits (close()
 * returned): posted when the send queue has room, awaited FIN_WAIT_NS from
 * the close at most, then the move; a forked child closes its copies of
 * their sockets (rdma_closers_forget), or the peer's FIN would wait for
 * that child, as after TCP's close() it does not.  Added at the head by
 * any thread; removed only by the sweeper (close_sweep_lock). */
_Atomic int rdma_closers;
static struct rconn *closing;
static pthread_mutex_t closing_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t close_sweep_lock = PTHREAD_MUTEX_INITIALIZER;

SHUNT_CHILD_PATH void rdma_closers_forget(void)
{
	for (struct rconn *x = closing; x; x = x->closing_next)
		if (x->c.tcp_fd >= 0)
			fd_close_internal(x->c.tcp_fd);
	SHUNT_RESET(closing, NULL);
	SHUNT_RESET(rdma_closers, 0);
	shunt_mutex_reset(&closing_lock);
	shunt_mutex_reset(&close_sweep_lock);
}

/* One deferred close: 1 once its word completed or it moved (the tail is
 * the caller's), 0 while it waits. */
static int close_step(struct conn *c)
{
	struct rdma_conn *rc = rcn(c)->rc;
	struct shunt_ring_ctl *locked;
	int r;

	if (!rc->close_seq && __atomic_load_n(&rc->link->state, __ATOMIC_ACQUIRE) == LINK_UP &&
	    !conn_moving(c) && !shunt_mutex_trylock(&rc->lock)) {
		/* not posted yet: a full send queue, the peer stopped */
		(void)rdma_push_locked(c, rc->close_word, PUSH_SIGNAL, &rc->close_seq);
		shunt_mutex_unlock(&rc->lock);
	}
	if (rc->close_seq && __atomic_load_n(&rc->link->completed, __ATOMIC_ACQUIRE) >= rc->close_seq)
		r = 0;
	else if (__atomic_load_n(&rc->link->state, __ATOMIC_ACQUIRE) != LINK_UP || conn_moving(c) ||
		 shunt_now_ns() - rc->close_since >= FIN_WAIT_NS)
		r = -ETIMEDOUT;
	else
		return 0;
	locked = conn_lock(c, 0);
	if (r || conn_moving(c))
		close_move(c);
	shunt_unlock(&locked->wlock);
	return 1;
}

/* Progress thread (and the process's end): finish the closes whose words
 * completed, move those whose did not in time. */
void rdma_close_sweep(void)
{
	struct rconn *x, *next, **pp;

	if (!__atomic_load_n(&rdma_closers, __ATOMIC_ACQUIRE) || shunt_mutex_trylock(&close_sweep_lock))
		return;
	shunt_mutex_lock(&closing_lock);
	x = closing;
	shunt_mutex_unlock(&closing_lock);
	for (; x; x = next) {
		next = x->closing_next; /* only this sweeper changes it */
		if (!close_step(&x->c))
			continue;
		shunt_mutex_lock(&closing_lock);
		for (pp = &closing; *pp; pp = &(*pp)->closing_next)
			if (*pp == x) {
				*pp = next;
				break;
			}
		shunt_mutex_unlock(&closing_lock);
		close_tail(&x->c);
		__atomic_sub_fetch(&rdma_closers, 1, __ATOMIC_RELEASE);
	}
	shunt_mutex_unlock(&close_sweep_lock);
}

/* The application let go: tell the peer (it stops writing into our ring);
 * the slot is reused once the peer said the same.  Like TCP's close(), it
 * does not wait for the peer: past FIN_LOOK_NS the closing word's
 * completion is awaited by the progress thread (rdma_close_sweep; not in a
 * seccomp sandbox, nor in a signal handler: those wait here), the kernel's
 * FIN after it; the process's end waits for them (rdma_exit_flush). */
void rdma_conn_free(struct conn *c)
{
	struct rdma_conn *rc = rcn(c)->rc;
	struct rdma_link *l = rc->link;
	int r = -EPIPE, late = 0;

	if (rcn(c)->pid != shunt_pid()) { /* a forked child's or exec'd image's copy */
		moved_free(c);
		return;
	}
	/* every byte reaches the peer: over RDMA with the closing word, or on
	 * TCP (moved now if the link failed meanwhile; a flusher finishes
	 * what the socket cannot take yet, as the kernel would after close) */
	struct shunt_ring_ctl *locked = conn_lock(c, 0);
	fin_wait_end(rc); /* the closing word below covers the FIN's */
	if (!conn_moving(c) && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP) {
		int later = !shunt_sandboxed && !shunt_in_handler();
		rc->close_word = SHUNT_CDC_F_CLOSED | (rcn(c)->close_reset ? SHUNT_CDC_F_RESET : 0);
		rc->close_since = shunt_now_ns();
		r = push_and_wait_ns(c, rc->close_word, later ? FIN_LOOK_NS : FIN_WAIT_NS, &late,
				     &rc->close_seq);
		if (((r == -ETIMEDOUT && !late) || r == -EAGAIN) && later) {
			/* the progress thread finishes it (rdma_close_sweep) */
			shunt_unlock(&locked->wlock);
			shunt_mutex_lock(&closing_lock);
			rcn(c)->closing_next = closing;
			closing = rcn(c);
			__atomic_add_fetch(&rdma_closers, 1, __ATOMIC_ACQ_REL);
			shunt_mutex_unlock(&closing_lock);
			rdma_thread_start();
			return;
		}
	}
	if (r)
		close_move(c);
	shunt_unlock(&locked->wlock);
	close_tail(c);
}

