/* SPDX-License-Identifier: MIT */
/*
 * sockinfo.c - what the kernel says about an accelerated socket, made true.
 *
 * After acceleration the kernel socket carries none of the connection's
 * bytes, so its answers about them describe an idle connection.  These
 * are corrected from the rings (issue #13, item 3):
 *   TCP_INFO       tcpi_bytes_sent, _acked, _received and the data
 *                  segment counts add the ring's bytes (cursors count
 *                  from the connection's start); the rest is the kernel's
 *   SIOCOUTQ       bytes written and not yet read by the peer (shared
 *                  memory; over RDMA the peer reports its reads lazily,
 *                  so the kernel's answer stands)
 *   SIOCOUTQNSD    0: nothing waits to be sent, the ring is the wire
 *   SO_ERROR       the peer's error, once, as the kernel's (conn_take_error:
 *                  shunt's own look at the socket may have taken the
 *                  kernel's report)
 *   SO_RCVLOWAT    kept per connection (conn.c honours it in recv, poll,
 *                  epoll); capped at half the ring, as the kernel caps it
 *                  at half the largest receive buffer.  Once the peer
 *                  moved to the socket with bytes left in our ring, the
 *                  socket's own mark is what the ring lacks of it
 *                  (sockinfo_lowat_sync); getsockopt says the program's
 *   TCP_INQ        recvmsg's TCP_CM_INQ control message, as the kernel
 *                  puts it when the option is on (gRPC's reads use it):
 *                  the bytes still to read in the ring, 1 once the
 *                  stream ended with none (the kernel's hint to read the
 *                  end); the option's state is the kernel's, asked once
 *                  (a listener's is inherited) and kept at setsockopt
 *                  (in a seccomp sandbox only what setsockopt said)
 * This file includes the kernel's <linux/tcp.h> for struct tcp_info (glibc's
 * copy predates the byte counters).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include "shim.h"
#include "../base/real.h"

#define HAS(field) (len >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

/* After our own shutdown(SHUT_RD) a socket's reads say an end at once:
 * did the peer's FIN come?  The socket's state says (the kernel's TCP
 * states, include/net/tcp_states.h: CLOSE_WAIT, LAST_ACK, CLOSING,
 * TIME_WAIT and CLOSE come after it, or a reset).  In a sandbox no
 * question is asked: no. */
int sockinfo_peer_fin(int fd)
{
	enum { TIME_WAIT = 6, CLOSE = 7, CLOSE_WAIT = 8, LAST_ACK = 9, CLOSING = 11 };
	struct tcp_info ti;
	int e = errno, r;

	if (shunt_sandboxed)
		return 0;
	r = real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &(socklen_t){ sizeof ti });
	errno = e;
	if (r)
		return 0;
	switch (ti.tcpi_state) {
	case TIME_WAIT: case CLOSE: case CLOSE_WAIT: case LAST_ACK: case CLOSING:
		return 1;
	}
	return 0;
}

/* After the kernel filled *val (len bytes of it). */
static void tcp_info(struct conn *c, void *val, socklen_t len)
{
	struct tcp_info ti;
	uint64_t sent = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t acked = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	uint64_t got = __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE);

	if (len > sizeof ti)
		len = sizeof ti;
	memcpy(&ti, val, len);
	if (acked > sent || !(c->tp->flags & TP_SHARED_RINGS))
		/* a hostile peer's cursor; over RDMA what was posted is
		 * acknowledged by the reliable connection (RC), as TCP's
		 * ACK acknowledges what the peer's kernel has */
		acked = sent;
	if (HAS(tcpi_bytes_acked))
		ti.tcpi_bytes_acked += acked;
	if (HAS(tcpi_bytes_received))
		ti.tcpi_bytes_received += got;
	if (HAS(tcpi_bytes_sent))
		ti.tcpi_bytes_sent += sent;
	/* one "segment" per 64 KiB moved: programs that divide by it get a
	 * sane figure, not a division by zero */
	if (HAS(tcpi_data_segs_out))
		ti.tcpi_data_segs_out += (uint32_t)(sent >> 16) + (sent != 0);
	if (HAS(tcpi_data_segs_in))
		ti.tcpi_data_segs_in += (uint32_t)(got >> 16) + (got != 0);
	memcpy(val, &ti, len);
}

/* SIOCOUTQ / SIOCOUTQNSD: 1 and *out set if answered here (over shared
 * rings: what the peer has not read; else the kernel answers). */
int sockinfo_ioctl(struct conn *c, unsigned long req, int *out)
{
	uint64_t used;

	if (req == SIOCATMARK) {
		/* the peer's move may wait on the socket, ahead of its urgent
		 * byte, unread by anything yet (a poll that found POLLPRI at
		 * its first look does not read it): read it now */
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2 && !ring_used(&c->rx) && !move_held(c))
			conn_refresh(c);
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2 || ring_used(&c->rx) || move_held(c)) {
			/* urgent data is only ever on the socket, after a move
			 * (conn.c conn_move_for): bytes still to read before
			 * the socket's come first, so the next byte is not at
			 * the mark */
			*out = 0;
			return 1;
		}
	}
	if (!(c->tp->flags & TP_SHARED_RINGS))
		return 0;
	if (req == SIOCOUTQ) {
		used = ring_used(&c->tx);
		*out = used > INT32_MAX ? INT32_MAX : (int)used;
		return 1;
	}
	if (req == SIOCOUTQNSD) {
		*out = 0;
		return 1;
	}
	return 0;
}

/* After the kernel answered SO_ERROR (*val, an int). */
static void so_error(struct conn *c, void *val)
{
	int told = __atomic_load_n(&c->reset_told, __ATOMIC_ACQUIRE), e, t;

	memcpy(&e, val, sizeof e);
	t = conn_take_error(c);
	if (!e && t)
		memcpy(val, &t, sizeof t);
	else if (e && told && e == c->peer_err)
		memset(val, 0, sizeof e); /* the same reset, told already: the
					     transport's word came before the RST */
}

/* After the kernel took SO_RCVLOWAT. */
void sockinfo_rcvlowat(struct conn *c, const void *val, socklen_t len)
{
	int v;

	if (!opt_int(val, len, &v))
		return;
	if (v < 1)
		v = 1;
	if ((uint32_t)v > c->rx.size / 2)
		v = (int)(c->rx.size / 2);
	__atomic_store_n(&c->rcvlowat, v, __ATOMIC_RELAXED);
	__atomic_store_n(&c->mv.lowat_set, 0, __ATOMIC_RELEASE); /* the kernel has the program's now */
	sockinfo_lowat_sync(c);
}

/* After the kernel answered SO_RCVLOWAT: the program's own mark, while
 * the socket's counts only what the ring lacks of it. */
static void rcvlowat_get(struct conn *c, void *val, socklen_t len)
{
	if (len >= sizeof(int) && __atomic_load_n(&c->mv.lowat_set, __ATOMIC_ACQUIRE))
		memcpy(val, &c->mv.lowat_app, sizeof(int));
}

/* The getsockopt answers corrected here. */
int sockinfo_corrects(int level, int name)
{
	return (level == IPPROTO_TCP && name == TCP_INFO) ||
	       (level == SOL_SOCKET && (name == SO_ERROR || name == SO_RCVLOWAT));
}

/* After the kernel answered getsockopt (len bytes of *val). */
void sockinfo_getsockopt(struct conn *c, int level, int name, void *val, socklen_t len)
{
	if (level == IPPROTO_TCP)
		tcp_info(c, val, len);
	else if (name == SO_RCVLOWAT)
		rcvlowat_get(c, val, len);
	else if (len >= sizeof(int))
		so_error(c, val);
}

/* The socket's mark a moved connection needs now: 0 for the program's
 * own, else what the bytes left before the socket's (the ring's, what a
 * move held) lack of it - at least 1. */
static int lowat_wanted(struct conn *c)
{
	int m = __atomic_load_n(&c->rcvlowat, __ATOMIC_RELAXED);
	uint64_t r;

	if (m <= 1 || __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2)
		return 0;
	r = ring_used(&c->rx) + move_held(c);
	if (!r)
		return 0;
	return r < (uint64_t)m ? m - (int)r : 1;
}

/* A connection whose peer moved to the socket with bytes left in our
 * ring reads those first, then the socket's: TCP's SO_RCVLOWAT counts
 * them together, the kernel's mark the socket's alone - a poll, an epoll
 * sleeper or a blocking peek waited past the program's mark.  The
 * socket's mark is set to what the ring lacks of the program's, and given
 * back once the ring is read; called before the socket's readiness or a
 * blocking read of it counts (conn_moved_events, conn_recvmsg).  Not in a
 * seccomp sandbox (system calls the program did not make: the kernel's
 * mark stands, a poll may wait longer). */
void sockinfo_lowat_sync(struct conn *c)
{
	int want, set, ok;
	socklen_t l = sizeof c->mv.lowat_app;

	if (shunt_sandboxed)
		return;
	while ((want = lowat_wanted(c)) != (set = __atomic_load_n(&c->mv.lowat_set, __ATOMIC_ACQUIRE))) {
		if (__atomic_exchange_n(&c->mv.lowat_busy, 1, __ATOMIC_ACQUIRE))
			return; /* the thread at it looks again when done */
		ok = (!want || set || !real.getsockopt(c->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, &c->mv.lowat_app, &l)) &&
		     !real.setsockopt(c->tcp_fd, SOL_SOCKET, SO_RCVLOWAT, want ? &want : &c->mv.lowat_app,
				      sizeof want);
		if (ok)
			__atomic_store_n(&c->mv.lowat_set, want, __ATOMIC_RELEASE);
		__atomic_store_n(&c->mv.lowat_busy, 0, __ATOMIC_RELEASE);
		if (!ok)
			return;
	}
}

/* After the kernel took TCP_INQ. */
void sockinfo_inq(struct conn *c, const void *val, socklen_t len)
{
	int v;

	if (!opt_int(val, len, &v))
		return;
	__atomic_store_n(&c->inq, v ? 2 : 1, __ATOMIC_RELAXED);
}

/* A read off the rings that returned (bytes, or the end): its TCP_CM_INQ
 * message in ctl (cap bytes of control buffer), if the option is on. */
void sockinfo_inq_cmsg(struct conn *c, struct msghdr *ctl, size_t cap, int ended)
{
	int on = __atomic_load_n(&c->inq, __ATOMIC_RELAXED), inq;
	socklen_t l = sizeof inq;
	struct cmsghdr *h;

	if (!on) { /* the kernel's word, once (set on a listener: inherited);
		    * in a seccomp sandbox no call of ours: off unless set here */
		on = shunt_sandboxed || real.getsockopt(c->tcp_fd, IPPROTO_TCP, TCP_INQ, &inq, &l) || !inq ? 1 : 2;
		__atomic_store_n(&c->inq, on, __ATOMIC_RELAXED);
	}
	if (on != 2)
		return;
	if (cap < CMSG_SPACE(sizeof inq)) {
		ctl->msg_flags |= MSG_CTRUNC; /* as put_cmsg says it */
		return;
	}
	inq = (int)(ring_used(&c->rx) + move_held(c));
	if (!inq && ended)
		inq = 1;
	h = (struct cmsghdr *)ctl->msg_control;
	h->cmsg_level = IPPROTO_TCP;
	h->cmsg_type = TCP_CM_INQ;
	h->cmsg_len = CMSG_LEN(sizeof inq);
	memcpy(CMSG_DATA(h), &inq, sizeof inq);
	ctl->msg_controllen = CMSG_SPACE(sizeof inq);
}
