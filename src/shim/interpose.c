/* SPDX-License-Identifier: MIT */
/*
 * interpose.c - the exported libc symbols: the edge of the shim.
 *
 * Every wrapper looks the fd up; fds shunt does not manage go straight to
 * libc, unchanged.  Internal code returns 0/-errno and errno is set here,
 * once (musl's __syscall_ret).  On success errno is left as the caller had it.
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
#include "shim.h"
#include "../base/real.h"
#include "shunt/shunt.h"


static long edge(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* A managed socket in the given kind, with a reference, or NULL. */
static struct sk *get_kind(int fd, int kind)
{
	struct sk *s = fdtab_get(fd);

	if (s && s->kind != kind) {
		sk_put(s);
		return NULL;
	}
	return s;
}

static int is_tcp(int domain, int type, int proto)
{
	return (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	       (proto == 0 || proto == IPPROTO_TCP);
}

/* A TCP socket this process did not create under shunt (inherited). */
static int probe_tcp(int fd, int *domain)
{
	__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED); /* its options are unknown */
	int v = 0, t = 0, p = 0;
	socklen_t l = sizeof v;
	int e = errno, ok;

	ok = !R(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) &&
	     !R(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &t, &(socklen_t){ sizeof t }) &&
	     !R(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &p, &(socklen_t){ sizeof p }) &&
	     is_tcp(v, t, p);
	errno = e;
	*domain = v;
	return ok;
}

/* ---- socket lifecycle ---- */

EXPORT int socket(int domain, int type, int protocol)
{
	int fd = R(socket)(domain, type, protocol);
	struct sk *s;

	AGAIN_IF_EMFILE(fd, R(socket)(domain, type, protocol));
	if (fd < 0 || !shunt_active || !is_tcp(domain, type, protocol))
		return fd;
	s = sk_new(SK_TCP, domain);
	if (s) {
		s->nonblock = !!(type & SOCK_NONBLOCK);
		fdtab_set(fd, s);
	}
	return fd;
}

/* The program's other calls that make descriptors: only retried (shunt
 * calls the real ones itself, never these: a give-back from inside shunt,
 * with one of its locks held, could wait on that lock). */
static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, unsigned) : 0;
}

/* The mode argument, there only when the flags need one. */
#define OPEN_MODE(flags, m)                   \
	do {                                  \
		va_list ap_;                  \
		va_start(ap_, flags);         \
		(m) = open_mode(flags, ap_);  \
		va_end(ap_);                  \
	} while (0)

/* open() and its siblings: fn (path only) or fn_at (dirfd, path). */
static int open_any(int (*fn)(const char *, int, ...), int (*fn_at)(int, const char *, int, ...),
		    int dirfd, const char *path, int flags, mode_t m)
{
	int fd = fn ? fn(path, flags, m) : fn_at(dirfd, path, flags, m);

	AGAIN_IF_EMFILE(fd, fn ? fn(path, flags, m) : fn_at(dirfd, path, flags, m));
	return fd;
}

EXPORT int open(const char *path, int flags, ...)
{
	mode_t m;

	OPEN_MODE(flags, m);
	return open_any(R(open), NULL, -1, path, flags, m);
}

EXPORT int open64(const char *path, int flags, ...)
{
	mode_t m;

	OPEN_MODE(flags, m);
	return open_any(R(open64), NULL, -1, path, flags, m);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t m;

	OPEN_MODE(flags, m);
	return open_any(NULL, R(openat), dirfd, path, flags, m);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t m;

	OPEN_MODE(flags, m);
	return open_any(NULL, R(openat64), dirfd, path, flags, m);
}

EXPORT int pipe(int fds[2])
{
	int r = R(pipe)(fds);

	AGAIN_IF_EMFILE(r, R(pipe)(fds));
	return r;
}

EXPORT int pipe2(int fds[2], int flags)
{
	int r = R(pipe2)(fds, flags);

	AGAIN_IF_EMFILE(r, R(pipe2)(fds, flags));
	return r;
}

EXPORT int socketpair(int domain, int type, int protocol, int fds[2])
{
	int r = R(socketpair)(domain, type, protocol, fds);

	AGAIN_IF_EMFILE(r, R(socketpair)(domain, type, protocol, fds));
	return r;
}

EXPORT int eventfd(unsigned int count, int flags)
{
	int fd = R(eventfd)(count, flags);

	AGAIN_IF_EMFILE(fd, R(eventfd)(count, flags));
	return fd;
}

EXPORT int timerfd_create(int clockid, int flags)
{
	int fd = R(timerfd_create)(clockid, flags);

	AGAIN_IF_EMFILE(fd, R(timerfd_create)(clockid, flags));
	return fd;
}

EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	int r = R(signalfd)(fd, mask, flags);

	AGAIN_IF_EMFILE(r, R(signalfd)(fd, mask, flags)); /* fd -1: a new one */
	return r;
}

EXPORT int inotify_init(void)
{
	int fd = R(inotify_init)();

	AGAIN_IF_EMFILE(fd, R(inotify_init)());
	return fd;
}

EXPORT int inotify_init1(int flags)
{
	int fd = R(inotify_init1)(flags);

	AGAIN_IF_EMFILE(fd, R(inotify_init1)(flags));
	return fd;
}

EXPORT int memfd_create(const char *name, unsigned int flags)
{
	int fd = R(memfd_create)(name, flags);

	AGAIN_IF_EMFILE(fd, R(memfd_create)(name, flags));
	return fd;
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sk *s = get_kind(fd, SK_TCP);
	int e = errno, r;

	if (!s || s->is_client || s->reason == SHUNT_R_UNSUPPORTED || !addr) {
		if (s)
			sk_put(s);
		return R(connect)(fd, addr, len);
	}
	r = rdv_connect(fd, s, addr, len);
	if (r == 0 || r == -EINPROGRESS)
		stats_update(s, fd);
	if (s->kind == SK_CONN)
		shunt_log("connect fd %d: accelerated (%s)", fd, s->conn->tp->name);
	else
		shunt_log("connect fd %d: tcp, %s", fd, shunt_reason_str((unsigned)s->reason));
	sk_put(s);
	errno = e;
	return (int)edge(r);
}

EXPORT int listen(int fd, int backlog)
{
	struct sk *s = get_kind(fd, SK_TCP);
	int r, e = errno, domain;

	/* Before listen(): the agent's program configures the listener then. */
	int marked = s && shunt_active && !shunt_off_reason && !agent_mark_listener(fd);
	if (s)
		sk_put(s);
	errno = e;
	r = R(listen)(fd, backlog);
	e = errno;
	if (r || !shunt_active)
		return r;
	s = fdtab_get(fd);
	if (!s && probe_tcp(fd, &domain) && (s = sk_new(SK_TCP, domain)))
		fdtab_set(fd, sk_ref(s));
	if (s && (s->kind == SK_TCP || s->kind == SK_LISTEN)) {
		s->ag_listen |= marked;
		rdv_listen(fd, s);
		stats_update(s, fd);
	}
	if (s)
		sk_put(s);
	errno = e;
	return r;
}

/* The listener of an accept(): known, or inherited (systemd, a parent). */
static struct sk *listener_of(int fd)
{
	struct sk *s = fdtab_get(fd);
	int domain;

	if (s || !shunt_active || !probe_tcp(fd, &domain))
		return s;
	s = sk_new(SK_TCP, domain);
	if (!s)
		return NULL;
	fdtab_set(fd, sk_ref(s));
	rdv_listen(fd, s);
	stats_update(s, fd);
	return s;
}

static int do_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	/* A program that does not ask for the peer's address (addr NULL)
	 * gets it asked for anyway, into our buffer: the set-up needs it,
	 * and a getpeername later costs a system call.  One that asks is
	 * left to the kernel (a short or bad buffer is its to judge). */
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	int own = !addr && shunt_active;
	struct sockaddr *a = own ? (struct sockaddr *)&peer : addr;
	socklen_t *al = own ? &plen : len;
	int e = errno, nfd = R(accept4)(fd, a, al, flags);
	struct sk *ls, *s;

	AGAIN_IF_EMFILE(nfd, R(accept4)(fd, a, al, flags));
	if (nfd < 0 || !shunt_active)
		return nfd;
	ls = listener_of(fd);
	if (!ls)
		return nfd;
	s = sk_new(SK_TCP, ls->domain);
	if (!s) {
		sk_put(ls);
		return nfd;
	}
	s->nonblock = !!(flags & SOCK_NONBLOCK);
	rdv_accept(ls, nfd, s, own && plen <= sizeof peer ? (struct sockaddr *)&peer : NULL);
	sk_put(ls);
	stats_update(s, nfd);
	shunt_log("accept fd %d: %s, %s", nfd, s->kind != SK_CONN ? "tcp" : s->conn->tp->name,
		  shunt_reason_str((unsigned)s->reason));
	fdtab_set(nfd, s);
	errno = e;
	return nfd;
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return do_accept(fd, addr, len, 0);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return do_accept(fd, addr, len, flags);
}

EXPORT int close(int fd)
{
	struct sk *s;
	int r;

	if (fdtab_is_internal(fd)) {
		/* One of shunt's own descriptors: the application never had it. */
		errno = EBADF;
		return -1;
	}
	s = fdtab_take(fd);
	if (s && s->kind == SK_CONN)
		ep_forget_fd(fd);
	r = R(close)(fd);
	if (s)
		sk_put(s);
	return r;
}

static long sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	long r = R(syscall)(SYS_close_range, first, last, flags);

	return r < 0 ? -errno : r;
}

/* close_range and closefrom (sshd's, many daemons' first act) close the
 * program's descriptors, never shunt's own (fdtab.c). */
EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	return (int)edge(fd_close_range(first, last, (unsigned)flags, sys_close_range));
}

EXPORT void closefrom(int lowfd)
{
	long max;

	if (lowfd < 0)
		lowfd = 0;
	if (!fd_close_range((unsigned)lowfd, ~0u, 0, sys_close_range))
		return;
	/* no close_range in this kernel: one close() per number, as glibc's
	 * fallback (which reads /proc/self/fd) would */
	max = sysconf(_SC_OPEN_MAX);
	for (long fd = lowfd; fd < max; fd++)
		close((int)fd);
}

EXPORT int shutdown(int fd, int how)
{
	struct sk *s = get_kind(fd, SK_CONN);
	long r;

	if (!s)
		return R(shutdown)(fd, how);
	r = conn_shutdown(s, how);
	sk_put(s);
	return (int)edge(r);
}

/* ---- duplication: dups share the open file description, and so the sk ---- */

static int after_dup(int oldfd, int newfd)
{
	struct sk *s;

	struct sk *old;

	if (newfd < 0)
		return newfd;
	old = fdtab_take(newfd); /* dup2 over a managed fd closed it */
	if (old) {
		ep_forget_fd(newfd);
		sk_put(old);
	}
	s = fdtab_get(oldfd);
	if (s)
		fdtab_set(newfd, s);
	return newfd;
}

EXPORT int dup(int fd)
{
	int r = R(dup)(fd);

	AGAIN_IF_EMFILE(r, R(dup)(fd));
	return after_dup(fd, r);
}

EXPORT int dup2(int fd, int nfd)
{
	if (fd == nfd)
		return R(dup2)(fd, nfd);
	return after_dup(fd, R(dup2)(fd, nfd));
}

EXPORT int dup3(int fd, int nfd, int flags)
{
	return after_dup(fd, R(dup3)(fd, nfd, flags));
}

static int do_fcntl(int fd, int cmd, void *arg)
{
	int r = R(fcntl)(fd, cmd, arg);
	struct sk *s;

	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		AGAIN_IF_EMFILE(r, R(fcntl)(fd, cmd, arg));
	if (r < 0)
		return r;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return after_dup(fd, r);
	if (cmd == F_SETFL && (s = fdtab_get(fd))) {
		s->nonblock = !!((long)arg & O_NONBLOCK);
		sk_put(s);
	}
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	struct sk *s;
	int r;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	s = fdtab_get(fd);
	if (!s)
		return R(ioctl)(fd, req, arg);
	if (req == FIONREAD && s->kind == SK_CONN) {
		size_t n = conn_nread(s->conn);
		*(int *)arg = n > INT_MAX ? INT_MAX : (int)n;
		sk_put(s);
		return 0;
	}
	if (s->kind == SK_CONN && sockinfo_ioctl(s->conn, req, arg)) {
		sk_put(s);
		return 0;
	}
	r = R(ioctl)(fd, req, arg);
	if (!r && req == FIONBIO)
		s->nonblock = !!*(int *)arg;
	sk_put(s);
	return r;
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct sk *s;
	struct shunt_info info = { 0 };

	if (level == IPPROTO_TCP && name == TCP_INFO && val && len) {
		int r = R(getsockopt)(fd, level, name, val, len);
		if (!r && (s = get_kind(fd, SK_CONN))) {
			sockinfo_tcp_info(s->conn, val, *len);
			sk_put(s);
		}
		return r;
	}
	if (level != SOL_SHUNT)
		return R(getsockopt)(fd, level, name, val, len);
	s = fdtab_get(fd);
	if (!s || name != SHUNT_INFO || !len || *len < sizeof info) {
		if (s)
			sk_put(s);
		errno = s ? EINVAL : ENOPROTOOPT;
		return -1;
	}
	{
		unsigned mode, reason;
		sk_describe(s, &mode, &reason);
		info.mode = mode;
		info.reason = reason;
	}
	if (s->stat) {
		info.tx = s->stat->tx;
		info.rx = s->stat->rx;
	}
	sk_put(s);
	memcpy(val, &info, sizeof info);
	*len = sizeof info;
	return 0;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int r = R(setsockopt)(fd, level, name, val, len);
	struct sk *s;

	/* TCP Fast Open sends data in the SYN, before any rendezvous (SMC: same). */
	if (!r && level == IPPROTO_TCP && (name == TCP_FASTOPEN_CONNECT || name == TCP_FASTOPEN) &&
	    (s = get_kind(fd, SK_TCP))) {
		if (!s->is_client)
			s->reason = SHUNT_R_UNSUPPORTED;
		sk_put(s);
	}
	if (!r && level == SOL_SOCKET &&
	    (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_OLD ||
	     name == SO_SNDTIMEO_NEW)) {
		__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED);
		if ((s = get_kind(fd, SK_CONN))) {
			conn_set_timeout(s->conn, name, val, len);
			sk_put(s);
		}
	}
	if (!r && level == SOL_SOCKET && name == SO_RCVLOWAT && (s = get_kind(fd, SK_CONN))) {
		sockinfo_rcvlowat(s->conn, val, len);
		sk_put(s);
	}
	return r;
}

/* ---- data ---- */

/* A plain socket whose handshake ended by a timeout may have a late
 * handshake message at the head of its stream (inband.c): settled before
 * the application's call, whose error (a blocking wait interrupted, or
 * timed out) it returns. */
static ssize_t settle(struct sk *s, int fd, int writing, int flags, int *handled)
{
	ssize_t r = 0;

	if (__atomic_load_n(&s->hs, __ATOMIC_RELAXED))
		r = inband_settle(s, fd, writing, s->nonblock || (flags & MSG_DONTWAIT));
	sk_put(s);
	*handled = r < 0;
	return edge(r);
}

static ssize_t accel_send(int fd, const struct iovec *iov, int cnt, int flags, int *handled)
{
	struct sk *s = fdtab_get(fd);
	ssize_t r;

	*handled = 0;
	if (!s)
		return 0;
	if (s->kind != SK_CONN)
		return settle(s, fd, 1, flags, handled);
	*handled = 1;
	r = conn_send(s, iov, cnt, flags);
	sk_put(s);
	return edge(r);
}

static ssize_t accel_recv(int fd, const struct iovec *iov, int cnt, int flags, int *handled)
{
	struct sk *s = fdtab_get(fd);
	ssize_t r;

	*handled = 0;
	if (!s)
		return 0;
	if (s->kind != SK_CONN)
		return settle(s, fd, 0, flags, handled);
	*handled = 1;
	r = conn_recv(s, iov, cnt, flags);
	sk_put(s);
	return edge(r);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct iovec iov = { buf, n };
	int h;
	ssize_t r = accel_recv(fd, &iov, 1, 0, &h);

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
	ssize_t r = accel_recv(fd, iov, cnt, 0, &h);

	return h ? r : R(readv)(fd, iov, cnt);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct iovec iov = { buf, n };
	int h;
	ssize_t r = accel_recv(fd, &iov, 1, flags, &h);

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
	ssize_t r = accel_recv(fd, &iov, 1, flags, &h);

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
	int h;
	ssize_t r = accel_recv(fd, m->msg_iov, (int)m->msg_iovlen, flags, &h);

	if (!h)
		return R(recvmsg)(fd, m, flags);
	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = 0;
	}
	return r;
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r = accel_send(fd, &iov, 1, 0, &h);

	return h ? r : R(write)(fd, buf, n);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int h;
	ssize_t r = accel_send(fd, iov, cnt, 0, &h);

	return h ? r : R(writev)(fd, iov, cnt);
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r = accel_send(fd, &iov, 1, flags, &h);

	return h ? r : R(send)(fd, buf, n, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
		      socklen_t al)
{
	struct iovec iov = { (void *)buf, n };
	int h;
	ssize_t r = accel_send(fd, &iov, 1, flags, &h);

	/* A connected TCP socket ignores the address, as the kernel does. */
	return h ? r : R(sendto)(fd, buf, n, flags, a, al);
}

/* An accelerated connection passed to another process (SCM_RIGHTS) must
 * arrive there as a plain TCP socket whose stream goes on at the exact
 * byte: both halves move to the socket first (move.c).  One that cannot
 * move (shared with another process, over RDMA, a peer that half-closed
 * with bytes we have not read) is named in a warning. */
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
			if (!(s = get_kind(pfd, SK_CONN)))
				continue;
			r = move_pass(s, SHUNT_R_FD_PASSED);
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
	ssize_t r = accel_send(fd, m->msg_iov, (int)m->msg_iovlen, flags, &h);

	if (h)
		return r;
	if (m->msg_controllen && m->msg_control)
		pass_moves(m);
	return R(sendmsg)(fd, m, flags);
}

/* sendfile to an accelerated socket: read the file, write the ring. */
static ssize_t accel_sendfile(struct sk *s, int in, off_t *off, size_t count)
{
	char buf[65536];
	size_t total = 0;
	off_t pos = off ? *off : 0;

	while (total < count) {
		size_t want = count - total < sizeof buf ? count - total : sizeof buf;
		ssize_t n = off ? pread(in, buf, want, pos) : R(read)(in, buf, want);
		struct iovec iov = { buf, 0 };
		ssize_t w;
		if (n <= 0) {
			if (n < 0 && !total)
				return -errno;
			break;
		}
		iov.iov_len = (size_t)n;
		w = conn_send(s, &iov, 1, 0);
		if (w < 0 && !total)
			return w;
		if (w <= 0)
			w = 0;
		/* Give back what the ring did not take. */
		if (!off && w < n)
			lseek(in, w - n, SEEK_CUR);
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

	if (s && s->kind != SK_CONN) {
		r = settle(s, out, 1, 0, &h);
		s = NULL;
		if (h)
			return r;
	}
	if (!s)
		return R(sendfile)(out, in, off, count);
	r = accel_sendfile(s, in, off, count);
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
	ssize_t r = shim_splice(in, off_in, out, off_out, len, flags, &h);

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
	struct sk *s = get_kind(fd, SK_CONN);
	unsigned i;
	ssize_t r0;

	if (!s) {
		if (settled_plain(fd, 1, flags, &r0))
			return (int)r0;
		for (i = 0; i < n && i < UIO_MAXIOV; i++)
			if (v[i].msg_hdr.msg_controllen && v[i].msg_hdr.msg_control)
				pass_moves(&v[i].msg_hdr);
		return R(sendmmsg)(fd, v, n, flags);
	}
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		ssize_t r = conn_send(s, m->msg_iov, (int)m->msg_iovlen, flags);
		if (r < 0) {
			if (!i) {
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
	sk_put(s);
	return (int)i;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *tmo)
{
	struct sk *s = get_kind(fd, SK_CONN);
	uint64_t end = tmo ? shunt_now_ns() + (uint64_t)tmo->tv_sec * 1000000000ull + (uint64_t)tmo->tv_nsec : 0;
	unsigned i;
	ssize_t r0;

	if (!s)
		return settled_plain(fd, 0, flags, &r0) ? (int)r0 : R(recvmmsg)(fd, v, n, flags, tmo);
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		struct msghdr *m = &v[i].msg_hdr;
		int f = flags & ~MSG_WAITFORONE;
		ssize_t r;
		if (i && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		r = conn_recv(s, m->msg_iov, (int)m->msg_iovlen, f);
		if (r < 0) {
			if (!i) {
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
	sk_put(s);
	return (int)i;
}

/* ---- readiness ---- */

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return (int)edge(shim_poll(fds, n, timeout, NULL));
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		abort();
	return poll(fds, n, timeout);
}

static int ts_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	if (ts->tv_sec > INT_MAX / 1000 - 1)
		return INT_MAX;
	return (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	return (int)edge(shim_poll(fds, n, ts_ms(ts), mask));
}

EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		       const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		abort();
	return ppoll(fds, n, ts, mask);
}

static int any_shm(int nfds, fd_set *a, fd_set *b, fd_set *c)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		if (!((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)) || (c && FD_ISSET(fd, c))))
			continue;
		struct sk *s = get_kind(fd, SK_CONN);
		if (s) {
			sk_put(s);
			return 1;
		}
	}
	return 0;
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	int ms;

	if (!any_shm(nfds, r, w, e))
		return R(select)(nfds, r, w, e, tv);
	ms = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
	return (int)edge(shim_select(nfds, r, w, e, ms, NULL));
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		   const sigset_t *mask)
{
	if (!any_shm(nfds, r, w, e))
		return R(pselect)(nfds, r, w, e, ts, mask);
	return (int)edge(shim_select(nfds, r, w, e, ts_ms(ts), mask));
}

EXPORT int epoll_create(int size)
{
	int fd = R(epoll_create)(size);

	AGAIN_IF_EMFILE(fd, R(epoll_create)(size));
	if (fd >= 0 && shunt_active)
		ep_create(fd);
	return fd;
}

EXPORT int epoll_create1(int flags)
{
	int fd = R(epoll_create1)(flags);

	AGAIN_IF_EMFILE(fd, R(epoll_create1)(flags));
	if (fd >= 0 && shunt_active)
		ep_create(fd);
	return fd;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct sk *s = get_kind(epfd, SK_EPOLL);
	long r;

	if (!s) {
		/* An epoll set created before shunt loaded, now given an
		 * accelerated fd: adopt it. */
		struct sk *t = get_kind(fd, SK_CONN);
		if (!t)
			return R(epoll_ctl)(epfd, op, fd, ev);
		sk_put(t);
		if (ep_create(epfd) || !(s = get_kind(epfd, SK_EPOLL)))
			return R(epoll_ctl)(epfd, op, fd, ev);
	}
	r = ep_ctl(s, epfd, op, fd, ev);
	sk_put(s);
	return (int)edge(r);
}

static int do_epoll_wait(int epfd, struct epoll_event *evs, int max, int ms, const sigset_t *m)
{
	struct sk *s = get_kind(epfd, SK_EPOLL);
	long r;

	if (!s)
		return R(epoll_pwait)(epfd, evs, max, ms, m);
	r = ep_wait(s, epfd, evs, max, ms, m);
	sk_put(s);
	return (int)edge(r);
}

EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int ms)
{
	return do_epoll_wait(epfd, evs, max, ms, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int ms, const sigset_t *m)
{
	return do_epoll_wait(epfd, evs, max, ms, m);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *ts,
			const sigset_t *m)
{
	return do_epoll_wait(epfd, evs, max, ts_ms(ts), m);
}

/* ---- processes ---- */

/* vfork's child shares our stack and may not return through a wrapper:
 * fork instead (the child only execs or exits; copy-on-write is cheap). */
EXPORT pid_t fork(void)
{
	pid_t p;
	int e;

	shunt_fork_before();
	p = R(fork)();
	e = errno;
	if (p) /* the parent (the child's hook is core.c's atfork_child) */
		shunt_fork_after(p);
	errno = e;
	return p;
}

EXPORT pid_t vfork(void)
{
	return fork();
}

/* The process ends without exit()'s destructors: what write() accepted
 * over RDMA must still reach the peer before the kernel's FIN. */
EXPORT void _exit(int status)
{
	transports_exit_flush();
	conn_exit_all(); /* what exit()'s destructors would do */
	rdv_exit();
	stats_exit();
	for (;;)
		syscall(SYS_exit_group, status);
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

/* ---- prctl and syscall: what a program may do behind the wrappers ---- */

EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP)
		shunt_sandbox_enter(); /* before: other threads may be filtered too (TSYNC) */
	return R(prctl)(option, a[0], a[1], a[2], a[3]);
}

/* libc's syscall(): the calls that bypass every wrapper above.  The
 * arguments are read as six longs whatever the call, as musl's and glibc's
 * own syscall() do. */
EXPORT long syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (nr) {
	case SYS_close:
		return close((int)a[0]);
	case SYS_close_range:
		return edge(fd_close_range((unsigned)a[0], (unsigned)a[1], (unsigned)a[2],
					   sys_close_range));
	case SYS_seccomp:
		if (a[0] == SECCOMP_SET_MODE_STRICT || a[0] == SECCOMP_SET_MODE_FILTER)
			shunt_sandbox_enter();
		break;
	case SYS_prctl:
		if (a[0] == PR_SET_SECCOMP)
			shunt_sandbox_enter();
		break;
	case SYS_io_uring_setup:
		shunt_uring_seen();
		break;
	}
	return R(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* liburing's set-up functions (liburing makes its system calls itself, so
 * these exported names are where a program using it can be seen; one
 * linked statically cannot).  Each is the next library's, called after. */
#define URING_NEXT(name, ...)                                               \
	do {                                                                \
		int (*next)() = (int (*)())dlsym(RTLD_NEXT, name);          \
		shunt_uring_seen();                                         \
		if (!next)                                                  \
			return -ENOSYS;                                     \
		return next(__VA_ARGS__);                                   \
	} while (0)

EXPORT int io_uring_queue_init(unsigned entries, void *ring, unsigned flags)
{
	URING_NEXT("io_uring_queue_init", entries, ring, flags);
}

EXPORT int io_uring_queue_init_params(unsigned entries, void *ring, void *p)
{
	URING_NEXT("io_uring_queue_init_params", entries, ring, p);
}

EXPORT int io_uring_queue_init_mem(unsigned entries, void *ring, void *p, void *buf, size_t size)
{
	URING_NEXT("io_uring_queue_init_mem", entries, ring, p, buf, size);
}

EXPORT int io_uring_setup(unsigned entries, void *p)
{
	URING_NEXT("io_uring_setup", entries, p);
}
