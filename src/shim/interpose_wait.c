/* SPDX-License-Identifier: MIT */
/*
 * interpose_wait.c - the wrappers that wait for readiness: poll, select,
 * epoll.
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



/* ---- readiness ---- */

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!fds && n) /* the kernel's EFAULT */
		return R(poll)(fds, n, timeout);
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
	if (!fds && n) /* the kernel's EFAULT */
		return R(ppoll)(fds, n, ts, mask);
	return (int)edge(shim_poll(fds, n, ts_ms(ts), mask));
}

EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		       const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		abort();
	return ppoll(fds, n, ts, mask);
}

/* An accelerated connection in the sets, or a socket in a handshake
 * state (poll.c looks at what the kernel reports for it first). */
static int any_shm(int nfds, fd_set *a, fd_set *b, fd_set *c)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		if (!((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)) || (c && FD_ISSET(fd, c))))
			continue;
		struct sk *s = fdtab_get(fd);
		int ours = s && (s->kind == SK_CONN || __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_NONE);
		sk_put(s);
		if (ours)
			return 1;
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
	cancel_hold(s);
	r = ep_wait(s, epfd, evs, max, ms, m);
	cancel_release();
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
