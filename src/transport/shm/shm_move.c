/* SPDX-License-Identifier: MIT */
/*
 * shm_move.c - a shared-memory connection moves to its TCP socket, at the
 * exact byte (the generic half: src/transport/move.c).
 *
 * Passed to another process (SCM_RIGHTS, issue #13 item 6), or given back
 * to free shunt's descriptors: the receiver gets the kernel socket, so the
 * connection must be plain TCP at the exact byte before the descriptor
 * leaves.  The passing side ("A") stops reading its ring and says so in the
 * ring (rd_left, wire.h): the peer ("B") resends what A had not read,
 * straight out of its own ring, on the socket, then writes there.  A stops
 * writing its ring and sends the FAILOVER message (start = end = its last
 * byte): B reads A's ring to that byte, then the socket.
 *
 * After the handshake the socket carried only what shunt put there (zero
 * byte liveness probes, a handshake message the in-band handshake left),
 * so the receiving half removes that and finds the message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include "shm.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/failover.h"

/* Set once the peer left our sending half's ring (shared memory, rd_left):
 * our half moves too.  The reason comes from the peer's word: checked. */
int shm_peer_left(struct conn *c)
{
	uint32_t w;
	int z = 0;

	if (c->passed)
		return 0;
	w = __atomic_load_n(&c->tx.ctl->rd_left, __ATOMIC_ACQUIRE);
	if (!w)
		return 0;
	if (w >= SHUNT_R_MAX)
		w = SHUNT_R_PEER_FAILOVER;
	if (__atomic_compare_exchange_n(&c->mv.want, &z, (int)w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
		shunt_log("move: connection (tcp fd %d): the peer moved it to TCP (%s)", c->tcp_fd,
			  shunt_reason_str(w));
	}
	return 1;
}

/* Shared memory, writer lock held: our sending half moves because the peer
 * left our ring.  What it had not read is still there: resend it first. */
int shm_move_tx(struct conn *c)
{
	uint64_t cons, prod;

	if (__atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE))
		return 0;
	cons = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	prod = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	if (prod - cons > c->tx.size) {
		conn_break(c, "impossible consumer cursor at the move");
		return -ECONNRESET;
	}
	c->mv.hdr_off = sizeof c->mv.hdr; /* nothing to say: the peer asked */
	c->mv.next = c->mv.start = cons;
	c->mv.end = prod;
	__atomic_store_n(&c->mv.tx, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Shared memory: the move's resend, made by whoever is here (a reader, a
 * poll) when no writer is: the peer's new reader may wait for it. */
void shm_move_progress(struct conn *c)
{
	struct shunt_ring_ctl *t = c->tx.ctl;

	if (!conn_moving(c) || (c->mv.tx && !move_pending(c)) || shunt_trylock(&t->wlock))
		return;
	/* then the shutdown owed - ours, or another holder's (a fork shares
	 * the connection: the ring's word says it shut; a second shutdown
	 * of the socket changes nothing) */
	if (!shm_move_tx(c) && move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) != -EAGAIN &&
	    (__atomic_exchange_n(&c->mv.fin, 0, __ATOMIC_ACQ_REL) | __atomic_load_n(&t->wr_done, __ATOMIC_ACQUIRE)))
		real.shutdown(c->tcp_fd, SHUT_WR);
	shunt_unlock(&t->wlock);
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

/* The refresh of a connection with bytes on its socket:
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
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2)
			return 0; /* the socket carries the peer's bytes now */
		int fd = __atomic_load_n(&c->tcp_fd, __ATOMIC_ACQUIRE);
		r = peek_past_leftovers(fd, buf, sizeof buf, &partial);
		if (r < 0 && conn_sock_renumbered(c, fd))
			continue;
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
		c->mv.rx_pos = c->mv.rx_end = m.end;
		__atomic_store_n(&c->mv.rx, 2, __ATOMIC_RELEASE);
		__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
		shm_peer_left(c);
		conn_wake_local(c, POLLIN | POLLOUT);
	}
}

int shm_settle(struct conn *c)
{
	int r;

	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2) {
		shm_move_progress(c);
		return 0; /* the socket carries the peer's bytes now */
	}
	if (!c->passed && shm_side_moved(c, 1))
		return 0; /* another holder passed it: the peer's resend is there,
			     ours follows at its next lock (conn_lock) */
	/* One thread at a time: two that peeked the same leftovers or the
	 * same message would both consume them, the second taking bytes of
	 * the stream.  A thread finding it busy leaves it to the one in it
	 * (a try: no wait, nothing held across a fork). */
	if (shunt_mutex_trylock(&c->mv.lock))
		return 0;
	r = settle_locked(c);
	shunt_mutex_unlock(&c->mv.lock);
	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2)
		shm_move_progress(c); /* just moved: the peer may wait for our resend */
	return r;
}

/* The halves of a passed connection, ours or another holder's (move.c,
 * move_follow): both on the socket; nothing of ours to resend (the peer
 * reads the rings to our last byte). */
void shm_follow(struct conn *c, int why)
{
	c->mv.hdr_off = sizeof c->mv.hdr;
	c->mv.want = why;
	c->mv.rx = 2;
	__atomic_store_n(&c->mv.tx, 1, __ATOMIC_RELEASE);
}

/* Our side was passed by another process holding it: its word on the
 * lines of our side's locks (wire.h: wr_moved beside our writer's lock,
 * rd_moved beside our reader's - read with that lock held, no line of the
 * peer's is touched); the reason.  rx: the reader's word, else the
 * writer's. */
int shm_side_moved(const struct conn *c, int rx)
{
	uint32_t w = rx ? __atomic_load_n(&c->rx.ctl->rd_moved, __ATOMIC_ACQUIRE)
			: __atomic_load_n(&c->tx.ctl->wr_moved, __ATOMIC_ACQUIRE);

	return !w ? 0 : w < SHUNT_R_MAX ? (int)w : SHUNT_R_FD_PASSED;
}

/* A pass of a connection whose peer closed its socket (its FIN heads
 * ours: a live peer's FIN waits while we have not read all it sent, shm.c
 * shm_shutdown) before we read `left` bytes of its ring: nobody is left to
 * resend them on the socket, and the receiver of the descriptor reads the
 * end without them - TCP's would read them, queued in the socket.  Said,
 * not silent (docs/architecture.md, "Known limits": a peer's close
 * lingers for no pass). */
static void peer_closed_unread(struct conn *c, uint64_t left)
{
	static int warned;

	shunt_log("move: connection (tcp fd %d) passed after its peer closed with %llu bytes unread here: "
		  "the receiver will not see them", c->tcp_fd, (unsigned long long)left);
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("fd %d, an accelerated connection, is passed to another process (SCM_RIGHTS) "
			   "after its peer closed it with %llu bytes this process had not read: the "
			   "receiver will read its end without them (pass a connection before its "
			   "peer can close, or keep this service plain: SHUNT_PORTS; "
			   "docs/architecture.md)", c->tcp_fd, (unsigned long long)left);
}

/* Shared memory, both ring locks held: the peer resends what we did not
 * read and writes the socket from now on, and reads our ring to its end,
 * then the socket. */
static int pass_locked(struct conn *c, struct shunt_ring_ctl *t, struct shunt_ring_ctl *rx, int why)
{
	uint8_t buf[SHUNT_HS_MAX_LEN];
	int here = why == SHUNT_R_STDIO || why == SHUNT_R_UNSUPPORTED || why == SHUNT_R_RINGS_FULL;
	uint64_t left;
	ssize_t n;
	int partial, r, hold, ended;

	/* Other processes holding it (a fork) follow (move_follow) - but
	 * for a give-back, which only frees this process's descriptors */
	if (why == SHUNT_R_DESCRIPTORS && !shm_sole_owner(c))
		return -EBUSY;
	/* the peer's unread bytes: it resends them - also when it has shut
	 * its sending side, whose FIN waits while we have not read them
	 * (shm.c shm_shutdown).  Then they are all there, before its end: a
	 * move within this process (C stdio, a kernel feature) holds them
	 * for the reads to come (move.c, stdio.c), sooner than a resend made
	 * at the peer's next call; the receiver of a passed descriptor reads
	 * the socket, where the peer resends them and then sends its FIN.
	 * (Its end first: then the ring holds every byte before it.) */
	ended = (int)__atomic_load_n(&rx->wr_done, __ATOMIC_ACQUIRE);
	left = __atomic_load_n(&rx->prod, __ATOMIC_ACQUIRE) - __atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE);
	hold = left && ended && here;
	/* our socket: nothing of shunt's may head the peer's resend */
	n = peek_past_leftovers(c->tcp_fd, buf, sizeof buf, &partial);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		c->peer_err = errno; /* reset: nothing to move (the peek took the report) */
		return 0;
	}
	if (n > 0)
		return -EBUSY; /* not ours: the peer moves it itself */
	if (!n && left && !here)
		peer_closed_unread(c, left);
	if (hold && (r = move_hold_ring(c)) < 0)
		return r;
	if (ended && here)
		/* the stream ends with what we hold: the socket's reads say
		 * so at once (the kernel's EOF once its queue is empty) - the
		 * peer's FIN may be owed until its next call, which a quiet
		 * peer does not make (tests/behave/halfclose_quiet_peer) */
		real.shutdown(c->tcp_fd, SHUT_RD);
	/* from here on the peer writes the socket, from our consumer on */
	__atomic_store_n(&rx->rd_left, (uint32_t)why, __ATOMIC_SEQ_CST);
	/* and our side's other holders follow (move_follow) */
	__atomic_store_n(&rx->rd_moved, (uint32_t)why, __ATOMIC_RELEASE);
	__atomic_store_n(&t->wr_moved, (uint32_t)why, __ATOMIC_RELEASE);
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
	} else {
		/* we shut while the peer had bytes of ours to read: the FIN
		 * owed, after them (the peer reads our ring to its end) */
		move_fin(c);
	}
	/* wake the peer (it resends now) and our own sleepers (they find
	 * the rings gone and the socket in their place once we unlock) */
	conn_wake_all(c);
	shm_follow(c, why);
	shunt_log("move: %s: connection (tcp fd %d) is plain TCP from byte %llu/%llu",
		  move_cause(why), c->tcp_fd,
		  (unsigned long long)__atomic_load_n(&rx->cons, __ATOMIC_RELAXED),
		  (unsigned long long)__atomic_load_n(&t->prod, __ATOMIC_RELAXED));
	return 1;
}

/* Before a pass or a give-back (move.c), reader's lock rx held: 1 with
 * *t, the writer's lock, held as well; else -errno, or 0 (reset: nothing
 * to move). */
int shm_pass(struct conn *c, struct shunt_ring_ctl *rx, struct shunt_ring_ctl **t, int why)
{
	if (!(*t = conn_lock(c, 0)))
		return -c->broken;
	return pass_locked(c, *t, rx, why);
}
