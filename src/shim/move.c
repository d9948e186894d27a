/* SPDX-License-Identifier: MIT */
/*
 * move.c - a live connection moves to its TCP socket, at the exact byte.
 *
 * Each half of a connection moves once and then uses the kernel socket it
 * kept: the sending half writes there (after what the move owes the peer),
 * the receiving half reads there once its ring is empty.  Two causes:
 *
 * - RDMA failover (rdma.c: a failed link, fork, exec): the halves move
 *   with the FAILOVER message of wire.h 5c.
 * - A shared-memory connection passed to another process (SCM_RIGHTS,
 *   issue #13 item 6): the receiver gets the kernel socket, so the
 *   connection must be plain TCP at the exact byte before the descriptor
 *   leaves (move_pass below).  The passing side ("A") stops reading its
 *   ring and says so in the ring (rd_left, wire.h): the peer ("B") resends
 *   what A had not read, straight out of its own ring, on the socket, then
 *   writes there.  A stops writing its ring and sends the FAILOVER message
 *   (start = end = its last byte): B reads A's ring to that byte, then the
 *   socket.  The receiving process, shunt or not, has a plain TCP socket
 *   whose stream goes on exactly where the rings stopped.
 *
 * After the handshake the socket carried only what shunt put there (zero
 * byte liveness probes, a handshake message the in-band handshake left),
 * so the receiving half removes that and finds the message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"
#include "real.h"
#include "../common/failover.h"
#include "arena.h"

/* ---- the moved halves' I/O, for any transport ---- */

/* Set once the peer left our sending half's ring (shared memory, rd_left):
 * our half moves too.  The reason comes from the peer's word: checked. */
static int peer_left(struct conn *c)
{
	uint32_t w;
	int z = 0;

	if (c->rd || c->passed)
		return 0;
	w = __atomic_load_n(&c->tx.ctl->rd_left, __ATOMIC_ACQUIRE);
	if (!w)
		return 0;
	if (w >= SHUNT_R_MAX)
		w = SHUNT_R_PEER_FAILOVER;
	if (__atomic_compare_exchange_n(&c->fo_want, &z, (int)w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
		shunt_log("move: connection (tcp fd %d): the peer moved it to TCP (%s)", c->tcp_fd,
			  shunt_reason_str(w));
	}
	return 1;
}

int conn_moving(struct conn *c)
{
	return __atomic_load_n(&c->fo_want, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->fo_tx, __ATOMIC_ACQUIRE) || peer_left(c);
}

int conn_moved_reason(struct conn *c)
{
	int w = __atomic_load_n(&c->fo_want, __ATOMIC_ACQUIRE);

	if (!(w || c->fo_tx || c->fo_rx))
		return 0;
	return w ? w : SHUNT_R_PEER_FAILOVER;
}

/* Our staged bytes [fo_next, end) onto the socket (writer lock held): 0
 * when all went, else -errno (-EAGAIN: a full socket). */
static int send_staged(struct conn *c, uint64_t end, int flags)
{
	while (c->fo_next != end) {
		uint32_t off = (uint32_t)(c->fo_next & (c->tx.size - 1));
		uint64_t left = end - c->fo_next;
		size_t len = (size_t)(left < c->tx.size - off ? left : c->tx.size - off);
		ssize_t n = real.send(c->tcp_fd, c->tx.data + off, len, flags);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		c->fo_next += (uint64_t)n;
	}
	return 0;
}

/* Tests only (SHUNT_FAULT_FO_CUT, fault.c): after the failover message,
 * that many bytes of the resend and the process dies. */
static void fault_cut(struct conn *c)
{
	int64_t cut = shunt_fault_fo_cut();
	uint64_t left;

	if (cut < 0)
		return;
	left = c->fo_end - c->fo_next;
	(void)send_staged(c, c->fo_next + ((uint64_t)cut < left ? (uint64_t)cut : left), MSG_NOSIGNAL);
	shunt_log("fault: failover cut after %lld resent bytes: the process dies", (long long)cut);
	raise(SIGKILL);
}

int move_flush(struct conn *c, int flags)
{
	while (c->fo_hdr_off < sizeof c->fo_hdr) {
		ssize_t n = real.send(c->tcp_fd, c->fo_hdr + c->fo_hdr_off,
				      sizeof c->fo_hdr - c->fo_hdr_off, flags);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		c->fo_hdr_off += (unsigned)n;
	}
	fault_cut(c);
	return send_staged(c, c->fo_end, flags);
}

int move_flush_until(struct conn *c, uint64_t deadline)
{
	for (;;) {
		int r = move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT);
		struct pollfd p = { .fd = c->tcp_fd, .events = POLLOUT };
		uint64_t now = shunt_now_ns();
		if ((r != -EAGAIN && r != -EINTR) || now >= deadline)
			return r;
		real.poll(&p, 1, deadline - now > 1000000000ull ? 1000 : (int)((deadline - now) / 1000000) + 1);
	}
}

int move_pending(const struct conn *c)
{
	return c->fo_tx && (c->fo_hdr_off < sizeof c->fo_hdr || c->fo_next != c->fo_end);
}

/* Shared memory, writer lock held: our sending half moves because the peer
 * left our ring.  What it had not read is still there: resend it first. */
static int shm_tx_begin(struct conn *c)
{
	uint64_t cons, prod;

	if (__atomic_load_n(&c->fo_tx, __ATOMIC_ACQUIRE))
		return 0;
	cons = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	prod = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	if (prod - cons > c->tx.size) {
		conn_break(c, "impossible consumer cursor at the move");
		return -ECONNRESET;
	}
	c->fo_hdr_off = sizeof c->fo_hdr; /* nothing to say: the peer asked */
	c->fo_next = c->fo_start = cons;
	c->fo_end = prod;
	__atomic_store_n(&c->fo_tx, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Shared memory: the move's resend, made by whoever is here (a reader, a
 * poll) when no writer is: the peer's new reader may wait for it. */
static void shm_progress(struct conn *c)
{
	struct shunt_ring_ctl *t = c->tx.ctl;

	if (!conn_moving(c) || (c->fo_tx && !move_pending(c)) || shunt_trylock(&t->wlock))
		return;
	if (!shm_tx_begin(c) && move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) != -EAGAIN &&
	    __atomic_exchange_n(&c->fo_fin, 0, __ATOMIC_ACQ_REL))
		real.shutdown(c->tcp_fd, SHUT_WR); /* the shutdown owed */
	shunt_unlock(&t->wlock);
}

/* Readiness once a half moved: the ring's bytes first, then the socket. */
unsigned conn_moved_events(struct conn *c, unsigned ring_ev)
{
	struct pollfd p = { .fd = c->tcp_fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	int rx = __atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE), tx = conn_moving(c);
	unsigned ev = ring_ev;

	if (!rx && !tx)
		return ring_ev;
	if (!c->rd)
		shm_progress(c); /* the peer may wait for our resend */
	if (rx == 1) {
		conn_refresh(c);
		rx = __atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE);
	}
	if (real.poll(&p, 1, 0) < 0)
		p.revents = 0;
	if (tx) {
		ev &= ~(unsigned)(POLLOUT | POLLWRNORM);
		if (p.revents & (POLLOUT | POLLERR | POLLHUP))
			ev |= p.revents & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP);
		if (c->shut_wr)
			ev |= POLLOUT | POLLWRNORM;
	}
	if (rx == 2 && !ring_used(&c->rx)) {
		ev &= ~(unsigned)(POLLIN | POLLRDNORM | POLLRDHUP);
		ev |= p.revents & (POLLIN | POLLRDNORM | POLLRDHUP | POLLERR | POLLHUP);
		if (c->shut_rd)
			ev |= POLLIN | POLLRDNORM;
	} else if (rx == 1 && !ring_used(&c->rx)) {
		ev &= ~(unsigned)(POLLIN | POLLRDNORM | POLLRDHUP);
	}
	return ev;
}

/* The system call a plain socket would have taken for this one: write,
 * writev or sendto, sendmsg only when nothing else carries it (and
 * likewise for reads) - a seccomp sandbox allows what the program uses,
 * and kills for the rest (a moved RDMA connection in one: rdma.c). */
static ssize_t sock_send(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };

	if (!flags)
		return iovcnt == 1 ? real.write(fd, iov[0].iov_base, iov[0].iov_len) : real.writev(fd, iov, iovcnt);
	if (iovcnt == 1)
		return real.send(fd, iov[0].iov_base, iov[0].iov_len, flags);
	return real.sendmsg(fd, &mh, flags);
}

static ssize_t sock_recv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };

	if (!flags)
		return iovcnt == 1 ? real.read(fd, iov[0].iov_base, iov[0].iov_len) : real.readv(fd, iov, iovcnt);
	if (iovcnt == 1)
		return real.recv(fd, iov[0].iov_base, iov[0].iov_len, flags);
	return real.recvmsg(fd, &mh, flags);
}

/* A write once the sending half moved (or is to move): writer lock held. */
ssize_t move_send_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock)
{
	int fl = (flags & MSG_NOSIGNAL) | (nonblock ? MSG_DONTWAIT : 0);
	ssize_t n;
	int r;

	r = c->rd ? rdma_fo_begin(c) : shm_tx_begin(c);
	if (r)
		return r;
	for (;;) {
		struct pollfd p = { .fd = c->tcp_fd, .events = POLLOUT };
		r = move_flush(c, fl | MSG_DONTWAIT);
		if (r != -EAGAIN || nonblock)
			break;
		if (real.poll(&p, 1, -1) < 0 && errno == EINTR)
			return -EINTR;
	}
	if (r) /* EPIPE raised SIGPIPE unless the caller said MSG_NOSIGNAL, as the kernel does */
		return r;
	n = sock_send(c->tcp_fd, iov, iovcnt, flags);
	return n < 0 ? -errno : n;
}

/* A read once the ring is empty and the peer moved: rx lock held. */
ssize_t move_recv_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock)
{
	ssize_t n;

	while (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) != 2) {
		struct pollfd p = { .fd = c->tcp_fd, .events = POLLIN };
		conn_refresh(c);
		if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2)
			break;
		if (nonblock)
			return -EAGAIN;
		if (real.poll(&p, 1, -1) < 0 && errno == EINTR)
			return -EINTR;
	}
	if (c->peer_err == EPROTO)
		return -EPROTO;
	if (c->fo_rx_err) { /* reported once, as the kernel reports a reset */
		int e = c->fo_rx_err;
		c->fo_rx_err = 0;
		c->fo_rx_end = 0;
		return -e;
	}
	n = sock_recv(c->tcp_fd, iov, iovcnt, flags);
	if (n > 0 && !(flags & MSG_PEEK))
		c->fo_rx_pos += (uint64_t)n;
	if (n == 0 && c->fo_rx_pos < c->fo_rx_end) {
		/* bytes the peer's write() accepted never came: not an end */
		shunt_log("move: tcp fd %d: the stream ended %llu bytes short of the peer's "
			  "failover; reporting ECONNRESET", c->tcp_fd,
			  (unsigned long long)(c->fo_rx_end - c->fo_rx_pos));
		c->fo_rx_end = 0;
		return -ECONNRESET;
	}
	return n < 0 ? -errno : n;
}

/* ---- shared memory: what heads the socket before the peer's move ---- */

int sock_hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return real.poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Peek at the socket past shunt's leftovers, which are consumed: the
 * peek's result (-1 with errno, 0 at FIN, else the bytes in buf), and
 * *partial when a leftover is cut at the end of what is there. */
static ssize_t peek_past_leftovers(int fd, uint8_t *buf, size_t cap, int *partial)
{
	for (;;) {
		ssize_t r = real.recv(fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
		size_t k;
		if (r <= 0)
			return r;
		k = shunt_fo_leftovers(buf, (size_t)r, partial);
		if (!k)
			return r;
		(void)!real.recv(fd, buf, k, MSG_DONTWAIT);
	}
}

/* conn_refresh for a shared-memory connection with bytes on its socket:
 * remove shunt's leftovers; the peer's FAILOVER message moves our
 * receiving half (and, as the peer left our ring too, our sending half).
 * Returns 1 at the kernel's FIN (conn_refresh takes it from there), else
 * 0: nothing more to read now, or the socket is the stream's now. */
static int settle_locked(struct conn *c)
{
	uint8_t buf[SHUNT_HS_MAX_LEN + sizeof(struct shunt_fo)];
	struct shunt_fo m;
	ssize_t r;
	int partial, e;

	for (;;) {
		if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2)
			return 0; /* the socket carries the peer's bytes now */
		r = peek_past_leftovers(c->tcp_fd, buf, sizeof buf, &partial);
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			c->peer_err = errno; /* the kernel reports a reset once: this was it */
			return 0;
		}
		if (r < 0)
			return 0; /* nothing there */
		if (!r)
			return 1;
		e = partial ? -EAGAIN : shunt_fo_parse(buf, (size_t)r, &m);
		if (e == -EAGAIN) {
			/* the rest is on its way (sent at once), unless the
			 * socket ended: then these bytes are all there will be */
			if (!sock_hung_up(c->tcp_fd))
				return 0;
			(void)!real.recv(c->tcp_fd, buf, (size_t)r, MSG_DONTWAIT);
			continue;
		}
		if (e || m.start != m.end ||
		    m.end != __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE)) {
			conn_break(c, "unexpected bytes on the TCP socket");
			return 0;
		}
		(void)!real.recv(c->tcp_fd, buf, sizeof m, MSG_DONTWAIT);
		c->fo_rx_pos = c->fo_rx_end = m.end;
		__atomic_store_n(&c->fo_rx, 2, __ATOMIC_RELEASE);
		__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
		peer_left(c);
		conn_wake_local(c, POLLIN | POLLOUT);
	}
}

int move_shm_settle(struct conn *c)
{
	int r;

	if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2) {
		shm_progress(c);
		return 0; /* the socket carries the peer's bytes now */
	}
	/* One thread at a time: two that peeked the same leftovers or the
	 * same message would both consume them, the second taking bytes of
	 * the stream.  A thread finding it busy leaves it to the one in it
	 * (a try: no wait, nothing held across a fork). */
	if (pthread_mutex_trylock(&c->fo_lock))
		return 0;
	r = settle_locked(c);
	pthread_mutex_unlock(&c->fo_lock);
	if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2)
		shm_progress(c); /* just moved: the peer may wait for our resend */
	return r;
}

/* ---- the passing side ---- */

/* Shared memory, both ring locks held: the peer resends what we did not
 * read and writes the socket from now on, and reads our ring to its end,
 * then the socket. */
static int shm_pass(struct conn *c, struct shunt_ring_ctl *t, struct shunt_ring_ctl *rx, int why)
{
	uint8_t buf[SHUNT_HS_MAX_LEN];
	uint64_t left;
	ssize_t n;
	int partial;

	if (__atomic_load_n(&arena_seg(c->arena, c->segno)->owner[c->side], __ATOMIC_ACQUIRE) != 1)
		return -EBUSY; /* another process reads and writes it too */
	/* the peer's unread bytes: it resends them, unless it has shut its
	 * sending side (it cannot write the socket then) */
	left = __atomic_load_n(&rx->prod, __ATOMIC_ACQUIRE) - __atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE);
	if (left && __atomic_load_n(&rx->wr_done, __ATOMIC_ACQUIRE))
		return -EPIPE;
	/* our socket: nothing of shunt's may head the peer's resend */
	n = peek_past_leftovers(c->tcp_fd, buf, sizeof buf, &partial);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		c->peer_err = errno; /* reset: nothing to move (the peek took the report) */
		return 0;
	}
	if (n > 0)
		return -EBUSY; /* not ours: the peer moves it itself */
	/* from here on the peer writes the socket, from our consumer on */
	__atomic_store_n(&rx->rd_left, (uint32_t)why, __ATOMIC_SEQ_CST);
	/* and reads its ring to our last byte, then the socket */
	if (!c->shut_wr) {
		uint8_t fo[sizeof(struct shunt_fo)];
		uint64_t p = __atomic_load_n(&t->prod, __ATOMIC_ACQUIRE);
		size_t off = 0;
		shunt_fo_encode(fo, p, p, (uint32_t)why);
		while (off < sizeof fo) {
			ssize_t w = real.send(c->tcp_fd, fo + off, sizeof fo - off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				break; /* the peer is gone: nothing to tell */
			off += (size_t)w;
		}
	}
	/* wake the peer (it resends now) and our own sleepers (they find
	 * the rings gone and the socket in their place once we unlock) */
	conn_wake_all(c);
	c->fo_hdr_off = sizeof c->fo_hdr;
	c->fo_want = why;
	c->fo_rx = 2;
	__atomic_store_n(&c->fo_tx, 1, __ATOMIC_RELEASE);
	shunt_log("move: %s: connection (tcp fd %d) is plain TCP from byte %llu/%llu",
		  why == SHUNT_R_FD_PASSED ? "fd passed" : "descriptors given back", c->tcp_fd,
		  (unsigned long long)__atomic_load_n(&rx->cons, __ATOMIC_RELAXED),
		  (unsigned long long)__atomic_load_n(&t->prod, __ATOMIC_RELAXED));
	return 1;
}

/* Before `fd`, an accelerated connection, is passed to another process
 * (why: SHUNT_R_FD_PASSED), or to give shunt's descriptors back
 * (SHUNT_R_DESCRIPTORS, giveback.c): both halves onto the socket (see the
 * head of this file).  0: the descriptor is a plain TCP socket now, else
 * -errno (it stays as it was). */
int move_pass(struct sk *s, int why)
{
	struct conn *c = s->conn;
	struct shunt_ring_ctl *t = NULL, *rx, *e;
	int r;

	if (c->broken || c->passed)
		return 0; /* a reset, or plain already: the socket says it all */
	if (shunt_sandboxed)
		return -EPERM;
	if (!c->rd && (conn_moving(c) || c->fo_rx))
		return -EBUSY; /* the peer is moving it: not both at once */
	e = aligned_alloc(SHUNT_CACHELINE, sizeof *e * 2);
	if (!e)
		return -ENOMEM;
	memset(e, 0, sizeof *e * 2);
	if (!(rx = conn_lock(c, 1))) {
		free(e);
		return -c->broken;
	}
	if (c->rd) { /* rdma.c moves it (and takes the writer's lock itself) */
		r = rdma_conn_pass(c);
		if (!r && (t = conn_lock(c, 0))) {
			shunt_log("move: fd passed: RDMA connection (tcp fd %d) is plain TCP", c->tcp_fd);
			r = 1;
		}
	} else if ((t = conn_lock(c, 0))) {
		r = shm_pass(c, t, rx, why);
	} else {
		r = -c->broken;
	}
	if (r == 1) {
		/* threads that wait for the old locks find the rings changed
		 * (conn_lock): empty ones, and the socket behind them */
		c->passed = e;
		c->tx.cons_seen = c->rx.cons_seen = c->tx.prod_seen = c->rx.prod_seen = 0;
		__atomic_store_n(&c->tx.ctl, &e[0], __ATOMIC_RELEASE);
		__atomic_store_n(&c->rx.ctl, &e[1], __ATOMIC_RELEASE);
		__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
		e = NULL;
		r = 0;
	}
	if (t)
		shunt_unlock(&t->wlock);
	shunt_unlock(&rx->rlock);
	free(e);
	return r;
}
