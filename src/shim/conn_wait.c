/* SPDX-License-Identifier: MIT */
/*
 * conn_wait.c - how a call on an accelerated connection waits: it spins
 * while spinning pays (an adaptive budget, a turn from spin.c), then
 * sleeps on the ring's want word as a futex in 100 ms slices, looking at
 * the kernel socket between them; SO_RCVTIMEO/SO_SNDTIMEO and signals
 * end the wait as the kernel's would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include "conn_int.h"
#include "../base/real.h"

static _Atomic uint32_t *want_word(struct conn *c, unsigned want)
{
	return want & POLLIN ? &c->rx.ctl->rd_want : &c->tx.ctl->wr_want;
}

/* After the peer's FIN, a writer asks: is it gone (closed, killed) or
 * only done sending? */
void conn_probe_gone(struct conn *c)
{
	if (c->tp->probe)
		c->tp->probe(c);
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

/* The socket's timeout (-1: none) in *ms; -1 when the kernel would not
 * say (*ms untouched). */
static int sock_timeout_get(int fd, int opt, int *ms)
{
	struct timeval tv;
	socklen_t l = sizeof tv;
	int e = errno;

	if (real.getsockopt(fd, SOL_SOCKET, opt, &tv, &l)) {
		errno = e;
		return -1;
	}
	*ms = timeval_ms(tv.tv_sec, tv.tv_usec);
	return 0;
}

static int sock_timeout_ms(int fd, int opt)
{
	int ms = -1;

	(void)sock_timeout_get(fd, opt, &ms);
	return ms;
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

/* The timeout a sleep of this call starts with (1: sending).  The
 * socket's options are shared with every process holding it: on a
 * connection a fork or exec shared, another's setsockopt may have changed
 * them since, and the kernel is asked (a sleep's path alone; not in a
 * sandbox) - else a child's SO_RCVTIMEO went unseen by its parent, whose
 * read slept on past it (tests/behave/shared_state). */
static int conn_timeout_now(struct conn *c, int tx)
{
	int ms;

	/* (a socket that would not say - its number closed under us, being
	 * moved by another thread's close - keeps what we knew) */
	if (c->shared && !shunt_sandboxed && !sock_timeout_get(c->tcp_fd, tx ? SO_SNDTIMEO : SO_RCVTIMEO, &ms)) {
		if (ms >= 0)
			__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&c->timeo_ms[tx], ms, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&c->timeo_ms[tx], __ATOMIC_RELAXED);
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

/* Does the handler of the signal that ended our wait ask for a restart
 * (the one the shim saw, else every installed one: above)? */
static int handler_restarts(void)
{
	int rs = shunt_signal_restarts();

	return rs < 0 ? signals_restart() : rs;
}

/* A blocking read's wait for bytes on a socket that may stop being the
 * connection's while it waits (inband.c: another thread's call attaches
 * an RDMA connection from under it), in naps of nap_ms between which the
 * caller looks: 1 bytes (or an end, an error) are there, 0 the nap ended,
 * -EAGAIN past SO_RCVTIMEO, -EINTR a signal the kernel's recv would not
 * have restarted (no SA_RESTART, or a receive time-out set: signal(7)).
 * *left_ms: the time-out's rest (-2 before the first nap: read then; -1
 * none). */
int sock_nap_in(int fd, int nap_ms, int *left_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t t0;
	int r, t;

	if (*left_ms == -2)
		*left_ms = __atomic_load_n(&conn_timeouts_maybe, __ATOMIC_RELAXED) ? sock_timeout_ms(fd, SO_RCVTIMEO)
										     : -1;
	t = *left_ms >= 0 && *left_ms < nap_ms ? *left_ms : nap_ms;
	t0 = shunt_now_ns();
	r = real.poll(&p, 1, t);
	if (r < 0)
		return errno == EINTR && (*left_ms >= 0 || !handler_restarts()) ? -EINTR : 0;
	if (r > 0)
		return 1;
	if (*left_ms >= 0) {
		*left_ms -= (int)((shunt_now_ns() - t0) / 1000000);
		if (*left_ms <= 0)
			return -EAGAIN;
	}
	return 0;
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

/* Both ends blocked writing into full rings would deadlock; TCP's larger
 * buffers rarely do.  SMC's lesson: return the short write instead. */
static int write_deadlock(struct conn *c)
{
	return ring_space(&c->rx) == 0 && c->tp->peer_blocked(c);
}

/* A blocking writer facing a full ring: is the connection stuck - both
 * rings full, the peer blocked writing to us, and neither ring's reader
 * taking a byte for STUCK_MS?  A program that writes its whole request
 * before it reads, to a peer that answers as it reads (cat behind xinetd,
 * an echo), deadlocks so once both rings fill (512 KiB in flight), where
 * TCP's buffers - megabytes on loopback - take it all.  (Readers that come
 * later - a program reading its connections one after another - are not
 * told from ones that never come: such a connection moves too, intact.)
 * *st carries the watch from one look to the next (zeroed at the send's
 * start).  Only the client's end decides: both ends seeing it at once must
 * not both move. */
int conn_write_stuck(struct conn *c, struct conn_stuck *st)
{
	uint64_t now = shunt_now_ns(), rc, tc;

	if (c->side || ring_space(&c->tx) || !write_deadlock(c)) {
		st->since = 0;
		return 0;
	}
	rc = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE);
	tc = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	if (!st->since || rc != st->rx_cons || tc != st->tx_cons) {
		st->since = now;
		st->rx_cons = rc;
		st->tx_cons = tc;
		return 0;
	}
	return now - st->since >= STUCK_MS * 1000000ull;
}

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
	if (want & POLLOUT)
		conn_no_room(c);
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
		*deadline_ms = conn_timeout_now(c, !(want & POLLIN));
	tmo = *deadline_ms < 0 || *deadline_ms > SLEEP_SLICE_MS ? SLEEP_SLICE_MS : *deadline_ms;
	if (conn_moving(c) && tmo > 10)
		tmo = 10; /* the peer's failover message comes on the socket */
	if ((want & POLLOUT) && tmo > STUCK_LOOK_MS && write_deadlock(c))
		tmo = STUCK_LOOK_MS; /* conn_write_stuck looks again soon */
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
		conn_probe_gone(c);
	return 0;
}


/* poll() on one accelerated connection, one direction (poll.c): the
 * wait a blocking call makes - spin, then the ring's futex word - instead
 * of the arena's doorbell, which every thread polling a connection of
 * the arena wakes on.  0 to look again, -EAGAIN once *deadline_ms ran
 * out, -EINTR on a signal since sig0. */
int conn_wait_poll(struct conn *c, unsigned want, int *deadline_ms, uint64_t sig0)
{
	return conn_wait(c, want, deadline_ms, 0, sig0);
}

/* A signal handled while a read waited for its connection's set-up
 * (early.c rdv_offer_settle_read): the read fails with EINTR as the
 * kernel's would have - nothing to read yet, and the call not restarted
 * (no SA_RESTART, or a receive timeout set). */
int conn_read_interrupted(struct conn *c)
{
	if (conn_events(c) & (POLLIN | POLLERR | POLLHUP))
		return 0; /* the data came first: the kernel's read returns it */
	return !handler_restarts() || __atomic_load_n(&c->timeo_ms[0], __ATOMIC_RELAXED) >= 0;
}

/* A blocking write's wait while its moved connection settles (move.c
 * move_settling): room on the socket, or the peer's copies of our ring's
 * bytes, read off here.  SO_SNDTIMEO and EINTR as for conn_wait_for:
 * 0 to go on, -EAGAIN (timed out) or -EINTR. */
int conn_settle_wait(struct sk *s, int *deadline, size_t done, uint64_t *sig0)
{
	struct conn *c = s->conn;
	uint64_t t0 = shunt_now_ns();
	int rx = __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE), r;

	if (*deadline == -2)
		*deadline = conn_timeout_now(c, 1);
	r = fd_wait(c->tcp_fd, POLLOUT | POLLIN, *deadline < 0 ? UINT64_MAX : t0 + *deadline * 1000000ull, 0);
	if (r > 0 && (r & POLLIN) && !(r & POLLOUT)) {
		uint64_t gen = __atomic_load_n(&c->mv.gen, __ATOMIC_ACQUIRE);
		conn_refresh(c);
		/* nothing to take yet (part of the peer's message): a nap,
		 * not a spin on a readable socket */
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == rx && rx != 1 &&
		    __atomic_load_n(&c->mv.gen, __ATOMIC_ACQUIRE) == gen)
			r = fd_wait(c->tcp_fd, POLLOUT, shunt_now_ns() + 1000000, 0);
	}
	if (*deadline >= 0) {
		uint64_t el = (shunt_now_ns() - t0) / 1000000;
		*deadline = el >= (uint64_t)*deadline ? 0 : *deadline - (int)el;
		if (!*deadline && r == 0)
			return -EAGAIN; /* SO_SNDTIMEO's */
	}
	if (r != -EINTR)
		return 0;
	if (!done && *deadline < 0 && handler_restarts()) {
		*sig0 = shunt_signals_seen();
		return 0;
	}
	return r;
}

/* EINTR as the kernel decides it for recv/send: restarted when nothing
 * moved yet, no timeout is set and the handler asked for SA_RESTART. */
int conn_wait_for(struct sk *s, unsigned want, int *deadline, size_t done, uint64_t *sig0)
{
	int r = conn_wait(s->conn, want, deadline, done > 0, *sig0);

	/* a handler ran while it waited (its spin may have found the ring
	 * ready too): with bytes moved the call ends short, as the kernel's
	 * does - the handler's own calls on the connection come after them
	 * (tests/behave/signal_reentry) */
	if (!r && done && shunt_signals_seen() != *sig0)
		r = -EINTR;
	if (r != -EINTR)
		return r;
	if (!done && *deadline < 0 && handler_restarts()) {
		*sig0 = shunt_signals_seen();
		return 0;
	}
	return r;
}
