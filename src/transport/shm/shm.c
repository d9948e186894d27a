/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the shared-memory transport's operations (transport.h).
 *
 * Both processes map the segment: a cursor the writer publishes is what
 * the reader sees, so telling the other side is only waking it, and only
 * if it asked (its bit in the ring's *_want word: a futex sleeper, or a
 * poll/epoll sleeper on the arena's doorbell).  The kernel socket carries
 * no application byte; a gone peer shows there as FIN or RST, and a peer
 * that moved the connection to TCP leaves its word in the ring (rd_left)
 * and a FAILOVER message on the socket (shm_move.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shm.h"
#include "arena.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/msg.h"

void shm_wake_owed(struct conn *c, _Atomic uint32_t *w)
{
	__atomic_store_n(&shm_of(c)->owed, w, __ATOMIC_RELAXED);
}

/* Our bytes (or our FIN, our close) for the peer's reader.  A client that
 * went to sleep in its first read before our answer sleeps on its slot
 * (server.c slot_answered): woken here, once; the word may be another
 * offer's by now - a spurious wake-up, which every futex sleeper takes. */
static void shm_push(struct conn *c)
{
	struct shm_conn *m = shm_of(c);
	_Atomic uint32_t *w;

	if (__builtin_expect(__atomic_load_n(&m->owed, __ATOMIC_RELAXED) != NULL, 0) &&
	    (w = __atomic_exchange_n(&m->owed, NULL, __ATOMIC_SEQ_CST))) {
		int e = errno;
		shunt_futex_wake(w, INT32_MAX);
		errno = e;
	}
	conn_wake_word(&c->tx.ctl->rd_want, m->efd_peer);
}

static void shm_ack(struct conn *c)
{
	conn_wake_word(&c->rx.ctl->wr_want, shm_of(c)->efd_peer);
}

static int shm_peer_blocked(struct conn *c)
{
	return __atomic_load_n(&c->rx.ctl->wr_want, __ATOMIC_ACQUIRE) != 0;
}

int shm_sole_owner(const struct conn *c)
{
	struct shm_conn *m = shm_of(c);

	return __atomic_load_n(&arena_seg(m->arena, m->segno)->owner[c->side], __ATOMIC_SEQ_CST) == 1;
}

/* After the peer's FIN: is it gone (closed, killed) or only done sending?
 * One byte on the kernel socket - a live peer's shim discards it, a gone
 * peer's kernel answers with a reset, which wakes whoever watches the
 * socket (poll.c, epoll.c) and makes the next send fail as TCP's would. */
static void shm_probe(struct conn *c)
{
	int e = errno;

	if (!c->peer_eof || c->peer_err || c->shut_wr || c->mv.rx || conn_moving(c))
		return; /* (after a move the socket carries the stream: no probe byte) */
	if (real.send(c->tcp_fd, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
		c->peer_err = errno;
	errno = e;
}

/* The kernel socket: after acceleration it carries only liveness probes
 * (discarded here), FIN or RST - or the peer's move. */
static void shm_refresh(struct conn *c)
{
	char buf[64];
	ssize_t r = 0;
	int fin;

	/* shunt's leftovers, or the peer's move (shm_move.c); after a move
	 * the socket carries the stream and says its end itself */
	if (!(fin = shm_settle(c)))
		return;
	for (;;) {
		int fd = __atomic_load_n(&c->tcp_fd, __ATOMIC_ACQUIRE);
		/* the settle's peek saw the FIN with nothing before it */
		if (!fin)
			r = real.recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		fin = 0;
		if (r > 0)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			break;
		if (r < 0 && conn_sock_renumbered(c, fd))
			continue;
		/* not a FIN: the end a socket reads after a reset (TCP's
		 * reads say ECONNRESET, not EOF), or after our own SHUT_RD
		 * (the probe that followed reset a peer that then closed:
		 * tests/behave/epoll_model) */
		if (r == 0 && (c->peer_err || (c->shut_rd && !sockinfo_peer_fin(fd))))
			break;
		if (r == 0) {
			/* the first FIN: a killed peer's too - ask at once if it
			 * left bytes of ours unread (a writer may be waiting for
			 * room it will never make); after it a reset is
			 * reported by SO_ERROR only (recv says EOF) */
			if (!__atomic_exchange_n(&c->peer_eof, 1, __ATOMIC_ACQ_REL)) {
				/* (not to a peer that shut its reading side
				 * too: its kernel resets at any byte, as
				 * TCP's would at ours - a live connection
				 * reset, tests/behave/epoll_model) */
				if (ring_used(&c->tx) && !__atomic_load_n(&c->tx.ctl->rd_shut, __ATOMIC_ACQUIRE))
					shm_probe(c);
			} else {
				conn_note_sock_error(c);
			}
		} else
			c->peer_err = errno;
		break;
	}
}

/* The peer's last holder closed it: its release (shm_release) closes the
 * kernel socket before it drops the owner.  A word the peer can write: a
 * lie sends our bytes to the socket instead of the ring - to the liar. */
static int shm_peer_gone(const struct conn *c)
{
	struct shm_conn *m = shm_of(c);

	return !__atomic_load_n(&arena_seg(m->arena, m->segno)->owner[!c->side], __ATOMIC_ACQUIRE);
}

/* shutdown(SHUT_WR), writer's lock held: 1 when the kernel's FIN waits.
 * A move's resend (shm_move.c) goes before the FIN.  Bytes the peer has
 * not read yet may still have to be resent on the socket - its process
 * may pass the connection to another (SCM_RIGHTS: the receiver reads the
 * socket) - so the FIN waits while our ring holds any: it is owed
 * (mv.fin), sent after a move's resend (shm_move_progress, a pass) or by
 * the socket's close; the peer reads our end off the ring meanwhile, and
 * a send of ours is EPIPE (conn.c).  Before, the FIN left at once, and a
 * pass of a connection whose client had sent its request and shut down
 * lost the request (tests/behave/fd_pass_halfclosed). */
static int shm_shutdown(struct conn *c)
{
	if (conn_moving(c)) {
		if (!shm_move_tx(c))
			move_flush_until(c, shunt_now_ns() + MOVE_FLUSH_NS);
		if (!move_pending(c))
			return 0;
	} else if (!c->mv.rx && !ring_used(&c->tx)) {
		return 0; /* all read: nothing can be owed */
	}
	__atomic_store_n(&c->mv.fin, 1, __ATOMIC_RELEASE);
	return 1;
}

/* This holder's last close begins (once): 1 if it is its side's last. */
static int shm_close_begin(struct conn *c)
{
	struct shm_conn *m = shm_of(c);

	if (m->close_begun)
		return 0;
	m->close_begun = 1;
	return arena_close_begin(m->arena, m->segno, c->side);
}

/* The application closed its last descriptor here (fdtab.c, before
 * release).  If no other process holds it - or every other one is
 * closing it too - this is the kernel socket's last close: what the
 * socket holds unread (probes, a handshake word the in-band handshake
 * left) is not the application's and would make the kernel reset; what
 * the application left unread in the ring is, and makes TCP reset (RST:
 * the peer's reads fail with ECONNRESET, its writes with EPIPE) - as it
 * must here too. */
static void shm_closing(struct conn *c)
{
	/* The last of our side's holders to get here decides, when every
	 * other has stopped reading.  (Asking whether we hold it alone, two
	 * processes closing at once - a forking server's parent and its
	 * child that exits with bytes unread - each saw the other still
	 * holding it, and neither said the reset: the peer read EOF,
	 * tests/behave/exit_open 2 runs in 100 with a core busy.) */
	int last = shm_close_begin(c);

	shunt_fault_close(); /* tests: another holder closes meanwhile */

	if (!c->passed && shm_side_moved(c, 1))
		move_follow(c); /* another holder passed it: what the rings hold was resent */
	if (c->passed || c->broken || shunt_sandboxed || !last)
		return;
	if (conn_may_move(c) && conn_moving(c)) {
		/* the move's resend, before the kernel's FIN: also of a move
		 * we learn of only now - a peer that passed the connection
		 * after its shutdown(SHUT_WR) sends no FAILOVER, only its
		 * ring's word, and our last calls may have been reads and
		 * its end (tests/behave/fd_pass_halfclosed: the worker read
		 * the end without our last words) */
		struct shunt_ring_ctl *t = conn_lock(c, 0);
		if (t) {
			if (!shm_move_tx(c))
				move_flush_until(c, shunt_now_ns() + MOVE_FLUSH_NS);
			shunt_unlock(&t->wlock);
		}
	}
	/* What the kernel's close would find unread: nothing of shunt's can
	 * be there if the registry made the connection, no FIN of ours drew
	 * a probe yet (ours or another holder's: wr_done) and no move said
	 * anything - then no look (two system calls a connection) */
	if (!shm_of(c)->sock_clean || c->shut_wr || __atomic_load_n(&c->tx.ctl->wr_done, __ATOMIC_ACQUIRE) ||
	    c->mv.rx || conn_moving(c))
		conn_refresh(c);
	/* (both FINs gone, TCP's peer is closed already: the reset that
	 * bytes unread here send changes nothing there) */
	if (ring_used(&c->rx) && !(c->shut_wr && __atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE)))
		conn_reset_on_close(c);
}

/* Free our state without dropping an owner (someone dropped it for us). */
static void shm_discard(struct conn *c)
{
	struct shm_conn *m = shm_of(c);

	arena_put(m->arena);
	conn_sock_close(c);
	free(c->passed);
	free(m);
}

/* The arena keeps the memory; the segment returns to its pool when both
 * sides have let go. */
static int shm_release(struct conn *c)
{
	struct shm_conn *m = shm_of(c);
	int last;

	/* Our duplicate goes first: if it was the last reference to the
	 * kernel socket, the FIN leaves now; then a peer asleep on the rings
	 * wakes and finds it.  (A borrowed number: the program's close()
	 * closed it before it let go - fdtab.c.) */
	conn_sock_close(c);
	shm_push(c);
	shm_ack(c);
	shm_close_begin(c); /* (let go without a close: its socket is not ours) */
	last = arena_drop_owner(m->arena, m->segno, c->side);
	shm_discard(c);
	return last;
}

/* Nothing in flight and this process its only holder: a give-back may
 * move it to TCP (giveback.c). */
static int shm_idle_here(const struct conn *c)
{
	return !c->broken && !c->shut_wr && !c->shut_rd && !c->peer_eof && !c->peer_err &&
	       shm_sole_owner(c);
}

/* fork() through the wrapper (core.c): the child's share of the segment
 * is taken in the parent, before the child exists - taken in the child, a
 * parent that closes its copy at once (a fork-per-connection server)
 * could see itself as the last owner and end the connection under the
 * child.  The generation tells the child which are taken. */
static void shm_fork_hold(struct conn *c, uint64_t gen)
{
	struct shm_conn *m = shm_of(c);

	SHUNT_RESET(c->shared, 1); /* (in the child: as the parent set it) */
	arena_forked(m->arena); /* its processes would wake each other */
	if (m->fork_gen == gen)
		return;
	m->fork_gen = gen;
	arena_hold_more(m->arena, m->segno, c->side);
}

static void shm_fork_unhold(struct conn *c, uint64_t gen)
{
	struct shm_conn *m = shm_of(c);

	if (m->fork_gen != gen)
		return;
	m->fork_gen = 0;
	arena_close_begin(m->arena, m->segno, c->side);
	arena_drop_owner(m->arena, m->segno, c->side);
}

static int shm_exec_item(struct conn *c, int fd, char *item, size_t cap, int *fds, int *nfds)
{
	struct shm_conn *m = shm_of(c);
	struct arena *a = m->arena;
	int n;

	if (c->passed || c->mv.rx || conn_moving(c))
		return 0; /* on its socket (move.c): a plain socket from here on */
	n = snprintf(item, cap, "s%d,%d,%llx,%u,%d,%d,%d;", fd, a->memfd, (unsigned long long)a->id,
		     m->segno, c->side, a->bell[0], a->bell[1]);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	fds[(*nfds)++] = a->memfd;
	fds[(*nfds)++] = a->bell[0];
	fds[(*nfds)++] = a->bell[1];
	return n;
}

/* arenas holding no segment of ours: a memfd and two doorbells each */
static int shm_drop_unused(void)
{
	return 3 * arena_drop_unused();
}

/* In the new image: "<fd>,<memfd>,<arena id>,<segment>,<side>,<bell 0>,<bell 1>"
 * - its numbers, and the arena (validated and mapped by its first entry:
 * several sockets may share it). */
struct exec_entry {
	int fd, memfd, bell[2], side;
	unsigned long long id;
	unsigned seg;
};

static int entry_arena(const char *e, struct exec_entry *x, struct arena **a)
{
	/* (the entries of one arena name the same descriptors: those of the
	 * one validated last are not looked at again - the new image's
	 * constructor, one thread) */
	static struct exec_entry ok = { .memfd = -1 };
	int fds[3];

	if (sscanf(e, "%d,%d,%llx,%u,%d,%d,%d", &x->fd, &x->memfd, &x->id, &x->seg, &x->side, &x->bell[0],
		   &x->bell[1]) != 7 ||
	    x->fd < 0 || x->memfd < 0 || x->bell[0] < 0 || x->bell[1] < 0 || (x->side != 0 && x->side != 1) ||
	    x->fd == x->memfd || x->fd == x->bell[0] || x->fd == x->bell[1] || x->memfd == x->bell[0] ||
	    x->memfd == x->bell[1] || x->bell[0] == x->bell[1] || x->seg >= SHUNT_ARENA_SLOTS ||
	    !exec_is_tcp_socket(x->fd))
		return -EINVAL;
	if (x->id == ok.id && x->memfd == ok.memfd && x->bell[0] == ok.bell[0] && x->bell[1] == ok.bell[1] &&
	    !arena_adopt(x->id, NULL, x->side, a)) /* mapped by an entry before */
		return 0;
	if (!exec_is_shmem(x->memfd) || !fd_is_eventfd(x->bell[0]) || !fd_is_eventfd(x->bell[1]))
		return -EINVAL;
	fds[0] = real.fcntl(x->memfd, F_DUPFD_CLOEXEC, 0);
	fds[1] = real.fcntl(x->bell[0], F_DUPFD_CLOEXEC, 0);
	fds[2] = real.fcntl(x->bell[1], F_DUPFD_CLOEXEC, 0);
	if (arena_adopt(x->id, fds, x->side, a))
		return -EPROTO;
	ok = *x;
	return 0;
}

static void entry_used(const struct exec_entry *x, int *used, int *nused)
{
	used[(*nused)++] = x->memfd;
	used[(*nused)++] = x->bell[0];
	used[(*nused)++] = x->bell[1];
}

/* A close-on-exec entry: the old image's share let go of, without a
 * connection made for it, while others of its side hold it (-EAGAIN:
 * this is the last - the connection's own close ends it). */
static int shm_exec_drop(const char *e, int *fdp, int *used, int *nused)
{
	struct exec_entry x;
	struct arena *a;
	int r = entry_arena(e, &x, &a);

	if (r)
		return r;
	r = shunt_seg_hdr_check(arena_seg(a, x.seg), arena_seg(a, x.seg)->nonce, a->ring_size) ? -EPROTO
		: arena_let_go_shared(a, x.seg, x.side);
	arena_put(a);
	if (!r) { /* (-EAGAIN: the adoption names them) */
		*fdp = x.fd;
		entry_used(&x, used, nused);
	}
	return r;
}

static int shm_exec_adopt(const char *e, int *fdp, struct conn **out, int *used, int *nused)
{
	struct exec_entry x;
	struct arena *a;
	int dupfd, r = entry_arena(e, &x, &a);

	if (r)
		return r;
	dupfd = fd_dup_hidden(x.fd);
	if (dupfd < 0 || shm_attach(out, a, x.seg, x.side, dupfd, 0, NULL)) {
		fd_close_internal(dupfd);
		arena_put(a);
		return -EPROTO;
	}
	(*out)->shared = 1; /* the old image's parent may hold it too */
	*fdp = x.fd;
	entry_used(&x, used, nused);
	return 0;
}

const struct transport shm_transport = {
	.name = "shm",
	.mode = SHUNT_M_SHM,
	.flags = TP_SHARED_RINGS,
	.push = shm_push,
	.ack = shm_ack,
	.peer_blocked = shm_peer_blocked,
	.refresh = shm_refresh,
	.probe = shm_probe,
	.shutdown = shm_shutdown,
	.shut_wake = shm_push,
	.closing = shm_closing,
	.release = shm_release,
	.discard = shm_discard,
	.idle_here = shm_idle_here,
	.sole_owner = shm_sole_owner,
	.move_tx = shm_move_tx,
	.peer_left = shm_peer_left,
	.peer_gone = shm_peer_gone,
	.move_progress = shm_move_progress,
	.pass = shm_pass,
	.side_moved = shm_side_moved,
	.follow = shm_follow,
	.fork_hold = shm_fork_hold,
	.fork_unhold = shm_fork_unhold,
	.fork_child = shm_fork_hold,
	.exec_tag = 's',
	.exec_item = shm_exec_item,
	.exec_adopt = shm_exec_adopt,
	.exec_drop = shm_exec_drop,
	.drop_unused = shm_drop_unused,
};

__thread char shm_refused[160];

int shm_attach(struct conn **out, struct arena *a, unsigned seg, int side, int tcp_fd, int borrowed,
	       const uint64_t *nonce)
{
	struct shunt_seg_hdr *h;
	struct shm_conn *m;
	struct conn *c;
	uint32_t rs = a->ring_size;

	if (seg >= SHUNT_ARENA_SLOTS)
		return -EPROTO;
	h = arena_seg(a, seg);
	if (shunt_seg_hdr_check(h, nonce ? *nonce : h->nonce, rs)) {
		/* (what the header held, for the log - and for the warning
		 * of a final answer refused so: a peer's or a race's) */
		snprintf(shm_refused, sizeof shm_refused,
			 "segment %u of arena %llx: nonce %s, magic %#x, ring %u/%u, owners %u/%u, in use %u", seg,
			 (unsigned long long)a->id, nonce && h->nonce != *nonce ? "another's" : "ours", h->magic,
			 h->ring_size, rs, __atomic_load_n(&h->owner[0], __ATOMIC_RELAXED),
			 __atomic_load_n(&h->owner[1], __ATOMIC_RELAXED), __atomic_load_n(&h->in_use, __ATOMIC_RELAXED));
		shunt_log("%s refused", shm_refused);
		return -EPROTO;
	}
	m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	c = &m->c;
	m->seg = h;
	m->arena = a;
	m->segno = seg;
	m->efd_peer = a->bell[!side];
	c->efd_mine = a->bell[side];  /* the arena's: not ours to close */
	c->bell_id = (a->id << 1 | (uint64_t)side) & ~(1ull << 63); /* bell.c: RDMA's have bit 63 */
	conn_init(c, &shm_transport, m, side, borrowed ? tcp_fd : fd_hide(tcp_fd));
	c->borrowed = borrowed;
	/* ring 0 carries client->server bytes, ring 1 server->client */
	c->tx = (struct ring){ .ctl = &h->ring[side], .data = (uint8_t *)h + SHUNT_SEG_HDR_SIZE + (size_t)side * rs, .size = rs };
	c->rx = (struct ring){ .ctl = &h->ring[!side], .data = (uint8_t *)h + SHUNT_SEG_HDR_SIZE + (size_t)!side * rs, .size = rs };
	*out = c;
	return 0;
}
