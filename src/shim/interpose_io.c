/* SPDX-License-Identifier: MIT */
/*
 * interpose_io.c - the wrappers that move data: read, write, send, recv and
 * their vectors, sendfile, splice, sendmmsg, recvmmsg.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "interpose.h"
#include "../base/real.h"
#include "shunt/shunt.h"



/* ---- data ---- */

/* A plain socket whose handshake ended by a timeout may have a late
 * handshake message at the head of its stream (inband.c): settled before
 * the application's call, whose error (a blocking wait interrupted, or
 * timed out) it returns.  A forked child's first byte on an inherited
 * plain socket lists it under the child (stats.c), as an accelerated
 * connection's does. */
static ssize_t settle(struct sk *s, int fd, int writing, int flags, int *handled)
{
	ssize_t r = 0;

	stats_adopt_maybe(); /* a forked child serving a plain connection: listed */
	if (__atomic_load_n(&s->hs, __ATOMIC_RELAXED))
		r = inband_settle(s, fd, writing, s->nonblock || (flags & MSG_DONTWAIT));
	sk_put(s);
	*handled = r < 0;
	return edge(r);
}

/* A server's socket whose client has not said whether it confirmed our
 * ACCEPT(RDMA) (inband.c HS_CONFIRM): settled before the call, which the
 * connection may then serve - a read when the client's bytes come, a
 * write once the word is there.  <0: the call's error. */
static int confirm_first(struct sk *s, int fd, int writing, int flags)
{
	if (__builtin_expect(__atomic_load_n(&s->hs, __ATOMIC_RELAXED) != HS_CONFIRM, 1))
		return 0;
	return inband_confirm(s, fd, writing, s->nonblock || (flags & MSG_DONTWAIT));
}

/* The same by descriptor (splice, sendmmsg, recvmmsg: before they look
 * at what it is). */
static int confirm_fd(int fd, int writing, int flags)
{
	struct sk *s = fdtab_peek(fd);
	int r = s ? confirm_first(s, fd, writing, flags) : 0;

	sk_put(s);
	return r;
}

static ssize_t accel_send(int fd, const struct iovec *iov, int cnt, int flags, int *handled,
			  const struct msghdr *ctl)
{
	struct sk *s = fdtab_peek(fd);
	ssize_t r;

	*handled = 0;
	if (!s)
		return 0;
	if (__builtin_expect(__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL, 0) &&
	    (r = rdv_early_send(s, iov, cnt, flags, ctl)) != -EAGAIN) {
		*handled = 1;
		sk_put(s);
		return edge(r);
	}
	if (s->kind != SK_CONN && (r = confirm_first(s, fd, 1, flags)) < 0) {
		*handled = 1;
		sk_put(s);
		return edge(r);
	}
	if (s->kind != SK_CONN)
		return settle(s, fd, 1, flags, handled);
	*handled = 1;
	cancel_hold(s);
	r = conn_sendmsg(s, iov, cnt, flags, ctl);
	cancel_release();
	sk_put(s);
	return edge(r);
}

/* A read() of no bytes: the kernel's file layer answers it with 0 before
 * the socket sees it (recv() waits for something to read: conn.c). */
static int file_read_empty(int file, const struct iovec *iov, int cnt)
{
	return file && cnt >= 0 && cnt <= IOV_MAX && (iov || !cnt) && !iov_total(iov, cnt);
}

/* file: read(), readv(), preadv2() (file_read_empty) */
static ssize_t accel_recv(int fd, const struct iovec *iov, int cnt, int flags, int *handled,
			  struct msghdr *ctl, int file)
{
	struct sk *s;
	ssize_t r;
	int empty, intr = 0;

	*handled = 0;
	if (flags & MSG_ERRQUEUE) /* the kernel's (zerocopy completions, timestamps): never ring bytes */
		return 0;
	if (!(s = fdtab_peek(fd)))
		return 0;
	/* a pending offer (early.c): a read that will wait for the reply
	 * anyway is woken by it, not first by the answer (not with a receive
	 * time-out to keep: the wait before the connection exists is not
	 * counted in it) */
	if (__builtin_expect(__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL, 0)) {
		int nb = s->nonblock || (flags & MSG_DONTWAIT);
		if (!nb && !file_read_empty(file, iov, cnt) &&
		    !__atomic_load_n(&conn_timeouts_maybe, __ATOMIC_RELAXED)) {
			intr = rdv_offer_settle_read(s, UINT64_MAX);
		} else if (nb && !file_read_empty(file, iov, cnt) && rdv_offer_unclaimed(s)) {
			*handled = 1;
			sk_put(s);
			return edge(-EAGAIN);
		} else if (nb) {
			rdv_offer_settle_due(s);
		} else {
			rdv_offer_settle(s);
		}
	}
	empty = file_read_empty(file, iov, cnt);
	if (s->kind != SK_CONN && (empty || (flags & MSG_OOB))) {
		/* the kernel's 0, never a wait for the handshake - nor for
		 * urgent data, which is out of the stream the handshake's
		 * messages head: none is the kernel's EINVAL (a server's
		 * recv(MSG_OOB | MSG_DONTWAIT) before the client's CONFIRM said
		 * EAGAIN) */
		sk_put(s);
		return 0;
	}
	if (s->kind != SK_CONN && (r = confirm_first(s, fd, 0, flags)) < 0) {
		*handled = 1;
		sk_put(s);
		return edge(r);
	}
	if (s->kind != SK_CONN)
		return settle(s, fd, 0, flags, handled);
	*handled = 1;
	cancel_hold(s);
	r = empty ? 0 : intr && conn_read_interrupted(s->conn) ? -EINTR : conn_recvmsg(s, iov, cnt, flags, ctl);
	cancel_release();
	sk_put(s);
	return edge(r);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct iovec iov = { buf, n };
	int h;
	ssize_t r;

	if (n > (size_t)SSIZE_MAX) /* the kernel's EFAULT, before any byte (a vector's: EINVAL) */
		return R(read)(fd, buf, n);
	r = accel_recv(fd, &iov, 1, 0, &h, NULL, 1);

	return h ? r : R(read)(fd, buf, n);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort(); /* what glibc's checked variant does */
	return read(fd, buf, n);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	int h;
	ssize_t r = accel_recv(fd, iov, cnt, 0, &h, NULL, 1);

	return h ? r : R(readv)(fd, iov, cnt);
}

/* preadv2/pwritev2 at offset -1 are readv/writev at the file position -
 * a socket's stream (RWF_NOWAIT: without waiting); another offset is the
 * kernel's ESPIPE, a flag it does not know its EOPNOTSUPP (both from the
 * socket, before any byte moves).  -1: not ours to serve. */
static int rwf_msg_flags(off_t off, int rwf)
{
	if (off != -1 || (rwf & ~(RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND)))
		return -1;
	return rwf & RWF_NOWAIT ? MSG_DONTWAIT : 0;
}

static ssize_t rw2(int wr, int fd, const struct iovec *iov, int cnt, off_t off, int rwf,
		   ssize_t (*next)(int, const struct iovec *, int, off_t, int))
{
	int f = rwf_msg_flags(off, rwf), h = 0;
	ssize_t r = 0;

	if (f >= 0)
		r = wr ? accel_send(fd, iov, cnt, f, &h, NULL) : accel_recv(fd, iov, cnt, f, &h, NULL, 1);
	if (h)
		return r;
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	return next(fd, iov, cnt, off, rwf);
}

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	return rw2(0, fd, iov, cnt, off, rwf, R(preadv2));
}

EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	return rw2(0, fd, iov, cnt, off, rwf, R(preadv64v2) ? R(preadv64v2) : R(preadv2));
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	return rw2(1, fd, iov, cnt, off, rwf, R(pwritev2));
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	return rw2(1, fd, iov, cnt, off, rwf, R(pwritev64v2) ? R(pwritev64v2) : R(pwritev2));
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct iovec iov = { buf, n };
	int h;
	ssize_t r = accel_recv(fd, &iov, 1, flags, &h, NULL, 0);

	return h ? r : R(recv)(fd, buf, n, flags);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	struct iovec iov = { buf, n };
	int h;
	ssize_t r = accel_recv(fd, &iov, 1, flags, &h, NULL, 0);

	if (!h)
		return R(recvfrom)(fd, buf, n, flags, a, al);
	if (r >= 0 && a && al)
		*al = 0; /* TCP reports no source address */
	return r;
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			      struct sockaddr *a, socklen_t *al)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, a, al);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct msghdr ctl;
	int h;
	ssize_t r;

	if (!m || m->msg_iovlen > IOV_MAX) /* the kernel's EFAULT, EMSGSIZE: before any byte */
		return R(recvmsg)(fd, m, flags);
	ctl = *m; /* its control buffer, for bytes read off the socket */
	r = accel_recv(fd, m->msg_iov, (int)m->msg_iovlen, flags, &h, &ctl, 0);
	if (!h)
		return R(recvmsg)(fd, m, flags);
	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_controllen = ctl.msg_controllen; /* none from the rings */
		m->msg_flags = ctl.msg_flags;
	}
	return r;
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r;

	if (n > (size_t)SSIZE_MAX) /* as read() */
		return R(write)(fd, buf, n);
	r = accel_send(fd, &iov, 1, 0, &h, NULL);

	return h ? r : (r = ksock_send(fd, &iov, 1)) ? edge(r) : R(write)(fd, buf, n);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int h;
	ssize_t r = accel_send(fd, iov, cnt, 0, &h, NULL);

	return h ? r : (r = ksock_send(fd, iov, cnt)) ? edge(r) : R(writev)(fd, iov, cnt);
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r = accel_send(fd, &iov, 1, flags, &h, NULL);

	return h ? r : (r = ksock_send(fd, &iov, 1)) ? edge(r) : R(send)(fd, buf, n, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
		      socklen_t al)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r = accel_send(fd, &iov, 1, flags, &h, NULL);

	/* A connected TCP socket ignores the address, as the kernel does. */
	return h ? r : (r = ksock_send(fd, &iov, 1)) ? edge(r) : R(sendto)(fd, buf, n, flags, a, al);
}

/* An accelerated connection passed to another process (SCM_RIGHTS) must
 * arrive there as a plain TCP socket whose stream goes on at the exact
 * byte: both halves move to the socket first (move.c).  One that cannot
 * move (a sandbox, a peer passing it at the same moment)
 * is named in a warning; other processes holding one follow (move.c). */
static void pass_moves(const struct msghdr *m)
{
	static int warned;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int pfd, r;
			struct sk *s;
			memcpy(&pfd, CMSG_DATA(c) + i * sizeof(int), sizeof pfd);
			(void)confirm_fd(pfd, 1, 0); /* the receiver's first bytes are the client's */
			if (!(s = get_kind(pfd, SK_CONN)))
				continue;
			r = move_pass_wait(s, SHUNT_R_FD_PASSED); /* a move of the peer's ends first */
			sk_put(s);
			if (r && !warned) {
				warned = 1;
				shunt_warn("fd %d, an accelerated connection, is passed to another process "
					   "(SCM_RIGHTS) but could not move to TCP first (%s): the receiver "
					   "will not see its data; keep this service plain (SHUNT_PORTS, "
					   "SHUNT_DISABLE: docs/architecture.md)", pfd, strerror(-r));
			}
		}
	}
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	int h;
	ssize_t r;

	if (!m || m->msg_iovlen > IOV_MAX) /* the kernel's EFAULT, EMSGSIZE: before any byte */
		return R(sendmsg)(fd, m, flags);
	r = accel_send(fd, m->msg_iov, (int)m->msg_iovlen, flags, &h, m);

	if (h)
		return r;
	if (m->msg_controllen && m->msg_control)
		pass_moves(m);
	if ((r = ksock_send(fd, m->msg_iov, (int)m->msg_iovlen)))
		return edge(r);
	return R(sendmsg)(fd, m, flags);
}

/* sendfile to an accelerated socket: read the file, write the ring.  No
 * byte is taken from the file that the ring did not take: a non-blocking
 * socket reads no more than its room, and without an offset the file's
 * position is given back what was read and not sent (before, a send that
 * said EAGAIN or failed at the call's first chunk kept the file's
 * position past it, and those bytes never reached the peer: Ruby's
 * IO.copy_stream lost 64 KiB each time the ring was full -
 * tests/behave/sendfile_nb). */
static ssize_t accel_sendfile(struct sk *s, int in, off_t *off, size_t count)
{
	char buf[65536];
	size_t total = 0;
	off_t pos = off ? *off : 0;
	int nonblock = conn_nonblock(s, 0);

	while (total < count) {
		size_t want = count - total < sizeof buf ? count - total : sizeof buf;
		ssize_t n, w;
		struct iovec iov = { buf, 0 };
		if (nonblock) {
			size_t room = conn_send_room(s->conn);
			if (!room && !total)
				return -EAGAIN;
			if (!room)
				break;
			if (want > room)
				want = room;
		}
		n = off ? pread(in, buf, want, pos) : R(read)(in, buf, want);
		if (n <= 0) {
			if (n < 0 && !total)
				return -errno;
			break;
		}
		iov.iov_len = (size_t)n;
		w = conn_send(s, &iov, 1, 0);
		/* Give back what the ring did not take. */
		if (!off && (w < 0 ? 0 : w) < n)
			lseek(in, (w < 0 ? 0 : w) - n, SEEK_CUR);
		if (w < 0 && !total)
			return w;
		if (w <= 0)
			break;
		total += (size_t)w;
		pos += w;
		if (w < n)
			break;
	}
	if (off)
		*off = pos;
	return (ssize_t)total;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct sk *s = fdtab_get(out);
	ssize_t r;
	int h;

	if (s && s->kind != SK_CONN && (r = confirm_first(s, out, 1, 0)) < 0) {
		sk_put(s);
		return edge(r);
	}
	if (s && s->kind != SK_CONN) {
		r = settle(s, out, 1, 0, &h);
		s = NULL;
		if (h)
			return r;
	}
	if (!s)
		return R(sendfile)(out, in, off, count);
	cancel_hold(s);
	r = accel_sendfile(s, in, off, count);
	cancel_release();
	sk_put(s);
	return edge(r);
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

/* A plain socket's late handshake message is settled first, as for send
 * and recv (settle() puts the reference); 1 if that call's error is the
 * answer (in *r). */
static int settled_plain(int fd, int writing, int flags, ssize_t *r)
{
	struct sk *s = fdtab_get(fd);
	int h = 0;

	if (s && s->kind != SK_CONN)
		*r = settle(s, fd, writing, flags, &h);
	else if (s)
		sk_put(s);
	return h;
}

/* splice() moving bytes to or from an accelerated socket: splice.c */
EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	int h;
	ssize_t r = confirm_fd(in, 0, (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0);

	if (r < 0 || (r = confirm_fd(out, 1, (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0)) < 0)
		return edge(r);
	r = shim_splice(in, off_in, out, off_out, len, flags, &h);
	if (h)
		return edge(r);
	if (settled_plain(in, 0, 0, &r) || settled_plain(out, 1, 0, &r))
		return r;
	return R(splice)(in, off_in, out, off_out, len, flags);
}

/* sendmmsg/recvmmsg on an accelerated socket: one sendmsg/recvmsg per
 * message, as the kernel loops; the count of messages done, or the first
 * one's error. */
EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	ssize_t r0 = confirm_fd(fd, 1, flags);
	struct sk *s = r0 < 0 ? NULL : v || !n ? get_kind(fd, SK_CONN) : NULL; /* none: the kernel's EFAULT */
	unsigned i;

	if (r0 < 0)
		return (int)edge(r0);
	if (!s) {
		if (settled_plain(fd, 1, flags, &r0))
			return (int)r0;
		for (i = 0; v && i < n && i < UIO_MAXIOV; i++) {
			ssize_t r = ksock_send(fd, v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen);
			if (r) { /* (a socket for the kernel that could not move) */
				if (!i)
					return (int)edge(r);
				n = i; /* the ones before go */
				break;
			}
			if (v[i].msg_hdr.msg_controllen && v[i].msg_hdr.msg_control)
				pass_moves(&v[i].msg_hdr);
		}
		return R(sendmmsg)(fd, v, n, flags);
	}
	cancel_hold(s);
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		ssize_t r = conn_sendmsg(s, m->msg_iov, (int)m->msg_iovlen, flags, m);
		if (r < 0) {
			if (!i) {
				cancel_release();
				sk_put(s);
				return (int)edge(r);
			}
			break;
		}
		v[i].msg_len = (unsigned)r;
		if ((size_t)r < iov_total(m->msg_iov, (int)m->msg_iovlen)) {
			i++; /* short: the next would wait or fail */
			break;
		}
	}
	cancel_release();
	sk_put(s);
	return (int)i;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *tmo)
{
	ssize_t r0 = flags & MSG_ERRQUEUE ? 0 : confirm_fd(fd, 0, flags);
	struct sk *s = r0 < 0 || flags & MSG_ERRQUEUE || (!v && n) ? NULL : get_kind(fd, SK_CONN);
	uint64_t end = tmo ? shunt_now_ns() + (uint64_t)tmo->tv_sec * 1000000000ull + (uint64_t)tmo->tv_nsec : 0;
	unsigned i;

	if (r0 < 0)
		return (int)edge(r0);
	if (!s)
		return settled_plain(fd, 0, flags, &r0) ? (int)r0 : R(recvmmsg)(fd, v, n, flags, tmo);
	cancel_hold(s);
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		int f = flags & ~MSG_WAITFORONE;
		ssize_t r;
		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		r = conn_recv(s, m->msg_iov, (int)m->msg_iovlen, f);
		if (r < 0) {
			if (!i) {
				cancel_release();
				sk_put(s);
				return (int)edge(r);
			}
			break; /* the kernel keeps this error for the next call; so does the ring */
		}
		v[i].msg_len = (unsigned)r;
		m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = 0;
		if (tmo && shunt_now_ns() >= end) {
			i++;
			break;
		}
	}
	cancel_release();
	sk_put(s);
	return (int)i;
}
