/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - epoll over accelerated sockets.
 *
 * An accelerated socket is ready when its rings say so, which the kernel
 * cannot see.  So its registration does not go into the application's epoll
 * set as is: our eventfd and the TCP socket (for FIN/RST) go in instead,
 * edge-triggered, with a tagged data word (bit 63 set, so it can never equal
 * a user-space pointer or a small integer) naming the application's fd.
 * epoll_wait translates: a tagged event makes us compute the socket's
 * readiness from the rings, filter it by the application's mask and report
 * it with the application's data.  The peer signals the eventfd only after
 * we asked (rd_want/wr_want), so a busy socket costs no wake-ups.
 *
 * Level-triggered semantics come from a check list: a socket reported
 * level-triggered is evaluated again at the next epoll_wait, before the
 * kernel is asked to sleep, and reported again while still ready - what the
 * kernel does with its own ready list.  Plain fds pass through untouched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "epoll_int.h"
#include "real.h"

#define FD_BITS 24
static uint64_t tag;
static struct epset *all_sets;
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t token(int fd, int is_tcp)
{
	return tag | ((uint64_t)(unsigned)fd << 1) | (uint64_t)is_tcp;
}

static int is_token(uint64_t v)
{
	return (v & ~((1ull << (FD_BITS + 1)) - 1)) == tag;
}

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
	ep->epfd = epfd;
	s->ep = ep;
	pthread_mutex_lock(&sets_lock);
	if (!tag)
		tag = (shunt_random64() | (1ull << 63)) & ~((1ull << (FD_BITS + 1)) - 1);
	ep->next = all_sets;
	all_sets = ep;
	pthread_mutex_unlock(&sets_lock);
	fdtab_set(epfd, s);
	return 0;
}

static void unqueue(struct epset *ep, struct epreg *r)
{
	for (struct epreg **pp = &ep->check; *pp; pp = &(*pp)->next_check)
		if (*pp == r) {
			*pp = r->next_check;
			break;
		}
	r->queued = 0;
}

static void enqueue(struct epset *ep, struct epreg *r)
{
	if (r->queued)
		return;
	r->queued = 1;
	r->next_check = ep->check;
	ep->check = r;
}

static void reg_drop(struct epset *ep, int fd)
{
	struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;

	if (!r)
		return;
	if (r->queued)
		unqueue(ep, r);
	real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->s->conn->efd_mine, NULL);
	if (r->tcp_on)
		real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->s->conn->tcp_fd, NULL);
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
	/* The epoll fd itself is closed: its registrations died with it. */
	for (int fd = 0; fd < ep->cap; fd++)
		if (ep->regs[fd]) {
			sk_put(ep->regs[fd]->s);
			free(ep->regs[fd]);
		}
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

static int ensure_cap(struct epset *ep, int fd)
{
	int cap = ep->cap ? ep->cap : 64;
	struct epreg **n;

	if (fd < ep->cap)
		return 0;
	if (fd >= (1 << FD_BITS))
		return -EINVAL;
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

static void reset_edges(struct epreg *r)
{
	r->seen_prod = r->seen_cons = UINT64_MAX;
	r->seen_ev = 0;
}

static int reg_add(struct epset *ep, int fd, struct sk *s, struct epoll_event *ev)
{
	struct epoll_event in = { .events = EPOLLIN | EPOLLET, .data.u64 = token(fd, 0) };
	struct epreg *r;
	int err;

	r = fd < ep->cap ? ep->regs[fd] : NULL;
	if (r && r->present)
		return -EEXIST;
	if (r && r->s == s) { /* re-added after a DEL: reuse the kernel side */
		reset_edges(r);
		r->present = 1;
		r->events = ev->events;
		r->data = ev->data;
		r->active = 1;
		enqueue(ep, r);
		return 0;
	}
	if (r)
		reg_drop(ep, fd); /* another socket now has this number */
	if ((err = ensure_cap(ep, fd)))
		return err;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	if (real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, s->conn->efd_mine, &in)) {
		err = -errno;
		free(r);
		return err == -EEXIST ? -EEXIST : err;
	}
	/* the socket may carry the connection again (RDMA failover, a peer
	 * that passed its descriptor: move.c): its writability matters then
	 * too (edge-triggered: one report now, then only after a move) */
	in = (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP | EPOLLET | EPOLLOUT,
				   .data.u64 = token(fd, 1) };
	r->tcp_on = (!conn_socket_done(s->conn) || s->conn->rd) &&
		    !real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, s->conn->tcp_fd, &in);
	reset_edges(r);
	r->fd = fd;
	r->present = 1;
	r->s = sk_ref(s);
	r->events = ev->events;
	r->data = ev->data;
	r->active = 1;
	ep->regs[fd] = r;
	enqueue(ep, r);
	return 0;
}

int ep_ctl(struct sk *eps, int epfd, int op, int fd, struct epoll_event *ev)
{
	struct epset *ep = eps->ep;
	struct sk *s = fdtab_get(fd);
	struct epreg *r;
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
	r = fd < ep->cap ? ep->regs[fd] : NULL;
	switch (op) {
	case EPOLL_CTL_ADD:
		err = reg_add(ep, fd, s, ev);
		break;
	case EPOLL_CTL_MOD:
		if (!r || !r->present) {
			err = -ENOENT;
			break;
		}
		r->events = ev->events;
		r->data = ev->data;
		r->active = 1;
		reset_edges(r);
		enqueue(ep, r);
		break;
	case EPOLL_CTL_DEL:
		if (!r || !r->present) {
			err = -ENOENT;
			break;
		}
		r->present = 0;
		r->active = 0;
		if (r->queued)
			unqueue(ep, r);
		break;
	default:
		err = -EINVAL;
	}
	pthread_mutex_unlock(&ep->lock);
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

static uint32_t ready_events(struct epreg *r)
{
	return poll_to_epoll(conn_events(r->s->conn)) & (r->events | EPOLLERR | EPOLLHUP);
}

/* An edge: bytes arrived, space freed, the state changed or a half of an
 * RDMA connection moved to its socket since the last report (after a move
 * the same mask means something new: a writer that saw a full ring may
 * write to the socket now, and the socket's own edge may have come and
 * gone before the move).  Without this a wake-up that lost the race with
 * our own check would report the same bytes twice. */
static int is_new_edge(struct epreg *r, uint32_t ev)
{
	struct conn *c = r->s->conn;
	uint64_t p = __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t k = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	uint32_t g = __atomic_load_n(&c->fo_gen, __ATOMIC_ACQUIRE);
	int fresh = p != r->seen_prod || k != r->seen_cons || ev != r->seen_ev || g != r->seen_gen;

	r->seen_gen = g;
	r->seen_prod = p;
	r->seen_cons = k;
	r->seen_ev = ev;
	return fresh;
}

/* Evaluate one registration; fill *out and return 1 if it is to be reported.
 * Whatever is not ready is armed, so the peer signals when it becomes so. */
static int eval_reg(struct epset *ep, struct epreg *r, struct epoll_event *out)
{
	uint32_t ev;

	if (!r->active || r->round == ep->round)
		return 0;
	ev = ready_events(r);
	if (!ev) {
		conn_arm(r->s->conn, interest(r->events));
		ev = ready_events(r); /* it may have come while arming */
		if (!ev)
			return 0;
	}
	if ((r->events & EPOLLET) && !is_new_edge(r, ev)) {
		conn_arm(r->s->conn, interest(r->events));
		return 0;
	}
	r->round = ep->round;
	if (r->events & EPOLLONESHOT)
		r->active = 0;
	else if (r->events & EPOLLET)
		conn_arm(r->s->conn, interest(r->events)); /* the next arrival is the next edge */
	else
		enqueue(ep, r); /* level: look again next time */
	out->events = ev;
	out->data = r->data;
	return 1;
}

/* Level-triggered reports and fresh registrations, before sleeping. */
static int run_checks(struct epset *ep, struct epoll_event *evs, int n, int max)
{
	struct epreg *list = ep->check, *r, *next;

	ep->check = NULL;
	for (r = list; r; r = next) {
		next = r->next_check;
		r->queued = 0;
		if (n < max)
			n += eval_reg(ep, r, &evs[n]);
		else
			enqueue(ep, r);
	}
	return n;
}

/* Translate the kernel's events in place: plain ones stay, tagged ones are
 * replaced by the application's event for that socket (or dropped). */
static int translate(struct epset *ep, struct epoll_event *evs, int k, int n)
{
	const int base = n; /* the kernel's events start here; we compact behind */

	for (int i = 0; i < k; i++) {
		struct epoll_event e = evs[base + i];
		struct epreg *r;
		int fd;

		if (!is_token(e.data.u64)) {
			evs[n++] = e;
			continue;
		}
		fd = (int)((e.data.u64 >> 1) & ((1u << FD_BITS) - 1));
		r = fd < ep->cap ? ep->regs[fd] : NULL;
		if (!r)
			continue; /* stale: the socket was removed */
		if (e.data.u64 & 1) {
			conn_refresh(r->s->conn);
			/* moved to TCP: the kernel's wake-up is the edge */
			if (conn_moving(r->s->conn) || r->s->conn->fo_rx)
				reset_edges(r);
			/* the socket has said all it will (shared memory); an
			 * RDMA connection's sending half may still move to it,
			 * and then its writability comes from the socket */
			if (conn_socket_done(r->s->conn) && !r->s->conn->rd && !r->s->conn->fo_rx &&
			    !conn_moving(r->s->conn)) {
				real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->s->conn->tcp_fd, NULL);
				r->tcp_on = 0;
			}
		}
		n += eval_reg(ep, r, &evs[n]);
	}
	return n;
}

int ep_wait(struct sk *eps, int epfd, struct epoll_event *evs, int max, int timeout_ms,
	    const sigset_t *mask)
{
	struct epset *ep = eps->ep;
	uint64_t deadline = timeout_ms > 0 ? shunt_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;

	if (max <= 0)
		return real.epoll_pwait(epfd, evs, max, timeout_ms, mask) < 0 ? -errno : 0;
	for (;;) {
		int n, k;

		pthread_mutex_lock(&ep->lock);
		ep->round++;
		n = run_checks(ep, evs, 0, max);
		pthread_mutex_unlock(&ep->lock);
		k = real.epoll_pwait(epfd, evs + n, max - n, n ? 0 : timeout_ms, mask);
		if (k < 0)
			return n ? n : -errno;
		pthread_mutex_lock(&ep->lock);
		n = translate(ep, evs, k, n);
		pthread_mutex_unlock(&ep->lock);
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
