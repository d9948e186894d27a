/* SPDX-License-Identifier: MIT */
/*
 * poll.c - poll/ppoll/select/pselect over a mix of accelerated and plain fds.
 *
 * Accelerated entries are answered from the rings; if none is ready, each is
 * replaced by its TCP socket (for FIN/RST) in a private array, the peer is
 * asked to ring our doorbell, the thread's set of doorbells (bell.c) is one
 * more entry, and the kernel sleeps on everything at once.  Calls without
 * an accelerated fd go straight to libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"
#include "../base/real.h"

static unsigned accel_revents(struct sk *s, short events)
{
	unsigned ev = conn_events(s->conn);

	if (events & POLLPRI) /* select()'s exceptfds too */
		ev |= conn_urgent(s->conn);
	return ev & ((unsigned)events | POLLERR | POLLHUP);
}

static int remaining_ms(int timeout_ms, uint64_t deadline)
{
	uint64_t now;

	if (timeout_ms <= 0)
		return timeout_ms;
	now = shunt_now_ns();
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* One pass: fill revents of accelerated entries; return how many are ready. */
static int scan_accel(struct pollfd *fds, nfds_t n, struct sk **sks)
{
	int ready = 0;

	for (nfds_t i = 0; i < n; i++) {
		if (!sks[i])
			continue;
		fds[i].revents = (short)accel_revents(sks[i], fds[i].events);
		ready += fds[i].revents != 0;
	}
	return ready;
}

/* An accelerated entry's kernel socket: the descriptor to poll (-1: none)
 * and *ev, its events - its FIN or RST; once an RDMA connection's sending
 * half moved there, its room (wanted even after the peer's FIN, as epoll.c
 * keeps it registered); after the FIN, for a writer, its reset only (a
 * probe of a gone peer gets one: POLLERR needs no event); urgent data,
 * when asked for. */
static int sock_watch(struct conn *c, short app_events, short *ev)
{
	*ev = (short)(c->peer_eof || c->shut_rd ? 0 : POLLIN | POLLRDHUP);
	if (conn_moving(c))
		*ev |= (short)((app_events & POLLOUT) | (move_pending(c) ? POLLOUT : 0));
	*ev |= (short)(app_events & POLLPRI); /* urgent data: the socket's alone */
	if (c->peer_err)
		return -1;
	return *ev || (!conn_socket_done(c) && (app_events & POLLOUT)) ? c->tcp_fd : -1;
}

/* Arm every accelerated entry for what it is not ready for (revents:
 * scan_accel's) and put its doorbell in the thread's set; the set, or -1:
 * none (a sandbox, no descriptor left) - the sleep is then cut into naps
 * of NAP_MS, the rings looked at between them.  (Armed for room while it
 * has room, the peer rang at its next read, and an edge-triggered epoll
 * set reported room TCP's does not: tests/behave/epoll_model.) */
#define NAP_MS 2

static int watch_bells(struct pollfd *fds, nfds_t n, struct sk **sks)
{
	int w = bell_waitfd();

	for (nfds_t i = 0; i < n; i++) {
		if (!sks[i])
			continue;
		conn_arm(sks[i]->conn, (unsigned)(fds[i].events & ~fds[i].revents) & (POLLIN | POLLOUT));
		if (w >= 0 && bell_watch(w, sks[i]->conn->efd_mine, sks[i]->conn->bell_id))
			w = -1;
	}
	return w;
}

static int nap(int w, int tmo)
{
	return w < 0 && (tmo < 0 || tmo > NAP_MS) ? NAP_MS : tmo;
}

/* After our own shutdown(SHUT_RD) the socket shows the peer's FIN to no
 * poll (its reading half reads as ended already), and a writer waiting
 * for room from a peer killed with the ring full - whose kernel, holding
 * nothing of ours, sends a FIN and no reset - would wait for ever where
 * TCP's, its bytes unread in that kernel, sees the reset.  So such an
 * entry is looked at every FIN_LOOK_MS (conn_refresh asks the socket's
 * state: then the probe, shm.c), as a blocking writer's slice does. */
#define FIN_LOOK_MS 100

static int fin_unseen(const struct pollfd *fd, const struct sk *s)
{
	const struct conn *c = s->conn;

	return (fd->events & POLLOUT) && c->shut_rd && !c->peer_eof && !c->peer_err;
}

/* ext: the plain entries in place, -1 for accelerated ones, then the
 * doorbell set (w >= 0), the answer socket (msgfd >= 0: pending offers
 * among the entries, below), then each accelerated entry's TCP socket. */
static int build(struct pollfd *fds, nfds_t n, struct sk **sks, struct pollfd *ext, int w, int msgfd)
{
	int k = (int)n;

	if (w >= 0)
		ext[k++] = (struct pollfd){ .fd = w, .events = POLLIN };
	if (msgfd >= 0)
		ext[k++] = (struct pollfd){ .fd = msgfd, .events = POLLIN };
	for (nfds_t i = 0; i < n; i++) {
		ext[i] = fds[i];
		if (!sks[i])
			continue;
		short tev;
		int tfd = sock_watch(sks[i]->conn, fds[i].events, &tev);
		ext[i].fd = -1; /* ignored by the kernel */
		ext[k++] = (struct pollfd){ .fd = tfd, .events = tev };
	}
	return k;
}

/* The kernel refuses more entries than RLIMIT_NOFILE (EINVAL), and a
 * sandbox may set that as low as the program's own count (OpenSSH's
 * pre-authentication child polls one socket under a limit of 1).  Then,
 * without asking for the limit (a system call the program would not make),
 * the array keeps the program's size: the first accelerated entry's slot
 * holds the doorbell set, and the TCP sockets (the peer's FIN or RST, a
 * killed peer) are looked at between naps of at most NARROW_TICK_MS - that
 * much later. */
#define NARROW_TICK_MS 20

static int narrow_pass(struct pollfd *fds, nfds_t n, struct sk **sks, int tmo,
		       const sigset_t *mask, struct pollfd *ext)
{
	struct timespec ts, zero = { 0, 0 };
	int r, ready = 0, k = 0, watched = 0, w = watch_bells(fds, n, sks), wslot = -1;

	if (tmo < 0 || tmo > NARROW_TICK_MS)
		tmo = NARROW_TICK_MS;
	for (nfds_t i = 0; i < n; i++) {
		ext[i] = fds[i];
		if (sks[i]) {
			ext[i] = (struct pollfd){ .fd = -1 };
			if (w >= 0 && wslot < 0) {
				ext[i] = (struct pollfd){ .fd = w, .events = POLLIN };
				wslot = (int)i;
			}
		}
	}
	if (scan_accel(fds, n, sks))
		tmo = 0; /* became ready while arming */
	tmo = nap(w, tmo);
	ts = (struct timespec){ tmo / 1000, (tmo % 1000) * 1000000L };
	r = real.ppoll(ext, n, &ts, mask);
	if (r < 0)
		return -errno;
	for (nfds_t i = 0; i < n; i++)
		if (!sks[i]) {
			fds[i].revents = ext[i].revents;
			ready += ext[i].revents != 0;
		}
	if (wslot >= 0 && ext[wslot].revents)
		bell_consume(w, sks, n);
	for (nfds_t i = 0; i < n; i++) {
		short tev;
		int tfd = sks[i] ? sock_watch(sks[i]->conn, fds[i].events, &tev) : -1;
		/* every accelerated entry keeps a place, so results map back */
		if (sks[i])
			ext[k++] = (struct pollfd){ .fd = tfd, .events = tev };
		watched += tfd >= 0;
	}
	if (watched && real.ppoll(ext, (nfds_t)k, &zero, mask) > 0) {
		k = 0;
		for (nfds_t i = 0; i < n; i++)
			if (sks[i] && ext[k++].revents)
				conn_refresh(sks[i]->conn);
	}
	return ready;
}

/* msgfd >= 0: the answer socket is watched too, and its datagram ends the
 * call (*msg set) - its offers are looked at by the caller. */
static int poll_loop(struct pollfd *fds, nfds_t n, struct sk **sks, int timeout_ms,
		     const sigset_t *mask, struct pollfd *ext, int msgfd, int *msg)
{
	uint64_t deadline = timeout_ms > 0 ? shunt_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	int narrow = 0;

	for (;;) {
		int tmo = remaining_ms(timeout_ms, deadline), ready = scan_accel(fds, n, sks), k, r, w, t;
		struct timespec ts;

		if (ready)
			tmo = 0;
		if (narrow) {
			r = narrow_pass(fds, n, sks, tmo, mask, ext);
			if (r < 0)
				return r;
			ready = r + scan_accel(fds, n, sks);
			if (ready || !tmo || (timeout_ms > 0 && !remaining_ms(timeout_ms, deadline)))
				return ready;
			continue;
		}
		w = watch_bells(fds, n, sks);
		k = build(fds, n, sks, ext, w, msgfd);
		if (!ready && scan_accel(fds, n, sks))
			tmo = 0; /* became ready while arming */
		t = nap(w, tmo);
		for (nfds_t i = 0; i < n; i++)
			if (sks[i] && fin_unseen(&fds[i], sks[i]) && (t < 0 || t > FIN_LOOK_MS))
				t = FIN_LOOK_MS;
		ts = (struct timespec){ t / 1000, (t % 1000) * 1000000L };
		r = real.ppoll(ext, (nfds_t)k, t < 0 ? NULL : &ts, mask);
		if (r < 0 && errno == EINVAL && (nfds_t)k > n) {
			narrow = 1; /* over RLIMIT_NOFILE only because of our entries */
			continue;
		}
		if (r < 0)
			return -errno;
		ready = 0;
		nfds_t j = n;
		if (w >= 0 && ext[j++].revents)
			bell_consume(w, sks, n);
		if (msgfd >= 0 && ext[j++].revents)
			*msg = 1;
		for (nfds_t i = 0; i < n; i++) {
			if (!sks[i]) {
				fds[i].revents = ext[i].revents;
				ready += ext[i].revents != 0;
			} else if (ext[j++].revents || fin_unseen(&fds[i], sks[i])) {
				conn_refresh(sks[i]->conn);
			}
		}
		ready += scan_accel(fds, n, sks);
		if (ready || !tmo || *msg)
			return ready;
	}
}

/* One accelerated entry waited for in one direction, without a signal
 * mask to swap (the common poll before a read: libpq, Python's and
 * Java's sockets with a time-out, an event loop's single connection):
 * asleep on the ring's futex word, as a blocking read - the arena's
 * doorbell is every connection's of the arena, and each thread polling one
 * woke at every ring (8 client threads, a connection and a byte each way:
 * 3.4 ppoll and 3.3 epoll_pwait a connection; 1.65x TCP's CPU time).
 * The peer's FIN or reset wakes it as it wakes a reader (conn_wait.c). */
static int poll_one(struct pollfd *fd, struct sk *s, int timeout_ms)
{
	short ev = fd->events;
	unsigned want = ev & (POLLIN | POLLRDNORM) ? POLLIN : POLLOUT;
	uint64_t sig0 = shunt_signals_seen();
	int deadline = timeout_ms < 0 ? -1 : timeout_ms, r; /* (-2 would read SO_RCVTIMEO) */

	for (;;) {
		fd->revents = (short)accel_revents(s, ev);
		if (fd->revents)
			return 1;
		r = conn_wait_poll(s->conn, want, &deadline, sig0);
		if (r == -EAGAIN)
			return (fd->revents = (short)accel_revents(s, ev)) != 0;
		if (r < 0)
			return r;
	}
}

static int poll_one_fits(const struct pollfd *fd, const struct sk *s, int timeout_ms, const sigset_t *mask)
{
	short ev = fd->events, in = POLLIN | POLLRDNORM, out = POLLOUT | POLLWRNORM;

	/* (not in a sandbox: the wait looks at the socket with recv(), a
	 * call OpenSSH's filter kills for - its pre-auth child polls its
	 * connection; the doorbell's ppoll is allowed) */
	return timeout_ms && !mask && !shunt_sandboxed && (s->conn->tp->flags & TP_SHARED_RINGS) &&
	       !conn_moving(s->conn) &&
	       !(ev & ~(in | out | POLLRDHUP)) && (!(ev & in) != !(ev & out)) &&
	       (!(ev & POLLRDHUP) || (ev & in)); /* (a writer's sleep is not woken by the FIN) */
}

/* A new connection whose offer is pending (early.c: connect() returned,
 * the server's answer not taken yet), polled alone: for room, ready at
 * once while the program's bytes fit in the slot; for bytes, asleep until
 * the server's reply as a blocking read's first sleep (one sleep, TCP's
 * - the offer settled at connect() slept twice: 1.30x TCP's CPU time a
 * connection for an event loop's client with 8 threads a side), within
 * the poll's time-out, then settled.  Anything else settles first.
 * Returns 1 (fd->revents set: answered), else 0 to poll as usual -
 * *timeout_ms what is left of the time-out (0 after a signal: *intr). */
static int poll_pending(struct pollfd *fd, struct sk *s, int *timeout_ms, const sigset_t *mask, int *intr)
{
	short ev = fd->events, in = POLLIN | POLLRDNORM, out = POLLOUT | POLLWRNORM;

	if (!(ev & ~out) && (ev & out) && rdv_early_room(s)) {
		fd->revents = ev;
		return 1;
	}
	if (!(ev & in) || (ev & ~(in | POLLRDHUP)) || !*timeout_ms || mask) {
		rdv_offer_settle_nb(s);
		return 0;
	}
	*intr = rdv_offer_settle_poll(s, timeout_ms);
	return 0;
}

/* ---- pending offers among other descriptors ----
 * A poll over more than one descriptor (an event loop's) that holds a
 * connection whose offer is pending (early.c) does not wait for the
 * server, as TCP's never does: the kernel polls the connection's socket
 * as it is (room at once, as the slot has it), the process's answer
 * socket joins the array - the server sends it an empty datagram once it
 * answered (SHUNT_WAIT_EPOLL, early.c rdv_offer_wake_me) - and the poll
 * sleeps at most PEND_NAP_MS at a time (another thread polling may read
 * that datagram first) and not past the offers' wait.  Then the offers
 * answered, past their wait, or whose socket shows bytes, an end or an
 * error (a plain server wrote) settle, and the poll looks again (as
 * epoll.c's pend_due does for a set).  Before, such a poll settled the
 * offer, waiting for the server's claim up to a fortieth of
 * SHUNT_ACCEPT_WAIT_MS - a server busy with another of the loop's
 * connections gave it plain (tests/behave/loop_cycle). */
#define PEND_NAP_MS 5
#define PEND_SETTLE (POLLIN | POLLRDNORM | POLLRDHUP | POLLPRI | POLLERR | POLLHUP | POLLNVAL)

static int pend_keep(const struct pollfd *p, struct sk *s)
{
	return !(p->events & ~(POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM)) && rdv_msg_fd() >= 0 &&
	       rdv_offer_wake_me(s);
}

/* The kept entries after a pass: 1 if one settled (look again). */
static int pend_look(struct pollfd *fds, nfds_t n, struct sk **kept, int msg)
{
	uint64_t now = shunt_now_ns(), due = UINT64_MAX;
	int settled = 0;

	if (msg)
		rdv_msg_pump();
	for (nfds_t i = 0; i < n; i++) {
		if (!kept[i])
			continue;
		if ((fds[i].revents & PEND_SETTLE) || rdv_offer_due(kept[i], now, &due)) {
			rdv_offer_settle_due(kept[i]);
			settled = 1;
		}
	}
	return settled;
}

/* ---- sockets in a handshake state ----
 * A socket whose in-band handshake ended by a time-out (a late message may
 * still head its stream, removed before the program's first read:
 * inband.c) or whose client's word after our ACCEPT(RDMA) is still to
 * come (HS_CONFIRM) is polled as the socket it is; what the kernel
 * reports for it is looked at first: a late message all there is taken
 * off, a CONFIRM attaches the connection, and the poll looks again - such
 * a message alone neither ends the poll with POLLIN (the program's read
 * found nothing: EAGAIN, or a blocking read that waited on) nor, once
 * the word came, does the connection stay behind the kernel's socket.
 * Until the word comes (HS_CONFIRM), a write would wait for it: room is
 * not reported - the kernel is asked for the word (POLLIN) instead - and
 * the sleep is cut into naps (another thread's call may take the word
 * off the socket), not past the word's wait (then the write ends it, and
 * room is the kernel's to report; CONFIRM_NAP_MS: shim.h). */

struct hs_ent {
	struct sk *s;
	short events; /* the program's */
};

/* Before the pass: the events the kernel is asked for; *nap_ms cut. */
static short hs_events(struct sk *s, short ev, int *nap_ms)
{
	uint64_t now = shunt_now_ns(), until = s->hs_until;
	int left;

	if (__atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_CONFIRM || now >= until)
		return ev;
	left = (int)((until - now + 999999) / 1000000);
	if (left > CONFIRM_NAP_MS)
		left = CONFIRM_NAP_MS;
	if (*nap_ms < 0 || left < *nap_ms)
		*nap_ms = left;
	return (short)((ev & ~(POLLOUT | POLLWRNORM | POLLWRBAND)) | POLLIN);
}

/* After the pass (look: it reported some): those the kernel reported for
 * settle if they can (one that changed is looked at again: no report of
 * its own), the program's events back; how many changed. */
static int hs_look(struct pollfd *fds, nfds_t n, const struct hs_ent *hs, int look)
{
	int changed = 0;

	for (nfds_t i = 0; i < n; i++) {
		if (!hs[i].s)
			continue;
		if (look && fds[i].revents && inband_settle_nb(hs[i].s, fds[i].fd)) {
			fds[i].revents = 0;
			changed++;
		}
		fds[i].events = hs[i].events;
		fds[i].revents &= (short)(hs[i].events | POLLERR | POLLHUP | POLLNVAL);
	}
	return changed;
}

static int count_ready(const struct pollfd *fds, nfds_t n)
{
	int r = 0;

	for (nfds_t i = 0; i < n; i++)
		r += fds[i].revents != 0;
	return r;
}

int shim_poll(struct pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask)
{
	struct sk *stack_sks[64], **sks = n <= 64 ? stack_sks : calloc(n, sizeof *sks);
	struct sk *stack_kept[64], **kept = n <= 64 ? stack_kept : calloc(n, sizeof *kept);
	struct hs_ent stack_hs[64], *hs = n <= 64 ? stack_hs : calloc(n, sizeof *hs);
	struct pollfd stack_ext[192], *ext = NULL;
	uint64_t deadline = timeout_ms > 0 ? shunt_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	int naccel, nkept, nhs, r, intr = 0, msg, pass_ms, settled, changed, nap_ms;

	if (!sks || !kept || !hs) {
		r = -ENOMEM;
		goto out;
	}
again:
	naccel = nkept = nhs = msg = 0;
	nap_ms = -1;
	for (nfds_t i = 0; i < n; i++) {
		struct sk *s = fds[i].fd >= 0 ? fdtab_peek(fds[i].fd) : NULL;
		kept[i] = hs[i].s = NULL;
		if (s && __builtin_expect(__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL, 0)) {
			if (n == 1 && poll_pending(&fds[0], s, &timeout_ms, mask, &intr)) {
				sk_put(s);
				r = 1;
				goto out;
			}
			if (n > 1 && pend_keep(&fds[i], s)) {
				kept[i] = s; /* polled as the socket it is */
				nkept++;
				sks[i] = NULL;
				continue;
			}
			rdv_offer_settle_nb(s); /* (settled already: nothing) */
		}
		if (s && s->kind != SK_CONN && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_NONE) {
			inband_settle_nb(s, fds[i].fd); /* (what is there already) */
			if (s->kind != SK_CONN && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_NONE) {
				hs[i] = (struct hs_ent){ s, fds[i].events }; /* polled as the socket it is */
				fds[i].events = hs_events(s, fds[i].events, &nap_ms);
				nhs++;
				sks[i] = NULL;
				continue;
			}
		}
		if (s && s->kind != SK_CONN) {
			sk_put(s);
			s = NULL;
		}
		sks[i] = s;
		naccel += s != NULL;
	}
	pass_ms = timeout_ms;
	if (nap_ms >= 0 && (pass_ms < 0 || nap_ms < remaining_ms(timeout_ms, deadline)))
		pass_ms = nap_ms; /* (the word awaited: naps) */
	if (nkept) { /* a nap, not past the offers' wait */
		uint64_t now = shunt_now_ns(), end = UINT64_MAX;
		for (nfds_t i = 0; i < n; i++)
			if (kept[i] && rdv_offer_due(kept[i], now, &end))
				end = now;
		int left = end <= now ? 0 : (int)((end - now + 999999) / 1000000);
		pass_ms = remaining_ms(timeout_ms, deadline);
		if (pass_ms < 0 || pass_ms > PEND_NAP_MS)
			pass_ms = PEND_NAP_MS;
		if (left < pass_ms)
			pass_ms = left;
	}
	if (!naccel && !nkept) {
		struct timespec ts = { pass_ms / 1000, (pass_ms % 1000) * 1000000L };
		r = real.ppoll(fds, n, pass_ms < 0 ? NULL : &ts, mask);
		r = r < 0 ? -errno : r;
	} else if (n == 1 && poll_one_fits(&fds[0], sks[0], timeout_ms, mask)) {
		cancel_hold(sks[0]);
		r = poll_one(&fds[0], sks[0], timeout_ms);
		cancel_release();
		sk_put(sks[0]);
		goto out;
	} else {
		if (!ext) /* (room for every entry accelerated: a later pass may have more) */
			ext = 2 * n + 2 <= 192 ? stack_ext : calloc(2 * n + 2, sizeof *ext);
		cancel_hold_all(sks, n); /* poll is a cancellation point (cancel.c) */
		r = ext ? poll_loop(fds, n, sks, pass_ms, mask, ext, nkept ? rdv_msg_fd() : -1, &msg) : -ENOMEM;
		cancel_release_all();
		for (nfds_t i = 0; i < n; i++)
			if (sks[i])
				sk_put(sks[i]);
	}
	settled = nkept && r >= 0 && pend_look(fds, n, kept, msg);
	changed = 0;
	if (nhs) {
		changed = hs_look(fds, n, hs, r > 0);
		if (r > 0)
			r = count_ready(fds, n);
	}
	for (nfds_t i = 0; i < n; i++) {
		if (kept[i])
			sk_put(kept[i]);
		if (hs[i].s)
			sk_put(hs[i].s);
	}
	if (r >= 0 && (nkept || changed || nap_ms >= 0)) {
		int left = remaining_ms(timeout_ms, deadline);
		/* one settled: looked at again (at once if others are ready);
		 * else, nothing ready and time left: another nap */
		if (settled || changed || (!r && timeout_ms && left)) {
			timeout_ms = r ? 0 : left;
			goto again;
		}
	}
out:
	if (intr && !r)
		r = -EINTR; /* a signal during the pending offer's sleep */
	if (ext != stack_ext)
		free(ext);
	if (sks != stack_sks)
		free(sks);
	if (kept != stack_kept)
		free(kept);
	if (hs != stack_hs)
		free(hs);
	return r;
}

/* select(): through poll when an accelerated fd is in the sets. */
int shim_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout_ms, const sigset_t *mask)
{
	struct pollfd *p = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof *p);
	int n = 0, r;

	if (!p)
		return -ENOMEM;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
				   (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	r = shim_poll(p, (nfds_t)n, timeout_ms, mask);
	if (r < 0)
		goto out;
	for (int i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL) {
			r = -EBADF;
			goto out;
		}
	if (rd) FD_ZERO(rd);
	if (wr) FD_ZERO(wr);
	if (ex) FD_ZERO(ex);
	r = 0;
	for (int i = 0; i < n; i++) {
		short re = p[i].revents;
		/* select reports errors and hang-ups as readable/writable. */
		if (rd && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, rd);
			r++;
		}
		if (wr && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, wr);
			r++;
		}
		if (ex && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, ex);
			r++;
		}
	}
out:
	free(p);
	return r;
}
