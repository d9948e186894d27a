/* SPDX-License-Identifier: MIT */
/*
 * failover.c - an RDMA connection moves to its TCP socket (wire.h 5c).
 *
 * After a link failure, the peer's move, or before fork, exec or a
 * sandbox (share.c): see the section below.  What follows the start of a
 * move - bytes owed on the socket, reads there - is src/transport/move.c.
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdma.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/handshake.h"
#include "../../common/failover.h"

_Atomic int rdma_fo_work; /* the progress thread has moves, backlogs or FINs to finish */

/* ---- failover: the TCP socket after the link (wire.h 5c) ----
 *
 * Each half of a connection moves once.  The sending half (writer lock):
 * our message, then the staged bytes the peer may lack, then the
 * application's; nothing more is posted.  The receiving half (fo_lock): the
 * peer's message, read off the socket after any probes, freezes our
 * producer, and the bytes it says we have are dropped.  A move asked for
 * (fo_want: the link failed, or the peer moved) is made by whoever holds
 * the writer lock next, or by the progress thread, which also sends what
 * a full socket could not take. */

void rdma_fo_request(struct conn *c, int reason)
{
	int z = 0;

	if (__atomic_compare_exchange_n(&c->mv.want, &z, reason, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
		shunt_log("rdma: connection (tcp fd %d) moves to TCP: %s", c->tcp_fd,
			  shunt_reason_str((unsigned)reason));
	}
	__atomic_store_n(&rdma_fo_work, 1, __ATOMIC_RELEASE);
	conn_wake_local(c, POLLIN | POLLOUT);
}

/* Writer lock held.  push_flags: PUSH_MAY_POLL, or 0 from the progress
 * thread, which holds the link's completion lock: it must not wait for a
 * poster (who may wait for completions only it could reap); -EBUSY then. */
int rdma_fo_tx_begin(struct conn *c, int push_flags)
{
	struct rdma_conn *rc = rcn(c)->rc;
	struct rdma_link *l = rc->link;
	uint64_t start, end;
	int why;

	if (__atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE))
		return 0;
	/* no post is under way */
	if (!(push_flags & PUSH_MAY_POLL)) {
		if (shunt_mutex_trylock(&rc->lock))
			return -EBUSY;
	} else {
		shunt_mutex_lock(&rc->lock);
	}
	why = __atomic_load_n(&c->mv.want, __ATOMIC_ACQUIRE);
	if (!why) {
		/* nobody asked: the link is down, or a closing cursor message
		 * (shutdown, close, the exit's flush) was not acknowledged in
		 * time on a live link - this connection moves, the link stays
		 * (said to be a failed link, the peer would break it and move
		 * every connection on it) */
		why = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP ? SHUNT_R_RDMA_STALLED
									       : SHUNT_R_LINK_FAILED;
		__atomic_store_n(&c->mv.want, why, __ATOMIC_RELEASE);
		shunt_log("rdma: connection (tcp fd %d) moves to TCP: %s", c->tcp_fd,
			  shunt_reason_str((unsigned)why));
	}
	start = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	end = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	shunt_fo_encode(c->mv.hdr, start, end, (uint32_t)why); /* (as a reason every peer knows) */
	c->mv.hdr_off = 0;
	c->mv.next = start;
	c->mv.start = start;
	c->mv.end = end;
	if (rc->fin_done && !__atomic_load_n(&c->mv.fin, __ATOMIC_ACQUIRE)) {
		/* all of it reached the peer and the kernel's FIN followed (one
		 * still owed: the peer had not read it all, its pass needs it
		 * on the socket - cursor.c fin_owed) */
		c->mv.hdr_off = sizeof c->mv.hdr;
		c->mv.next = end;
	}
	/* a live link (the peer's failed, or the peer moved): say so there too,
	 * and that we write into its ring no more */
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP && !rc->closed_sent) {
		if (!rdma_post_word(rc, SHUNT_CDC_F_FAILOVER | SHUNT_CDC_F_CLOSED, push_flags)) {
			rc->fo_closed = 1;
			rc->closed_sent = 1;
		}
	}
	__atomic_store_n(&c->mv.tx, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
	shunt_mutex_unlock(&rc->lock);
	__atomic_store_n(&rdma_fo_work, 1, __ATOMIC_RELEASE);
	return 0;
}

/* move.c's write on a moved half: the move, if not made yet. */
int rdma_fo_begin(struct conn *c)
{
	return rdma_fo_tx_begin(c, PUSH_MAY_POLL);
}


/* ---- closed sockets our threads finish (orphans, lingers) ----
 *
 * The kernel finishes a closed TCP socket after the process is gone; ours
 * live in threads, which the process's end would cut off (the bytes the
 * peer was owed, or a reset for what it resent).  So the end waits for
 * them, within its bound (rdma_fo_threads_wait), and a forked child closes
 * its copies of their sockets, or the peer's FIN would wait for the child. */
static pthread_mutex_t fo_thr_lock = PTHREAD_MUTEX_INITIALIZER;
static int *fo_thr_fd, fo_thr_n, fo_thr_cap;

static int fo_thread_spawn(void *(*fn)(void *), void *arg, int fd)
{
	int r = -ENOMEM;

	shunt_mutex_lock(&fo_thr_lock);
	if (fo_thr_n == fo_thr_cap) {
		int cap = fo_thr_cap ? 2 * fo_thr_cap : 8, *v = realloc(fo_thr_fd, sizeof *v * (size_t)cap);
		if (v) {
			fo_thr_fd = v;
			fo_thr_cap = cap;
		}
	}
	if (fo_thr_n < fo_thr_cap) {
		fo_thr_fd[fo_thr_n++] = fd;
		r = rdma_spawn(fn, arg);
		if (r)
			fo_thr_n--;
	}
	shunt_mutex_unlock(&fo_thr_lock);
	return r;
}

/* The thread's last step. */
static void fo_thread_close(int fd)
{
	shunt_mutex_lock(&fo_thr_lock);
	for (int i = 0; i < fo_thr_n; i++)
		if (fo_thr_fd[i] == fd) {
			fo_thr_fd[i] = fo_thr_fd[--fo_thr_n];
			break;
		}
	fd_close_internal(fd);
	shunt_mutex_unlock(&fo_thr_lock);
}

void rdma_fo_threads_wait(uint64_t deadline)
{
	while (__atomic_load_n(&fo_thr_n, __ATOMIC_ACQUIRE) && shunt_now_ns() < deadline)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

SHUNT_CHILD_PATH void rdma_fo_threads_forget(void)
{
	for (int i = 0; i < fo_thr_n; i++)
		fd_close_internal(fo_thr_fd[i]);
	SHUNT_RESET(fo_thr_n, 0);
	shunt_mutex_reset(&fo_thr_lock);
}

/* The peer's failover message at the head of the socket, after its
 * liveness probes (those are read off): 0 with *m (the message still
 * unread), -EAGAIN while it is on its way, -EPROTO for anything else, or
 * 1 at the socket's end (*err: 0 for the FIN, else the error). */
static int fo_msg_peek(int fd, struct shunt_fo *m, int *err)
{
	uint8_t buf[64];

	for (;;) {
		ssize_t r = real.recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
		size_t z = 0;
		int e;

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return -EAGAIN;
		if (r <= 0) {
			*err = r ? errno : 0;
			return 1;
		}
		while (z < (size_t)r && !buf[z])
			z++;
		if (z) { /* liveness probes */
			(void)!real.recv(fd, buf, z, MSG_DONTWAIT);
			continue;
		}
		e = shunt_fo_parse(buf, (size_t)r, m);
		if (e == -EAGAIN && sock_hung_up(fd))
			e = -EPROTO; /* the rest will never come */
		return e;
	}
}

/* Reads off the bytes the peer resends that we have - *skip of them, no
 * more (the next is the application's) - without waiting: 0 once all are
 * read, -EAGAIN while the rest is on its way, or the stream's end among
 * them (ECONNRESET for a FIN: bytes owed never came; else the socket's
 * error).  *pos, if given, counts them. */
static int fo_skip_off(int fd, uint64_t *skip, uint64_t *pos)
{
	uint8_t buf[4096];

	while (*skip) {
		ssize_t n = real.recv(fd, buf, *skip < sizeof buf ? (size_t)*skip : sizeof buf, MSG_DONTWAIT);
		if (n > 0) {
			*skip -= (uint64_t)n;
			if (pos)
				*pos += (uint64_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			return -EAGAIN;
		} else {
			return n ? errno : ECONNRESET;
		}
	}
	return 0;
}

/* At the close (the ring still ours): whether the socket may yet receive,
 * unread, what only the peer's move puts there - its failover message and
 * the bytes it resends that we have.  Closed with those unread, the
 * kernel would reset the connection, and the peer could lose what we
 * sent it last (a fork of the peer's between our last read and our close;
 * a peer whose closing word was late).  Not after a fork, an exec or a
 * pass (another process may read the socket still), nor with bytes of
 * the peer's unread (a reset is what TCP does then). */
void rdma_fo_linger_note(struct conn *c)
{
	struct fo_linger *lg = &rcn(c)->linger;
	int why = __atomic_load_n(&c->mv.want, __ATOMIC_ACQUIRE), rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE);
	int inq = 0;

	lg->on = 0;
	if (c->tcp_fd < 0 || rcn(c)->moved || c->passed || rx == 2 || rcn(c)->close_reset || ring_used(&c->rx) ||
	    (why && why != SHUNT_R_PEER_FAILOVER && why != SHUNT_R_LINK_FAILED && why != SHUNT_R_RDMA_STALLED))
		return;
	/* a move under way (the peer's message comes), or bytes there
	 * already (the peer's message before its word) */
	if (!why && (shunt_sandboxed || real.ioctl(c->tcp_fd, FIONREAD, &inq) || inq <= 0))
		return;
	lg->on = 1;
	lg->rx = rx;
	lg->skip = c->mv.skip;
	lg->prod = __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE);
	lg->size = c->rx.size;
}

/* Reads off what the note expects, no more; never blocks.  1 once done:
 * the message and the bytes we have are read, or the socket ended, or it
 * holds something else (the kernel's close decides: a reset, as TCP's
 * close with bytes unread). */
static int linger_step(struct fo_linger *lg, int fd)
{
	uint8_t buf[sizeof(struct shunt_fo)];

	while (!lg->rx) {
		struct shunt_fo m;
		int err, e = fo_msg_peek(fd, &m, &err);
		if (e == -EAGAIN)
			return 0;
		if (e || shunt_fo_skip(&m, lg->prod, lg->size, &lg->skip))
			return 1;
		(void)!real.recv(fd, buf, sizeof m, MSG_DONTWAIT);
		lg->rx = 1;
	}
	return fo_skip_off(fd, &lg->skip, NULL) != -EAGAIN;
}

/* Our stream ends now (as close() sends the FIN at once); the socket is
 * closed once the note's bytes are read off, within 30 s, as the kernel
 * finishes a closed TCP socket's exchange. */
static void linger_finish(struct fo_linger *lg, int fd)
{
	uint64_t deadline = shunt_now_ns() + 30000000000ull;

	real.shutdown(fd, SHUT_WR);
	while (!linger_step(lg, fd) && shunt_now_ns() < deadline)
		fd_wait(fd, POLLIN, deadline, 1000);
	lg->on = 2;
	fo_thread_close(fd);
}

struct lingerer {
	int fd;
	struct fo_linger lg;
};

static void *linger_run(void *arg)
{
	struct lingerer *x = arg;

	linger_finish(&x->lg, x->fd);
	free(x);
	return NULL;
}

/* After the close (its note): a thread of ours reads the socket off. */
void rdma_fo_linger(struct conn *c)
{
	struct lingerer *x;

	if (c->tcp_fd < 0 || rcn(c)->linger.on != 1 || !(x = malloc(sizeof *x)))
		return; /* (an orphan's socket: it lingers itself, rdma_fo_orphan) */
	x->fd = c->tcp_fd;
	x->lg = rcn(c)->linger;
	if (!fo_thread_spawn(linger_run, x, x->fd))
		c->tcp_fd = -1; /* the thread's now */
	else
		free(x);
}

/* close() with bytes the socket cannot take yet: a thread finishes them
 * and closes our descriptor of the socket, as the kernel sends what was
 * queued after close(). */
struct orphan {
	int fd, fin;
	struct fo_linger lg;
	size_t len, off;
	uint8_t buf[];
};

static void *orphan_run(void *arg)
{
	struct orphan *o = arg;

	while (o->off < o->len) {
		ssize_t n = real.send(o->fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			o->off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* the peer is gone: so are the bytes, as with TCP */
		/* the peer's resend must not wait for ours: read it off as we wait */
		if (o->lg.on == 1 && linger_step(&o->lg, o->fd))
			o->lg.on = 2;
		fd_wait(o->fd, POLLOUT | (o->lg.on == 1 ? POLLIN : 0), UINT64_MAX, 1000);
	}
	if (o->lg.on == 1) {
		linger_finish(&o->lg, o->fd); /* (its FIN, then closes it) */
	} else {
		if (o->fin) /* the application's shutdown, owed until now */
			real.shutdown(o->fd, SHUT_WR);
		fo_thread_close(o->fd);
	}
	free(o);
	return NULL;
}

void rdma_fo_orphan(struct conn *c)
{
	size_t hdr = sizeof c->mv.hdr - c->mv.hdr_off, len = hdr + (size_t)(c->mv.end - c->mv.next);
	struct orphan *o = malloc(sizeof *o + len);

	if (!o) {
		move_flush_until(c, UINT64_MAX);
		return;
	}
	o->fd = c->tcp_fd;
	o->fin = __atomic_exchange_n(&c->mv.fin, 0, __ATOMIC_ACQ_REL);
	rdma_fo_linger_note(c);
	o->lg = rcn(c)->linger;
	rcn(c)->linger.on = 0; /* the orphan's */
	o->len = len;
	o->off = 0;
	memcpy(o->buf, c->mv.hdr + c->mv.hdr_off, hdr);
	for (size_t k = hdr; c->mv.next != c->mv.end; k++, c->mv.next++)
		o->buf[k] = c->tx.data[c->mv.next & (c->tx.size - 1)];
	if (!fo_thread_spawn(orphan_run, o, o->fd)) {
		c->tcp_fd = -1; /* the thread's now */
	} else {
		free(o);
		move_flush_until(c, UINT64_MAX);
	}
}

/* One connection for fo_sweep; *again when it must look once more. */
static int sweep_one(struct rdma_conn *rc, void *arg)
{
	struct conn *c = rc->c;
	int *again = arg;

	if (!conn_moving(c) || (c->mv.tx && c->mv.hdr_off == sizeof c->mv.hdr &&
				     c->mv.next == c->mv.end && !c->mv.fin))
		return 0;
	struct shunt_ring_ctl *t = c->tx.ctl;
	if (shunt_trylock(&t->wlock)) {
		*again = 1; /* an application thread writes: it moves it */
		return 0;
	}
	if (t != c->tx.ctl) { /* moved before fork meanwhile: nothing owed */
		shunt_unlock(&t->wlock);
		return 0;
	}
	if (rdma_fo_tx_begin(c, 0)) {
		*again = 1;
	} else {
		int r = move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r == -EAGAIN)
			*again = 1;
		else
			move_fin(c); /* the shutdown owed */
	}
	shunt_unlock(&t->wlock);
	return 0;
}

/* Progress thread: make the moves asked for and send what full sockets
 * could not take, for connections no application thread is writing on. */
void rdma_fo_sweep(void)
{
	if (!__atomic_load_n(&rdma_fo_work, __ATOMIC_ACQUIRE))
		return;
	shunt_mutex_lock(&rdma_lock);
	rdma_each_open_flagged(&rdma_fo_work, sweep_one, 0);
	shunt_mutex_unlock(&rdma_lock);
}

/* fo_lock held: consume what precedes the peer's application bytes on the
 * socket (probes, its failover message, the bytes our ring has).  Never
 * blocks and never takes an application byte. */
static void fo_rx_settle(struct conn *c)
{
	uint8_t buf[sizeof(struct shunt_fo)];

	while (!c->mv.rx) {
		struct shunt_fo m;
		uint64_t prod;
		int e, err;

		e = fo_msg_peek(c->tcp_fd, &m, &err);
		if (e == -EAGAIN)
			return; /* (the rest is on its way) */
		if (e == 1 && !err && c->shut_rd && !sockinfo_peer_fin(c->tcp_fd))
			return; /* the end our own SHUT_RD reads as: no FIN */
		if (e == 1 && !err && c->peer_eof) {
			/* after the FIN the socket reads as its end: a reset
			 * that came since (bytes of ours the peer closed
			 * before: cursor.c closed_before_ours) is SO_ERROR's */
			if (!shunt_sandboxed)
				(void)!real.getsockopt(c->tcp_fd, SOL_SOCKET, SO_ERROR, &err,
						       &(socklen_t){ sizeof err });
			if (err)
				c->peer_err = err;
			return;
		}
		if (e == 1) {
			/* the kernel's FIN or RST: cursor messages sent before
			 * it count first */
			rdma_link_drain(rcn(c)->rc->link);
			if (!err && !__atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE)) {
				/* FIN with no cursor FIN before it: the peer
				 * ended without flushing (killed, crashed, or
				 * its exit flush timed out) - bytes its write()
				 * accepted may be lost, so not a clean EOF */
				shunt_log("rdma: tcp fd %d: the peer closed without ending its stream "
					  "over RDMA; reporting ECONNRESET", c->tcp_fd);
				err = ECONNRESET;
				/* as a reset: a send reports it once, then EPIPE -
				 * not a byte to the kernel socket, which a gone
				 * peer's FIN would let through (writer_dead_peer) */
				__atomic_store_n(&c->peer_reset, 1, __ATOMIC_RELEASE);
			}
			if (!err)
				c->peer_eof = 1;
			else
				c->peer_err = err;
			return;
		}
		if (!e) {
			shunt_mutex_lock(&rcn(c)->rc->link->cq_lock);
			__atomic_store_n(&c->mv.rx, 1, __ATOMIC_RELEASE); /* cursor messages stop here */
			prod = __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE);
			shunt_mutex_unlock(&rcn(c)->rc->link->cq_lock);
			/* a pass or a fork (rdma_conn_pass, rdma_share_prepare;
			 * the mover holds the reader's lock): the socket is to
			 * carry what our application has not read, so only the
			 * bytes it read are dropped - and the ring's unread ones
			 * are void (the socket brings them again) */
			if (c->mv.pass) {
				uint64_t cons = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE);
				__atomic_store_n(&c->rx.ctl->cons, prod, __ATOMIC_RELEASE);
				prod = cons;
			}
			e = shunt_fo_skip(&m, prod, c->rx.size, &c->mv.skip);
			/* the socket's stream starts at the message's start and
			 * owes us at least up to its end (what the peer's write()
			 * accepted): an end before it is a reset (item 5) */
			c->mv.rx_pos = m.start;
			c->mv.rx_end = m.end;
		}
		if (e) {
			shunt_log("rdma: invalid failover message on tcp fd %d", c->tcp_fd);
			__atomic_store_n(&c->mv.rx, 2, __ATOMIC_RELEASE);
			c->peer_err = EPROTO;
			conn_wake_local(c, POLLIN | POLLOUT);
			return;
		}
		(void)!real.recv(c->tcp_fd, buf, sizeof m, MSG_DONTWAIT);
		rdma_fo_request(c, m.reason == SHUNT_R_FD_PASSED ? SHUNT_R_FD_PASSED : SHUNT_R_PEER_FAILOVER);
		/* the peer's end of our link failed: ours is no better (its
		 * queue pair may not know yet), so every connection on it
		 * moves now and no new one is put on it */
		if (m.reason == SHUNT_R_LINK_FAILED &&
		    __atomic_load_n(&rcn(c)->rc->link->state, __ATOMIC_ACQUIRE) == LINK_UP)
			rdma_link_break(rcn(c)->rc->link);
	}
	if (c->mv.rx == 1) {
		/* the stream ended, or was reset, inside the resend: the
		 * recv took the kernel's one report of it, so the reader gets
		 * it from here (never a clean EOF) */
		int e = fo_skip_off(c->tcp_fd, &c->mv.skip, &c->mv.rx_pos);
		if (e == -EAGAIN)
			return;
		if (e)
			c->mv.rx_err = e;
		__atomic_store_n(&c->mv.rx, 2, __ATOMIC_RELEASE); /* the application reads it */
	}
}

/* conn_refresh() for RDMA connections. */
void rdma_conn_refresh(struct conn *c)
{
	int rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE);

	if (rx == 2)
		return;
	shunt_mutex_lock(&c->mv.lock);
	fo_rx_settle(c);
	shunt_mutex_unlock(&c->mv.lock);
	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != rx)
		__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
}

