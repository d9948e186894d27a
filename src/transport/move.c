/* SPDX-License-Identifier: MIT */
/*
 * move.c - a live connection moves to its TCP socket, at the exact byte,
 * whatever carried it (transport.h).
 *
 * Each half of a connection moves once and then uses the kernel socket it
 * kept: the sending half writes there (after what the move owes the peer),
 * the receiving half reads there once its ring is empty.  The causes:
 *
 * - RDMA failover (src/transport/rdma: a failed link, fork, exec, a
 *   sandbox): the halves move with the FAILOVER message of wire.h 5c.
 * - A connection passed to another process (SCM_RIGHTS, issue #13 item 6)
 *   or given back (giveback.c): the receiver gets the kernel socket, so the
 *   connection must be plain TCP at the exact byte before the descriptor
 *   leaves (move_pass below; shared memory's half: shm/shm_move.c).  The
 *   receiving process, shunt or not, has a plain TCP socket whose stream
 *   goes on exactly where the rings stopped.
 *
 * The transport begins a half's move (its move_tx, pass); what follows -
 * the owed bytes on the socket, reads and writes there, readiness - is
 * here, for any transport.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../shim/shim.h"
#include "../base/real.h"

/* ---- the moved halves' I/O, for any transport ---- */

int conn_moving(struct conn *c)
{
	return __atomic_load_n(&c->mv.want, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE) || (c->tp->peer_left && c->tp->peer_left(c));
}

int conn_moved_reason(struct conn *c)
{
	int w = __atomic_load_n(&c->mv.want, __ATOMIC_ACQUIRE);

	if (!(w || c->mv.tx || c->mv.rx))
		return 0;
	return w ? w : SHUNT_R_PEER_FAILOVER;
}

/* Our staged bytes [fo_next, end) onto the socket (writer lock held): 0
 * when all went, else -errno (-EAGAIN: a full socket). */
static int send_staged(struct conn *c, uint64_t end, int flags)
{
	while (c->mv.next != end) {
		uint32_t off = (uint32_t)(c->mv.next & (c->tx.size - 1));
		uint64_t left = end - c->mv.next;
		size_t len = (size_t)(left < c->tx.size - off ? left : c->tx.size - off);
		ssize_t n = real.send(c->tcp_fd, c->tx.data + off, len, flags);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		c->mv.next += (uint64_t)n;
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
	left = c->mv.end - c->mv.next;
	(void)send_staged(c, c->mv.next + ((uint64_t)cut < left ? (uint64_t)cut : left), MSG_NOSIGNAL);
	shunt_log("fault: failover cut after %lld resent bytes, the stream ends at byte %llu: the process dies",
		  (long long)cut, (unsigned long long)c->mv.end);
	raise(SIGKILL);
}

int move_flush(struct conn *c, int flags)
{
	while (c->mv.hdr_off < sizeof c->mv.hdr) {
		ssize_t n = real.send(c->tcp_fd, c->mv.hdr + c->mv.hdr_off,
				      sizeof c->mv.hdr - c->mv.hdr_off, flags);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		c->mv.hdr_off += (unsigned)n;
	}
	fault_cut(c);
	return send_staged(c, c->mv.end, flags);
}

/* After the flush: the kernel's FIN that shutdown() left owed while the
 * peer had bytes of ours to read (mv.fin), once. */
void move_fin(struct conn *c)
{
	if (__atomic_exchange_n(&c->mv.fin, 0, __ATOMIC_ACQ_REL))
		real.shutdown(c->tcp_fd, SHUT_WR);
}

int move_flush_until(struct conn *c, uint64_t deadline)
{
	for (;;) {
		int r = move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT);
		if ((r != -EAGAIN && r != -EINTR) || shunt_now_ns() >= deadline)
			return r;
		fd_wait(c->tcp_fd, POLLOUT, deadline, 1000);
	}
}

int move_pending(const struct conn *c)
{
	return c->mv.tx && (c->mv.hdr_off < sizeof c->mv.hdr || c->mv.next != c->mv.end);
}

/* Readiness once a half moved: the ring's bytes first, then the socket. */
unsigned conn_moved_events(struct conn *c, unsigned ring_ev)
{
	int rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE), tx = conn_moving(c);
	unsigned ev = ring_ev, rev;
	int r;

	if (!rx && !tx)
		return ring_ev;
	if (c->tp->move_progress)
		c->tp->move_progress(c); /* the peer may wait for our resend */
	if (rx == 1) {
		conn_refresh(c);
		rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE);
	}
	if (rx == 2)
		sockinfo_lowat_sync(c); /* the socket's readiness counts from the ring's bytes on */
	r = fd_wait(c->tcp_fd, POLLIN | POLLOUT | POLLRDHUP, 0, 0);
	rev = r > 0 ? (unsigned)r : 0;
	if (!rx && (rev & (POLLIN | POLLRDHUP | POLLHUP))) {
		/* our receiving half is on the ring and the socket says
		 * something: the peer's move, or its end - looked at now, or a
		 * reader woken by the socket's hang-up (our sending half
		 * moved) finds the ring empty and waits again at once, for
		 * ever */
		conn_refresh(c);
		if ((rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE)) != 0) {
			r = fd_wait(c->tcp_fd, POLLIN | POLLOUT | POLLRDHUP, 0, 0);
			rev = r > 0 ? (unsigned)r : 0;
		}
	}
	if (tx) {
		ev &= ~(unsigned)(POLLOUT | POLLWRNORM);
		if (rev & (POLLOUT | POLLERR | POLLHUP))
			ev |= rev & (POLLOUT | POLLWRNORM | POLLERR | POLLHUP);
		if (c->shut_wr)
			ev |= POLLOUT | POLLWRNORM;
	}
	if (move_held(c)) {
		/* bytes held in memory, the rest on the socket: what the
		 * socket says of the stream's end holds already, as TCP's does
		 * with bytes unread (a move within the process after the
		 * peer's shutdown shuts the socket's reading side: a poll for
		 * POLLRDHUP waited for ever - tests/behave/stream_model, seed
		 * 5018) */
		ev |= POLLIN | POLLRDNORM | (rev & (POLLRDHUP | POLLHUP | POLLERR));
	} else if (rx == 2 && !ring_used(&c->rx)) {
		ev &= ~(unsigned)(POLLIN | POLLRDNORM | POLLRDHUP);
		ev |= rev & (POLLIN | POLLRDNORM | POLLRDHUP | POLLERR | POLLHUP);
		if (c->shut_rd)
			ev |= POLLIN | POLLRDNORM;
	} else if (rx == 1 && !ring_used(&c->rx)) {
		ev &= ~(unsigned)(POLLIN | POLLRDNORM | POLLRDHUP);
	} else if (rx == 2) {
		/* bytes left in our ring, the rest on the socket: what the
		 * socket says of the stream's end (the peer's FIN, a reset,
		 * with our own FIN a hang-up) holds already, as TCP's does
		 * with bytes unread - a poll for POLLRDHUP waited on the ring
		 * for ever; and its bytes with the ring's make SO_RCVLOWAT's
		 * mark (the socket's own is what the ring lacks of it) */
		ev |= rev & (POLLIN | POLLRDNORM | POLLRDHUP | POLLHUP | POLLERR);
	}
	return ev;
}

/* The system call a plain socket would have taken for this one: write,
 * writev or sendto, sendmsg only when nothing else carries it (and
 * likewise for reads) - a seccomp sandbox allows what the program uses,
 * and kills for the rest (a moved RDMA connection in one: rdma/share.c). */
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

/* The application's bytes straight to the kernel socket (a peer that
 * closed: conn.c), as a plain socket's call would send them. */
ssize_t move_send_socket(struct conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t n = sock_send(c->tcp_fd, iov, iovcnt, flags);

	return n < 0 ? -errno : n;
}

/* recv(MSG_OOB): urgent data is only ever on the socket (a sender moves
 * the connection first: conn.c conn_move_for), and out of the stream's
 * order, so no ring byte comes before it; none there: the kernel's EINVAL
 * or EAGAIN, as TCP's. */
ssize_t move_recv_urgent(struct conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t n = sock_recv(c->tcp_fd, iov, iovcnt, flags);

	return n < 0 ? -errno : n;
}

/* A write once the sending half moved (or is to move): writer lock held. */
ssize_t move_send_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock,
		      const struct msghdr *ctl)
{
	int fl = (flags & MSG_NOSIGNAL) | (nonblock ? MSG_DONTWAIT : 0);
	ssize_t n;
	int r;

	r = c->tp->move_tx(c);
	if (r)
		return r;
	for (;;) {
		r = move_flush(c, fl | MSG_DONTWAIT);
		if (r != -EAGAIN || nonblock)
			break;
		int d = shunt_crit_open(); /* (waits as long as the peer likes: lock.h) */
		r = fd_wait(c->tcp_fd, POLLOUT, UINT64_MAX, 0);
		shunt_crit_close(d);
		if (r == -EINTR)
			return -EINTR;
	}
	if (r) /* EPIPE raised SIGPIPE unless the caller said MSG_NOSIGNAL, as the kernel does */
		return r;
	int d = nonblock ? -1 : shunt_crit_open(); /* (as above) */
	if (ctl) { /* sendmsg's control data, the kernel's to judge */
		struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt,
				     .msg_control = ctl->msg_control, .msg_controllen = ctl->msg_controllen };
		n = real.sendmsg(c->tcp_fd, &mh, flags);
	} else {
		n = sock_send(c->tcp_fd, iov, iovcnt, flags);
	}
	if (d >= 0)
		shunt_crit_close(d);
	return n < 0 ? -errno : n;
}

/* Over RDMA the peer's move resends what our ring already holds (it cannot
 * tell what reached us) and our receiving half skips those bytes on the
 * socket (rdma/failover.c fo_rx_settle) - when something reads there.  A
 * writer blocked on the socket left them in our receive buffer: with both
 * ends writing, neither reading (the rings were full: conn_write_stuck),
 * each end's copies took the room the other's stream needed, and both sat
 * blocked for good at sizes TCP carries (tests/behave/rings_full over
 * RDMA, 1.5 MiB each way: 6 runs in 30).  So a blocking write goes on
 * without blocking while the half settles, and reads them off as it waits
 * (conn_wait.c conn_settle_wait).  Not in a seccomp sandbox: only the
 * program's own calls there. */
int move_settling(struct conn *c)
{
	return !(c->tp->flags & TP_SHARED_RINGS) && !shunt_sandboxed && !c->peer_eof && !c->peer_err &&
	       conn_moving(c) && __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2;
}

/* ---- bytes a moved half holds back (conn_move.held) ---- */

/* Everything the ring has, off it into the held bytes (rx lock held): a
 * half moved with bytes the socket will not carry. */
int move_hold_ring(struct conn *c)
{
	size_t have = move_held(c), n = (size_t)ring_used(&c->rx);
	uint8_t *b;
	ssize_t r;

	if (!n)
		return 0;
	if (!(b = malloc(have + n)))
		return -ENOMEM;
	r = ring_readv(&c->rx, &(struct iovec){ b + have, n }, 1, n, 0);
	if (r < 0) { /* a cursor the peer made impossible */
		free(b);
		return -EPROTO;
	}
	c->tp->ack(c);
	if (have)
		memcpy(b, c->mv.held + c->mv.held_off, have);
	free(c->mv.held);
	c->mv.held = b;
	c->mv.held_off = 0;
	c->mv.held_len = have + (size_t)r; /* (n, but for a hostile peer's cursor) */
	return 0;
}

/* Held bytes into iov (NULL or MSG_TRUNC: dropped, as the kernel drops
 * them; MSG_PEEK: kept), rx lock held. */
size_t move_take_held(struct conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	size_t n = 0, left = move_held(c);

	for (int i = 0; iov && i < iovcnt && n < left; i++) {
		size_t k = iov[i].iov_len < left - n ? iov[i].iov_len : left - n;
		if (!(flags & MSG_TRUNC))
			memcpy(iov[i].iov_base, c->mv.held + c->mv.held_off + n, k);
		n += k;
	}
	if (!(flags & MSG_PEEK) && (c->mv.held_off += n) == c->mv.held_len)
		move_held_free(c);
	return n;
}

void move_held_free(struct conn *c)
{
	free(c->mv.held);
	c->mv.held = NULL;
	c->mv.held_off = c->mv.held_len = 0;
}

/* A read once the ring is empty and the peer moved: rx lock held.  What
 * the move held back comes first. */
ssize_t move_recv_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock,
		      struct msghdr *ctl)
{
	ssize_t n;

	if (move_held(c)) {
		if (ctl) /* bytes of the rings: no control data */
			ctl->msg_controllen = 0;
		return (ssize_t)move_take_held(c, iov, iovcnt, flags);
	}
	while (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2) {
		conn_refresh(c);
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2)
			break;
		if (nonblock)
			return -EAGAIN;
		int d = shunt_crit_open(); /* (as move_send_tcp's) */
		int w = fd_wait(c->tcp_fd, POLLIN, UINT64_MAX, 0);
		shunt_crit_close(d);
		if (w == -EINTR)
			return -EINTR;
	}
	if (c->peer_err == EPROTO)
		return -EPROTO;
	if (c->mv.rx_err) { /* reported once, as the kernel reports a reset */
		int e = c->mv.rx_err;
		c->mv.rx_err = 0;
		c->mv.rx_end = 0;
		return -e;
	}
	if (ctl && ctl->msg_control) { /* recvmsg's control data (timestamps) is the socket's */
		struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt,
				     .msg_control = ctl->msg_control, .msg_controllen = ctl->msg_controllen };
		n = real.recvmsg(c->tcp_fd, &mh, flags);
		if (n >= 0) {
			ctl->msg_controllen = mh.msg_controllen;
			ctl->msg_flags = mh.msg_flags;
		}
	} else {
		int d = nonblock ? -1 : shunt_crit_open(); /* (as move_send_tcp's) */
		n = sock_recv(c->tcp_fd, iov, iovcnt, flags);
		if (d >= 0)
			shunt_crit_close(d);
		if (ctl)
			ctl->msg_controllen = 0;
	}
	if (n > 0 && !(flags & MSG_PEEK))
		c->mv.rx_pos += (uint64_t)n;
	if (n == 0 && c->mv.rx_pos < c->mv.rx_end) {
		/* bytes the peer's write() accepted never came: not an end */
		shunt_log("move: tcp fd %d: the stream ended %llu bytes short of the peer's "
			  "failover; reporting ECONNRESET", c->tcp_fd,
			  (unsigned long long)(c->mv.rx_end - c->mv.rx_pos));
		c->mv.rx_end = 0;
		return -ECONNRESET;
	}
	return n < 0 ? -errno : n;
}

/* The peer's FIN or RST is there (no wait). */
int sock_hung_up(int fd)
{
	int r = fd_wait(fd, POLLRDHUP, 0, 0);

	return r > 0 && (r & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---- the passing side ---- */

/* A pass's last step (both locks held): threads that wait for the old
 * locks find the rings changed (conn_lock): empty ones, and the socket
 * behind them. */
static void leave_rings(struct conn *c, struct shunt_ring_ctl *e)
{
	c->passed = e;
	c->tx.cons_seen = c->rx.cons_seen = c->tx.prod_seen = c->rx.prod_seen = 0;
	__atomic_store_n(&c->tx.ctl, &e[0], __ATOMIC_RELEASE);
	__atomic_store_n(&c->rx.ctl, &e[1], __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
}

/* A connection moved (or moving) to its socket: is the socket all of it
 * now - both halves there, nothing unsent, and nothing left in our ring
 * or held?  For a move within this process (`why` a kernel feature) our
 * reads take what the ring has first, then the socket's; and a peer that
 * shut its sending half before it moved sends nothing more, its ring
 * holding all of it (it sent no FAILOVER message: the socket says its
 * FIN).  The peer's message is looked for first (it may be on its way: a
 * caller that waits comes again). */
int move_settled(struct conn *c, int why)
{
	int here = why == SHUNT_R_UNSUPPORTED || why == SHUNT_R_RINGS_FULL;

	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2)
		conn_refresh(c);
	return (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 ||
		(here && __atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE))) &&
	       __atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE) && (here || (!ring_used(&c->rx) && !move_held(c))) &&
	       !move_pending(c);
}

/* What a pass's log line calls its cause. */
const char *move_cause(int why)
{
	return why == SHUNT_R_FD_PASSED	  ? "fd passed"
	       : why == SHUNT_R_DESCRIPTORS ? "descriptors given back"
					    : shunt_reason_str((unsigned)why);
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
	if ((c->tp->flags & TP_SHARED_RINGS) && (conn_moving(c) || c->mv.rx)) {
		/* The peer moved it, or is moving it: not both at once.  Our
		 * half follows here (a caller that waits - move_pass_wait -
		 * made no other call on it, and would wait out its second for
		 * nothing); once both halves are on the socket and our ring
		 * holds nothing unread, the socket is the connection. */
		if (c->tp->move_progress)
			c->tp->move_progress(c);
		return move_settled(c, why) ? 0 : -EBUSY;
	}
	e = aligned_alloc(SHUNT_CACHELINE, sizeof *e * 2);
	if (!e)
		return -ENOMEM;
	memset(e, 0, sizeof *e * 2);
	if (!(rx = conn_lock(c, 1))) {
		free(e);
		return -c->broken;
	}
	/* (the lock may have found it passed by another holder: followed) */
	r = c->passed ? 0 : c->tp->pass(c, rx, &t, why);
	if (r == 1) {
		leave_rings(c, e);
		e = NULL;
		r = 0;
	}
	if (t)
		shunt_unlock(&t->wlock);
	shunt_unlock(&rx->rlock);
	free(e);
	return r;
}

/* move_pass, waiting up to a second for a move the peer is making
 * (-EBUSY) to end: for a pass the program did not ask for (C stdio, a
 * posix_spawn child), which cannot be refused. */
int move_pass_wait(struct sk *s, int why)
{
	int r;

	for (int ms = 0;; ms++) {
		r = move_pass(s, why);
		if (r != -EBUSY || ms >= 1000)
			return r;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
}

/* Another process holding our side of a shared-memory connection passed
 * it (C stdio in a child that shares it, stdio.c; an SCM_RIGHTS pass): the peer resends what
 * our side had not read and reads the rings only to the mover's last
 * byte, so our copy leaves the rings too, under both locks - a reader or
 * writer of ours that takes one after finds the socket (conn_lock).
 * Called with no lock held. */
void move_follow(struct conn *c)
{
	struct shunt_ring_ctl *rx = c->rx.ctl, *t = c->tx.ctl, *e;
	int why;

	if (c->passed || !(e = aligned_alloc(SHUNT_CACHELINE, sizeof *e * 2)))
		return;
	memset(e, 0, sizeof *e * 2);
	if (shunt_lock_bounded(&rx->rlock, LOCK_BOUND_NS)) {
		free(e);
		return;
	}
	if (shunt_lock_bounded(&t->wlock, LOCK_BOUND_NS)) {
		shunt_unlock(&rx->rlock);
		free(e);
		return;
	}
	if (!c->passed && rx == c->rx.ctl && t == c->tx.ctl && (why = c->tp->side_moved(c, 1))) {
		c->tp->follow(c, why);
		leave_rings(c, e);
		e = NULL;
		shunt_log("move: connection (tcp fd %d): another process holding it moved it to TCP (%s)",
			  c->tcp_fd, shunt_reason_str((unsigned)why));
	}
	shunt_unlock(&t->wlock);
	shunt_unlock(&rx->rlock);
	free(e);
}
