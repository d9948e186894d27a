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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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

#define PROBE_INTERVAL_NS 100000000ull /* writer blocked on a gone peer: probe */
#define REFRESH_INTERVAL_NS 1000000ull /* non-blocking reader: look for FIN */

static void efd_signal(int efd)
{
	uint64_t one = 1;
	int e = errno;

	(void)!real.write(efd, &one, sizeof one);
	errno = e;
}

/* The "wake me" words hold who sleeps: a poll/epoll sleeper on our
 * doorbell, or a blocking call on the word itself (a futex: one system
 * call to sleep, one to wake). */
#define WANT_EFD 1u
#define WANT_FUTEX 2u
#define SLEEP_SLICE_MS 100 /* a futex sleeper looks at the TCP socket this often */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
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

/* A move (move.c): every sleeper looks again, the peer's and ours. */
void conn_wake_all(struct conn *c)
{
	c->tp->push(c);
	c->tp->ack(c);
	conn_wake_local(c, POLLIN | POLLOUT);
}

static _Atomic uint32_t *want_word(struct conn *c, unsigned want)
{
	return want & POLLIN ? &c->rx.ctl->rd_want : &c->tx.ctl->wr_want;
}

/* Ask the peer to ring our doorbell (poll, epoll, a non-blocking EAGAIN). */
void conn_arm(struct conn *c, unsigned want)
{
	if (want & POLLIN)
		__atomic_fetch_or(&c->rx.ctl->rd_want, WANT_EFD, __ATOMIC_SEQ_CST);
	if (want & POLLOUT) {
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
	c->tp->closing(c);
}

/* The kernel socket's last close resets (RST), as TCP's close with bytes
 * unread does. */
void conn_reset_on_close(struct conn *c)
{
	real.setsockopt(c->tcp_fd, SOL_SOCKET, SO_LINGER, &(struct linger){ .l_onoff = 1, .l_linger = 0 },
			sizeof(struct linger));
}

/* exit() and _exit() close every descriptor in the kernel, past the
 * wrappers: each accelerated connection's last close is done here first. */
static void closing_at_exit(int fd, struct sk *s, void *arg)
{
	(void)s;
	(void)arg;
	if ((s = fdtab_get(fd)) == NULL)
		return;
	if (s->kind == SK_CONN && s->conn)
		conn_closing(s->conn);
	sk_put(s);
}

void conn_exit_all(void)
{
	if (!shunt_sandboxed && !shunt_in_handler())
		fdtab_each(closing_at_exit, NULL);
}

__attribute__((destructor)) static void conn_exit_dtor(void)
{
	conn_exit_all();
}

/* The application let go of it in this process. */
int conn_free(struct conn *c)
{
	return c->tp->release(c);
}

/* Free our state without dropping an owner (someone dropped it for us). */
void conn_discard(struct conn *c)
{
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

/* After the peer's FIN, a writer asks: is it gone (closed, killed) or
 * only done sending? */
static void probe_gone(struct conn *c)
{
	if (c->tp->probe)
		c->tp->probe(c);
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

#define LOCK_BOUND_NS 2000000000ull /* no holder sleeps with a ring lock */

/* The writer's (rx: the reader's) lock, of the rings the connection has
 * once it is held: a move before fork replaces an RDMA connection's rings
 * (rdma.c), and a thread that waited for the old lock must not use the new
 * rings unlocked.  Unlock the control block returned.  A shared-memory
 * connection's lock word is in the peer's reach: a wait beyond the bound
 * breaks the connection (NULL), it never hangs the caller. */
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
		if (t == __atomic_load_n(rx ? &c->rx.ctl : &c->tx.ctl, __ATOMIC_ACQUIRE))
			return t;
		shunt_unlock(l);
	}
}

static int rx_eof(struct conn *c)
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
	int eof = rx_eof(c);

	if (c->broken)
		return POLLIN | POLLOUT | POLLERR | POLLHUP;
	if (ring_used(&c->rx) >= (uint64_t)rx_lowat(c) || eof || c->peer_err || c->shut_rd)
		ev |= POLLIN | POLLRDNORM;
	if (eof)
		ev |= POLLRDHUP;
	if (ring_space(&c->tx) || c->shut_wr || c->peer_err)
		ev |= POLLOUT | POLLWRNORM;
	if (c->peer_err)
		ev |= POLLERR;
	if (c->peer_err || (c->shut_wr && eof))
		ev |= POLLHUP;
	return (c->tp->flags & TP_SOCKET_EVENTS) || c->mv.rx || (conn_may_move(c) && conn_moving(c)) ? conn_moved_events(c, ev) : ev;
}

size_t conn_nread(struct conn *c)
{
	size_t n = ring_used(&c->rx);
	int k = 0;

	if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 &&
	    !real.ioctl(c->tcp_fd, FIONREAD, &k) && k > 0)
		n += (size_t)k;
	return n;
}

static int ready_for(struct conn *c, unsigned want)
{
	return (conn_events(c) & (want | POLLERR | POLLHUP)) != 0;
}

static int timeval_ms(int64_t sec, int64_t usec)
{
	if (sec < 0 || usec < 0 || (!sec && !usec))
		return -1;
	return sec > INT_MAX / 1000 - 1 ? INT_MAX : (int)(sec * 1000 + (usec + 999) / 1000);
}

static int sock_timeout_ms(int fd, int opt)
{
	struct timeval tv;
	socklen_t l = sizeof tv;
	int e = errno;

	if (real.getsockopt(fd, SOL_SOCKET, opt, &tv, &l)) {
		errno = e;
		return -1;
	}
	return timeval_ms(tv.tv_sec, tv.tv_usec);
}

/* The socket's timeouts, read once when the connection is attached (they
 * may have been set before connect(), or on the listener); the setsockopt
 * wrapper keeps them from then on.  Asking at every sleep made a system
 * call the program never made: a sandbox (seccomp) kills for that. */
int conn_timeouts_maybe; /* a socket here may carry a timeout (interpose.c, exec.c) */

void conn_load_timeouts(struct conn *c)
{
	if (!__atomic_load_n(&conn_timeouts_maybe, __ATOMIC_RELAXED)) {
		c->timeo_ms[0] = c->timeo_ms[1] = -1; /* none was ever set: ask nothing */
		return;
	}
	c->timeo_ms[0] = sock_timeout_ms(c->tcp_fd, SO_RCVTIMEO);
	c->timeo_ms[1] = sock_timeout_ms(c->tcp_fd, SO_SNDTIMEO);
}

/* After the kernel took SO_{RCV,SND}TIMEO{,_OLD,_NEW}: a struct timeval
 * or struct __kernel_sock_timeval, two 64-bit fields on 64-bit Linux. */
void conn_set_timeout(struct conn *c, int name, const void *val, socklen_t len)
{
	int64_t v[2];

	if (len < sizeof v)
		return;
	memcpy(v, val, sizeof v);
	__atomic_store_n(&c->timeo_ms[name == SO_SNDTIMEO_OLD || name == SO_SNDTIMEO_NEW],
			 timeval_ms(v[0], v[1]), __ATOMIC_RELAXED);
}

/* Would every installed handler be restarted by the kernel (SA_RESTART)?
 * The fallback when the interrupting signal is not known (its handler was
 * installed behind the shim's back, e.g. by a raw system call). */
static int signals_restart(void)
{
	struct sigaction sa;

	for (int sig = 1; sig < NSIG; sig++) {
		/* Faults are synchronous: they never interrupt a sleep (and
		 * sanitizers install handlers for them without SA_RESTART). */
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
		    sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS ||
		    sigaction(sig, NULL, &sa))
			continue;
		if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN &&
		    !(sa.sa_flags & SA_RESTART))
			return 0;
	}
	return 1;
}

/* Spin longer when spinning pays (the data came while we spun, or soon
 * after we went to sleep), shorter when it does not (long idle gaps). */
static void adapt_spin(struct conn *c, int hit)
{
	int64_t max = shunt_cfg.spin_ns, b = c->spin_ns;

	if (max <= 0)
		return;
	/* never below an eighth: at zero no spin could ever hit again, and a
	 * connection that missed a few times while its peer was descheduled
	 * slept on every call for good (a 64 B round trip stuck at ~75 us on
	 * this machine, one run in two) */
	b = hit ? (b * 2 + 1000 < max ? b * 2 + 1000 : max) : (b / 2 > max / 8 ? b / 2 : max / 8);
	c->spin_ns = b;
}

static int write_deadlock(struct conn *c);

/* The common "it happened" of a spin: data (or EOF) arrived, space freed. */
static inline int quick_ready(struct conn *c, unsigned want)
{
	if (want & POLLIN)
		return __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE) !=
		       __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_RELAXED) ||
		       __atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_RELAXED);
	return ring_space(&c->tx) != 0;
}

/* The spin before a sleep, from start: 1 ready, 0 spun out, -EINTR. */
static int spin_wait(struct conn *c, unsigned want, int64_t budget, uint64_t sig0, uint64_t start)
{
	uint64_t now;

	while ((now = shunt_now_ns()) - start < (uint64_t)budget) {
		/* Poll the one cache line the peer will write; look at the
		 * clock and the rest of the state only every 64 turns. */
		for (int i = 0; i < 64; i++) {
			if (quick_ready(c, want))
				return 1;
			__builtin_ia32_pause();
		}
		if (ready_for(c, want))
			return 1;
		/* A handler ran while we spun: the kernel would have failed
		 * (or restarted) the call, not kept waiting. */
		if (shunt_signals_seen() != sig0)
			return -EINTR;
		if (now - c->last_probe_ns > REFRESH_INTERVAL_NS * 10)
			conn_refresh(c);
		if (c->tp->progress)
			c->tp->progress(c); /* e.g. RDMA: no need to wait for its progress thread */
	}
	return 0;
}

/* Spin, then sleep until want (POLLIN/POLLOUT) may be satisfied.
 * Returns 0 to re-check, -EAGAIN on SO_*TIMEO expiry, -EINTR on a signal,
 * -EDEADLK when short_ok and the peer is blocked writing to us too. */
static int conn_wait(struct conn *c, unsigned want, int *deadline_ms, int short_ok, uint64_t sig0)
{
	uint64_t now, el;
	int64_t budget = shunt_cfg.spin_ns < 0 ? INT64_MAX : c->spin_ns;
	_Atomic uint32_t *w;
	struct timespec ts;
	uint32_t v;
	int r, tmo, err, turn;

	/* no turn to spin (core.c): sleep at once, and learn nothing from
	 * it - a budget halved for spins never tried would stay at its floor
	 * once both ends sleep (each reply then comes later than any spin) */
	now = budget > 0 ? shunt_now_ns() : 0;
	turn = budget > 0 ? shunt_spin_begin((uint64_t)budget, now) : 0;
	if (turn) {
		r = spin_wait(c, want, budget, sig0, now);
		shunt_spin_end(turn);
	} else {
		r = 0;
	}
	if (r > 0)
		adapt_spin(c, 1);
	if (r)
		return r > 0 ? 0 : r;
	w = want_word(c, want);
	v = __atomic_or_fetch(w, WANT_FUTEX, __ATOMIC_SEQ_CST);
	if (ready_for(c, want))
		return 0;
	/* A closing peer sends its FIN, then wakes us if our flag was set:
	 * set after its look, the flag missed that wake-up, but the FIN is
	 * on the socket by now - look there too, or a clean close reached a
	 * reader only at the end of its 100 ms slice (issue #13, item 10: a
	 * client waiting for EOF after a one-byte exchange took 43 ms). */
	conn_refresh(c);
	if (ready_for(c, want))
		return 0;
	if (c->tp->tx_blocked && (want & POLLOUT))
		c->tp->tx_blocked(c); /* e.g. RDMA: the peer must answer every read now */
	if (shunt_signals_seen() != sig0)
		return -EINTR;
	/* Checked after arming: of two writers arming at once, at least one
	 * sees the other's flag (both are seq_cst), so they never both sleep. */
	if (short_ok && (want & POLLOUT) && write_deadlock(c))
		return -EDEADLK;
	if (turn)
		adapt_spin(c, 0);
	/* SO_RCVTIMEO/SO_SNDTIMEO matter only to a sleeper */
	if (*deadline_ms == -2)
		*deadline_ms = __atomic_load_n(&c->timeo_ms[!(want & POLLIN)], __ATOMIC_RELAXED);
	tmo = *deadline_ms < 0 || *deadline_ms > SLEEP_SLICE_MS ? SLEEP_SLICE_MS : *deadline_ms;
	if (conn_moving(c) && tmo > 10)
		tmo = 10; /* the peer's failover message comes on the socket */
	ts = (struct timespec){ tmo / 1000, (long)(tmo % 1000) * 1000000L };
	now = shunt_now_ns();
	r = (int)futex(w, FUTEX_WAIT, v, &ts);
	err = r ? errno : 0;
	el = shunt_now_ns() - now;
	/* Woken sooner than the spin limit: spinning would have caught it. */
	if (!r && el < (uint64_t)(shunt_cfg.spin_ns > 0 ? shunt_cfg.spin_ns : 0))
		adapt_spin(c, 1);
	if (*deadline_ms >= 0) {
		*deadline_ms -= (int)(el / 1000000);
		if (*deadline_ms <= 0 && err == ETIMEDOUT && !ready_for(c, want))
			return -EAGAIN;
		if (*deadline_ms < 0)
			*deadline_ms = 0;
	}
	if (err == EINTR)
		return -EINTR;
	/* Nothing for us after a wake-up or a slice: FIN or RST?  (A closing
	 * peer wakes us after its FIN left; a killed one does not: the slice.) */
	if (!ready_for(c, want))
		conn_refresh(c);
	/* A writer facing a peer that half-closed must learn whether it is
	 * gone: probe the TCP socket (a gone peer answers RST). */
	if ((want & POLLOUT) && err == ETIMEDOUT && !conn_moving(c))
		probe_gone(c);
	return 0;
}

/* Both ends blocked writing into full rings would deadlock; TCP's larger
 * buffers rarely do.  SMC's lesson: return the short write instead. */
static int write_deadlock(struct conn *c)
{
	return ring_space(&c->rx) == 0 && c->tp->peer_blocked(c);
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

/* EINTR as the kernel decides it for recv/send: restarted when nothing
 * moved yet, no timeout is set and the handler asked for SA_RESTART. */
static int wait_or_fail(struct sk *s, unsigned want, int *deadline, size_t done, uint64_t *sig0)
{
	int r = conn_wait(s->conn, want, deadline, done > 0, *sig0), rs;

	if (r != -EINTR)
		return r;
	rs = shunt_signal_restarts();
	if (rs < 0)
		rs = signals_restart();
	if (!done && *deadline < 0 && rs) {
		*sig0 = shunt_signals_seen();
		return 0;
	}
	return r;
}

/* Let the kernel produce EPIPE/ECONNRESET and SIGPIPE exactly as TCP does. */
static ssize_t send_on_kernel(struct sk *s, size_t len, int flags)
{
	char zero = 0;
	ssize_t r = real.send(s->conn->tcp_fd, &zero, len ? 1 : 0, flags & ~MSG_DONTWAIT);

	return r < 0 ? -errno : r;
}

/* What a non-blocking send would take now (splice.c sizes its read from a
 * pipe by it).  Once an RDMA connection's sending half moved to the TCP
 * socket, the socket's buffer decides: a chunk, completed by send_all. */
size_t conn_send_room(struct conn *c)
{
	if (c->broken || c->shut_wr || c->peer_err)
		return 1; /* the send reports the error */
	if (__atomic_load_n(&c->mv.tx, __ATOMIC_ACQUIRE))
		return 65536;
	return ring_space(&c->tx);
}

ssize_t conn_send(struct sk *s, const struct iovec *iov0, int iovcnt, int flags)
{
	struct conn *c = s->conn;
	size_t len = iov_total(iov0, iovcnt), total = 0;
	int nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	int deadline = -2, r = 0, moved = 0, armed = 0;
	uint64_t sig0 = shunt_signals_seen();
	struct iovec copy[IOV_MAX], *iov = copy;

	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	if (c->broken)
		return -c->broken;
	if (c->shut_wr && c->mv.fin) { /* the kernel's FIN is still owed */
		if (!(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		return -EPIPE;
	}
	if (c->peer_reset && !conn_moving(c)) {
		/* reset through the transport (its kernel RST may still be on its way):
		 * reported once, then the pipe is broken, as TCP's */
		if (!__atomic_exchange_n(&c->reset_told, 1, __ATOMIC_ACQ_REL))
			return -ECONNRESET;
		if (!(flags & MSG_NOSIGNAL))
			raise(SIGPIPE);
		return -EPIPE;
	}
	if ((c->shut_wr || c->peer_err) && !conn_moving(c))
		return send_on_kernel(s, len, flags);
	if (shunt_fault_ring(c))
		return (ssize_t)len; /* tests only (fault.c): a hostile peer */
	memcpy(copy, iov0, sizeof(struct iovec) * (size_t)iovcnt);
	struct shunt_ring_ctl *locked = conn_lock(c, 0);
	if (!locked)
		return -c->broken;
	while (total < len || !len) {
		if (conn_may_move(c) && conn_moving(c)) { /* the link failed, the peer left: on with TCP */
			ssize_t m = move_send_tcp(c, iov, iovcnt, flags, nonblock);
			if (m > 0)
				total += (size_t)m;
			moved = 1;
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
		if (!len || (nonblock && total))
			break;
		if (nonblock) {
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
		r = wait_or_fail(s, POLLOUT, &deadline, total, &sig0);
		if (!(locked = conn_lock(c, 0)))
			return total ? (ssize_t)total : -c->broken;
		if (c->shut_wr) { /* another thread's shutdown(SHUT_WR) came first */
			if (total)
				break; /* a short write, as TCP's */
			shunt_unlock(&locked->wlock);
			return send_on_kernel(s, len, flags); /* EPIPE (SIGPIPE) */
		}
		if (r)
			break; /* with total > 0 the error is dropped: a short write */
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
	if (c->peer_err)
		return send_on_kernel(s, len, flags);
	if (nonblock) {
		if (!armed)
			conn_arm(c, POLLOUT);
		/* a full ring and the peer's FIN: gone?  (its reset then wakes
		 * the poll or epoll this caller sleeps in next) */
		if (c->peer_eof && shunt_now_ns() - c->last_gone_probe_ns > PROBE_INTERVAL_NS) {
			c->last_gone_probe_ns = shunt_now_ns();
			probe_gone(c);
		}
		return -EAGAIN;
	}
	return r;
}

ssize_t conn_recv(struct sk *s, const struct iovec *iov0, int iovcnt, int flags)
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
	int deadline = -2, r = 0;
	uint64_t sig0 = shunt_signals_seen();
	struct iovec copy[IOV_MAX], *iov = copy;

	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	if (c->broken)
		return -c->broken;
	if (c->shut_rd || !len)
		return 0;
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
		    ring_used(&c->rx) < want && !rx_eof(c) && !c->peer_err) {
			/* not all there yet: nap, the lock released (rare: no
			 * wake-up says "this many"; and what is there stays
			 * unread, as the kernel leaves it) */
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
		n = ring_readv(&c->rx, trunc ? NULL : iov, iovcnt, len - total, peek);
		if (n < 0) {
			conn_break(c, "impossible producer cursor");
			r = -ECONNRESET;
			break;
		}
		if (n) {
			total += (size_t)n;
			if (!peek) {
				if (!trunc)
					iov_skip(&iov, &iovcnt, (size_t)n);
				c->tp->ack(c);
			}
			if (total >= want || (nonblock && !waitall) || peek)
				break;
			continue;
		}
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE)) {
			/* the peer moved to TCP: its bytes follow there */
			ssize_t m = move_recv_tcp(c, iov, iovcnt, flags, nonblock);
			if (m > 0)
				total += (size_t)m;
			r = m < 0 ? (int)m : 0;
			stats_moved(s);
			break;
		}
		/* EOF only if the ring is still empty after seeing the flag:
		 * the writer sets it after its last byte. */
		if (rx_eof(c) || c->peer_err) {
			if (ring_used(&c->rx))
				continue;
			break;
		}
		if (nonblock) {
			if (shunt_now_ns() - c->last_probe_ns > REFRESH_INTERVAL_NS) {
				conn_refresh(c);
				if (c->peer_eof || c->peer_err || c->mv.rx)
					continue;
			}
			/* a program that polls by itself: reap the completion
			 * queue here, as rsocket does, not only in the
			 * progress thread (a wake-up later) */
			if (c->tp->progress && (c->tp->progress(c), ring_used(&c->rx) || rx_eof(c)))
				continue;
			conn_arm(c, POLLIN);
			if (ring_used(&c->rx) || rx_eof(c) || c->mv.rx)
				continue;
			r = -EAGAIN;
			break;
		}
		shunt_unlock(&locked->rlock); /* sleep without it, as conn_send */
		r = wait_or_fail(s, POLLIN, &deadline, total, &sig0);
		if (!(locked = conn_lock(c, 1)))
			return total ? (ssize_t)total : -c->broken;
		if (r)
			break;
	}
	shunt_unlock(&locked->rlock);
	if (total) {
		stats_adopt_maybe();
		if (s->stat && !peek)
			__atomic_store_n(&s->stat->rx, s->stat->rx + total, __ATOMIC_RELAXED);
		return (ssize_t)total;
	}
	if (!r && c->peer_err && !rx_eof(c) && !c->mv.rx) {
		if (c->peer_reset)
			__atomic_store_n(&c->reset_told, 1, __ATOMIC_RELEASE);
		return -c->peer_err;
	}
	return r;
}

int conn_shutdown(struct sk *s, int how)
{
	struct conn *c = s->conn;

	if (how == SHUT_RD || how == SHUT_RDWR)
		c->shut_rd = 1;
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
	if (how < 0)
		return 0;
	return real.shutdown(c->tcp_fd, how) ? -errno : 0;
}
