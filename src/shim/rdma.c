/* SPDX-License-Identifier: MIT */
/*
 * rdma.c - shunt connections over RDMA links (issue #4).
 *
 * A connection over RDMA is a struct conn like a shared-memory one: the
 * application writes into a local staging ring and reads from a local
 * receive ring with the same ring code and the same waits.  What differs is
 * who moves the cursors: after a write, the bytes are RDMA-WRITten into the
 * peer's receive ring at the same offsets and a cursor message (struct
 * shunt_cdc, SMC-R's CDC) follows on the same queue pair; a received cursor
 * message advances our receive ring's producer and our staging ring's
 * consumer and wakes local sleepers exactly as a shared-memory peer would.
 *
 * Links (link.h) are per peer process and owned by this process; one spare
 * link per device is kept ready, so a connection to a new peer creates no
 * queue pair on its path.  A progress thread sleeps on the devices'
 * completion channels, so event-driven programs (epoll, poll) are woken
 * through the connection's eventfd as with shared memory; a spinning
 * reader or writer polls the completion queue itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#ifndef SHUNT_NO_RDMA
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"
#include "real.h"
#include "../transport/rdma/link.h"
#include "../common/handshake.h"
#include "../common/failover.h"

enum { RC_OFFERED, RC_OPEN, RC_CLOSED };

/* One slot's connection state.  It exists from the moment the slot is
 * offered in the handshake, because the peer may write and send cursor
 * messages as soon as it has sent its CONFIRM, before we read it: those
 * are recorded in h and found there by the connection when it attaches. */
struct rdma_conn {
	struct rdma_link *link;
	unsigned slot;
	_Atomic int state;        /* RC_* */
	struct shunt_seg_hdr *h;  /* the two rings' cursors: ring[0] ours, ring[1] the peer's */
	uint64_t raddr;           /* the peer's receive ring */
	uint32_t rkey, tag;
	pthread_mutex_t lock;     /* serialises cursor messages of this connection */
	uint64_t sent;            /* staged bytes posted to the peer */
	uint64_t acked;           /* our receive consumer, as last told */
	_Atomic int peer_blocked; /* the peer waits for space: tell it every read */
	int fin_sent;
	int fin_done;             /* FIN reached the peer's device (shutdown) */
	_Atomic int closed_sent, closed_rcvd;
	struct conn *c;           /* NULL once the application closed it */
};

static struct rdma_link *links;     /* connected, per peer process */
static struct rdma_link *spares;    /* ready (INIT), one per device */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int thread_on;
static pid_t thread_pid;

static void on_cdc(struct rdma_link *l, unsigned slot, const struct shunt_cdc *m);
static void on_down(struct rdma_link *l);
static const struct link_ops ops = { on_cdc, on_down };

int rdma_available(void)
{
	return shunt_cfg.transport != 1 && !ibv_load();
}

static void spare_refill(void);
static void fo_sweep(void);
static int fo_tx_begin(struct conn *c, int push_flags);
static void fo_orphan(struct conn *c);
static void window_probe(void);
static void link_each_open(struct rdma_link *l, int (*fn)(struct rdma_conn *rc, void *arg), void *arg);
static int push_locked(struct conn *c, uint32_t extra, int flags, uint64_t *seq);
static _Atomic int fo_work; /* the progress thread has moves, backlogs or FINs to finish */

/* ---- the progress thread ---- */

/* A device's port went down or the device failed (the veth under rxe
 * taken down, a NIC reset): its queue pairs may never report an error
 * themselves, so every link on it is broken now and its connections move
 * to TCP. */
static void dev_events(struct rdma_dev *d)
{
	struct ibv_async_event e;
	int dead = 0;

	while (!ibv.get_async_event(d->ctx, &e)) {
		dead |= e.event_type == IBV_EVENT_PORT_ERR || e.event_type == IBV_EVENT_DEVICE_FATAL;
		ibv.ack_async_event(&e);
	}
	if (!dead)
		return;
	shunt_log("rdma: %s: port down or device failed", d->name);
	pthread_mutex_lock(&lock);
	for (struct rdma_link *l = links; l; l = l->next)
		if (l->dev == d && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP)
			rdma_link_break(l);
	pthread_mutex_unlock(&lock);
}

static void progress_once(int timeout_ms)
{
	struct pollfd p[32];
	struct rdma_dev *dev[16];
	struct rdma_link *l;
	int n = 0;

	pthread_mutex_lock(&lock);
	for (l = links; l && n < 16; l = l->next) {
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= dev[i] == l->dev;
		if (!dup)
			dev[n++] = l->dev;
	}
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < n; i++) {
		p[2 * i] = (struct pollfd){ .fd = dev[i]->ch->fd, .events = POLLIN };
		p[2 * i + 1] = (struct pollfd){ .fd = dev[i]->ctx->async_fd, .events = POLLIN };
	}
	real.poll(p, (nfds_t)(2 * n), timeout_ms);
	for (int i = 0; i < n; i++) {
		struct ibv_cq *cq;
		void *ctx;
		if (p[2 * i + 1].revents & POLLIN)
			dev_events(dev[i]);
		if (!(p[2 * i].revents & POLLIN))
			continue;
		while (!ibv.get_cq_event(dev[i]->ch, &cq, &ctx)) {
			ibv.ack_cq_events(cq, 1);
			ibv_req_notify_cq(cq, 0);
		}
	}
	/* every link, woken or not: cheap, and nothing is missed */
	pthread_mutex_lock(&lock);
	for (l = links; l; l = l->next)
		rdma_link_poll(l);
	if (shunt_fault_rdma_die())
		for (l = links; l; l = l->next)
			rdma_link_break(l);
	window_probe();
	pthread_mutex_unlock(&lock);
	fo_sweep();
	spare_refill();
}

/* fn on each open connection of l, under the link's cq lock (which keeps
 * rc->c alive), until fn returns nonzero. */
static void link_each_open(struct rdma_link *l, int (*fn)(struct rdma_conn *rc, void *arg), void *arg)
{
	pthread_mutex_lock(&l->cq_lock);
	for (unsigned s = 0; s < LINK_SLOTS; s++) {
		struct rdma_conn *rc = l->slot_ctx[s];
		if (rc && __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE) == RC_OPEN && rc->c && fn(rc, arg))
			break;
	}
	pthread_mutex_unlock(&l->cq_lock);
}

/* One link's probe (window_probe): 1 once a cursor message went. */
static int probe_one(struct rdma_conn *rc, void *arg)
{
	struct conn *c = rc->c;
	int r;

	(void)arg;
	if (ring_space(&c->tx) || c->moved || conn_moving(c) || pthread_mutex_trylock(&rc->lock))
		return 0;
	/* no completion polling here: we hold the cq lock */
	r = push_locked(c, SHUNT_CDC_F_BLOCKED, 0, NULL);
	pthread_mutex_unlock(&rc->lock);
	return !r; /* one post tells for the whole link */
}

/* A writer that waits for space waits for the peer's cursor, which a dead
 * peer queue pair never sends - and a queue pair learns that its peer is
 * gone only by posting.  A peer whose end of the link failed after it had
 * sent its FIN cannot say so on the socket either (its kernel FIN went
 * first), so without this the writer would wait for ever where TCP keeps
 * retransmitting.  So, as TCP's zero-window probe: once a second, on each
 * link with a writer waiting on a full ring, one cursor message (BLOCKED:
 * a live peer answers with its consumer).  A dead peer fails the post
 * (retry exceeded) and the link's connections move to TCP.  Caller holds
 * lock. */
static void window_probe(void)
{
	static uint64_t last;
	uint64_t now = shunt_now_ns();

	if (now - last < 1000000000ull)
		return;
	last = now;
	for (struct rdma_link *l = links; l; l = l->next)
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP)
			link_each_open(l, probe_one, NULL);
}

static void *progress(void *arg)
{
	(void)arg;
	for (;;)
		progress_once(20);
	return NULL;
}

/* A detached thread of ours: the application's signals are not for it. */
static int spawn(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, NULL, fn, arg);
	if (!r)
		pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

static void thread_start(void)
{
	if (thread_on && thread_pid == shunt_pid())
		return;
	if (!spawn(progress, NULL)) {
		thread_on = 1;
		thread_pid = shunt_pid();
	}
}

static void nonblock(int fd)
{
	int f = real.fcntl(fd, F_GETFL);

	if (f >= 0)
		real.fcntl(fd, F_SETFL, f | O_NONBLOCK);
}

/* ---- links ---- */

static int link_new(struct rdma_dev *d, struct rdma_link **out)
{
	static int said;
	int r = rdma_link_new(d, shunt_cfg.ring_size, &ops, out);

	if (!r && !(*out)->mw[0] && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		shunt_log("rdma: %s has no memory windows: a peer's key reaches every ring of "
			  "its link (isolation per peer process, not per connection)", d->name);
	return r;
}

static struct rdma_link *spare_take(struct rdma_dev *d)
{
	struct rdma_link **pp, *l = NULL;

	for (pp = &spares; *pp; pp = &(*pp)->next)
		if ((*pp)->dev == d) {
			l = *pp;
			*pp = l->next;
			l->next = NULL;
			break;
		}
	if (!l && link_new(d, &l))
		return NULL;
	return l;
}

/* Keep one ready link per device in use, made here, off the connection
 * path (registering memory and creating a queue pair take long). */
static uint64_t spare_retry_ns; /* after a failed refill: not before this */

static void spare_refill(void)
{
	struct rdma_dev *need = NULL;
	struct rdma_link *l, *n;

	pthread_mutex_lock(&lock);
	for (l = links; l && !need; l = l->next) {
		need = l->dev;
		for (n = spares; n; n = n->next)
			if (n->dev == need)
				need = NULL;
	}
	pthread_mutex_unlock(&lock);
	uint64_t t0 = shunt_now_ns();
	if (!need || t0 < spare_retry_ns)
		return;
	if (link_new(need, &n)) {
		/* limits: try again in a second, not on every wake-up */
		if (!spare_retry_ns)
			shunt_log("rdma: no spare link on %s (limits?); retrying every second",
				  need->name);
		spare_retry_ns = t0 + 1000000000ull;
		return;
	}
	spare_retry_ns = 0;
	shunt_log("rdma: spare link on %s ready in %llu us", need->name,
		  (unsigned long long)(shunt_now_ns() - t0) / 1000);
	pthread_mutex_lock(&lock);
	n->next = spares;
	spares = n;
	pthread_mutex_unlock(&lock);
}

static int usable(struct rdma_link *l, struct rdma_dev *d)
{
	return l->dev == d && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP &&
	       __atomic_load_n(&l->used, __ATOMIC_ACQUIRE) != 0xffffffffu;
}

/* Server: a link to that client process with a free slot (a full one is
 * joined by another: the link group grows a queue pair). */
static struct rdma_link *link_find(const uint8_t host[16], uint64_t proc, struct rdma_dev *d)
{
	for (struct rdma_link *l = links; l; l = l->next)
		if (usable(l, d) && l->peer_proc == proc && !memcmp(l->peer_host, host, 16))
			return l;
	return NULL;
}

/* Client: the link the server answered on, if it is one of ours. */
static struct rdma_link *link_named(const union ibv_gid *g, uint32_t qpn, struct rdma_dev *d)
{
	for (struct rdma_link *l = links; l; l = l->next)
		if (usable(l, d) && l->peer_qpn == qpn && !memcmp(l->peer_gid.raw, g->raw, 16))
			return l;
	return NULL;
}

static void link_add(struct rdma_link *l, const uint8_t host[16], uint64_t proc)
{
	memcpy(l->peer_host, host, 16);
	l->peer_proc = proc;
	l->next = links;
	links = l;
	nonblock(l->dev->ch->fd);
	nonblock(l->dev->ctx->async_fd);
	/* the program's close_range() or closefrom() must not take them */
	fd_mark_internal(l->dev->ch->fd);
	fd_mark_internal(l->dev->ctx->async_fd);
	fd_mark_internal(l->dev->ctx->cmd_fd);
	thread_start();
}

/* ---- the handshake's RDMA half (inband.c) ---- */

struct rdma_offer {
	struct rdma_dev *dev;
	struct rdma_link *link;  /* spare (client, until ACCEPT) or the link used */
	int slot;
	struct rdma_conn *rc;    /* the slot's state */
	int spare;               /* link is a spare not yet connected */
};

static void rc_free(struct rdma_conn *rc)
{
	free(rc->h);
	free(rc);
}

/* A slot with its state, ready for cursor messages. */
static int slot_open(struct rdma_offer *x, struct rdma_link *l, uint32_t tag)
{
	struct rdma_conn *rc = calloc(1, sizeof *rc);
	struct shunt_seg_hdr *h = aligned_alloc(SHUNT_CACHELINE, sizeof *h);
	int slot;

	if (!rc || !h) {
		free(rc);
		free(h);
		return -1;
	}
	memset(h, 0, sizeof *h);
	h->ring_size = l->ring_size;
	rc->h = h;
	rc->link = l;
	rc->tag = tag;
	pthread_mutex_init(&rc->lock, NULL);
	pthread_mutex_lock(&l->cq_lock);
	slot = rdma_slot_take(l, rc, tag);
	pthread_mutex_unlock(&l->cq_lock);
	if (slot < 0) {
		rc_free(rc);
		return -1;
	}
	rc->slot = (unsigned)slot;
	x->link = l;
	x->slot = slot;
	x->rc = rc;
	return slot;
}

static void slot_close(struct rdma_offer *x)
{
	if (x->slot < 0)
		return;
	pthread_mutex_lock(&x->link->cq_lock);
	rdma_slot_put(x->link, (unsigned)x->slot);
	pthread_mutex_unlock(&x->link->cq_lock);
	rc_free(x->rc);
	x->slot = -1;
	x->rc = NULL;
}

/* rkey: the slot's key for this connection (rdma_slot_key); 0 in the
 * client's PROPOSAL, made on a spare link that cannot bind yet. */
static void fill(struct shunt_hs_offer *o, struct rdma_link *l, int slot, uint32_t rkey)
{
	memcpy(o->gid, l->dev->gid.raw, 16);
	o->qpn = l->qp->qp_num;
	o->rkey = rkey;
	o->addr = (uintptr_t)rdma_slot_rx(l, (unsigned)slot);
}

/* No link for a connection on device d (NULL: none for its address):
 * -ENOMEM when a limit is the cause - queue pairs, registrations, locked
 * memory, or a device that would not open (the rdma cgroup's rdma.max) -
 * else -ENODEV. */
static int no_link(const struct rdma_dev *d)
{
	int e = rdma_dev_refused();

	if (d)
		shunt_log("rdma: no link on %s (queue pairs, registrations or locked memory "
			  "exhausted)", d->name);
	else if (e)
		shunt_log("rdma: an RDMA device would not open (%s): rdma cgroup limit?", strerror(e));
	return d || e ? -ENOMEM : -ENODEV;
}

/* Client: reserve a slot in a spare link for the PROPOSAL.  -ENODEV: no
 * device for this address; -ENOMEM: a device, but no resources. */
int rdma_client_offer(int fd, uint32_t tag, struct shunt_hs_offer *o, void **state)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	struct rdma_offer *x;

	if (!rdma_available() || getsockname(fd, (void *)&ss, &sl))
		return -ENODEV;
	x = calloc(1, sizeof *x);
	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&lock);
	x->dev = rdma_dev_for((void *)&ss);
	x->link = x->dev ? spare_take(x->dev) : NULL;
	x->slot = -1;
	if (x->link && slot_open(x, x->link, tag) < 0) {
		rdma_link_free(x->link);
		x->link = NULL;
	}
	pthread_mutex_unlock(&lock);
	if (x->slot < 0) {
		/* a device, but no queue pair or registration for us: resources */
		int r = no_link(x->dev);
		free(x);
		return r;
	}
	x->spare = 1;
	fill(o, x->link, x->slot, 0);
	*state = x;
	return 0;
}

void rdma_offer_drop(void *state)
{
	struct rdma_offer *x = state;

	if (!x)
		return;
	pthread_mutex_lock(&lock);
	slot_close(x);
	if (x->spare) { /* unused: back to the pool */
		x->link->next = spares;
		spares = x->link;
	}
	pthread_mutex_unlock(&lock);
	free(x);
}

/* The peer may still write into this slot: it stays reserved until the
 * peer says it closed, or the link ends. */
void rdma_offer_abandon(void *state)
{
	struct rdma_offer *x = state;

	if (x && x->rc) {
		pthread_mutex_lock(&x->link->cq_lock);
		x->rc->closed_sent = 1;
		__atomic_store_n(&x->rc->state, RC_CLOSED, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&x->link->cq_lock);
		x->slot = -1;
		x->rc = NULL;
	}
	rdma_offer_drop(x);
}

static int attach(struct sk *s, int fd, struct rdma_conn *rc, uint64_t raddr, uint32_t rkey, int side);

/* Client, on ACCEPT(RDMA): use the link to that peer if we have one, else
 * connect the spare to it.  Fills *o for the CONFIRM. */
int rdma_client_accept(struct sk *s, int fd, void *state, const struct shunt_hs_msg *a,
		       uint32_t tag, struct shunt_hs_offer *o)
{
	struct rdma_offer *x = state;
	struct rdma_link *l;
	union ibv_gid g;
	uint32_t key;
	int r;

	memcpy(g.raw, a->offer.gid, 16);
	pthread_mutex_lock(&lock);
	l = link_named(&g, a->offer.qpn, x->dev);
	if (l) {
		struct rdma_link *spare = x->link;
		slot_close(x);
		spare->next = spares;
		spares = spare;
		x->spare = 0;
		slot_open(x, l, tag);
	} else if (!rdma_link_connect(x->link, &g, a->offer.qpn, shunt_cfg.rdma_ack_timeout)) {
		link_add(x->link, a->offer.host_id, a->offer.proc_id);
		x->spare = 0;
	} else {
		slot_close(x);
	}
	pthread_mutex_unlock(&lock);
	if (x->slot < 0) {
		rdma_offer_drop(x);
		return SHUNT_R_RESOURCE;
	}
	if (rdma_slot_key(x->link, (unsigned)x->slot, &key)) {
		rdma_offer_drop(x);
		return SHUNT_R_LINK_FAILED;
	}
	r = attach(s, fd, x->rc, a->offer.addr, a->offer.rkey, 0);
	if (r) {
		rdma_offer_drop(x);
		return r;
	}
	fill(o, x->link, x->slot, key);
	free(x);
	return 0;
}

/* Server, on PROPOSAL(RDMA): the link to that client process, or a spare
 * connected to its queue pair; a slot in it.  Fills *o for the ACCEPT. */
int rdma_server_offer(int fd, const struct shunt_hs_msg *p, uint32_t tag, struct shunt_hs_offer *o,
		      void **state)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	struct rdma_offer *x;
	union ibv_gid g;
	uint32_t key;

	if (!rdma_available() || getsockname(fd, (void *)&ss, &sl))
		return SHUNT_R_HS_NO_TRANSPORT;
	if (!(x = calloc(1, sizeof *x)))
		return SHUNT_R_RESOURCE;
	memcpy(g.raw, p->offer.gid, 16);
	x->slot = -1;
	pthread_mutex_lock(&lock);
	x->dev = rdma_dev_for((void *)&ss);
	if (x->dev && (x->link = link_find(p->offer.host_id, p->offer.proc_id, x->dev))) {
		slot_open(x, x->link, tag);
	} else if (x->dev && (x->link = spare_take(x->dev))) {
		if (!rdma_link_connect(x->link, &g, p->offer.qpn, shunt_cfg.rdma_ack_timeout)) {
			link_add(x->link, p->offer.host_id, p->offer.proc_id);
			slot_open(x, x->link, tag);
		} else {
			rdma_link_free(x->link);
		}
	}
	pthread_mutex_unlock(&lock);
	if (x->slot < 0) {
		int r = no_link(x->dev) == -ENOMEM ? SHUNT_R_RESOURCE : SHUNT_R_HS_NO_TRANSPORT;
		free(x);
		return r;
	}
	if (rdma_slot_key(x->link, (unsigned)x->slot, &key)) {
		rdma_offer_drop(x);
		return SHUNT_R_LINK_FAILED;
	}
	fill(o, x->link, x->slot, key);
	*state = x;
	return 0;
}

/* Server, on the client's CONFIRM: it must name the link we answered on. */
int rdma_server_confirm(struct sk *s, int fd, void *state, const struct shunt_hs_msg *c, uint32_t tag)
{
	struct rdma_offer *x = state;
	int r;

	if (c->offer.qpn != x->link->peer_qpn || c->offer.transports != SHUNT_HS_T_RDMA) {
		rdma_offer_drop(x);
		return SHUNT_R_HS_MALFORMED;
	}
	r = attach(s, fd, x->rc, c->offer.addr, c->offer.rkey, 1);
	if (r)
		rdma_offer_drop(x);
	else
		free(x);
	return r;
}

/* ---- connections ---- */

static int attach(struct sk *s, int fd, struct rdma_conn *rc, uint64_t raddr, uint32_t rkey, int side)
{
	struct rdma_link *l = rc->link;
	struct conn *c = calloc(1, sizeof *c);
	int dupfd = fd_dup_hidden(fd), efd = real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint32_t rs = l->ring_size;

	if (!c || dupfd < 0 || efd < 0) {
		free(c);
		fd_close_internal(dupfd);
		if (efd >= 0)
			real.close(efd);
		return SHUNT_R_RESOURCE;
	}
	rc->raddr = raddr;
	rc->rkey = rkey;
	rc->c = c;
	c->seg = rc->h;
	c->side = side;
	c->rd = rc;
	c->rd_pid = shunt_pid();
	c->moved_fd = -1;
	c->efd_mine = fd_hide(efd);
	c->efd_peer = -1;
	c->bell_id = bell_new_id();
	c->tcp_fd = fd_hide(dupfd);
	c->spin_ns = shunt_cfg.spin_ns;
	conn_load_timeouts(c);
	pthread_mutex_init(&c->fo_lock, NULL);
	c->tx = (struct ring){ .ctl = &rc->h->ring[0], .data = rdma_slot_tx(l, rc->slot), .size = rs };
	c->rx = (struct ring){ .ctl = &rc->h->ring[1], .data = rdma_slot_rx(l, rc->slot), .size = rs };
	/* from here cursor messages wake this connection's sleepers */
	pthread_mutex_lock(&l->cq_lock);
	__atomic_store_n(&rc->state, RC_OPEN, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&l->cq_lock);
	s->conn = c;
	s->kind = SK_SHM;
	return 0;
}

static uint64_t max64(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_ACQUIRE);

	while (v > o && !__atomic_compare_exchange_n(p, &o, v, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		;
	return o;
}

static void release(struct rdma_conn *rc)
{
	rdma_slot_put(rc->link, rc->slot);
	rc_free(rc);
}

static int push_locked(struct conn *c, uint32_t extra, int flags, uint64_t *seq);
static void fo_request(struct conn *c, int reason);

/* Called with the link's completion lock held. */
static void on_cdc(struct rdma_link *l, unsigned slot, const struct shunt_cdc *m)
{
	struct rdma_conn *rc = l->slot_ctx[slot];
	struct shunt_ring_ctl *tx, *rx;
	int st;
	struct conn *c;

	if (!rc)
		return;
	if (m->flags & SHUNT_CDC_F_CLOSED)
		rc->closed_rcvd = 1;
	st = __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE);
	if (st == RC_CLOSED) {
		if (rc->closed_rcvd && rc->closed_sent)
			release(rc);
		return;
	}
	c = st == RC_OPEN ? rc->c : NULL;
	if (m->flags & SHUNT_CDC_F_FAILOVER) {
		/* the peer writes here no more: its bytes follow on TCP */
		if (c)
			fo_request(c, SHUNT_R_PEER_FAILOVER);
		return;
	}
	if (c && __atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE))
		return; /* our producer is frozen: the TCP stream has the rest */
	tx = &rc->h->ring[0];
	rx = &rc->h->ring[1];
	/* a peer can only move cursors forward, and never past what fits */
	if (m->prod - __atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE) > l->ring_size ||
	    m->cons > __atomic_load_n(&tx->prod, __ATOMIC_ACQUIRE)) {
		if (c) {
			c->peer_err = EPROTO;
			conn_wake_local(c, POLLIN | POLLOUT);
		}
		return;
	}
	if (max64(&rx->prod, m->prod) < m->prod && c)
		conn_wake_local(c, POLLIN);
	if (max64(&tx->cons, m->cons) < m->cons && c)
		conn_wake_local(c, POLLOUT);
	if ((m->flags & (SHUNT_CDC_F_RESET | SHUNT_CDC_F_CLOSED)) ==
	    (SHUNT_CDC_F_RESET | SHUNT_CDC_F_CLOSED)) {
		/* closed with our bytes unread: a reset (what came before it
		 * is still read first, as from TCP's queue) */
		if (c) {
			__atomic_store_n(&c->rd_reset, 1, __ATOMIC_RELEASE);
			c->peer_err = ECONNRESET;
			conn_wake_local(c, POLLIN | POLLOUT);
		}
	} else if ((m->flags & (SHUNT_CDC_F_FIN | SHUNT_CDC_F_CLOSED)) && !rx->wr_done) {
		__atomic_store_n(&rx->wr_done, 1, __ATOMIC_RELEASE);
		if (c)
			conn_wake_local(c, POLLIN);
	}
	if (m->flags & SHUNT_CDC_F_BLOCKED) {
		/* Answer now if we have read since our last word (a reader
		 * asleep on an empty ring reads no more); a writer posting at
		 * this moment carries our consumer anyway. */
		__atomic_store_n(&rc->peer_blocked, 1, __ATOMIC_RELEASE);
		if (c && !pthread_mutex_trylock(&rc->lock)) {
			if (__atomic_load_n(&rx->cons, __ATOMIC_ACQUIRE) != rc->acked &&
			    !push_locked(c, 0, 0, NULL))
				__atomic_store_n(&rc->peer_blocked, 0, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&rc->lock);
		}
	}
}

static int down_one(struct rdma_conn *rc, void *arg)
{
	(void)arg;
	fo_request(rc->c, SHUNT_R_LINK_FAILED);
	return 0;
}

/* The queue pair failed: every connection on it moves to its TCP socket
 * (not one is lost; wire.h 5c). */
static void on_down(struct rdma_link *l)
{
	shunt_log("rdma: link on %s to qp %u failed (completion status %d, opcode %d); its "
		  "connections move to TCP", l->dev->name, l->peer_qpn, l->fail_status, l->fail_op);
	link_each_open(l, down_one, NULL);
}

/* Post what the application staged, with a cursor message; rc->lock held. */
static int push_locked(struct conn *c, uint32_t extra, int flags, uint64_t *seq)
{
	struct rdma_conn *rc = c->rd;
	struct shunt_cdc m;
	/* the flag first: the writer sets it after its last byte, so a
	 * producer read after seeing it covers every byte (FIN never
	 * overtakes data, whichever thread posts) */
	int fin = __atomic_load_n(&c->tx.ctl->wr_done, __ATOMIC_ACQUIRE) && !rc->fin_sent;
	uint64_t staged = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	uint64_t prod = shunt_fault_rdma_hold(staged);
	int r;

	if (prod != staged)
		fin = 0; /* a test holds the rest back */

	if (__atomic_load_n(&c->fo_tx, __ATOMIC_ACQUIRE))
		return -EPIPE; /* the sending half is on TCP now */
	m = (struct shunt_cdc){ .ring = rc->raddr, .prod = prod, .tag = rc->tag, .flags = extra,
				.cons = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE) };
	if (fin)
		m.flags |= SHUNT_CDC_F_FIN;
	if (prod == rc->sent && m.cons == rc->acked && !m.flags)
		return 0;
	r = rdma_push(rc->link, rc->slot, rc->raddr, shunt_fault_rdma_key(rc->raddr, rc->rkey),
		      rc->sent, prod, &m, flags, seq);
	if (r)
		return r; /* a failed link reports itself through its completions */
	rc->sent = prod;
	rc->acked = m.cons;
	if (shunt_fault_rdma(prod))
		rdma_link_break(rc->link);
	if (m.flags & SHUNT_CDC_F_FIN)
		rc->fin_sent = 1;
	if (m.flags & SHUNT_CDC_F_CLOSED)
		rc->closed_sent = 1;
	return 0;
}

static void push(struct conn *c, uint32_t extra)
{
	pthread_mutex_lock(&c->rd->lock);
	push_locked(c, extra, PUSH_MAY_POLL, NULL);
	pthread_mutex_unlock(&c->rd->lock);
}

/* Before the TCP socket says FIN: the cursor message that ends the stream
 * (FIN, CLOSED) must have reached the peer's device, or the peer could see
 * the kernel's FIN first and end its stream short of our last bytes. */
static int push_and_wait(struct conn *c, uint32_t extra)
{
	struct rdma_conn *rc = c->rd;
	uint64_t seq = 0;
	int r;

	pthread_mutex_lock(&rc->lock);
	r = push_locked(c, extra, PUSH_MAY_POLL | PUSH_SIGNAL, &seq);
	pthread_mutex_unlock(&rc->lock);
	if (!r && seq)
		r = rdma_link_wait(rc->link, seq, 2000000000ull);
	return r;
}

/* shutdown(SHUT_WR), writer lock held, before the kernel's FIN: every byte
 * must be at the peer first - over RDMA, or moved to TCP if that fails.
 * Like TCP's, it never waits for the peer to read: what the socket cannot
 * take yet is sent by the progress thread, and the FIN after it (1). */
int rdma_conn_shutdown(struct conn *c)
{
	if (!conn_moving(c) && !push_and_wait(c, 0)) {
		c->rd->fin_done = 1;
		return 0;
	}
	fo_tx_begin(c, PUSH_MAY_POLL);
	if (move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) != -EAGAIN)
		return 0;
	__atomic_store_n(&c->fo_fin, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&fo_work, 1, __ATOMIC_RELEASE);
	return 1;
}

void rdma_conn_push(struct conn *c)
{
	if (!c->moved)
		push(c, 0);
}

/* After a read: tell the writer about the space, lazily (a quarter of the
 * ring), or at once when it said it waits (SMC's write_blocked). */
void rdma_conn_ack(struct conn *c, int force)
{
	struct rdma_conn *rc = c->rd;
	uint64_t cons = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE);

	if (c->moved)
		return; /* both halves on TCP: no cursor to tell */
	if (__atomic_exchange_n(&rc->peer_blocked, 0, __ATOMIC_ACQ_REL))
		force = 1;
	if (force || cons - rc->acked >= c->rx.size / 4)
		push(c, 0);
}

/* The writer is about to wait for space: the reader must answer every read. */
void rdma_conn_blocked(struct conn *c)
{
	if (!c->moved)
		push(c, SHUNT_CDC_F_BLOCKED);
}

int rdma_conn_peer_blocked(struct conn *c)
{
	return !c->moved && __atomic_load_n(&c->rd->peer_blocked, __ATOMIC_ACQUIRE);
}

void rdma_conn_poll(struct conn *c)
{
	if (!c->moved)
		rdma_link_poll(c->rd->link);
}

/* What every process holding a connection frees: its descriptors, and the
 * moved region's mapping if it moved before fork or exec. */
static void moved_free(struct conn *c)
{
	if (c->tcp_fd >= 0)
		fd_close_internal(c->tcp_fd);
	fd_close_internal(c->efd_mine);
	if (c->moved) {
		munmap(c->moved, c->moved_len);
		fd_close_internal(c->moved_fd);
	}
	free(c->passed);
	free(c);
}

/* The last close (conn_closing), or the process's end, with bytes of the
 * peer's unread: TCP resets the connection, so the closing word says so
 * and the socket goes with a reset too (SO_LINGER 0).  Only while the
 * connection is on RDMA here: once moved, the socket's own unread bytes
 * and the same option decide. */
void rdma_conn_closing(struct conn *c)
{
	if (c->close_reset || c->moved || c->passed || c->rd_pid != shunt_pid())
		return; /* (passed: the socket is another process's now) */
	if (!ring_used(&c->rx) && !(__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2 && conn_nread(c)))
		return;
	c->close_reset = 1;
	conn_reset_on_close(c);
}

/* The application let go: tell the peer (it stops writing into our ring);
 * the slot is reused once the peer said the same. */
void rdma_conn_free(struct conn *c)
{
	struct rdma_conn *rc = c->rd;
	struct rdma_link *l = rc->link;
	int now;

	if (c->rd_pid != shunt_pid()) { /* a forked child's or exec'd image's copy */
		moved_free(c);
		return;
	}
	/* every byte reaches the peer: over RDMA with the closing word, or on
	 * TCP (moved now if the link failed meanwhile; a flusher finishes
	 * what the socket cannot take yet, as the kernel would after close) */
	struct shunt_ring_ctl *locked = conn_lock(c, 0);
	if (conn_moving(c) || __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP ||
	    push_and_wait(c, SHUNT_CDC_F_CLOSED | (c->close_reset ? SHUNT_CDC_F_RESET : 0))) {
		fo_tx_begin(c, PUSH_MAY_POLL);
		if (move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT) == -EAGAIN)
			fo_orphan(c);
		else if (__atomic_exchange_n(&c->fo_fin, 0, __ATOMIC_ACQ_REL))
			real.shutdown(c->tcp_fd, SHUT_WR);
	}
	shunt_unlock(&locked->wlock);
	pthread_mutex_lock(&l->cq_lock);
	__atomic_store_n(&rc->state, RC_CLOSED, __ATOMIC_RELEASE);
	rc->c = NULL;
	now = rc->closed_rcvd || __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP;
	if (now)
		release(rc);
	pthread_mutex_unlock(&l->cq_lock);
	moved_free(c);
}

/* ---- failover: the TCP socket after the link (wire.h 5c) ----
 *
 * Each half of a connection moves once.  The sending half (writer lock):
 * our message, then the staged bytes the peer may lack, then the
 * application's; nothing more is posted.  The receiving half (fo_lock): the
 * peer's message, read off the socket after any probes, freezes our
 * producer, and the bytes it says we have are dropped.  A move asked for
 * (fo_want: the link failed, or the peer moved) is made by whoever holds
 * the writer lock next, or by the progress thread, which also sends what
 * a full socket could not take. */

static void fo_request(struct conn *c, int reason)
{
	int z = 0;

	if (__atomic_compare_exchange_n(&c->fo_want, &z, reason, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
		shunt_log("rdma: connection (tcp fd %d) moves to TCP: %s", c->tcp_fd,
			  shunt_reason_str((unsigned)reason));
	}
	__atomic_store_n(&fo_work, 1, __ATOMIC_RELEASE);
	conn_wake_local(c, POLLIN | POLLOUT);
}

/* Writer lock held.  push_flags: PUSH_MAY_POLL, or 0 from the progress
 * thread, which holds the link's completion lock: it must not wait for a
 * poster (who may wait for completions only it could reap); -EBUSY then. */
static int fo_tx_begin(struct conn *c, int push_flags)
{
	struct rdma_conn *rc = c->rd;
	struct rdma_link *l = rc->link;
	uint64_t start, end;
	int why;

	if (__atomic_load_n(&c->fo_tx, __ATOMIC_ACQUIRE))
		return 0;
	/* no post is under way */
	if (!(push_flags & PUSH_MAY_POLL)) {
		if (pthread_mutex_trylock(&rc->lock))
			return -EBUSY;
	} else {
		pthread_mutex_lock(&rc->lock);
	}
	why = __atomic_load_n(&c->fo_want, __ATOMIC_ACQUIRE);
	if (!why) {
		why = SHUNT_R_LINK_FAILED;
		__atomic_store_n(&c->fo_want, why, __ATOMIC_RELEASE);
	}
	start = __atomic_load_n(&c->tx.ctl->cons, __ATOMIC_ACQUIRE);
	end = __atomic_load_n(&c->tx.ctl->prod, __ATOMIC_ACQUIRE);
	/* the peer only tells a pass from the rest; a sandbox's move goes as
	 * fork-exec's, which every peer's parser knows (failover.c) */
	shunt_fo_encode(c->fo_hdr, start, end, (uint32_t)(why == SHUNT_R_SANDBOX ? SHUNT_R_FORK : why));
	c->fo_hdr_off = 0;
	c->fo_next = start;
	c->fo_start = start;
	c->fo_end = end;
	if (rc->fin_done) { /* all of it reached the peer and the kernel's FIN followed */
		c->fo_hdr_off = sizeof c->fo_hdr;
		c->fo_next = end;
	}
	/* a live link (the peer's failed, or the peer moved): say so there too,
	 * and that we write into its ring no more */
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP && !rc->closed_sent) {
		struct shunt_cdc m = { .ring = rc->raddr, .prod = rc->sent, .tag = rc->tag,
				       .cons = rc->acked,
				       .flags = SHUNT_CDC_F_FAILOVER | SHUNT_CDC_F_CLOSED };
		if (!rdma_push(l, rc->slot, rc->raddr, rc->rkey, rc->sent, rc->sent, &m, push_flags, NULL))
			rc->closed_sent = 1;
	}
	__atomic_store_n(&c->fo_tx, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rc->lock);
	__atomic_store_n(&fo_work, 1, __ATOMIC_RELEASE);
	return 0;
}

/* move.c's write on a moved half: the move, if not made yet. */
int rdma_fo_begin(struct conn *c)
{
	return fo_tx_begin(c, PUSH_MAY_POLL);
}


/* close() with bytes the socket cannot take yet: a thread finishes them
 * and closes our descriptor of the socket, as the kernel sends what was
 * queued after close(). */
struct orphan {
	int fd, fin;
	size_t len, off;
	uint8_t buf[];
};

static void *orphan_run(void *arg)
{
	struct orphan *o = arg;

	while (o->off < o->len) {
		struct pollfd p = { .fd = o->fd, .events = POLLOUT };
		ssize_t n = real.send(o->fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			o->off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* the peer is gone: so are the bytes, as with TCP */
		real.poll(&p, 1, 1000);
	}
	if (o->fin) /* the application's shutdown, owed until now */
		real.shutdown(o->fd, SHUT_WR);
	fd_close_internal(o->fd);
	free(o);
	return NULL;
}

static void fo_orphan(struct conn *c)
{
	size_t hdr = sizeof c->fo_hdr - c->fo_hdr_off, len = hdr + (size_t)(c->fo_end - c->fo_next);
	struct orphan *o = malloc(sizeof *o + len);

	if (!o) {
		move_flush_until(c, UINT64_MAX);
		return;
	}
	o->fd = c->tcp_fd;
	o->fin = __atomic_exchange_n(&c->fo_fin, 0, __ATOMIC_ACQ_REL);
	o->len = len;
	o->off = 0;
	memcpy(o->buf, c->fo_hdr + c->fo_hdr_off, hdr);
	for (size_t k = hdr; c->fo_next != c->fo_end; k++, c->fo_next++)
		o->buf[k] = c->tx.data[c->fo_next & (c->tx.size - 1)];
	if (!spawn(orphan_run, o)) {
		c->tcp_fd = -1; /* the thread's now */
	} else {
		free(o);
		move_flush_until(c, UINT64_MAX);
	}
}

/* One connection for fo_sweep; *again when it must look once more. */
static int sweep_one(struct rdma_conn *rc, void *arg)
{
	struct conn *c = rc->c;
	int *again = arg;

	if (!conn_moving(c) || (c->fo_tx && c->fo_hdr_off == sizeof c->fo_hdr &&
				     c->fo_next == c->fo_end && !c->fo_fin))
		return 0;
	struct shunt_ring_ctl *t = c->tx.ctl;
	if (shunt_trylock(&t->wlock)) {
		*again = 1; /* an application thread writes: it moves it */
		return 0;
	}
	if (t != c->tx.ctl) { /* moved before fork meanwhile: nothing owed */
		shunt_unlock(&t->wlock);
		return 0;
	}
	if (fo_tx_begin(c, 0)) {
		*again = 1;
	} else {
		int r = move_flush(c, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r == -EAGAIN)
			*again = 1;
		else if (__atomic_exchange_n(&c->fo_fin, 0, __ATOMIC_ACQ_REL))
			real.shutdown(c->tcp_fd, SHUT_WR); /* the shutdown owed */
	}
	shunt_unlock(&t->wlock);
	return 0;
}

/* Progress thread: make the moves asked for and send what full sockets
 * could not take, for connections no application thread is writing on. */
static void fo_sweep(void)
{
	int again = 0;

	if (!__atomic_exchange_n(&fo_work, 0, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&lock);
	for (struct rdma_link *l = links; l; l = l->next)
		link_each_open(l, sweep_one, &again);
	pthread_mutex_unlock(&lock);
	if (again)
		__atomic_store_n(&fo_work, 1, __ATOMIC_RELEASE);
}

/* fo_lock held: consume what precedes the peer's application bytes on the
 * socket (probes, its failover message, the bytes our ring has).  Never
 * blocks and never takes an application byte. */
static void fo_rx_settle(struct conn *c)
{
	uint8_t buf[4096];
	ssize_t r;

	while (!c->fo_rx) {
		struct shunt_fo m;
		uint64_t prod;
		size_t z = 0;
		int e;

		r = real.recv(c->tcp_fd, buf, 64, MSG_PEEK | MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (r <= 0) {
			/* the kernel's FIN or RST: cursor messages sent before
			 * it count first */
			int err = r ? errno : 0;
			rdma_link_drain(c->rd->link);
			if (!err && !__atomic_load_n(&c->rx.ctl->wr_done, __ATOMIC_ACQUIRE)) {
				/* FIN with no cursor FIN before it: the peer
				 * ended without flushing (killed, crashed, or
				 * its exit flush timed out) - bytes its write()
				 * accepted may be lost, so not a clean EOF */
				shunt_log("rdma: tcp fd %d: the peer closed without ending its stream "
					  "over RDMA; reporting ECONNRESET", c->tcp_fd);
				err = ECONNRESET;
				/* as a reset: a send reports it once, then EPIPE -
				 * not a byte to the kernel socket, which a gone
				 * peer's FIN would let through (writer_dead_peer) */
				__atomic_store_n(&c->rd_reset, 1, __ATOMIC_RELEASE);
			}
			if (!err)
				c->peer_eof = 1;
			else
				c->peer_err = err;
			return;
		}
		while (z < (size_t)r && !buf[z])
			z++;
		if (z) { /* liveness probes */
			(void)!real.recv(c->tcp_fd, buf, z, MSG_DONTWAIT);
			continue;
		}
		e = shunt_fo_parse(buf, (size_t)r, &m);
		if (e == -EAGAIN) {
			if (!sock_hung_up(c->tcp_fd))
				return; /* the rest is on its way */
			e = -EPROTO; /* and will never come */
		}
		if (!e) {
			pthread_mutex_lock(&c->rd->link->cq_lock);
			__atomic_store_n(&c->fo_rx, 1, __ATOMIC_RELEASE); /* cursor messages stop here */
			prod = __atomic_load_n(&c->rx.ctl->prod, __ATOMIC_ACQUIRE);
			pthread_mutex_unlock(&c->rd->link->cq_lock);
			/* passing the descriptor (rdma_conn_pass): the socket is
			 * to carry what our application has not read, so only the
			 * bytes it read are dropped */
			if (c->fo_pass)
				prod = __atomic_load_n(&c->rx.ctl->cons, __ATOMIC_ACQUIRE);
			e = shunt_fo_skip(&m, prod, c->rx.size, &c->fo_skip);
			/* the socket's stream starts at the message's start and
			 * owes us at least up to its end (what the peer's write()
			 * accepted): an end before it is a reset (item 5) */
			c->fo_rx_pos = m.start;
			c->fo_rx_end = m.end;
		}
		if (e) {
			shunt_log("rdma: invalid failover message on tcp fd %d", c->tcp_fd);
			__atomic_store_n(&c->fo_rx, 2, __ATOMIC_RELEASE);
			c->peer_err = EPROTO;
			conn_wake_local(c, POLLIN | POLLOUT);
			return;
		}
		(void)!real.recv(c->tcp_fd, buf, sizeof m, MSG_DONTWAIT);
		fo_request(c, m.reason == SHUNT_R_FD_PASSED ? SHUNT_R_FD_PASSED : SHUNT_R_PEER_FAILOVER);
		/* the peer's end of our link failed: ours is no better (its
		 * queue pair may not know yet), so every connection on it
		 * moves now and no new one is put on it */
		if (m.reason == SHUNT_R_LINK_FAILED &&
		    __atomic_load_n(&c->rd->link->state, __ATOMIC_ACQUIRE) == LINK_UP)
			rdma_link_break(c->rd->link);
	}
	while (c->fo_rx == 1) {
		if (!c->fo_skip) {
			__atomic_store_n(&c->fo_rx, 2, __ATOMIC_RELEASE);
			break;
		}
		r = real.recv(c->tcp_fd, buf, c->fo_skip < sizeof buf ? (size_t)c->fo_skip : sizeof buf,
			      MSG_DONTWAIT);
		if (r > 0) {
			c->fo_skip -= (uint64_t)r;
			c->fo_rx_pos += (uint64_t)r;
		} else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			/* the stream ended, or was reset, inside the resend:
			 * this recv took the kernel's one report of it, so the
			 * reader gets it from here (never a clean EOF) */
			c->fo_rx_err = r ? errno : ECONNRESET;
			__atomic_store_n(&c->fo_rx, 2, __ATOMIC_RELEASE); /* the application reads it */
		} else {
			break;
		}
	}
}

/* conn_refresh() for RDMA connections. */
void rdma_conn_refresh(struct conn *c)
{
	int rx = __atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE);

	if (rx == 2)
		return;
	pthread_mutex_lock(&c->fo_lock);
	fo_rx_settle(c);
	pthread_mutex_unlock(&c->fo_lock);
	if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) != rx)
		__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
}

/* ---- fork and exec: connections a process shares move to TCP ----
 *
 * A forked child can use neither the parent's queue pairs nor the pages the
 * device writes (MADV_DONTFORK), and exec drops both.  So before either,
 * every RDMA connection moves to its TCP socket, both halves, exactly as
 * after a link failure (reason fork-exec, which the peer is told in its
 * failover message): our staged bytes are flushed to the socket, the
 * peer's message and resent bytes are read, and the bytes our ring still
 * holds unread are copied into a small shared region (wire.h
 * SHUNT_MOVED_MAGIC, a memfd) that holds the rings from then on.  A forked
 * child shares that mapping, exec hands the memfd over: every process
 * holding the connection reads those bytes first, once, then the socket,
 * as with TCP.  The move is bounded (MOVE_WAIT_MS for all connections); a
 * connection that cannot move in time (a peer that does not answer, a
 * thread holding it) stays RDMA in the parent and is EIO in the child. */
#define MOVE_WAIT_MS 5000

static uint64_t ms_left(uint64_t deadline)
{
	uint64_t now = shunt_now_ns();

	return now >= deadline ? 0 : (deadline - now) / 1000000 + 1;
}

static int lock_until(_Atomic uint32_t *l, uint64_t deadline)
{
	while (shunt_trylock(l)) {
		if (!ms_left(deadline))
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 0;
}

/* The sending half: moved and flushed (its owed FIN sent), or -errno. */
static int move_tx(struct conn *c, uint64_t deadline, int reason)
{
	int r;

	if (lock_until(&c->tx.ctl->wlock, deadline))
		return -EBUSY;
	fo_request(c, reason); /* unless it is moving already */
	fo_tx_begin(c, PUSH_MAY_POLL);
	r = move_flush_until(c, deadline);
	if (!r && __atomic_exchange_n(&c->fo_fin, 0, __ATOMIC_ACQ_REL))
		real.shutdown(c->tcp_fd, SHUT_WR);
	shunt_unlock(&c->tx.ctl->wlock);
	return r == -EPIPE || r == -ECONNRESET ? 0 : r; /* a dead socket owes nothing */
}

/* The receiving half: the peer's message and resent bytes read. */
static int move_rx(struct conn *c, uint64_t deadline)
{
	while (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) != 2) {
		struct pollfd p = { .fd = c->tcp_fd, .events = POLLIN };
		uint64_t t0 = shunt_now_ns();
		rdma_conn_refresh(c);
		if (__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) == 2)
			break;
		if (!__atomic_load_n(&c->fo_rx, __ATOMIC_ACQUIRE) && (c->peer_eof || c->peer_err)) {
			/* the socket ended with no message before it: the peer
			 * sent everything over RDMA and closed (its FIN came
			 * after its last cursor message), so our ring has all */
			pthread_mutex_lock(&c->rd->link->cq_lock);
			__atomic_store_n(&c->fo_rx, 2, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&c->rd->link->cq_lock);
			__atomic_add_fetch(&c->fo_gen, 1, __ATOMIC_RELEASE);
			break;
		}
		if (!ms_left(deadline))
			return -ETIMEDOUT;
		real.poll(&p, 1, 20);
		if (shunt_now_ns() - t0 < 1000000) /* a message still partial */
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 0;
}

/* Before the descriptor is passed to another process (move.c, reader's
 * lock held): both halves on TCP, the socket carrying the peer's bytes
 * from our application's read position on - what our ring holds unread is
 * resent there (the peer resends from our last consumer update; we drop
 * only what was read).  Bounded as a move before fork. */
int rdma_conn_pass(struct conn *c)
{
	uint64_t deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;
	int r;

	if (c->rd_pid != shunt_pid() || c->moved)
		return -EBUSY; /* not this process's link: moved before a fork */
	if (c->fo_rx || conn_moving(c))
		return -EBUSY; /* moving already: our ring may hold what the socket will not */
	c->fo_pass = 1;
	fo_request(c, SHUNT_R_FD_PASSED);
	r = move_tx(c, deadline, SHUNT_R_FD_PASSED);
	if (!r)
		r = move_rx(c, deadline);
	c->fo_pass = 0;
	if (!r && c->peer_eof && ring_used(&c->rx))
		r = -EPIPE; /* the peer ended over RDMA: the rest is only in our ring */
	return r;
}

static int moved_map(int memfd, struct shunt_seg_hdr **out, size_t *len)
{
	struct stat st;
	struct shunt_seg_hdr *h;
	uint32_t rs;

	if (fstat(memfd, &st) || st.st_size < (off_t)SHUNT_SEG_HDR_SIZE + 4096 ||
	    st.st_size > (off_t)SHUNT_SEG_HDR_SIZE + (1 << 30))
		return -EPROTO;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (h == MAP_FAILED)
		return -errno;
	rs = h->ring_size;
	if (h->magic != SHUNT_MOVED_MAGIC || h->hdr_size != SHUNT_SEG_HDR_SIZE || rs < 4096 ||
	    (rs & (rs - 1)) || (off_t)SHUNT_SEG_HDR_SIZE + rs != st.st_size ||
	    __atomic_load_n(&h->ring[1].prod, __ATOMIC_ACQUIRE) -
	    __atomic_load_n(&h->ring[1].cons, __ATOMIC_ACQUIRE) > rs) {
		munmap(h, (size_t)st.st_size);
		return -EPROTO;
	}
	*out = h;
	*len = (size_t)st.st_size;
	return 0;
}

/* The connection's rings are the region's from now on. */
static void moved_use(struct conn *c, struct shunt_seg_hdr *h, size_t len, int memfd)
{
	uint8_t *data = (uint8_t *)h + SHUNT_SEG_HDR_SIZE;

	c->moved = h;
	c->moved_len = len;
	c->moved_fd = memfd;
	c->tx.data = c->rx.data = data; /* the sending half never writes it */
	c->tx.size = c->rx.size = h->ring_size;
	c->tx.cons_seen = c->rx.cons_seen = 0;
	c->tx.prod_seen = c->rx.prod_seen = 0;
	__atomic_store_n(&c->tx.ctl, &h->ring[0], __ATOMIC_RELEASE);
	__atomic_store_n(&c->rx.ctl, &h->ring[1], __ATOMIC_RELEASE);
}

/* Both halves on TCP: the unread bytes leave the device's pages. */
static int move_ring(struct conn *c, uint64_t deadline)
{
	struct shunt_ring_ctl *otx = c->tx.ctl, *orx = c->rx.ctl;
	uint64_t cons, n;
	uint32_t rs = 4096;
	struct shunt_seg_hdr *h;
	size_t len;
	int fd, r = -EBUSY;

	if (lock_until(&otx->wlock, deadline))
		return r;
	if (lock_until(&orx->rlock, deadline))
		goto out_w;
	r = 0;
	if (c->moved) /* another thread's fork moved it */
		goto out;
	cons = __atomic_load_n(&orx->cons, __ATOMIC_ACQUIRE);
	n = __atomic_load_n(&orx->prod, __ATOMIC_ACQUIRE) - cons; /* frozen: fo_rx is 2 */
	while (rs < n)
		rs <<= 1;
	len = SHUNT_SEG_HDR_SIZE + rs;
	fd = real.memfd_create("shunt-moved", MFD_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		/* no descriptor to be had (a sandbox's RLIMIT_NOFILE): shared
		 * anonymous memory, which a fork shares too; only an exec
		 * cannot take it along (exec.c) */
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED) {
			r = -errno;
			goto out;
		}
	} else if (fd < 0 || ftruncate(fd, (off_t)len) ||
		   (h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		r = -errno;
		if (fd >= 0)
			real.close(fd);
		goto out;
	}
	h->magic = SHUNT_MOVED_MAGIC;
	h->version = 1;
	h->ring_size = rs;
	h->hdr_size = SHUNT_SEG_HDR_SIZE;
	ring_readv(&c->rx, &(struct iovec){ (uint8_t *)h + SHUNT_SEG_HDR_SIZE, n }, 1, n, 1);
	h->ring[1].prod = n;
	h->ring[1].wr_done = __atomic_load_n(&orx->wr_done, __ATOMIC_ACQUIRE);
	h->ring[0].wr_done = __atomic_load_n(&otx->wr_done, __ATOMIC_ACQUIRE);
	/* threads that wait for the old locks find the rings changed (conn.c) */
	moved_use(c, h, len, fd >= 0 ? fd_hide(fd) : -1);
	/* shared from now on: a process cannot tell how much of the peer's
	 * resend the others read, so the short-resend check (fo_rx_end) is
	 * this process's only while it reads alone */
	c->fo_rx_end = 0;
	r = 0;
out:
	shunt_unlock(&orx->rlock);
out_w:
	shunt_unlock(&otx->wlock);
	return r;
}

struct movelist {
	struct sk **v;
	int n, cap;
};

static void gather(int fd, struct sk *s, void *arg)
{
	struct movelist *m = arg;
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind != SK_SHM || !c || !c->rd || c->moved || c->broken || c->rd_pid != shunt_pid())
		return;
	for (int i = 0; i < m->n; i++)
		if (m->v[i] == s)
			return; /* a dup'd descriptor */
	if (m->n == m->cap) {
		int cap = m->cap ? 2 * m->cap : 16;
		struct sk **v = realloc(m->v, sizeof *v * (size_t)cap);
		if (!v)
			return;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = sk_ref(s);
}

void rdma_share_prepare(const char *why, int reason)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER; /* two threads forking */
	struct movelist m = { 0 };
	uint64_t deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;
	int *err;

	if (!__atomic_load_n(&links, __ATOMIC_ACQUIRE))
		return; /* no RDMA connection was ever made here */
	pthread_mutex_lock(&one);
	fdtab_each(gather, &m);
	if (!m.n || !(err = calloc((size_t)m.n, sizeof *err))) {
		for (int i = 0; i < m.n; i++)
			sk_put(m.v[i]);
		free(m.v);
		pthread_mutex_unlock(&one);
		return;
	}
	/* all sending halves first: the peers move theirs meanwhile */
	for (int i = 0; i < m.n; i++)
		err[i] = move_tx(m.v[i]->conn, deadline, reason);
	for (int i = 0; i < m.n; i++)
		if (!err[i])
			err[i] = move_rx(m.v[i]->conn, deadline);
	for (int i = 0; i < m.n; i++) {
		struct conn *c = m.v[i]->conn;
		if (!err[i])
			err[i] = move_ring(c, deadline);
		if (err[i])
			shunt_log("rdma: connection (tcp fd %d) could not move to TCP before %s (%s): "
				  "only this process can use it", c->tcp_fd, why, strerror(-err[i]));
		sk_put(m.v[i]);
	}
	free(err);
	free(m.v);
	pthread_mutex_unlock(&one);
}

/* Before the process ends (exit(), _exit()): the kernel closes the TCP
 * socket (its FIN) and the queue pair goes with the process, so what
 * write() accepted must be at the peer's device first - TCP's buffer would
 * deliver it.  Each connection this process owns ends its sending half as
 * shutdown(SHUT_WR) does: bytes posted, then the cursor FIN, its
 * completion awaited.  Bounded (a writer blocked on a full ring holds its
 * lock, a peer may not answer): no new flush after MOVE_WAIT_MS.  A killed
 * process cannot do this. */
void rdma_exit_flush(void)
{
	struct movelist m = { 0 };
	uint64_t deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;

	if (!__atomic_load_n(&links, __ATOMIC_ACQUIRE))
		return; /* no RDMA connection was ever made here */
	if (shunt_in_handler())
		return; /* _exit() in a signal handler: the interrupted thread may
			 * hold the locks a flush takes; the peer sees a reset */
	shunt_fault_rdma_release();
	fdtab_each(gather, &m);
	for (int i = 0; i < m.n; i++) {
		struct conn *c = m.v[i]->conn;
		/* past the deadline the rest go as they are (each flush may
		 * wait up to 2 s for a peer that does not answer) */
		rdma_conn_closing(c);
		if (c->close_reset && !conn_moving(c) && ms_left(deadline) &&
		    !lock_until(&c->tx.ctl->wlock, deadline)) {
			/* bytes of the peer's unread: it is reset, not ended */
			push_and_wait(c, SHUNT_CDC_F_CLOSED | SHUNT_CDC_F_RESET);
			shunt_unlock(&c->tx.ctl->wlock);
		} else if (!c->shut_wr && ms_left(deadline) && !lock_until(&c->tx.ctl->wlock, deadline)) {
			__atomic_store_n(&c->tx.ctl->wr_done, 1, __ATOMIC_RELEASE);
			rdma_conn_shutdown(c);
			shunt_unlock(&c->tx.ctl->wlock);
		}
		sk_put(m.v[i]);
	}
	free(m.v);
}

__attribute__((destructor)) static void rdma_exit(void)
{
	rdma_exit_flush();
}

/* After exec: a connection that moved before it, from its handover. */
int rdma_conn_adopt(int fd, int memfd, int side, int reason, struct conn **out)
{
	static struct rdma_conn no_link; /* its link is gone with the old image */
	struct conn *c = calloc(1, sizeof *c);
	struct shunt_seg_hdr *h = NULL;
	size_t len = 0;
	int r = c ? moved_map(memfd, &h, &len) : -ENOMEM;
	int efd;

	if (r) {
		free(c);
		return r;
	}
	efd = real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->tcp_fd = fd_dup_hidden(fd);
	c->moved_fd = fd_dup_hidden(memfd);
	if (efd < 0 || c->tcp_fd < 0 || c->moved_fd < 0) {
		if (efd >= 0)
			real.close(efd);
		fd_close_internal(c->tcp_fd);
		fd_close_internal(c->moved_fd);
		munmap(h, len);
		free(c);
		return -EMFILE;
	}
	c->rd = &no_link;
	c->rd_pid = 0;
	c->side = side;
	c->efd_mine = fd_hide(efd);
	c->efd_peer = -1;
	c->bell_id = bell_new_id();
	c->spin_ns = shunt_cfg.spin_ns;
	conn_load_timeouts(c);
	pthread_mutex_init(&c->fo_lock, NULL);
	c->fo_want = reason;
	c->fo_tx = 1;
	c->fo_rx = 2;
	c->fo_hdr_off = sizeof c->fo_hdr;
	moved_use(c, h, len, c->moved_fd);
	*out = c;
	return 0;
}

/* A forked child starts with no links; the connections that moved before
 * the fork are TCP (and their region) here, the others EIO (core.c). */
void rdma_atfork_child(void)
{
	links = spares = NULL;
	thread_on = 0;
	rdma_dev_forget();
	pthread_mutex_init(&lock, NULL);
}
#else /* built without libibverbs-dev: no connection is ever offered RDMA */
#include "shim.h"
int rdma_available(void) { return 0; }
int rdma_client_offer(int fd, uint32_t tag, struct shunt_hs_offer *o, void **state) { return -ENODEV; }
int rdma_client_accept(struct sk *s, int fd, void *state, const struct shunt_hs_msg *a, uint32_t tag,
		       struct shunt_hs_offer *o) { return SHUNT_R_HS_NO_TRANSPORT; }
int rdma_server_offer(int fd, const struct shunt_hs_msg *p, uint32_t tag, struct shunt_hs_offer *o,
		      void **state) { return SHUNT_R_HS_NO_TRANSPORT; }
int rdma_server_confirm(struct sk *s, int fd, void *state, const struct shunt_hs_msg *c, uint32_t tag)
{ return SHUNT_R_HS_NO_TRANSPORT; }
void rdma_offer_drop(void *state) { (void)state; }
void rdma_offer_abandon(void *state) { (void)state; }
void rdma_conn_push(struct conn *c) { (void)c; }
void rdma_conn_ack(struct conn *c, int force) { (void)c; }
void rdma_conn_blocked(struct conn *c) { (void)c; }
int rdma_conn_peer_blocked(struct conn *c) { return 0; }
void rdma_conn_poll(struct conn *c) { (void)c; }
void rdma_conn_free(struct conn *c) { (void)c; }
int rdma_conn_shutdown(struct conn *c) { (void)c; return 0; }
void rdma_conn_refresh(struct conn *c) { (void)c; }
int rdma_fo_begin(struct conn *c) { (void)c; return -EIO; }
int rdma_conn_pass(struct conn *c) { (void)c; return -ENOTSUP; }
void rdma_conn_closing(struct conn *c) { (void)c; }
void rdma_share_prepare(const char *why, int reason) { (void)why; (void)reason; }
void rdma_exit_flush(void) {}
int rdma_conn_adopt(int fd, int memfd, int side, int reason, struct conn **out) { return -ENOTSUP; }
void rdma_atfork_child(void) {}
#endif
