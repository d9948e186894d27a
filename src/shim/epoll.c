/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - epoll over accelerated sockets.
 *
 * An accelerated socket is ready when its rings say so, which the kernel
 * cannot see.  So its registration does not go into the application's epoll
 * set: our eventfd (and the TCP socket, for FIN/RST) go into a hidden inner
 * epoll set, and the inner set sits in the application's set under a random
 * 64-bit tag.  When the tag fires, epoll_wait expands it: each accelerated
 * fd's readiness is computed from the rings, filtered by the application's
 * mask and reported with the application's data.  Level-triggered: the
 * eventfd is left signalled while the socket is ready, so the kernel keeps
 * reporting it; it is drained (and the peer asked to signal again) only when
 * the socket is not ready for what the application wants.  Edge-triggered:
 * drained and re-armed on each report.  Plain fds are untouched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "epoll_int.h"
#include "real.h"

static uint64_t tag;
static struct epset *all_sets;
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

#define TOKEN(fd, is_tcp) (((uint64_t)(unsigned)(fd) << 1) | (is_tcp))

int ep_create(int epfd)
{
	struct epset *ep = calloc(1, sizeof *ep);
	struct sk *s = sk_new(SK_EPOLL, 0);

	if (!ep || !s) {
		free(ep);
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&ep->lock, NULL);
	ep->inner = -1;
	ep->epfd = epfd;
	s->ep = ep;
	pthread_mutex_lock(&sets_lock);
	if (!tag)
		tag = shunt_random64() | 1;
	ep->next = all_sets;
	all_sets = ep;
	pthread_mutex_unlock(&sets_lock);
	fdtab_set(epfd, s);
	return 0;
}

static void reg_drop(struct epset *ep, int fd)
{
	struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;

	if (!r)
		return;
	real.epoll_ctl(ep->inner, EPOLL_CTL_DEL, r->s->conn->efd_mine, NULL);
	if (r->tcp_on)
		real.epoll_ctl(ep->inner, EPOLL_CTL_DEL, r->s->conn->tcp_fd, NULL);
	sk_put(r->s);
	free(r);
	ep->regs[fd] = NULL;
}

void ep_free(struct epset *ep)
{
	pthread_mutex_lock(&sets_lock);
	for (struct epset **pp = &all_sets; *pp; pp = &(*pp)->next)
		if (*pp == ep) {
			*pp = ep->next;
			break;
		}
	pthread_mutex_unlock(&sets_lock);
	for (int fd = 0; fd < ep->cap; fd++)
		reg_drop(ep, fd);
	if (ep->inner >= 0)
		real.close(ep->inner);
	free(ep->regs);
	free(ep);
}

/* close(fd): the kernel would drop the registration with the file. */
void ep_forget_fd(int fd)
{
	pthread_mutex_lock(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next) {
		pthread_mutex_lock(&ep->lock);
		reg_drop(ep, fd);
		pthread_mutex_unlock(&ep->lock);
	}
	pthread_mutex_unlock(&sets_lock);
}

static int ensure_inner(struct epset *ep)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	if (ep->inner >= 0)
		return 0;
	ep->inner = real.epoll_create1(EPOLL_CLOEXEC);
	if (ep->inner < 0)
		return -errno;
	if (real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->inner, &ev)) {
		int e = -errno;
		real.close(ep->inner);
		ep->inner = -1;
		return e;
	}
	return 0;
}

static int ensure_cap(struct epset *ep, int fd)
{
	int cap = ep->cap ? ep->cap : 64;
	struct epreg **n;

	if (fd < ep->cap)
		return 0;
	while (cap <= fd)
		cap *= 2;
	n = realloc(ep->regs, (size_t)cap * sizeof *n);
	if (!n)
		return -ENOMEM;
	memset(n + ep->cap, 0, (size_t)(cap - ep->cap) * sizeof *n);
	ep->regs = n;
	ep->cap = cap;
	return 0;
}

static int reg_add(struct epset *ep, int fd, struct sk *s, struct epoll_event *ev)
{
	struct epoll_event in = { .events = EPOLLIN, .data.u64 = TOKEN(fd, 0) };
	struct epreg *r;
	int err;

	if (fd < ep->cap && ep->regs[fd])
		return -EEXIST;
	if ((err = ensure_inner(ep)) || (err = ensure_cap(ep, fd)))
		return err;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	if (real.epoll_ctl(ep->inner, EPOLL_CTL_ADD, s->conn->efd_mine, &in)) {
		free(r);
		return -errno;
	}
	in = (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP, .data.u64 = TOKEN(fd, 1) };
	r->tcp_on = !real.epoll_ctl(ep->inner, EPOLL_CTL_ADD, s->conn->tcp_fd, &in);
	r->s = sk_ref(s);
	r->events = ev->events;
	r->data = ev->data;
	r->active = 1;
	ep->regs[fd] = r;
	return 0;
}

int ep_ctl(struct sk *eps, int epfd, int op, int fd, struct epoll_event *ev)
{
	struct epset *ep = eps->ep;
	struct sk *s = fdtab_get(fd);
	int err = 0;

	if (!s || s->kind != SK_SHM) {
		if (s)
			sk_put(s);
		return real.epoll_ctl(epfd, op, fd, ev) ? -errno : 0;
	}
	if (op != EPOLL_CTL_DEL && !ev) {
		sk_put(s);
		return -EFAULT;
	}
	pthread_mutex_lock(&ep->lock);
	switch (op) {
	case EPOLL_CTL_ADD:
		err = reg_add(ep, fd, s, ev);
		break;
	case EPOLL_CTL_MOD:
		if (fd >= ep->cap || !ep->regs[fd]) {
			err = -ENOENT;
			break;
		}
		ep->regs[fd]->events = ev->events;
		ep->regs[fd]->data = ev->data;
		ep->regs[fd]->active = 1;
		break;
	case EPOLL_CTL_DEL:
		if (fd >= ep->cap || !ep->regs[fd])
			err = -ENOENT;
		else
			reg_drop(ep, fd);
		break;
	default:
		err = -EINVAL;
	}
	pthread_mutex_unlock(&ep->lock);
	/* Make the next epoll_wait evaluate this socket. */
	if (!err && op != EPOLL_CTL_DEL)
		conn_kick_self(s->conn);
	sk_put(s);
	return err;
}

static uint32_t poll_to_epoll(unsigned p)
{
	uint32_t e = 0;

	if (p & POLLIN) e |= EPOLLIN | EPOLLRDNORM;
	if (p & POLLOUT) e |= EPOLLOUT | EPOLLWRNORM;
	if (p & POLLRDHUP) e |= EPOLLRDHUP;
	if (p & POLLERR) e |= EPOLLERR;
	if (p & POLLHUP) e |= EPOLLHUP;
	return e;
}

static unsigned interest(uint32_t events)
{
	return (events & EPOLLIN ? POLLIN : 0) | (events & EPOLLOUT ? POLLOUT : 0);
}

/* Translate one fired accelerated registration; returns 1 if reported. */
static int eval_reg(struct epreg *r, struct epoll_event *out)
{
	struct conn *c = r->s->conn;
	uint32_t want, ev;

	if (!r->active) {
		conn_drain(c);
		return 0;
	}
	want = r->events | EPOLLERR | EPOLLHUP;
	ev = poll_to_epoll(conn_events(c)) & want;
	if (!ev) {
		conn_drain(c);
		conn_arm(c, interest(r->events));
		if (poll_to_epoll(conn_events(c)) & want)
			conn_kick_self(c);
		return 0;
	}
	if (r->events & (EPOLLET | EPOLLONESHOT)) {
		conn_drain(c);
		conn_arm(c, interest(r->events));
	}
	if (r->events & EPOLLONESHOT)
		r->active = 0;
	out->events = ev;
	out->data = r->data;
	return 1;
}

static int expand(struct epset *ep, struct epoll_event *evs, int n, int max)
{
	struct epoll_event in[256];
	int room = max - n, m;

	if (room > (int)(sizeof in / sizeof in[0]))
		room = (int)(sizeof in / sizeof in[0]);
	if (room <= 0)
		return n;
	m = real.epoll_wait(ep->inner, in, room, 0);
	pthread_mutex_lock(&ep->lock);
	ep->round++;
	for (int i = 0; i < m && n < max; i++) {
		int fd = (int)(in[i].data.u64 >> 1), is_tcp = (int)(in[i].data.u64 & 1);
		struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;
		if (!r)
			continue;
		/* FIN/RST is latched in the conn once seen; stop watching the
		 * socket (it would stay readable forever) and let the eventfd,
		 * left signalled while the socket is ready, carry it. */
		if (is_tcp && r->tcp_on) {
			conn_refresh(r->s->conn);
			if (r->s->conn->peer_eof || r->s->conn->peer_err) {
				real.epoll_ctl(ep->inner, EPOLL_CTL_DEL, r->s->conn->tcp_fd, NULL);
				r->tcp_on = 0;
				conn_kick_self(r->s->conn);
			}
		}
		if (r->round == ep->round)
			continue;
		r->round = ep->round;
		n += eval_reg(r, &evs[n]);
	}
	pthread_mutex_unlock(&ep->lock);
	return n;
}

int ep_wait(struct sk *eps, int epfd, struct epoll_event *evs, int max, int timeout_ms,
	    const sigset_t *mask)
{
	struct epset *ep = eps->ep;
	uint64_t deadline = timeout_ms > 0 ? shunt_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;

	for (;;) {
		int n = real.epoll_pwait(epfd, evs, max, timeout_ms, mask), k = 0;
		if (n <= 0 || ep->inner < 0)
			return n < 0 ? -errno : n;
		for (int i = 0; i < n; i++)
			if (evs[i].data.u64 == tag)
				k = 1;
			else if (k)
				evs[i - 1] = evs[i];
		if (!k)
			return n;
		n = expand(ep, evs, n - 1, max);
		if (n || !timeout_ms)
			return n;
		if (timeout_ms > 0) {
			uint64_t now = shunt_now_ns();
			if (now >= deadline)
				return 0;
			timeout_ms = (int)((deadline - now + 999999) / 1000000);
		}
	}
}
