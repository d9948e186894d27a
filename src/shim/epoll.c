/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - epoll over accelerated sockets.
 *
 * An accelerated socket is ready when its rings say so, which the kernel
 * cannot see.  So its registration does not go into the application's epoll
 * set as is: its doorbell and its TCP socket (for FIN/RST) go in instead,
 * edge-triggered, with a tagged data word (bit 63 set, so it can never equal
 * a user-space pointer or a small integer) naming the application's fd (the
 * socket) or a doorbell group (the doorbell, shared by the connections of
 * one arena: each member is evaluated when it rings).  epoll_wait
 * translates: a tagged event makes us compute the socket's readiness from
 * the rings, filter it by the application's mask and report it with the
 * application's data.  The peer rings only after we asked
 * (rd_want/wr_want), so a busy socket costs no wake-ups.
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
#include "../base/real.h"

#define FD_BITS 24
#define TOK_BITS (FD_BITS + 2)
#define TOK_TCP 1u  /* the application's fd: its TCP socket */
#define TOK_BELL 2u /* a doorbell group's slot */
#define TOK_MSG 3u  /* this process's answer socket (pending offers) */
#define KEV_MAX 1024 /* kernel events taken per call */
static uint64_t tag;
static struct epset *all_sets;
static _Atomic int nsets; /* in all_sets: a close looks at none while 0 */
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t token(unsigned x, unsigned kind)
{
	return tag | ((uint64_t)x << 2) | kind;
}

static int is_token(uint64_t v)
{
	return (v & ~((1ull << TOK_BITS) - 1)) == tag;
}

/* May this process take a registration out of the kernel's set?  A set a
 * forked child inherited is its parent's kernel instance: the child's
 * close of a connection it shares with the parent drops the child's
 * record, and the kernel's registrations stay - the parent's (as the
 * kernel keeps a registration while any process holds the file).  Before,
 * a child's close (or its exit: redis's BGSAVE child) took the parent's
 * doorbell and socket out of the set, and the parent's event loop never
 * heard of room again (redis's replication stalled at the ring's 256 KiB:
 * tests/behave/fork_epoll).  Stale registrations a child leaves report
 * edges nobody is named for: dropped (translate). */
static int ep_mine(pid_t pid)
{
	return pid == shunt_pid();
}

/* Put r in the group of its connection's doorbell, made (and the doorbell
 * registered) if r is the first. */
static int bell_join(struct epset *ep, struct epreg *r)
{
	struct conn *c = r->s->conn;
	struct epbell *b = NULL, **v;
	unsigned slot = ep->nbells;

	for (unsigned i = 0; i < ep->nbells && !b; i++) {
		if (!ep->bells[i])
			slot = slot < ep->nbells ? slot : i;
		else if (ep->bells[i]->efd == c->efd_mine && ep->bells[i]->id == c->bell_id)
			b = ep->bells[i];
	}
	if (!b) {
		struct epoll_event in = { .events = EPOLLIN | EPOLLET };
		if (slot >= (1u << FD_BITS))
			return -ENOMEM;
		if (slot == ep->nbells) {
			unsigned cap = ep->nbells ? 2 * ep->nbells : 16;
			if (!(v = realloc(ep->bells, cap * sizeof *v)))
				return -ENOMEM;
			memset(v + ep->nbells, 0, (cap - ep->nbells) * sizeof *v);
			ep->bells = v;
			ep->nbells = cap;
		}
		if (!(b = calloc(1, sizeof *b)))
			return -ENOMEM;
		in.data.u64 = token(slot, TOK_BELL);
		if (real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, c->efd_mine, &in)) {
			int err = -errno;
			free(b);
			return err;
		}
		*b = (struct epbell){ .efd = c->efd_mine, .id = c->bell_id, .slot = slot, .pid = shunt_pid() };
		ep->bells[slot] = b;
	}
	r->bell = b;
	r->next_in_bell = b->members;
	b->members = r;
	return 0;
}

static void bell_leave(struct epset *ep, struct epreg *r)
{
	struct epbell *b = r->bell;

	for (struct epreg **pp = &b->members; *pp; pp = &(*pp)->next_in_bell)
		if (*pp == r) {
			*pp = r->next_in_bell;
			break;
		}
	r->bell = NULL;
	if (b->members)
		return;
	if (ep_mine(b->pid))
		real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, b->efd, NULL);
	ep->bells[b->slot] = NULL;
	free(b);
}

int ep_create(int epfd)
{
	struct epset *ep = calloc(1, sizeof *ep);
	struct sk *s = sk_new(SK_EPOLL, 0);
	struct epoll_event *kev = malloc(KEV_MAX * sizeof *kev);

	if (!ep || !s || !kev) {
		free(ep);
		free(s);
		free(kev);
		return -ENOMEM;
	}
	ep->kev = kev;
	pthread_mutex_init(&ep->lock, NULL);
	ep->epfd = epfd;
	s->ep = ep;
	shunt_mutex_lock(&sets_lock);
	if (!tag)
		tag = (shunt_random64() | (1ull << 63)) & ~((1ull << TOK_BITS) - 1);
	ep->next = all_sets;
	all_sets = ep;
	__atomic_add_fetch(&nsets, 1, __ATOMIC_RELEASE);
	shunt_mutex_unlock(&sets_lock);
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

/* r no longer waited for as a pending offer (pend_in, pend_list) */
static void pend_unmark(struct epset *ep, struct epreg *r)
{
	if (ep->pend_in == r)
		ep->pend_in = NULL;
	if (!r->pend_many)
		return;
	for (struct epreg **pp = &ep->pend_list; *pp; pp = &(*pp)->next_pend)
		if (*pp == r) {
			*pp = r->next_pend;
			break;
		}
	r->pend_many = 0;
}

static void hs_unlist(struct epset *ep, struct epreg *r)
{
	for (struct epreg **pp = &ep->hs_list; *pp; pp = &(*pp)->next_hs)
		if (*pp == r) {
			*pp = r->next_hs;
			break;
		}
}

/* (a pending offer's registration is the kernel's own, on fd: whoever
 * drops ours - a close, a dup2 over the number - ends the kernel's too,
 * or deletes it first; a socket in a handshake state is held under our
 * token, taken out here) */
static void reg_drop(struct epset *ep, int fd)
{
	struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;

	if (!r)
		return;
	if (r->queued)
		unqueue(ep, r);
	if (r->bell)
		bell_leave(ep, r);
	if ((r->tcp_on || r->hs_tok) && ep_mine(r->pid))
		real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
	if (r->hs_tok)
		hs_unlist(ep, r);
	pend_unmark(ep, r);
	sk_put(r->s);
	free(r);
	ep->regs[fd] = NULL;
	ep->nregs--;
}

SHUNT_CHILD_PATH void ep_atfork_child(void)
{
	shunt_mutex_reset(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next)
		shunt_mutex_reset(&ep->lock);
}

void ep_free(struct epset *ep)
{
	shunt_mutex_lock(&sets_lock);
	for (struct epset **pp = &all_sets; *pp; pp = &(*pp)->next)
		if (*pp == ep) {
			*pp = ep->next;
			__atomic_sub_fetch(&nsets, 1, __ATOMIC_RELAXED);
			break;
		}
	shunt_mutex_unlock(&sets_lock);
	/* The epoll fd itself is closed: its registrations died with it. */
	for (int fd = 0; fd < ep->cap; fd++)
		if (ep->regs[fd]) {
			sk_put(ep->regs[fd]->s);
			free(ep->regs[fd]);
		}
	for (unsigned i = 0; i < ep->nbells; i++)
		free(ep->bells[i]);
	free(ep->bells);
	free(ep->kev);
	free(ep->regs);
	free(ep);
}

/* close(fd): the kernel would drop the registration with the file.  With
 * no set in the process there is none to drop, and no lock to take (a
 * program without epoll; a set made meanwhile cannot have this number: its
 * registration would need the number in the table, taken before this). */
void ep_forget_fd(int fd)
{
	if (!__atomic_load_n(&nsets, __ATOMIC_ACQUIRE))
		return;
	shunt_mutex_lock(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next) {
		shunt_mutex_lock(&ep->lock);
		reg_drop(ep, fd);
		shunt_mutex_unlock(&ep->lock);
	}
	shunt_mutex_unlock(&sets_lock);
}

int ep_in_use(void)
{
	return __atomic_load_n(&nsets, __ATOMIC_RELAXED) > 0;
}

/* How many sets hold a registration of fd's connection s (each holds a
 * reference); *blocked if one is an EPOLLONESHOT that fired and was not
 * re-armed (the kernel has no such registration to become). */
int ep_regs_of(int fd, struct sk *s, int *blocked)
{
	int n = 0;

	shunt_mutex_lock(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next) {
		shunt_mutex_lock(&ep->lock);
		struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;
		if (r && r->s == s && !r->pend) {
			n++;
			*blocked |= r->present && !r->active;
		}
		shunt_mutex_unlock(&ep->lock);
	}
	shunt_mutex_unlock(&sets_lock);
	return n;
}

/* fd's connection is a plain socket from now on (giveback.c): each
 * registration the application has becomes the kernel's own, on fd itself
 * (the kernel reports at once what is ready, as at an EPOLL_CTL_ADD). */
void ep_retire(int fd, struct sk *s)
{
	shunt_mutex_lock(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next) {
		shunt_mutex_lock(&ep->lock);
		struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;
		if (r && r->s == s && !r->pend) {
			struct epoll_event ev = { .events = r->events, .data = r->data };
			int present = r->present;
			/* ours out first: the connection's socket may be this
			 * very number (borrowed: fdtab.c), the kernel's key */
			reg_drop(ep, fd);
			/* (a child's: the parent's token registration is there still) */
			if (present && real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev) && errno == EEXIST)
				real.epoll_ctl(ep->epfd, EPOLL_CTL_MOD, fd, &ev);
		}
		shunt_mutex_unlock(&ep->lock);
	}
	shunt_mutex_unlock(&sets_lock);
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

/* The kernel's registration of r's TCP socket: every event, edge-triggered
 * (the socket may carry the connection again - RDMA failover, a peer that
 * passed its descriptor: move.c - so its writability matters then too: one
 * report now, then only after a move; urgent data is only ever there:
 * conn.c conn_move_for). */
static struct epoll_event tcp_event(const struct epreg *r)
{
	return (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP | EPOLLET | EPOLLOUT | EPOLLPRI,
				     .data.u64 = token((unsigned)r->fd, TOK_TCP) };
}

/* r was put on the check list (added again after a delete, or modified)
 * while threads may be asleep in the kernel on this set: the kernel looks
 * at a registration added or modified at once and wakes a sleeper if it is
 * ready, our check list only before a sleep.  So a sleeper is woken to
 * look (and to arm the ring if it is not ready): modifying the socket's
 * registration makes the kernel report it again (its socket, carrying
 * nothing, is writable), or, with none, the doorbell rings.  Before, a
 * server thread that put a connection back for room (Apache's write
 * completion: delete, then add again after a short write) slept on until
 * its time-out - 50 s - with the ring drained and nobody asked to ring
 * (tests/behave/epoll_readd). */
static void poke(struct epset *ep, struct epreg *r)
{
	if (!__atomic_load_n(&ep->sleepers, __ATOMIC_ACQUIRE))
		return; /* the next epoll_wait runs the check list first */
	if (r->tcp_on) {
		struct epoll_event in = tcp_event(r);
		real.epoll_ctl(ep->epfd, EPOLL_CTL_MOD, r->fd, &in);
	} else if (r->bell) {
		int e = errno;
		(void)!real.write(r->bell->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
		errno = e;
	}
}

/* r's connection into the kernel's set: its doorbell's group, its TCP
 * socket (held already if held: a pending offer's, modified - one system
 * call less a connection).  The socket goes in under the program's own
 * number r->fd, which names the same socket: two descriptors of one
 * connection in one set are two registrations, as the kernel's (under
 * the connection's number both went to one, and removing either removed
 * it: tests/behave/epoll_dup); a close takes ours out before the number
 * goes (ep_forget_fd). */
static int reg_attach(struct epset *ep, struct epreg *r, int held)
{
	struct conn *c = r->s->conn;
	struct epoll_event in;
	int err, want;

	if ((err = bell_join(ep, r)))
		return err;
	in = tcp_event(r);
	want = !conn_socket_done(c) || (c->tp->flags & TP_SOCKET_EVENTS);
	if (held && !want) {
		real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
		held = 0;
	}
	r->tcp_on = want && !real.epoll_ctl(ep->epfd, held ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, r->fd, &in);
	reset_edges(r);
	return 0;
}

static int reg_add(struct epset *ep, int fd, struct sk *s, struct epoll_event *ev)
{
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
		poke(ep, r);
		return 0;
	}
	if (r)
		reg_drop(ep, fd); /* another socket now has this number */
	if ((err = ensure_cap(ep, fd)))
		return err;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->s = s;
	r->fd = fd;
	r->pid = shunt_pid();
	if ((err = reg_attach(ep, r, 0))) {
		free(r);
		return err;
	}
	r->present = 1;
	r->s = sk_ref(s);
	r->events = ev->events;
	r->data = ev->data;
	r->active = 1;
	ep->regs[fd] = r;
	ep->nregs++;
	enqueue(ep, r);
	return 0;
}

/* ---- a pending offer's socket in a set ----
 * An event loop adds a new connection for room right after its
 * non-blocking connect(), and modifies it for bytes once its request is
 * written: settled at the add, its offer cost a sleep for the answer, then
 * one in epoll_wait for the reply - TCP's client sleeps once.  So while
 * the offer is pending (early.c) the kernel holds the socket itself, with
 * the program's events and data: room it reports at once, as the slot
 * has it.  A wait for bytes alone, in a set that holds nothing else and
 * where no thread waits (epollin_pend_ok): the next epoll_wait sleeps on
 * the slot until the reply, as a blocking read's first wait, then
 * settles.  A wait for bytes anywhere else - with room (nginx's add),
 * among other descriptors, other threads - stays pending too, on the
 * set's pend_list: the set holds this process's answer socket, which the
 * server wakes once it answered (early.c rdv_offer_wake_me), and each
 * epoll_wait settles the offers so answered, or past their wait
 * (pend_due).  No epoll call waits for the server's accept: an event
 * loop whose server waits on the loop itself (a lock, another of its
 * connections) is not held up (tests/behave/loop_cycle).  For any other
 * event or flag the offer settles first, as before.  When it settles, by
 * whatever call, the registrations follow: the connection's doorbell and
 * socket replace the socket's own (ep_pend_settled), or - plain - the
 * kernel's stays as the program made it. */
#define PEND_EVENTS (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP | EPOLLOUT | EPOLLWRNORM | EPOLLET | EPOLLERR | EPOLLHUP)

static int epollin_pend_ok(const struct epset *ep, const struct epreg *r)
{
	return !ep->nplain && !__atomic_load_n(&ep->sleepers, __ATOMIC_RELAXED) && ep->nregs == (r ? 1 : 0);
}

/* fd's record in ep, with a pending one of another socket dropped: that
 * socket was closed, its settle (plain) on its way here, and the number
 * given again - the kernel's registration went with the file. */
static struct epreg *reg_current(struct epset *ep, int fd, const struct sk *s)
{
	struct epreg *r = fd < ep->cap ? ep->regs[fd] : NULL;

	if (r && r->pend && r->s != s) {
		if (r->hs_tok) { /* (the number is another socket's now) */
			hs_unlist(ep, r);
			r->hs_tok = 0;
		}
		reg_drop(ep, fd);
		r = NULL;
	}
	return r;
}

/* The set holds this process's answer socket (edge-triggered: each
 * datagram a report).  1 if it does. */
static int msg_join(struct epset *ep)
{
	struct epoll_event in = { .events = EPOLLIN | EPOLLET, .data.u64 = token(0, TOK_MSG) };
	int fd;

	if (ep->msg_pid == shunt_pid())
		return 1;
	if ((fd = rdv_msg_fd()) < 0 || (real.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &in) && errno != EEXIST))
		return 0;
	ep->msg_pid = shunt_pid();
	return 1;
}

/* s's pending offer waited for among others: the set holds the answer
 * socket, which the server wakes once it answered.  0: settle it now. */
static int pend_many_ok(struct epset *ep, struct sk *s)
{
	return msg_join(ep) && rdv_offer_wake_me(s);
}

/* r (pending) waited for: bytes alone in the set alone, bytes among others,
 * or room. */
static void pend_mark(struct epset *ep, struct epreg *r, int in, int many)
{
	pend_unmark(ep, r);
	if (in && !many) {
		ep->pend_in = r;
	} else if (many) {
		r->pend_many = 1;
		r->next_pend = ep->pend_list;
		ep->pend_list = r;
		__atomic_store_n(&ep->many_seen, 1, __ATOMIC_RELAXED);
	}
}

/* The events the kernel is asked for a socket in a handshake state (below:
 * *held, the word instead of room). */
static uint32_t hs_kev(uint32_t events, struct sk *s, int *held)
{
	*held = (events & (EPOLLOUT | EPOLLWRNORM)) && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) == HS_CONFIRM &&
		shunt_now_ns() < s->hs_until;
	if (!*held)
		return events;
	events &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);
	/* (a partial word must not spin a level-triggered registration) */
	return events & EPOLLIN ? events : events | EPOLLIN | EPOLLET;
}

/* The kernel's registration of fd (an ADD or a MOD) and our pending record
 * of it, made at an ADD (*rp): the program's events and data as they are
 * (a pending offer's socket), or - hs, a socket in a handshake state - under
 * our token, asked for what hs_kev says.  0 or -errno. */
static int pend_kernel_ctl(struct epset *ep, int epfd, int op, int fd, struct sk *s,
			   struct epoll_event *ev, struct epreg **rp, int hs)
{
	struct epoll_event in = *ev;
	struct epreg *r = *rp;
	int err, held = 0;

	if (!r && ((err = ensure_cap(ep, fd)) || !(r = calloc(1, sizeof *r))))
		return err ? err : -ENOMEM;
	if (hs) {
		in.events = hs_kev(ev->events, s, &held);
		in.data.u64 = token((unsigned)fd, TOK_TCP);
	}
	if (real.epoll_ctl(epfd, op, fd, &in)) {
		err = -errno;
		if (op == EPOLL_CTL_ADD)
			free(r);
		return err;
	}
	if (op == EPOLL_CTL_ADD) {
		*r = (struct epreg){ .fd = fd, .pid = shunt_pid(), .present = 1, .pend = 1, .hs_tok = hs,
				     .s = sk_ref(s) };
		if (hs) {
			r->next_hs = ep->hs_list;
			ep->hs_list = r;
		}
		ep->regs[fd] = r;
		ep->nregs++;
	}
	r->hs_held = held;
	r->active = 1; /* (a one-shot's MOD arms it again) */
	r->events = ev->events;
	r->data = ev->data;
	*rp = r;
	return 0;
}

/* 1 and *err: done, the offer left pending; 0: settle and go on. */
static int pend_ctl(struct epset *ep, int epfd, int op, int fd, struct sk *s, struct epoll_event *ev, int *err)
{
	int in = !!(ev->events & (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP)), done = 0, many;
	int out = !!(ev->events & (EPOLLOUT | EPOLLWRNORM));
	struct epreg *r;

	if ((ev->events & ~(uint32_t)PEND_EVENTS) || !rdv_offer_mark_epoll(s))
		return 0;
	shunt_mutex_lock(&ep->lock);
	r = reg_current(ep, fd, s);
	if (r && (!r->pend || !r->present))
		goto out; /* ours from before (a DEL keeps it): settle */
	if ((op == EPOLL_CTL_ADD) == !!r) {
		*err = r ? -EEXIST : -ENOENT;
		done = 1;
		goto out;
	}
	/* (room and bytes at once - nginx's add - among the many: the wait
	 * for the reply would hold the report of room) */
	many = in && (out || !epollin_pend_ok(ep, r));
	if (many && !pend_many_ok(ep, s))
		goto out;
	done = 1;
	if (!(*err = pend_kernel_ctl(ep, epfd, op, fd, s, ev, &r, 0)))
		pend_mark(ep, r, in, many);
out:
	shunt_mutex_unlock(&ep->lock);
	/* settled meanwhile, before its settler could see this registration */
	if (done && !__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE))
		ep_pend_settled(fd, s);
	return done;
}

/* A pending registration's offer settled: the connection's registration
 * replaces the socket's own, or - plain - ours goes and the kernel's
 * stays as the program made it. */
static void pend_convert(struct epset *ep, struct epreg *r)
{
	struct sk *s = r->s;
	int tok = r->hs_tok;

	pend_unmark(ep, r);
	if (tok)
		hs_unlist(ep, r);
	r->pend = r->hs_tok = r->hs_held = 0;
	if (s->kind == SK_CONN) {
		if (!reg_attach(ep, r, 1)) {
			enqueue(ep, r); /* (its socket's first report wakes a sleeper too) */
			return;
		}
		real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
		shunt_warn("epoll: no memory for descriptor %d's registration: dropped", r->fd);
	} else {
		/* the kernel's registration, plain from now on: the program's
		 * own events and data (the kernel reports what is ready, as at
		 * a modification; a one-shot that fired stays off until the
		 * program's own EPOLL_CTL_MOD, which now goes to the kernel) */
		struct epoll_event own = { .events = r->events, .data = r->data };
		if (tok && r->active)
			real.epoll_ctl(ep->epfd, EPOLL_CTL_MOD, r->fd, &own);
		ep->nplain++;
	}
	ep->regs[r->fd] = NULL;
	ep->nregs--;
	sk_put(s);
	free(r);
}

void ep_pend_settled(int fd, struct sk *s)
{
	if (!__atomic_load_n(&nsets, __ATOMIC_ACQUIRE))
		return;
	shunt_mutex_lock(&sets_lock);
	for (struct epset *ep = all_sets; ep; ep = ep->next) {
		shunt_mutex_lock(&ep->lock);
		struct epreg *r = fd >= 0 && fd < ep->cap ? ep->regs[fd] : NULL;
		if (r && r->pend && r->s == s)
			pend_convert(ep, r);
		shunt_mutex_unlock(&ep->lock);
	}
	shunt_mutex_unlock(&sets_lock);
}

/* ---- a socket in a set before its connect() ----
 * nginx adds its upstream sockets (proxy_pass, fastcgi_pass) to its set
 * right after socket(), before connect().  The kernel holds such a socket
 * as the program made it - and went on holding only the TCP socket after
 * connect() made it an accelerated connection: the program heard of room
 * (the TCP socket's), wrote its request into the ring, and never heard of
 * the reply, which came by the ring (nginx in front of PHP-FPM: 504 after
 * 60 s; tests/behave/epoll_before_connect).  So a TCP socket not connected
 * yet is recorded as a pending offer's is (the kernel's registration as
 * the program made it, pend_kernel_ctl), and once connect() has decided it
 * - an offer still pending is settled first, as when a set is given one
 * (ep_ctl) - the registration follows (pend_convert): the connection's, or
 * the kernel's own. */
static int pre_ctl(struct epset *ep, int epfd, int op, int fd, struct sk *s, struct epoll_event *ev)
{
	struct epreg *r;
	int err;

	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	shunt_mutex_lock(&ep->lock);
	r = reg_current(ep, fd, s);
	if (r && !r->pend) {
		err = -EEXIST; /* (no conn record outlives its socket's close: ep_forget_fd) */
	} else if (op == EPOLL_CTL_DEL) {
		err = real.epoll_ctl(epfd, op, fd, ev) ? -errno : 0;
		if (!err && r)
			reg_drop(ep, fd);
		else if (!err && ep->nplain)
			ep->nplain--;
	} else if (op == EPOLL_CTL_ADD && r) {
		err = -EEXIST;
	} else if (op == EPOLL_CTL_MOD && !r) { /* added as plain (before shunt knew it) */
		err = real.epoll_ctl(epfd, op, fd, ev) ? -errno : 0;
	} else if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD) {
		err = -EINVAL;
	} else if (!(err = pend_kernel_ctl(ep, epfd, op, fd, s, ev, &r, 0))) {
		__atomic_store_n(&s->ep_pre, 1, __ATOMIC_SEQ_CST);
	}
	shunt_mutex_unlock(&ep->lock);
	/* connect() or listen() decided it in another thread meanwhile, after
	 * its look at ep_pre: this registration follows here */
	if (!err && !__atomic_load_n(&s->fresh, __ATOMIC_SEQ_CST))
		ep_sock_decided(fd, s);
	return err;
}

void ep_sock_decided(int fd, struct sk *s)
{
	if (__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE))
		rdv_offer_settle_nb(s);
	ep_pend_settled(fd, s);
}

/* ---- a socket in a handshake state in a set ----
 * A plain socket whose in-band handshake ended by a time-out may still see
 * a late message head its stream (inband.c: HS_LAZY, HS_STRIP_*), and a
 * server's socket whose client's word after our ACCEPT(RDMA) has not come
 * (HS_CONFIRM) is plain until its first call settles it.  The kernel
 * holds such a socket under our token (TOK_TCP, its number), with the
 * program's events - for HS_CONFIRM, the word (EPOLLIN) instead of room,
 * edge-triggered, until the word's wait ends (a write would wait for the
 * word: reported room, an event loop that writes first stalled in a wait
 * each time, 5 ms, until the client spoke).  What the kernel reports for
 * it is looked at first, outside the set's lock (hs_settle): a late
 * message all there is taken off (and answered), a CONFIRM attaches the
 * connection - and then the registration follows (ep_pend_settled: the
 * connection's own, or the kernel's with the program's data, which then
 * reports what is ready) and nothing is reported for the message itself.
 * Else the kernel's events are reported with the program's data.  Before,
 * the kernel held such a socket as the program made it: a late message
 * alone woke the loop (its read said EAGAIN), HS_CONFIRM reported room. */

/* r's kernel registration again, as hs_kev says now: it reports what is
 * ready at once (a one-shot that fired with nothing for the program is
 * armed again; a report with no room for it comes again). */
static void hs_rearm(struct epset *ep, struct epreg *r)
{
	struct epoll_event in = { .data.u64 = token((unsigned)r->fd, TOK_TCP) };

	in.events = hs_kev(r->events, r->s, &r->hs_held);
	real.epoll_ctl(ep->epfd, EPOLL_CTL_MOD, r->fd, &in);
}

/* 1 and *err: done (0: the plain path's). */
static int hs_ctl(struct epset *ep, int epfd, int op, int fd, struct sk *s, struct epoll_event *ev, int *err)
{
	struct epreg *r;
	int done = 1, st;

	/* (no event given: the kernel's EFAULT; an exclusive wake-up cannot
	 * be modified, as hs_rearm does: as the program made it) */
	if (op != EPOLL_CTL_DEL && (!ev || (ev->events & EPOLLEXCLUSIVE)))
		return 0;
	shunt_mutex_lock(&ep->lock);
	r = reg_current(ep, fd, s);
	if (r && !r->pend) {
		done = 0; /* ours from before (a DEL keeps it): the plain path's */
		goto out;
	}
	if ((op == EPOLL_CTL_ADD) == !!r) {
		*err = r ? -EEXIST : -ENOENT;
		goto out;
	}
	if (op != EPOLL_CTL_DEL)
		*err = pend_kernel_ctl(ep, epfd, op, fd, s, ev, &r, 1);
	else
		reg_drop(ep, fd); /* (the kernel's goes with it) */
out:
	shunt_mutex_unlock(&ep->lock);
	/* settled meanwhile, before its settler could see this registration */
	st = __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE);
	if (done && (st == HS_NONE || s->kind == SK_CONN))
		ep_pend_settled(fd, s);
	return done;
}

/* What the kernel reported for sockets in a handshake state, noted under
 * the set's lock by translate and looked at without it (hs_settle). */
#define HS_SEEN_MAX 16
struct hs_seen {
	int fd;
	uint32_t ev;
	struct sk *s;
};

/* Under the lock: r's report noted (one with no room: again later). */
static void hs_note(struct epset *ep, struct epreg *r, uint32_t ev, struct hs_seen *seen, int *nseen)
{
	if (*nseen >= HS_SEEN_MAX) {
		hs_rearm(ep, r);
		return;
	}
	seen[(*nseen)++] = (struct hs_seen){ r->fd, ev, sk_ref(r->s) };
}

/* Under the lock: r's report (the kernel's events ev) into evs[n]. */
static int hs_report(struct epset *ep, struct epreg *r, uint32_t ev, struct epoll_event *evs, int n, int max)
{
	ev &= r->events | EPOLLERR | EPOLLHUP;
	if (!r->active)
		return n; /* (a one-shot's second report: raced with its first) */
	if (!ev || n >= max) {
		if (n >= max || (r->events & EPOLLONESHOT))
			hs_rearm(ep, r);
		return n;
	}
	if (r->events & EPOLLONESHOT)
		r->active = 0;
	evs[n].events = ev;
	evs[n].data = r->data;
	return n + 1;
}

/* The noted sockets: a message there settles (and the registration
 * follows, with nothing reported for it); the others' reports go out. */
static int hs_settle(struct epset *ep, struct hs_seen *seen, int nseen, struct epoll_event *evs, int n, int max)
{
	int changed[HS_SEEN_MAX], cs;

	for (int i = 0; i < nseen; i++)
		changed[i] = seen[i].s->kind == SK_CONN || inband_settle_nb(seen[i].s, seen[i].fd);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	shunt_mutex_lock(&ep->lock);
	for (int i = 0; i < nseen; i++) {
		struct epreg *r = seen[i].fd < ep->cap ? ep->regs[seen[i].fd] : NULL;
		if (!changed[i] && r && r->hs_tok && r->s == seen[i].s)
			n = hs_report(ep, r, seen[i].ev, evs, n, max);
	}
	shunt_mutex_unlock(&ep->lock);
	pthread_setcancelstate(cs, NULL);
	for (int i = 0; i < nseen; i++)
		sk_put(seen[i].s);
	return n;
}

/* Under the lock, before a sleep: the held registrations whose word's
 * wait ended ask for room (a write ends the wait: inband.c); the end of
 * the others' waits. */
static uint64_t hs_due(struct epset *ep)
{
	uint64_t now = shunt_now_ns(), due = UINT64_MAX;

	for (struct epreg *r = ep->hs_list; r; r = r->next_hs) {
		if (!r->hs_held)
			continue;
		if (now >= r->s->hs_until || __atomic_load_n(&r->s->hs, __ATOMIC_ACQUIRE) != HS_CONFIRM)
			hs_rearm(ep, r);
		else if (r->s->hs_until < due)
			due = r->s->hs_until;
	}
	return due;
}

int ep_ctl(struct sk *eps, int epfd, int op, int fd, struct epoll_event *ev)
{
	struct epset *ep = eps->ep;
	struct sk *s = fdtab_peek(fd);
	struct epreg *r;
	int err = 0;

	if (s && __builtin_expect(__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE) != NULL, 0)) {
		if (op == EPOLL_CTL_DEL) {
			shunt_mutex_lock(&ep->lock);
			r = reg_current(ep, fd, s);
			if (r && r->pend) {
				err = real.epoll_ctl(epfd, op, fd, ev) ? -errno : 0;
				reg_drop(ep, fd);
				shunt_mutex_unlock(&ep->lock);
				sk_put(s);
				return err;
			}
			shunt_mutex_unlock(&ep->lock);
		} else if (ev && pend_ctl(ep, epfd, op, fd, s, ev, &err)) {
			sk_put(s);
			return err;
		}
		rdv_offer_settle_nb(s); /* (and its registrations follow) */
	}
	if (s && s->kind != SK_CONN && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_NONE &&
	    hs_ctl(ep, epfd, op, fd, s, ev, &err)) {
		sk_put(s);
		return err;
	}
	if (s && __atomic_load_n(&s->fresh, __ATOMIC_ACQUIRE) && (op == EPOLL_CTL_ADD || s->ep_pre) &&
	    !(ev && (ev->events & EPOLLEXCLUSIVE))) { /* (its kernel registration takes no MOD) */
		err = pre_ctl(ep, epfd, op, fd, s, ev);
		sk_put(s);
		return err;
	}
	if (!s || s->kind != SK_CONN) {
		if (s)
			sk_put(s);
		if (real.epoll_ctl(epfd, op, fd, ev))
			return -errno;
		shunt_mutex_lock(&ep->lock);
		if (op == EPOLL_CTL_ADD)
			ep->nplain++;
		else if (op == EPOLL_CTL_DEL && ep->nplain)
			ep->nplain--;
		shunt_mutex_unlock(&ep->lock);
		return 0;
	}
	if (op != EPOLL_CTL_DEL && !ev) {
		sk_put(s);
		return -EFAULT;
	}
	shunt_mutex_lock(&ep->lock);
	/* (s's own record still pending: settled by another thread whose
	 * conversion has not come here yet - converted now) */
	if ((r = reg_current(ep, fd, s)) && r->pend)
		pend_convert(ep, r);
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
		poke(ep, r);
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
	shunt_mutex_unlock(&ep->lock);
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
	if (p & POLLPRI) e |= EPOLLPRI;
	return e;
}

static unsigned interest(uint32_t events)
{
	return (events & EPOLLIN ? POLLIN : 0) | (events & EPOLLOUT ? POLLOUT : 0);
}

/* What an edge-triggered registration asks the peer to ring for, ev being
 * ready now: every arrival of bytes (each is an edge of TCP's), and room
 * only while there is none - TCP's edge for room comes when a writer that
 * found its buffer full (a short write, EAGAIN: conn_send arms then) or a
 * poll that found it so is given room again, not each time the peer reads.
 * Before the forty-eighth session every read of the peer's rang for a
 * registration of EPOLLIN|EPOLLOUT|EPOLLET (nginx's, for every
 * connection): a wake-up and a report of room per response, where TCP's
 * reports none (tests/behave/epoll_model). */
static unsigned edge_interest(uint32_t events, uint32_t ev)
{
	return interest(events & ~(ev & EPOLLOUT));
}

static uint32_t ready_events(struct epreg *r)
{
	unsigned ev = conn_events(r->s->conn);

	if (r->events & EPOLLPRI)
		ev |= conn_urgent(r->s->conn);
	return poll_to_epoll(ev) & (r->events | EPOLLERR | EPOLLHUP);
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
	uint32_t g = __atomic_load_n(&c->mv.gen, __ATOMIC_ACQUIRE);
	uint32_t f = __atomic_load_n(&c->tx_full, __ATOMIC_ACQUIRE);
	/* A change of the connection's state is an edge of TCP's whatever
	 * the mask says (the kernel wakes every sleeper at a FIN, a reset,
	 * a shutdown of either half: an edge-triggered set reports then
	 * what is ready, the same bytes too); bytes that arrived are one
	 * for a registration of EPOLLIN, room freed for one of EPOLLOUT
	 * only after someone found none (TCP's SOCK_NOSPACE): the kernel's
	 * wake-up names its events, and a registration for others sleeps
	 * on.  An event gone (the bytes read) is no edge. */
	unsigned st = (c->shut_wr ? 1u : 0) | (c->shut_rd ? 2u : 0) | (conn_rx_eof(c) ? 4u : 0) | (c->peer_err ? 8u : 0) |
		      (c->peer_reset ? 32u : 0) | (c->broken ? 64u : 0) |
		      __atomic_load_n(&c->shut_calls, __ATOMIC_ACQUIRE) << 8;
	int fresh = ((r->events & EPOLLIN) && p != r->seen_prod) ||
		    ((r->events & EPOLLOUT) && k != r->seen_cons && f != r->seen_full) || (ev & ~r->seen_ev) ||
		    g != r->seen_gen || st != r->seen_state;

	r->seen_gen = g;
	r->seen_full = f;
	r->seen_state = st;
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

	if (!r->active)
		return 0;
	if (r->round == ep->round) {
		/* Reported in this turn already: what came since is looked
		 * at in the next (enqueued) - the kernel's edge that brought
		 * it is spent.  Its doorbell's report, then its socket's FIN
		 * in the same batch (a server that writes its last bytes and
		 * closes while the client waits for a CPU): the end was read
		 * off the socket after the report and never reported, and an
		 * edge-triggered reader that had read to EAGAIN waited for
		 * ever (tests/behave/epoll_before_connect, under load). */
		enqueue(ep, r);
		return 0;
	}
	ev = ready_events(r);
	if (!ev) {
		conn_arm(r->s->conn, interest(r->events));
		ev = ready_events(r); /* it may have come while arming */
		if (!ev)
			return 0;
	}
	if ((r->events & EPOLLET) && !is_new_edge(r, ev)) {
		conn_arm(r->s->conn, edge_interest(r->events, ev));
		return 0;
	}
	r->round = ep->round;
	if (r->events & EPOLLONESHOT)
		r->active = 0;
	else if (r->events & EPOLLET)
		conn_arm(r->s->conn, edge_interest(r->events, ev)); /* the next edge */
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

/* r's report into evs[n], if it has one and there is room; without room
 * it is looked at in the next call, before the kernel is asked. */
static int emit(struct epset *ep, struct epreg *r, struct epoll_event *evs, int n, int max)
{
	if (n >= max) {
		enqueue(ep, r);
		return n;
	}
	return n + eval_reg(ep, r, &evs[n]);
}

/* Translate the kernel's k events (in ep->kev) into evs[n..max): plain
 * ones as they are (each has its place: the kernel was asked for no more
 * than there was room for), tagged ones replaced by the applications'
 * events for the sockets they name (or dropped). */
static int translate(struct epset *ep, struct epoll_event *evs, int k, int n, int max, struct hs_seen *seen,
		     int *nseen)
{
	for (int i = 0; i < k; i++)
		if (!is_token(ep->kev[i].data.u64))
			evs[n++] = ep->kev[i];
	for (int i = 0; i < k; i++) {
		uint64_t v = ep->kev[i].data.u64;
		unsigned x = (unsigned)(v >> 2) & ((1u << FD_BITS) - 1);
		struct epreg *r;

		if (!is_token(v))
			continue;
		if ((v & 3) == TOK_MSG) {
			ep->msg_seen = 1;
			continue;
		}
		if ((v & 3) == TOK_BELL) {
			struct epbell *b = x < ep->nbells ? ep->bells[x] : NULL;
			for (r = b ? b->members : NULL; r; r = r->next_in_bell)
				n = emit(ep, r, evs, n, max);
			continue;
		}
		r = (int)x < ep->cap ? ep->regs[x] : NULL;
		if (r && r->hs_tok) { /* (looked at without the lock: hs_settle) */
			hs_note(ep, r, ep->kev[i].events, seen, nseen);
			continue;
		}
		/* stale: the socket was removed - and its number may be a
		 * pending offer's now (taken by the kernel before our DEL) */
		if (!r || r->pend)
			continue;
		{
			conn_refresh(r->s->conn);
			/* moved to TCP: the kernel's wake-up is the edge */
			if (conn_moving(r->s->conn) || r->s->conn->mv.rx)
				reset_edges(r);
			/* the socket has said all it will (shared memory); a
			 * connection whose sending half may still move to it
			 * (RDMA) takes its writability from the socket then */
			if (conn_socket_done(r->s->conn) && !(r->s->conn->tp->flags & TP_SOCKET_EVENTS) &&
			    !r->s->conn->mv.rx &&
			    !conn_moving(r->s->conn)) {
				real.epoll_ctl(ep->epfd, EPOLL_CTL_DEL, r->fd, NULL);
				r->tcp_on = 0;
			}
		}
		n = emit(ep, r, evs, n, max);
	}
	return n;
}

static int wait_loop(struct epset *ep, int epfd, struct epoll_event *evs, int max, int timeout_ms,
		     const sigset_t *mask);

int ep_wait(struct sk *eps, int epfd, struct epoll_event *evs, int max, int timeout_ms,
	    const sigset_t *mask)
{
	struct epset *ep = eps->ep;
	struct sk *s = NULL;
	int r, intr = 0, solo = 0;

	if (max <= 0) /* the kernel's EINVAL */
		return real.epoll_pwait(epfd, evs, max, timeout_ms, mask) < 0 ? -errno : 0;
	if (!evs) /* the kernel's EFAULT (its, once it has an event to copy) */
		return -EFAULT;
	/* Counted under the lock: a registration left pending for bytes
	 * (pend_ctl) either sees this thread or is seen by it.  Before the
	 * kernel sleeps, that pending offer settles - first asleep on its
	 * slot until the server's reply (within the time-out) where the set
	 * holds nothing else and no other thread waits in it, the reply then
	 * read from the ring at once (no doorbell, no second sleep). */
	shunt_mutex_lock(&ep->lock);
	__atomic_add_fetch(&ep->sleepers, 1, __ATOMIC_RELAXED);
	if (ep->pend_in) {
		solo = timeout_ms && !mask && !ep->nplain && ep->nregs == 1 &&
		       __atomic_load_n(&ep->sleepers, __ATOMIC_RELAXED) == 1;
		/* not alone any more: among the many, if it can */
		if (!solo && pend_many_ok(ep, ep->pend_in->s))
			pend_mark(ep, ep->pend_in, 1, 1);
		else
			s = sk_ref(ep->pend_in->s);
	}
	shunt_mutex_unlock(&ep->lock);
	if (s) {
		if (solo)
			intr = rdv_offer_settle_poll(s, &timeout_ms);
		else
			rdv_offer_settle_nb(s);
		sk_put(s);
	}
	r = wait_loop(ep, epfd, evs, max, timeout_ms, mask);
	__atomic_sub_fetch(&ep->sleepers, 1, __ATOMIC_RELEASE);
	return intr && !r ? -EINTR : r;
}

/* The set's offers waited for among others (pend_list): those answered,
 * or past their wait, settled (and so converted: ep_pend_settled); *due
 * the end of the others' wait. */
static void pend_due(struct epset *ep, uint64_t *due)
{
	struct sk *ready[16];
	uint64_t now = shunt_now_ns();
	int n = 0, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	shunt_mutex_lock(&ep->lock);
	for (struct epreg *r = ep->pend_list; r && n < 16; r = r->next_pend)
		if (rdv_offer_due(r->s, now, due))
			ready[n++] = sk_ref(r->s);
	shunt_mutex_unlock(&ep->lock);
	for (int i = 0; i < n; i++) {
		rdv_offer_settle_due(ready[i]);
		sk_put(ready[i]);
	}
	pthread_setcancelstate(cs, NULL);
	if (n == 16)
		*due = now; /* more: look again at once */
}

/* A sleep of wait_ms (-1: none set) not past end (shunt_now_ns()'s clock),
 * in whole milliseconds rounded up. */
static int wait_until(int wait_ms, uint64_t end)
{
	uint64_t now = shunt_now_ns();
	int left_ms = end > now ? (int)((end - now + 999999) / 1000000) : 0;

	return wait_ms < 0 || left_ms < wait_ms ? left_ms : wait_ms;
}

static int wait_loop(struct epset *ep, int epfd, struct epoll_event *evs, int max, int timeout_ms,
		     const sigset_t *mask)
{
	uint64_t deadline = timeout_ms > 0 ? shunt_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	int again = 0;

	for (;;) {
		uint64_t due = UINT64_MAX, hs_end = UINT64_MAX;
		struct hs_seen seen[HS_SEEN_MAX];
		int n, k, cs, wait_ms = timeout_ms, msg, nseen = 0;

		if (__atomic_load_n(&ep->pend_list, __ATOMIC_RELAXED))
			pend_due(ep, &due);
		/* a look at a socket under the lock (conn_refresh's recv) is
		 * a cancellation point: not with the set's lock held */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		shunt_mutex_lock(&ep->lock);
		ep->round++;
		n = run_checks(ep, evs, 0, max);
		if (ep->hs_list)
			hs_end = hs_due(ep);
		shunt_mutex_unlock(&ep->lock);
		pthread_setcancelstate(cs, NULL);
		/* not past an offer's wait (pend_due), nor - once the set
		 * had one - SHUNT_ACCEPT_WAIT_MS at a time: a thread asleep
		 * here when another put an offer on the list looks at it by
		 * then (a server that never answers - not shunt's, on a port
		 * where a shunt server listens too - would leave its first
		 * bytes in the slot) */
		if (due != UINT64_MAX || __atomic_load_n(&ep->many_seen, __ATOMIC_RELAXED)) {
			uint64_t cap = shunt_now_ns() + shunt_accept_wait_ns(&shunt_cfg);
			wait_ms = wait_until(wait_ms, due < cap ? due : cap);
		}
		if (hs_end != UINT64_MAX) /* (not past a word's wait: hs_due) */
			wait_ms = wait_until(wait_ms, hs_end);
		if (n >= max) /* the array is full: no room for the kernel's (its EINVAL) */
			return n;
		/* the kernel writes into the caller's array (threads may wait
		 * on one set at once); a doorbell's group may report more than
		 * one event, so its answer is copied aside under the lock */
		k = real.epoll_pwait(epfd, evs + n, max - n < KEV_MAX ? max - n : KEV_MAX,
				     n ? 0 : wait_ms, mask);
		if (k < 0)
			return n ? n : -errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		shunt_mutex_lock(&ep->lock);
		memcpy(ep->kev, evs + n, (size_t)k * sizeof *evs);
		n = translate(ep, evs, k, n, max, seen, &nseen);
		msg = ep->msg_seen;
		ep->msg_seen = 0;
		shunt_mutex_unlock(&ep->lock);
		pthread_setcancelstate(cs, NULL);
		if (nseen)
			n = hs_settle(ep, seen, nseen, evs, n, max);
		if (msg) /* an answer: the offers are looked at next turn */
			rdv_msg_pump();
		if (n)
			return n;
		if (msg && !again++)
			continue; /* (once more even with time-out 0: the answer's offer) */
		if (!timeout_ms)
			return 0;
		if (timeout_ms > 0) {
			uint64_t now = shunt_now_ns();
			if (now >= deadline)
				return 0;
			timeout_ms = (int)((deadline - now + 999999) / 1000000);
		}
	}
}
