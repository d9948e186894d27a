/* SPDX-License-Identifier: MIT */
/*
 * interpose.c - the exported libc symbols: the edge of the shim.  Here the
 * sockets' lives (socket, connect, listen, accept, close, dup, fcntl,
 * options); their data is interpose_io.c, readiness interpose_wait.c,
 * processes and system calls behind the wrappers interpose_proc.c.
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
#include "interpose.h"
#include "../base/real.h"
#include "../common/agent.h"
#include "shunt/shunt.h"


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
	if (fd >= 0 && shunt_active && domain == AF_NETLINK)
		ksock_socket(fd, domain, protocol);
	if (fd < 0 || !shunt_active || !is_tcp(domain, type, protocol))
		return fd;
	s = sk_new(SK_TCP, domain);
	if (s) {
		s->nonblock = !!(type & SOCK_NONBLOCK);
		s->fresh = 1;
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

/* SHUNT_LOG's line for a connect's decision (here, or when its pending
 * offer settles: early.c). */
void connect_log(int fd, const struct sk *s)
{
	if (s->kind == SK_CONN)
		shunt_log("connect fd %d: accelerated (%s)", fd, s->conn->tp->name);
	else
		shunt_log("connect fd %d: tcp, %s", fd, shunt_reason_str((unsigned)s->reason));
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sk *s = get_kind(fd, SK_TCP);
	int e = errno, r, pending;

	if (!s || s->is_client || s->reason == SHUNT_R_UNSUPPORTED || !addr) {
		if (s)
			sk_put(s);
		return R(connect)(fd, addr, len);
	}
	r = rdv_connect(fd, s, addr, len);
	pending = s->offer != NULL;
	/* its epoll registrations follow (nginx's upstreams; one another
	 * thread makes meanwhile sees it decided: epoll.c pre_ctl) */
	__atomic_store_n(&s->fresh, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->ep_pre, __ATOMIC_SEQ_CST))
		ep_sock_decided(fd, s);
	if (r == 0 || r == -EINPROGRESS)
		stats_update(s, fd);
	if (!pending) /* pending: said when it settles (early.c) */
		connect_log(fd, s);
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
		__atomic_store_n(&s->fresh, 0, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&s->ep_pre, __ATOMIC_SEQ_CST)) /* the kernel's own now */
			ep_sock_decided(fd, s);
	}
	if (s)
		sk_put(s);
	errno = e;
	return r;
}

/* The listener of an accept(): known, or inherited (systemd, a parent; an
 * exec of ours names its listeners to the new image, which adopts them at
 * start: exec.c). */
struct sk *listener_of(int fd)
{
	struct sk *s = fdtab_get(fd);
	int domain;

	if (s || !shunt_active || !probe_tcp(fd, &domain))
		return s;
	s = sk_new(SK_TCP, domain);
	if (!s)
		return NULL;
	/* one the agent answers for (its mark is the socket's: a parent's
	 * listen() made it): its clients' PROPOSALs are ours to read */
	s->ag_listen = agent_take(fd, NULL) == SHUNT_AG_LISTENER;
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
	 * left to the kernel (a short or bad buffer is its to judge), and its
	 * answer read if it was whole. */
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer, given = addr && len ? *len : 0;
	int own = !addr && shunt_active;
	struct sockaddr *a = own ? (struct sockaddr *)&peer : addr;
	socklen_t *al = own ? &plen : len;
	int e = errno, nfd = R(accept4)(fd, a, al, flags);
	const struct sockaddr *pa;
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
	pa = own ? (plen <= sizeof peer ? (struct sockaddr *)&peer : NULL)
		 : al && *al <= given && *al >= sizeof(struct sockaddr_in) ? addr : NULL;
	rdv_accept(ls, nfd, s, pa);
	if (ls->kernel_opts && s->kind == SK_CONN) /* it inherited the listener's timestamps */
		conn_move_for(s, "timestamps (SO_TIMESTAMP*), from the listener");
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
	s = fdtab_closing(fd);
	ksock_closed((unsigned)fd, (unsigned)fd);
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
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		ksock_closed(first, last);
	return (int)edge(fd_close_range(first, last, (unsigned)flags, sys_close_range));
}

EXPORT void closefrom(int lowfd)
{
	long max;

	if (lowfd < 0)
		lowfd = 0;
	ksock_closed((unsigned)lowfd, ~0u);
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
	struct sk *s = fdtab_peek(fd);
	long r;

	/* our FIN may not go before the client said how it reads (inband.c) */
	if (s && __atomic_load_n(&s->hs, __ATOMIC_RELAXED) == HS_CONFIRM)
		inband_confirm(s, fd, 1, 0);
	sk_put(s);
	s = get_kind(fd, SK_CONN);

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
	fdtab_unborrow(nfd);
	return after_dup(fd, R(dup2)(fd, nfd));
}

EXPORT int dup3(int fd, int nfd, int flags)
{
	if (fd != nfd)
		fdtab_unborrow(nfd);
	return after_dup(fd, R(dup3)(fd, nfd, flags));
}

static void kernel_feature(int fd, const char *what, int inherited);

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
		if ((long)arg & O_ASYNC)
			kernel_feature(fd, "signal-driven I/O (O_ASYNC)", 0);
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
	if (!s) {
		/* (another descriptor's ioctl may hand a socket to the kernel) */
		int e = ksock_ioctl(req, (unsigned long)arg);
		return e ? (int)edge(e) : R(ioctl)(fd, req, arg);
	}
	/* a late handshake message, all there, is not the program's bytes
	 * (a CONFIRM there: the connection's count) */
	if (req == FIONREAD && s->kind != SK_CONN && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_NONE)
		inband_settle_nb(s, fd);
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
	if (!r && req == FIOASYNC && *(int *)arg)
		kernel_feature(fd, "signal-driven I/O (FIOASYNC)", 0);
	return r;
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct sk *s;
	struct shunt_info info = { 0 };

	if (val && len && sockinfo_corrects(level, name)) {
		int r = R(getsockopt)(fd, level, name, val, len);
		/* a pending offer's SO_ERROR is its socket's: the event loop's
		 * look after its poll for room (poll.c) leaves it pending */
		if (!r && level == SOL_SOCKET && name == SO_ERROR && (s = fdtab_peek(fd))) {
			int pending = __atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL;
			sk_put(s);
			if (pending)
				return r;
		}
		if (!r && (s = get_kind(fd, SK_CONN))) {
			sockinfo_getsockopt(s->conn, level, name, val, *len);
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

/* Timestamps (SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING) come from
 * the kernel's handling of each packet - receive ones in recvmsg's
 * control data, transmit ones on the error queue - and signal-driven I/O
 * (O_ASYNC, FIOASYNC: SIGIO) from its socket's readiness, which the rings
 * never touch: the connection moves to TCP (conn.c conn_move_for); a
 * socket not yet connected stays plain, and a listener's accepted
 * connections move (they inherit timestamps; O_ASYNC only makes its own
 * SIGIO for new connections, which stays the kernel's). */
static int turns_on_timestamps(int name, const void *val, socklen_t len)
{
	int v;

	if (name != SO_TIMESTAMP_OLD && name != SO_TIMESTAMP_NEW && name != SO_TIMESTAMPNS_OLD &&
	    name != SO_TIMESTAMPNS_NEW && name != SO_TIMESTAMPING_OLD && name != SO_TIMESTAMPING_NEW)
		return 0;
	return opt_int(val, len, &v) && v != 0; /* SO_TIMESTAMPING's struct begins with its flags */
}

static void kernel_feature(int fd, const char *what, int inherited)
{
	struct sk *s = fdtab_get(fd);

	if (!s)
		return;
	if (s->kind == SK_CONN) {
		conn_move_for(s, what);
	} else if (s->kind == SK_TCP || s->kind == SK_LISTEN) {
		s->kernel_opts |= inherited;
		if (s->kind == SK_TCP && !s->is_client)
			s->reason = SHUNT_R_UNSUPPORTED; /* connect() keeps it plain */
	}
	sk_put(s);
}

/* Does the kernel take this option on a TCP socket?  Asked on a scratch
 * socket: a protocol or option it does not have fails there as on any
 * socket (TCP_ULP "tls" without the module: ENOENT; SO_PEEK_OFF on TCP
 * before Linux 6.10: EOPNOTSUPP), one it has fails only for the scratch
 * socket's state (ENOTCONN) or not at all. */
static int kernel_takes(int level, int name, const void *val, socklen_t len)
{
	int fd = real.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return 0; /* cannot tell: as if it did */
	r = real.setsockopt(fd, level, name, val, len) && errno != ENOTCONN ? -errno : 0;
	real.close(fd);
	return r;
}

/* Options after which the kernel's handling of the stream itself differs
 * from the socket's next byte on - which bytes carried by the rings would
 * pass by:
 * - an upper-layer protocol (TCP_ULP: "tls" - kernel TLS, which OpenSSL,
 *   nginx and HAProxy turn on once their handshake is done - or
 *   "espintcp") encrypts what is written and decrypts what is read: the
 *   peer would read plaintext where it awaits records, the program
 *   records where it awaits plaintext;
 * - a peek offset (SO_PEEK_OFF, TCP's since Linux 6.10: passt's) makes
 *   each MSG_PEEK go on where the last one ended: the ring's peeks would
 *   hand out the same bytes again.
 * So an accelerated connection moves to TCP at the exact byte first, the
 * peer resending what our ring held unread onto the socket - which the
 * kernel then handles as TCP's receive queue - and is a plain socket to
 * shunt from then on.  If the socket is not all of the connection after
 * the move (bytes only memory holds: a peer that ended its stream before;
 * the move's own message not all sent), or the connection cannot move (a
 * sandbox), the call fails (EOPNOTSUPP: TLS libraries keep their own TLS,
 * as on a kernel without the module; a peek offset is unsupported, as
 * before 6.10).  An option the kernel does not take fails as it would,
 * without a move.  A socket not yet connected stays plain at its connect.
 * Returns 0 to go on to the kernel, else -errno. */
static int stream_to_kernel(int fd, int level, int name, const void *val, socklen_t len, const char *what)
{
	struct sk *s = fdtab_get(fd);
	int r = 0;

	if (!s)
		return 0;
	if (s->kind == SK_TCP && !s->is_client) {
		s->reason = SHUNT_R_UNSUPPORTED; /* connect() keeps it plain */
	} else if (s->kind == SK_CONN && shunt_sandboxed) {
		r = -EOPNOTSUPP; /* no move, and no scratch socket: a call the filter may refuse */
	} else if (s->kind == SK_CONN && !(r = kernel_takes(level, name, val, len))) {
		r = conn_move_retire(fd, s, SHUNT_R_UNSUPPORTED, what);
		if (r == -EBUSY) {
			shunt_warn("fd %d: %s refused: the connection is plain TCP now, but bytes of it are "
				   "not on its socket yet", fd, what);
			r = -EOPNOTSUPP;
		} else if (r == 1) {
			/* another thread is in a call on it: it stays a moved
			 * connection, whose byte counts kernel TLS no longer
			 * keeps (records in, plaintext out) - no end is judged
			 * short by them */
			s->conn->mv.rx_end = 0;
			r = 0;
		}
	}
	sk_put(s);
	return r;
}

/* A peek offset turned on (-1 turns it off: the rings' peeks are that). */
static int peek_off_on(const void *val, socklen_t len)
{
	int v;

	return opt_int(val, len, &v) && v >= 0; /* (none: the kernel's error) */
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int r, v;
	struct sk *s;

	if (level == IPPROTO_TCP && name == TCP_ULP &&
	    (r = stream_to_kernel(fd, level, name, val, len, "an upper-layer protocol (TCP_ULP: kernel TLS)")))
		return edge(r);
	if (level == SOL_SOCKET && name == SO_PEEK_OFF && peek_off_on(val, len) &&
	    (r = stream_to_kernel(fd, level, name, val, len, "a peek offset (SO_PEEK_OFF)")))
		return edge(r);
	r = R(setsockopt)(fd, level, name, val, len);

	/* TCP Fast Open sends data in the SYN, before any rendezvous (SMC: same). */
	if (!r && level == IPPROTO_TCP && (name == TCP_FASTOPEN_CONNECT || name == TCP_FASTOPEN) &&
	    (s = get_kind(fd, SK_TCP))) {
		if (!s->is_client)
			s->reason = SHUNT_R_UNSUPPORTED;
		sk_put(s);
	}
	/* The kernel's accept waits for the first byte: local offers send none
	 * (registry.c rdv_listen_deferred).  Set before listen() too. */
	if (!r && level == IPPROTO_TCP && name == TCP_DEFER_ACCEPT && opt_int(val, len, &v) &&
	    (s = fdtab_get(fd))) {
		if (s->kind == SK_TCP || s->kind == SK_LISTEN) {
			s->defer_accept = v != 0;
			if (s->kind == SK_LISTEN)
				rdv_listen_deferred(s);
		}
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
	if (!r && level == SOL_SOCKET && turns_on_timestamps(name, val, len))
		kernel_feature(fd, "timestamps (SO_TIMESTAMP*)", 1);
	if (!r && level == SOL_SOCKET && name == SO_RCVLOWAT && (s = get_kind(fd, SK_CONN))) {
		sockinfo_rcvlowat(s->conn, val, len);
		sk_put(s);
	}
	if (!r && level == IPPROTO_TCP && name == TCP_INQ && (s = get_kind(fd, SK_CONN))) {
		sockinfo_inq(s->conn, val, len);
		sk_put(s);
	}
	return r;
}

