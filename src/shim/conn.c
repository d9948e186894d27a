/* SPDX-License-Identifier: MIT */
/*
 * conn.c - I/O on an accelerated connection, whatever carries it.
 *
 * Data goes through the connection's two rings (ring.h); its transport
 * (c->tp, src/transport/transport.h) tells the other end that cursors
 * moved and reads what the kernel TCP socket says.  The socket carries no
 * application byte after acceleration and is watched only for FIN and RST
 * (or a move to it, move.c): it is how a peer's death (or close) reaches
 * us even when the peer never touches the rings again.  A blocking call
 * sleeps on the ring's *_want word as a futex (checking the TCP socket
 * between 100 ms slices); poll/epoll waiters sleep on our doorbell, an
 * eventfd (bell.c).  The other end wakes either only if we set the
 * matching bit (see wire.h), so a busy connection makes no system call
 * per message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <linux/futex.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"
#include "../common/msg.h"
#include "conn_int.h"

#define PROBE_INTERVAL_NS 100000000ull /* writer blocked on a gone peer: probe */

static void efd_signal(int efd)
{
	uint64_t one = 1;
	int e = errno;

	(void)!real.write(efd, &one, sizeof one);
	errno = e;
}

/* Take the flag and wake whoever set it.  The exchange is a full barrier (a
 * locked instruction) that orders our cursor store before reading the flag:
 * the waker's half of the Dekker pair whose other half is the sleeper's
 * seq_cst flag store before it re-checks the cursor.  Its line is written
 * by no one else while data flows. */
void conn_wake_word(_Atomic uint32_t *w, int efd)
{
	uint32_t v = __atomic_exchange_n(w, 0, __ATOMIC_SEQ_CST);

	if (v & WANT_EFD)
		efd_signal(efd);
	if (v & WANT_FUTEX) {
		int e = errno;
		futex(w, FUTEX_WAKE, INT32_MAX, NULL);
		errno = e;
	}
}

/* Our sleepers, woken as a shared-memory peer would wake them (over RDMA
 * the cursors move here, when a cursor message arrives). */
void conn_wake_local(struct conn *c, unsigned ev)
{
	if (ev & POLLIN)
		conn_wake_word(&c->rx.ctl->rd_want, c->efd_mine);
	if (ev & POLLOUT)
		conn_wake_word(&c->tx.ctl->wr_want, c->efd_mine);
}

/* A change of the connection's state that a cursor message brought (the
 * peer's FIN, reset or close, over RDMA): every sleeper looks, armed or
 * not - TCP's wakes them all then, and an epoll registration that asked
 * for neither bytes nor room (EPOLLRDHUP alone; none: HUP and ERR are
 * always reported) hears it (tests/behave/epoll_model over RDMA).  Over
 * shared memory the peer's shutdown rings for it (conn_shutdown). */
void conn_wake_state(struct conn *c)
{
	conn_wake_local(c, POLLIN | POLLOUT);
	if (ep_in_use())
		efd_signal(c->efd_mine);
}

/* A move (move.c): every sleeper looks again, the peer's and ours. */
void conn_wake_all(struct conn *c)
{
	c->tp->push(c);
	c->tp->ack(c);
	conn_wake_local(c, POLLIN | POLLOUT);
}

/* A writer or a poll found no room (TCP's SOCK_NOSPACE): the room to
 * come is an edge for epoll's registrations of EPOLLOUT (is_new_edge). */
void conn_no_room(struct conn *c)
{
	__atomic_fetch_add(&c->tx_full, 1, __ATOMIC_RELAXED);
}

/* Ask the peer to ring our doorbell (poll, epoll, a non-blocking EAGAIN). */
void conn_arm(struct conn *c, unsigned want)
{
	if (want & POLLIN)
		__atomic_fetch_or(&c->rx.ctl->rd_want, WANT_EFD, __ATOMIC_SEQ_CST);
	if (want & POLLOUT) { /* (asked only while there is no room) */
		conn_no_room(c);
		__atomic_fetch_or(&c->tx.ctl->wr_want, WANT_EFD, __ATOMIC_SEQ_CST);
		if (c->tp->tx_blocked && !ring_space(&c->tx))
			c->tp->tx_blocked(c);
	}
}

/* What every transport's attach does first (transport.h); tcp_fd is
 * hidden already and owned by the connection from now on. */
void conn_init(struct conn *c, const struct transport *tp, void *tpd, int side, int tcp_fd)
{
	c->tp = tp;
	c->tpd = tpd;
	c->side = side;
	c->tcp_fd = tcp_fd;
	c->borrowed = 0; /* a duplicate of ours, unless the transport says (shm_attach) */
	c->spin_ns = shunt_cfg.spin_ns;
	pthread_mutex_init(&c->mv.lock, NULL);
	conn_load_timeouts(c);
}

/* The application closed its last descriptor of an accelerated
 * connection (fdtab.c, before conn_free).  If no other process holds it,
 * this is the kernel socket's last close: what the socket holds unread
 * (probes, a handshake word the in-band handshake left) is not the
 * application's and would make the kernel reset; what the application left
 * unread in the ring is, and makes TCP reset (RST: the peer's reads fail
 * with ECONNRESET, its writes with EPIPE) - as it must here too. */
void conn_closing(struct conn *c)
{
	if (c->tcp_fd >= 0) /* -1: done while its last number was open (fdtab.c) */
		c->tp->closing(c);
}

/* The connection's hold of its socket ends: our duplicate closed; a
 * borrowed number is the program's, never ours to close. */
void conn_sock_close(struct conn *c)
{
	if (!c->borrowed)
		fd_close_internal(c->tcp_fd);
	c->tcp_fd = -1;
}

/* The kernel socket's last close resets (RST), as TCP's close with bytes
 * unread does. */
void conn_reset_on_close(struct conn *c)
{
	real.setsockopt(c->tcp_fd, SOL_SOCKET, SO_LINGER, &(struct linger){ .l_onoff = 1, .l_linger = 0 },
			sizeof(struct linger));
}

/* Is the calling thread the process's only one?  glibc's word first (a
 * process that never made a thread; a forked child of one that did says
 * no), then the kernel's count. */
static int exit_alone(void)
{
	char buf[512], *p;
	ssize_t n;
	int fd;

	if (__libc_single_threaded)
		return 1;
	if ((fd = real.open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = real.read(fd, buf, sizeof buf - 1);
	real.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* after the name: state is field 3, num_threads field 20 */
	for (int field = 2; field < 20 && p; field++)
		p = strchr(p + 1, ' ');
	return p && strtol(p + 1, NULL, 10) == 1;
}

/* exit() and _exit() close every descriptor in the kernel, past the
 * wrappers: each accelerated connection's last close is done here first,
 * and its `shunt ss` record goes if this process was its last holder (a
 * fork-per-connection server's child that ends without close(): the
 * record is its parent's, which let go of it at the fork - stats.c).
 * A process whose one thread is ending closes each as close() does: it
 * lets go of its rings, so a forking server's child that ends without
 * closing its connection (a PostgreSQL backend leaves that to the
 * kernel) frees its segment for the server's next connection
 * (src/transport/shm/arena.c).  With other threads alive, one of them may
 * still be inside a call on the rings: they stay held, as before.  (A
 * thread made past pthread_create - a raw clone - is not counted by glibc's
 * word; such threads may not call libc anyway.) */
SHUNT_CHILD_PATH static void closing_at_exit(int fd, struct sk *s, void *arg)
{
	struct shunt_stat_rec *r;
	int *alone = arg; /* -1: not asked yet */

	if ((s = fdtab_get(fd)) == NULL)
		return;
	/* (shared memory's: an RDMA connection's close may hand its end to
	 * a thread, which the exit would cut - its end is exit_flush's) */
	if (s->kind == SK_CONN && s->conn && s->conn->tp == &shm_transport && *alone < 0)
		*alone = exit_alone();
	if (s->kind == SK_CONN && s->conn && s->conn->tp == &shm_transport && *alone > 0) {
		sk_put(s);
		if ((s = fdtab_closing(fd)) != NULL) {
			real.close(fd); /* (the kernel would, at the end) */
			sk_put(s);
		}
		return;
	}
	if (s->kind == SK_CONN && s->conn) {
		conn_closing(s->conn);
		if (s->conn->tp->sole_owner && s->conn->tp->sole_owner(s->conn) &&
		    (r = __atomic_exchange_n(&s->stat, NULL, __ATOMIC_ACQ_REL)))
			stats_free(s, r, 1); /* once: a descriptor's dup shares s */
	}
	stats_child_exit(s); /* (a plain socket's: it looks) */
	sk_put(s);
}

SHUNT_CHILD_PATH void conn_exit_all(void)
{
	if (!shunt_sandboxed && !shunt_in_handler()) {
		int alone = -1;
		rdv_offers_settle_all(); /* the first bytes reach the server */
		inband_confirm_all(1);   /* a CONFIRM come meanwhile: closed as a connection */
		fdtab_each(closing_at_exit, &alone);
	}
}

SHUNT_CHILD_PATH __attribute__((destructor)) static void conn_exit_dtor(void)
{
	conn_exit_all();
}

/* The application let go of it in this process. */
int conn_free(struct conn *c)
{
	move_held_free(c);
	return c->tp->release(c);
}

/* Free our state without dropping an owner (someone dropped it for us). */
void conn_discard(struct conn *c)
{
	move_held_free(c);
	c->tp->discard(c);
}

/* Look at the kernel socket (the transport knows what it carries). */
void conn_refresh(struct conn *c)
{
	int e = errno;

	c->last_probe_ns = shunt_now_ns();
	c->tp->refresh(c);
	errno = e;
}

/* The peer broke the ring's rules (impossible cursors, a lock word it held
 * for ever): this connection ends as a reset would end it, here and, through
 * the kernel socket, at the peer; every other connection goes on. */
void conn_break(struct conn *c, const char *what)
{
	if (__atomic_exchange_n(&c->broke, SHUNT_R_PEER_BROKE, __ATOMIC_ACQ_REL))
		return;
	shunt_warn("connection reset: the peer broke its shared ring (%s)", what);
	c->broken = ECONNRESET;
	c->peer_err = ECONNRESET;
	real.shutdown(c->tcp_fd, SHUT_RDWR);
	conn_wake_local(c, POLLIN | POLLOUT);
}

/* The writer's (rx: the reader's) lock, of the rings the connection has
 * once it is held: a move before fork replaces an RDMA connection's rings
 * (rdma/share.c), and a thread that waited for the old lock must not use the new
 * rings unlocked.  Unlock the control block returned.  A shared-memory
 * connection's lock word is in the peer's reach: a wait beyond the bound
 * breaks the connection (NULL), it never hangs the caller. */
/* conn_lock's rare turn, out of its way: another holder of our side
 * moved the connection; ours follows (-1: it could not, broken). */
static __attribute__((noinline, cold)) int lock_follow(struct conn *c, _Atomic uint32_t *l)
{
	shunt_unlock(l);
	move_follow(c);
	if (c->passed)
		return 0;
	conn_break(c, "moved by another holder, but its locks stay held");
	return -1;
}

struct shunt_ring_ctl *conn_lock(struct conn *c, int rx)
{
	for (;;) {
		struct shunt_ring_ctl *t = __atomic_load_n(rx ? &c->rx.ctl : &c->tx.ctl, __ATOMIC_ACQUIRE);
		_Atomic uint32_t *l = rx ? &t->rlock : &t->wlock;
		if (!(c->tp->flags & TP_SHARED_RINGS)) {
			shunt_lock(l);
		} else if (shunt_lock_bounded(l, LOCK_BOUND_NS)) {
			conn_break(c, rx ? "reader lock held too long" : "writer lock held too long");
			return NULL;
		}
		if (t == __atomic_load_n(rx ? &c->rx.ctl : &c->tx.ctl, __ATOMIC_ACQUIRE)) {
			/* another holder's move: its word on the line of the
			 * lock just taken (wire.h; never set on local rings) */
			if (__builtin_expect(!c->shared, 1) ||
			    !__atomic_load_n(rx ? &t->rd_moved : &t->wr_moved, __ATOMIC_RELAXED))
				return t;
			if (lock_follow(c, l))
				return NULL;
			continue;
		}
		shunt_unlock(l);
	}
}

/* The peer's end, by its ring's word or its socket's FIN, whichever
 * came first */
int conn_rx_eof(struct conn *c)
{
	return __atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE) || c->peer_eof;
}

/* SO_RCVLOWAT: readable from this many bytes on (sockinfo.c keeps it) */
static int rx_lowat(struct conn *c)
{
	int v = __atomic_load_n(&c->rcvlowat, __ATOMIC_RELAXED);

	return v > 1 ? v : 1;
}

unsigned conn_events(struct conn *c)
{
	unsigned ev = 0;
	int eof = conn_rx_eof(c);

	if (c->broken)
		return POLLIN | POLLOUT | POLLERR | POLLHUP;
	if (ring_used(&c->rx) >= (uint64_t)rx_lowat(c) || eof || c->peer_err || c->shut_rd)
		ev |= POLLIN | POLLRDNORM;
	/* (TCP's: its receiving half shut - the peer's FIN, our own
	 * shutdown(SHUT_RD), a reset - reads as RDHUP; both halves shut as
	 * HUP) */
	if (eof || c->shut_rd || c->peer_err)
		ev |= POLLRDHUP;
	if (ring_space(&c->tx) || c->shut_wr || c->peer_err)
		ev |= POLLOUT | POLLWRNORM;
	if (c->peer_err && !__atomic_load_n(&c->reset_told, __ATOMIC_ACQUIRE))
		ev |= POLLERR; /* the kernel's: until a call reported it */
	if (c->peer_err || (c->shut_wr && (eof || c->shut_rd)))
		ev |= POLLHUP;
	return (c->tp->flags & TP_SOCKET_EVENTS) || c->mv.rx || (conn_may_move(c) && conn_moving(c)) ? conn_moved_events(c, ev) : ev;
}

/* POLLPRI: urgent data on the socket (only ever there: conn_move_for) -
 * a look at it, for a caller that asked, once the connection moved: a
 * sender moves first, and its move is seen before its bytes (the ring
 * word; the FAILOVER message ahead of them on the socket), so a poll
 * spinning on a connection that never moved makes no system call. */
unsigned conn_urgent(struct conn *c)
{
	int r;

	if (!c->passed && !__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) && !conn_may_move(c))
		return 0;
	r = fd_wait(c->tcp_fd, POLLPRI, 0, 0);
	return r > 0 ? (unsigned)r & POLLPRI : 0;
}

size_t conn_nread(struct conn *c)
{
	size_t n;
	int k = 0;

	/* A move the socket holds news of (the peer's FAILOVER message ahead
	 * of its bytes, RDMA's or a moving connection's): read now, or the
	 * bytes behind it go uncounted until another call looks (a program
	 * that waits for FIONREAD to say all came waited for ever) */
	if (!shunt_sandboxed && __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2 &&
	    ((c->tp->flags & TP_SOCKET_EVENTS) || c->mv.rx || conn_moving(c)) &&
	    !real.ioctl(c->tcp_fd, FIONREAD, &k) && k > 0)
		conn_refresh(c);
	n = ring_used(&c->rx) + move_held(c);
	k = 0;
	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 &&
	    !real.ioctl(c->tcp_fd, FIONREAD, &k) && k > 0)
		n += (size_t)k;
	return n;
}

/* On a moved connection whose ring holds just the `taken` bytes we read
 * or peeked (the lock held), the socket's bytes come right after them:
 * how many it holds now, or -1 when they do not follow (not moved, more
 * in the ring, a held byte, an error to report first) or may not be
 * asked for (a seccomp sandbox: a system call the program did not make,
 * where a short read is TCP's too). */
static int socket_after_ring(struct conn *c, size_t taken)
{
	int k = 0;

	if (shunt_sandboxed || __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2 || ring_used(&c->rx) != taken ||
	    move_held(c) || c->mv.rx_err || c->peer_err || real.ioctl(c->tcp_fd, FIONREAD, &k))
		return -1;
	return k;
}

/* The last of a moved connection's ring was read and `left` bytes more
 * are wanted: what the socket holds already comes with it, as TCP's read
 * takes all that is queued (a program that asked FIONREAD how much is
 * there reads it in one call) - never an error or the end, which the next
 * call reports, and not for a MSG_WAITALL read (it goes on to the socket
 * anyway) or one that wants the socket's control data (timestamps: the
 * ring's bytes have none). */
static ssize_t moved_rest(struct conn *c, const struct iovec *iov, int iovcnt, int flags, size_t left,
			  int skip)
{
	if (skip || !left || socket_after_ring(c, 0) <= 0)
		return 0;
	return move_recv_tcp(c, iov, iovcnt, flags | MSG_DONTWAIT, 1, NULL);
}

/* A peek of a moved connection's ring took all of it (`peeked` bytes)
 * and wants more: the socket's bytes come after them - what is there, or
 * (wait) what makes MSG_WAITALL's count or SO_RCVLOWAT's mark with the
 * ring's, as TCP's peek would.  Never an error or the end, which the next
 * call reports. */
static ssize_t moved_peek(struct conn *c, const struct iovec *iov, int iovcnt, int flags, size_t peeked,
			  int wait)
{
	int k = socket_after_ring(c, peeked);

	if (k < 0 || (!k && !wait))
		return 0;
	if (wait)
		sockinfo_lowat_sync(c);
	k = (int)move_recv_tcp(c, iov, iovcnt, flags | (wait ? 0 : MSG_DONTWAIT), !wait, NULL);
	return k > 0 ? k : 0;
}

/* Advance a private copy of an iovec array by n bytes. */
static void iov_skip(struct iovec **iov, int *cnt, size_t n)
{
	while (*cnt && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
	if (*cnt && n) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

/* Let the kernel produce EPIPE/ECONNRESET and SIGPIPE exactly as TCP does. */
static ssize_t send_on_kernel(struct sk *s, size_t len, int flags)
{
	char zero = 0;
	ssize_t r = real.send(s->conn->tcp_fd, &zero, len ? 1 : 0, flags & ~MSG_DONTWAIT);

	return r < 0 ? -errno : r;
}

/* The peer's error (a reset the socket showed, a broken move): reported
 * once, by whichever call comes first - a read, a send, SO_ERROR - as the
 * kernel reports its socket's; then a send says EPIPE, a read EOF.  0:
 * told before. */
/* A reset the kernel socket holds, reported by SO_ERROR alone (after its
 * FIN its reads say EOF): the peer's error, unless one is known already.
 * In a sandbox no call of ours.  errno is kept. */
void conn_note_sock_error(struct conn *c)
{
	int err = 0, e = errno;

	if (!shunt_sandboxed && !c->peer_err &&
	    !real.getsockopt(c->tcp_fd, SOL_SOCKET, SO_ERROR, &err, &(socklen_t){ sizeof err }) && err)
		c->peer_err = err;
	errno = e;
}

int conn_take_error(struct conn *c)
{
	int e = c->peer_err;

	return e && !__atomic_exchange_n(&c->reset_told, 1, __ATOMIC_ACQ_REL) ? e : 0;
}

/* EPIPE where the socket cannot say it (the transport's reset, a FIN
 * still owed), with TCP's SIGPIPE */
static ssize_t send_epipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	return -EPIPE;
}

/* A send once the peer's error is known - a reset through the transport
 * (its kernel RST may still be on its way), or one the socket showed: the
 * error, told once, before EPIPE after our own SHUT_WR too (TCP's; an
 * EPIPE - a reset after the peer's FIN - with TCP's SIGPIPE).  Then the
 * pipe is broken: the socket's own EPIPE where the socket saw the error
 * and carries our FIN, ours where it cannot say it. */
static ssize_t send_after_error(struct sk *s, size_t len, int flags)
{
	struct conn *c = s->conn;
	int e = c->peer_reset ? ECONNRESET : c->peer_err;

	if (!__atomic_exchange_n(&c->reset_told, 1, __ATOMIC_ACQ_REL))
		return e == EPIPE ? send_epipe(flags) : -e;
	if (!c->peer_reset && !(c->shut_wr && c->mv.fin))
		return send_on_kernel(s, len, flags);
	return send_epipe(flags);
}

/* What a non-blocking send would take now (splice.c sizes its read from a
 * pipe by it).  Once an RDMA connection's sending half moved to the TCP
 * socket, the socket's buffer decides: a chunk, completed by send_all. */
size_t conn_send_room(struct conn *c)
{
	size_t room;

	if (c->broken || c->shut_wr || c->peer_err)
		return 1; /* the send reports the error */
	if (__atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE))
		return 65536;
	if ((room = ring_space(&c->tx)))
		return room;
	/* none: its caller says EAGAIN or a short count, so the room to
	 * come must be an edge for epoll (as conn_send's, TCP's NOSPACE);
	 * armed, then looked at again (the reader's Dekker pair) */
	conn_arm(c, POLLOUT);
	return ring_space(&c->tx);
}

/* What only the kernel's packets carry: urgent data (MSG_OOB: telnet's
 * and FTP's interrupts, Java's sendUrgentData probe) travels beside TCP's
 * stream with its mark, SIGURG and POLLPRI; zerocopy completions
 * (MSG_ZEROCOPY) and timestamps (SO_TIMESTAMP*) come from the kernel's
 * handling of each packet - nothing the rings carry.  So the connection
 * moves to TCP at the exact byte first (both halves, as before a
 * descriptor pass: move.c) and the feature is the socket's from then on;
 * the peer follows (reason unsupported-feature, 8).  0, or -EOPNOTSUPP
 * when it cannot move (a sandbox), said once. */
/* A look at c's socket through fd (its number a moment ago) failed: was
 * it because another thread's close moved the socket to a duplicate of
 * ours meanwhile (fdtab.c unborrow)?  Then it is no error of the peer's
 * and the look is made again on the new number - before, a reader that
 * looked at that moment reported EBADF (tests/behave/borrowed_fd, once in
 * a CI run).  errno: the look's. */
int conn_sock_renumbered(const struct conn *c, int fd)
{
	return (errno == EBADF || errno == ENOTSOCK) && __atomic_load_n(&c->tcp_fd, __ATOMIC_ACQUIRE) != fd;
}

int conn_move_for(struct sk *s, const char *what)
{
	return conn_move_why(s, SHUNT_R_UNSUPPORTED, what);
}

int conn_move_why(struct sk *s, int why, const char *what)
{
	static int warned;
	int r = move_pass_wait(s, why);

	if (!r) {
		shunt_log("connection (tcp fd %d): %s: it is plain TCP now", s->conn->tcp_fd, what);
		return 0;
	}
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("an accelerated connection could not move to TCP for %s (%s): it goes "
			   "without (urgent data: EOPNOTSUPP)", what, strerror(-r));
	return -EOPNOTSUPP;
}

/* fd's connection to TCP at the exact byte for what (conn_move_why) and,
 * its socket holding all of it, plain to shunt from now on (reason why:
 * giveback.c conn_retire).  0: retired; 1: moved but kept (a thread in a
 * call on it - its calls use the socket too, which holds all of it);
 * -EBUSY: moved, but bytes of it are in our memory still; -EOPNOTSUPP:
 * it could not move. */
int conn_move_retire(int fd, struct sk *s, int why, const char *what)
{
	int r = conn_move_why(s, why, what);

	if (r)
		return r;
	if (!move_settled(s->conn, SHUNT_R_FD_PASSED))
		return -EBUSY;
	return !conn_retire(fd, s, why);
}

/* sendmsg's control data that TCP acts on: its socket-level messages
 * (SO_TIMESTAMPING asks for the send's timestamps, SO_MARK, SCM_TXTIME;
 * an unknown type is its EINVAL) but for SCM_RIGHTS and SCM_CREDENTIALS,
 * which TCP ignores, as it ignores other levels. */
static int kernel_cmsgs(const struct msghdr *m)
{
	if (!m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR((struct msghdr *)m, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type != SCM_RIGHTS && h->cmsg_type != SCM_CREDENTIALS)
			return 1;
	return 0;
}

/* A send's flags that need the socket: MSG_OOB; MSG_ZEROCOPY once the
 * program enabled SO_ZEROCOPY (the kernel ignores the flag otherwise, and
 * so does the ring).  0 or -EOPNOTSUPP (urgent data that cannot move). */
static int send_needs_socket(struct sk *s, int flags)
{
	int on = 0;
	socklen_t l = sizeof on;

	if (flags & MSG_OOB) {
		/* the urgent byte goes on the socket after every byte before
		 * it: our sending half there is enough, where the transport
		 * can move it alone (RDMA) */
		if (s->conn->tp->move_ask && !s->conn->tp->move_ask(s->conn, SHUNT_R_UNSUPPORTED))
			return 0;
		return conn_move_for(s, "urgent data (MSG_OOB)");
	}
	if (!real.getsockopt(s->conn->tcp_fd, SOL_SOCKET, SO_ZEROCOPY, &on, &l) && on)
		conn_move_for(s, "zerocopy (MSG_ZEROCOPY)"); /* if not, its copy is the ring's */
	return 0;
}

/* O_NONBLOCK is the open file description's, which a fork shares: the
 * other process's fcntl(F_SETFL) or FIONBIO changes it for this one too,
 * and our copy (s->nonblock, kept by this process's wrappers) would not
 * know - a read TCP fails with EAGAIN waited for ever.  Where a call on a
 * connection another process may hold must wait or say EAGAIN, the
 * kernel is asked (one fcntl, on that path alone; not in a sandbox). */
int conn_nonblock(struct sk *s, int flags)
{
	int fl;

	if (s->conn->shared && !(flags & MSG_DONTWAIT) && !shunt_sandboxed &&
	    (fl = real.fcntl(s->conn->tcp_fd, F_GETFL)) >= 0)
		s->nonblock = !!(fl & O_NONBLOCK);
	return s->nonblock || (flags & MSG_DONTWAIT);
}

/* The peer did shutdown(SHUT_WR) and shutdown(SHUT_RD) (the ring's reader
 * says so: since wire version 14; over RDMA the reader's word is not
 * carried: 0).  Its end first: the word beside the producer, a line our
 * reads poll - the reader's line, which its every read writes, is looked
 * at only once the peer ended. */
static int peer_shut_both(const struct conn *c)
{
	return __atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&c->tx.ctl->rd_shut, __ATOMIC_ACQUIRE);
}

/* The peer shut down both halves: TCP's peer kernel answers any byte with
 * a reset (RFC 1122), so the bytes go to the socket - this send takes
 * them, the next fails (EPIPE, SIGPIPE: the reset came after the peer's
 * FIN), poll says POLLERR and POLLHUP, and the peer's next read says
 * ECONNRESET - not to a ring nobody will read, with a reset only at the
 * peer's close (tests/behave/write_to_shut_peer).  The reset comes back
 * within the send on the loopback: its error is taken at once.  A
 * peer's FIN still owed (its ring holds bytes we have not read: shm.c
 * shm_shutdown) leaves its kernel socket open: the bytes wait there
 * unread, and its close resets.  Words the peer writes: a lie sends our
 * bytes to the liar's socket. */
static ssize_t send_to_shut_peer(struct conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t n = move_send_socket(c, iov, iovcnt, flags);

	if (n > 0)
		conn_note_sock_error(c);
	return n;
}

ssize_t conn_sendmsg(struct sk *s, const struct iovec *iov0, int iovcnt, int flags, const struct msghdr *ctl)
{
	struct conn *c = s->conn;
	size_t len = iov_total(iov0, iovcnt), total = 0;
	int nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	int deadline = -2, r = 0, moved = 0, armed = 0, asked = 0;
	uint64_t sig0 = shunt_signals_seen();
	struct iovec copy[IOV_MAX], *iov = copy;
	struct conn_stuck stuck = { 0 };

	if (iovcnt < 0 || iovcnt > IOV_MAX || iov_len_bad(iov0, iovcnt))
		return -EINVAL;
	if (iov_null(iov0, iovcnt))
		return -EFAULT;
	if (c->broken)
		return -c->broken;
	if (__builtin_expect(c->shared, 0) && !c->shut_wr && __atomic_load_n(&c->tx.ctl->wr_done, __ATOMIC_ACQUIRE)) {
		/* another holder's shutdown(SHUT_WR) (a fork shares the
		 * socket): it holds for every holder - the send is EPIPE,
		 * not bytes put after the end the peer read; its FIN may
		 * still be owed (shm.c shm_shutdown), so not the socket's */
		c->shut_wr = 1;
		__atomic_store_n(&c->mv.fin, 1, __ATOMIC_RELEASE);
	}
	if ((c->peer_reset || c->peer_err) && !conn_moving(c))
		return send_after_error(s, len, flags);
	if (c->shut_wr && c->mv.fin) /* the kernel's FIN is still owed */
		return send_epipe(flags);
	if (c->shut_wr && !conn_moving(c))
		return send_on_kernel(s, len, flags);
	if (c->tp->peer_gone && c->tp->peer_gone(c) && !conn_moving(c))
		/* the peer closed it: TCP's answers are its socket's - the
		 * first send after the close is taken (the peer's kernel
		 * answers with a reset), the next fails - not a ring's worth
		 * of bytes taken for nobody */
		return move_send_socket(c, iov0, iovcnt, flags);
	if (peer_shut_both(c) && !conn_moving(c))
		return send_to_shut_peer(c, iov0, iovcnt, flags);
	if ((flags & (MSG_OOB | MSG_ZEROCOPY)) && !conn_moving(c) && (r = send_needs_socket(s, flags)))
		return r;
	if (ctl && !kernel_cmsgs(ctl) && !conn_moving(c))
		ctl = NULL; /* (moved: the socket's, whatever it holds - kernel TLS's record type) */
	if (ctl && !conn_moving(c) && conn_move_for(s, "control data (sendmsg)"))
		ctl = NULL; /* a sandbox: sent without it, as before (said once) */
	if (shunt_fault_ring(c))
		return (ssize_t)len; /* tests only (fault.c): a hostile peer */
	memcpy(copy, iov0, sizeof(struct iovec) * (size_t)iovcnt);
	struct shunt_ring_ctl *locked = conn_lock(c, 0);
	if (!locked)
		return -c->broken;
	while (total < len || !len) {
		if (conn_may_move(c) && conn_moving(c)) { /* the link failed, the peer left: on with TCP */
			int settle = !nonblock && !ctl && len && move_settling(c);
			ssize_t m = move_send_tcp(c, iov, iovcnt, flags | (settle ? MSG_DONTWAIT : 0), nonblock || settle, ctl);
			if (m > 0)
				total += (size_t)m;
			moved = 1;
			if (settle && (m > 0 || m == -EAGAIN) && total < len) {
				/* the peer's copies of our ring's bytes are read
				 * off as we wait (move.c move_settling) */
				if (m > 0)
					iov_skip(&iov, &iovcnt, (size_t)m);
				if (!(r = conn_settle_wait(s, &deadline, total, &sig0)))
					continue;
				break;
			}
			r = m < 0 ? (int)m : 0;
			break;
		}
		ssize_t n = ring_writev(&c->tx, iov, iovcnt, len - total);
		if (n < 0) { /* bytes already written count: a short write */
			conn_break(c, "impossible consumer cursor");
			r = -ECONNRESET;
			break;
		}
		if (n) {
			total += (size_t)n;
			iov_skip(&iov, &iovcnt, (size_t)n);
			c->tp->push(c);
			continue;
		}
		if (len && !asked++) /* the ring is full: wait, or EAGAIN? */
			nonblock = conn_nonblock(s, flags);
		if (!len)
			break;
		if (nonblock) { /* EAGAIN, or a short write: armed for room either way */
			/* Arm, then look again: space freed between the full
			 * ring above and the arming woke no one, and no edge
			 * would ever say so (the reader's Dekker pair). */
			if (c->tp->progress && !armed && (c->tp->progress(c), ring_space(&c->tx)))
				continue; /* space the progress thread has not reaped yet */
			conn_arm(c, POLLOUT);
			armed = 1;
			/* a move asked for meanwhile (the link failed, maybe in
			 * this very write) woke no one: write to the socket now */
			if ((ring_space(&c->tx) && !c->peer_err) || conn_moving(c))
				continue;
			break;
		}
		if (c->peer_err)
			break;
		/* Sleep without the lock (TCP releases its socket lock too):
		 * no holder ever waits on the peer, so lock waits are short,
		 * and another thread's shutdown or MSG_DONTWAIT send goes
		 * through at once.  Over RDMA a move asked for meanwhile is
		 * made by the progress thread (fo_sweep) or by this writer
		 * when it has the lock again. */
		shunt_unlock(&locked->wlock);
		r = conn_wait_for(s, POLLOUT, &deadline, total, &sig0);
		if (!r && conn_write_stuck(c, &stuck))
			/* TCP's buffers take what the rings cannot (the peer
			 * follows); on at the loop's head, on the socket */
			(void)conn_move_why(s, SHUNT_R_RINGS_FULL,
					    "both ends blocked writing into full rings");
		if (!(locked = conn_lock(c, 0)))
			return total ? (ssize_t)total : -c->broken;
		if (c->shut_wr) { /* another thread's shutdown(SHUT_WR) came first */
			if (total)
				break; /* a short write, as TCP's */
			shunt_unlock(&locked->wlock);
			return send_on_kernel(s, len, flags); /* EPIPE (SIGPIPE) */
		}
		/* with total > 0 the error is dropped: a short write; so is
		 * the call once a handler ran while it waited, before the
		 * lock was ours again (conn_wait_for: while it is ours, they
		 * wait for its unlock, lock.h), its bytes after these, as
		 * the kernel's */
		if (r || (total && shunt_signals_seen() != sig0))
			break;
	}
	shunt_unlock(&locked->wlock);
	if (moved)
		stats_moved(s);
	if (total) {
		stats_adopt_maybe();
		if (s->stat) /* a statistic: a plain add (threads may lose a count) */
			__atomic_store_n(&s->stat->tx, s->stat->tx + total, __ATOMIC_RELAXED);
		return (ssize_t)total;
	}
	if (!len || moved)
		return r;
	if (c->peer_err || c->peer_reset)
		return send_after_error(s, len, flags);
	if (nonblock) {
		if (!armed)
			conn_arm(c, POLLOUT);
		/* a full ring and the peer's FIN: gone?  (its reset then wakes
		 * the poll or epoll this caller sleeps in next) */
		if (c->peer_eof && shunt_now_ns() - c->last_gone_probe_ns > PROBE_INTERVAL_NS) {
			c->last_gone_probe_ns = shunt_now_ns();
			conn_probe_gone(c);
		}
		return -EAGAIN;
	}
	return r;
}

ssize_t conn_recvmsg(struct sk *s, const struct iovec *iov0, int iovcnt, int flags, struct msghdr *ctl)
{
	struct conn *c = s->conn;
	size_t len = iov_total(iov0, iovcnt), total = 0;
	int nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	int peek = flags & MSG_PEEK, waitall = (flags & MSG_WAITALL) && !peek;
	/* MSG_PEEK|MSG_WAITALL waits for the whole count before it peeks
	 * (as TCP's, up to what the ring can hold); SO_RCVLOWAT makes a
	 * blocking read wait for that many bytes, or its whole count */
	int peekall = peek && (flags & MSG_WAITALL);
	size_t want;
	int trunc = flags & MSG_TRUNC; /* TCP's: count and consume, copy nothing */
	int deadline = -2, r = 0, asked = 0, looked = 0;
	uint64_t sig0 = shunt_signals_seen();
	struct iovec copy[IOV_MAX], *iov = copy;

	if (iovcnt < 0 || iovcnt > IOV_MAX || iov_len_bad(iov0, iovcnt))
		return -EINVAL;
	if (!iov0 && iovcnt > 0) /* the vector itself: the kernel's EFAULT at once */
		return -EFAULT;
	/* recvmsg's control buffer, for a read off the socket (its capacity
	 * kept in sock); ctl says what came: none from the rings */
	struct msghdr sock = ctl ? *ctl : (struct msghdr){ 0 };
	size_t cap = sock.msg_controllen;
	if (ctl) {
		ctl->msg_controllen = 0;
		ctl->msg_flags = 0;
	}
	/* bytes to copy to NULL: the kernel's EFAULT once there are some
	 * (before, it waits as for any read; MSG_TRUNC copies nothing) */
	int bad = !trunc && iov_null(iov0, iovcnt);
	if (flags & MSG_OOB) /* the socket's alone (conn_move_for): none there is EINVAL, as TCP's */
		return move_recv_urgent(c, iov0, iovcnt, flags);
	if (c->broken)
		return -c->broken;
	/* the peer left our ring (its pass: the ring's word alone after its
	 * shutdown(SHUT_WR), no FAILOVER on the socket): a read makes our
	 * resend too, as a write or a poll does - a reader to the end that
	 * writes no more (a client that sent its request and shut down)
	 * left its last bytes in a ring nobody reads */
	if (__builtin_expect(conn_may_move(c), 0) && c->tp->move_progress && conn_moving(c))
		c->tp->move_progress(c);
	if (!len) {
		/* recv() of no bytes: TCP's waits until there is something
		 * to read, the end or an error (non-blocking: EAGAIN), takes
		 * nothing and says 0 (read() and readv() say 0 at once:
		 * interpose_io.c) - a 1-byte peek, its byte dropped */
		char one;
		struct iovec peek1 = { &one, 1 };
		ssize_t n = conn_recvmsg(s, &peek1, 1, (flags & MSG_DONTWAIT) | MSG_PEEK, NULL);
		if (n >= 0 && ctl && ctl->msg_control)
			sockinfo_inq_cmsg(c, ctl, cap, !n);
		return n < 0 ? n : 0;
	}
	memcpy(copy, iov0, sizeof(struct iovec) * (size_t)iovcnt);
	want = waitall ? len : (size_t)rx_lowat(c) < len ? (size_t)rx_lowat(c) : len;
	if (peekall)
		want = len < c->rx.size ? len : c->rx.size;
	struct shunt_ring_ctl *locked = conn_lock(c, 1);
	if (!locked)
		return -c->broken;
	for (;;) {
		ssize_t n;
		if ((peekall || (!waitall && want > 1)) && !total && !nonblock &&
		    !__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) &&
		    ring_used(&c->rx) < want && !conn_rx_eof(c) && !c->peer_err && !c->shut_rd) {
			/* not all there yet: nap, the lock released (rare: no
			 * wake-up says "this many"; and what is there stays
			 * unread, as the kernel leaves it) */
			if (!asked++ && (nonblock = conn_nonblock(s, flags)))
				continue; /* (another process made it non-blocking) */
			shunt_unlock(&locked->rlock);
			if (shunt_signals_seen() != sig0)
				return -EINTR;
			if (shunt_now_ns() - c->last_probe_ns > REFRESH_INTERVAL_NS)
				conn_refresh(c);
			if (c->tp->progress)
				c->tp->progress(c);
			nanosleep(&(struct timespec){ 0, 200000 }, NULL);
			if (!(locked = conn_lock(c, 1)))
				return -c->broken;
			continue;
		}
		if (bad && ring_used(&c->rx)) {
			r = -EFAULT;
			break;
		}
		n = ring_readv(&c->rx, trunc ? NULL : iov, iovcnt, len - total, peek);
		if (n < 0) {
			conn_break(c, "impossible producer cursor");
			r = -ECONNRESET;
			break;
		}
		if (n) {
			total += (size_t)n;
			if (peek) {
				/* a moved connection's ring peeked to its end: the
				 * socket's bytes follow them (MSG_WAITALL: all) */
				struct iovec rest = { NULL, len - total };
				if (!trunc)
					iov_skip(&iov, &iovcnt, (size_t)n);
				n = total < len ? moved_peek(c, trunc ? &rest : iov, trunc ? 1 : iovcnt, flags, total,
							     (peekall || total < want) && !nonblock)
						: 0;
				if (n > 0)
					total += (size_t)n;
				break;
			}
			if (!trunc)
				iov_skip(&iov, &iovcnt, (size_t)n);
			c->tp->ack(c);
			struct iovec rest = { NULL, len - total }; /* MSG_TRUNC's */
			n = moved_rest(c, trunc ? &rest : iov, trunc ? 1 : iovcnt, flags, len - total,
				       waitall || (ctl && ctl->msg_control));
			if (n > 0) {
				total += (size_t)n;
				if (!trunc)
					iov_skip(&iov, &iovcnt, (size_t)n);
			}
			if (total >= want || (nonblock && !waitall))
				break;
			continue;
		}
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) || move_held(c)) {
			/* the peer moved to TCP: its bytes follow there (after
			 * what the move held back: a MSG_WAITALL read goes on) */
			int held = move_held(c) != 0;
			if (bad && held) {
				r = -EFAULT;
				break;
			}
			sock.msg_controllen = cap;
			sockinfo_lowat_sync(c); /* the ring is read: the program's mark */
			/* (MSG_TRUNC: no buffer, and no more than is left) */
			struct iovec rest = { NULL, len - total };
			ssize_t m = move_recv_tcp(c, trunc ? &rest : iov, trunc ? 1 : iovcnt, flags, nonblock,
						  ctl ? &sock : NULL);
			if (ctl && m >= 0) {
				ctl->msg_controllen = sock.msg_controllen;
				ctl->msg_flags = sock.msg_flags;
			}
			if (m > 0)
				total += (size_t)m;
			r = m < 0 ? (int)m : 0;
			stats_moved(s);
			if (held && m > 0 && waitall && !peek && total < len) {
				if (!trunc)
					iov_skip(&iov, &iovcnt, (size_t)m);
				continue;
			}
			break;
		}
		/* EOF only if the ring is still empty after seeing the flag:
		 * the writer sets it after its last byte.  After our
		 * shutdown(SHUT_RD) Linux's TCP still hands out what came
		 * (before and after it), and says 0 instead of waiting. */
		if (conn_rx_eof(c) || c->peer_err || c->shut_rd) {
			if (ring_used(&c->rx))
				continue;
			/* TCP's read after our SHUT_RD says a reset before
			 * it says the end: bytes sent to us once we shut both
			 * halves were answered with one (conn_sendmsg's
			 * peer_shut_both, at the peer) - looked at on the
			 * socket, at most once a call and a millisecond */
			if (!c->peer_err && !conn_rx_eof(c) && !looked++ &&
			    shunt_now_ns() - c->last_probe_ns > REFRESH_INTERVAL_NS) {
				conn_refresh(c);
				continue;
			}
			break;
		}
		if (!asked++) /* the ring is empty: wait, or EAGAIN? */
			nonblock = conn_nonblock(s, flags);
		if (nonblock) {
			if (shunt_now_ns() - c->last_probe_ns > REFRESH_INTERVAL_NS) {
				conn_refresh(c);
				if (c->peer_eof || c->peer_err || c->mv.rx)
					continue;
			}
			/* a program that polls by itself: reap the completion
			 * queue here, as rsocket does, not only in the
			 * progress thread (a wake-up later) */
			if (c->tp->progress && (c->tp->progress(c), ring_used(&c->rx) || conn_rx_eof(c)))
				continue;
			conn_arm(c, POLLIN);
			if (ring_used(&c->rx) || conn_rx_eof(c) || c->mv.rx)
				continue;
			r = -EAGAIN;
			break;
		}
		shunt_unlock(&locked->rlock); /* sleep without it, as conn_send */
		r = conn_wait_for(s, POLLIN, &deadline, total, &sig0);
		if (!(locked = conn_lock(c, 1)))
			return total ? (ssize_t)total : -c->broken;
		if (r || (total && shunt_signals_seen() != sig0)) /* (as conn_sendmsg's) */
			break;
	}
	shunt_unlock(&locked->rlock);
	if (__atomic_load_n(&c->mv.lowat_set, __ATOMIC_ACQUIRE))
		sockinfo_lowat_sync(c); /* what the ring lacks of the mark changed */
	if (total) {
		stats_adopt_maybe();
		if (s->stat && !peek)
			__atomic_store_n(&s->stat->rx, s->stat->rx + total, __ATOMIC_RELAXED);
		if (ctl && ctl->msg_control && !ctl->msg_controllen) /* (none from the socket) */
			sockinfo_inq_cmsg(c, ctl, cap, conn_rx_eof(c) || c->peer_err);
		return (ssize_t)total;
	}
	/* once; then EOF, as the kernel's - and EOF at once after the
	 * peer's FIN and then its reset (TCP's reads: the socket is done;
	 * the end its socket reads as after a reset alone is no FIN:
	 * shm.c shm_refresh) */
	if (!r && c->peer_err && !conn_rx_eof(c) && !c->mv.rx)
		return -conn_take_error(c);
	if (!r && ctl && ctl->msg_control && !ctl->msg_controllen)
		sockinfo_inq_cmsg(c, ctl, cap, 1); /* the end */
	return r;
}

int conn_shutdown(struct sk *s, int how)
{
	struct conn *c = s->conn;
	/* TCP's socket is closed once reset, or once both ends' FINs went
	 * (ours acknowledged at once on the loopback): its shutdown() then
	 * says ENOTCONN, and shuts what it was asked all the same.  (The
	 * peer's FIN: its ring's word, or its socket's - looked at now,
	 * as nothing may have woken a look since the peer's close.) */
	int closed;

	if (c->shut_wr && !c->peer_err && !conn_rx_eof(c))
		conn_refresh(c);
	closed = c->peer_err || (c->shut_wr && conn_rx_eof(c));

	if (how == SHUT_RD || how == SHUT_RDWR) {
		c->shut_rd = 1;
		__atomic_store_n(&c->rx.ctl->rd_shut, 1, __ATOMIC_RELEASE); /* (the peer's probe: shm.c) */
		conn_wake_local(c, POLLIN); /* a blocked reader returns */
	}
	if (how == SHUT_WR || how == SHUT_RDWR) {
		/* Take the writer lock so the flag follows every byte in flight. */
		struct shunt_ring_ctl *locked = conn_lock(c, 0);
		if (!locked)
			return real.shutdown(c->tcp_fd, how) ? -errno : 0;
		c->shut_wr = 1;
		__atomic_store_n(&c->tx.ctl->wr_done, 1, __ATOMIC_RELEASE);
		/* every byte at the peer (over the transport, or moved to
		 * TCP) before the kernel's FIN; deferred while bytes wait */
		if (c->tp->shutdown(c))
			how = how == SHUT_WR ? -1 : SHUT_RD;
		shunt_unlock(&locked->wlock);
		/* Wake any sleeper: an epoll waiter must see the EOF too, and
		 * a writer of ours asleep on a full ring returns (a short
		 * write, or EPIPE), as from TCP's shutdown. */
		__atomic_fetch_or(&c->tx.ctl->rd_want, WANT_EFD, __ATOMIC_SEQ_CST);
		if (c->tp->shut_wake)
			c->tp->shut_wake(c);
		conn_wake_local(c, POLLOUT);
	}
	/* a change of state - or none, a call all the same: TCP wakes
	 * every sleeper on the socket, and an edge-triggered registration
	 * for any event reports (epoll.c
	 * is_new_edge; tests/behave/epoll_model) */
	__atomic_fetch_add(&c->shut_calls, 1, __ATOMIC_RELEASE);
	if (ep_in_use())
		efd_signal(c->efd_mine);
	if (how >= 0 && real.shutdown(c->tcp_fd, how))
		return -errno;
	return closed ? -ENOTCONN : 0;
}
