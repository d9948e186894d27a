/* SPDX-License-Identifier: MIT */
/*
 * progress.c - the RDMA transport's progress thread.
 *
 * It sleeps on the devices' completion channels and async events, so
 * event-driven programs (epoll, poll) are woken through a connection's
 * eventfd as with shared memory; a spinning reader or writer polls the
 * completion queue itself (cursor.c).  It also probes stalled windows and
 * finishes what failovers left (failover.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdma.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/handshake.h"
#include "../../common/failover.h"

struct rdma_link *rdma_links;
struct rdma_link *rdma_spares;
pthread_mutex_t rdma_lock = PTHREAD_MUTEX_INITIALIZER;
int rdma_thread_on;
pid_t rdma_thread_pid;

static void window_probe(void);

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
		/* a queue pair's or queue's error says why a link failed */
		if (e.event_type == IBV_EVENT_QP_FATAL || e.event_type == IBV_EVENT_QP_REQ_ERR ||
		    e.event_type == IBV_EVENT_QP_ACCESS_ERR || e.event_type == IBV_EVENT_CQ_ERR)
			shunt_log("rdma: %s: %s on %s %u", d->name, ibv.event_type_str(e.event_type),
				  e.event_type == IBV_EVENT_CQ_ERR ? "a completion queue" : "queue pair",
				  e.event_type == IBV_EVENT_CQ_ERR ? 0 : e.element.qp->qp_num);
		ibv.ack_async_event(&e);
	}
	if (!dead)
		return;
	shunt_log("rdma: %s: port down or device failed", d->name);
	shunt_mutex_lock(&rdma_lock);
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (l->dev == d && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP)
			rdma_link_break(l);
	shunt_mutex_unlock(&rdma_lock);
}

static void progress_once(int timeout_ms)
{
	struct pollfd p[32];
	struct rdma_dev *dev[16];
	struct rdma_link *l;
	int n = 0;

	shunt_mutex_lock(&rdma_lock);
	for (l = rdma_links; l && n < 16; l = l->next) {
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= dev[i] == l->dev;
		if (!dup)
			dev[n++] = l->dev;
	}
	shunt_mutex_unlock(&rdma_lock);
	for (int i = 0; i < n; i++) {
		p[2 * i] = (struct pollfd){ .fd = dev[i]->ch->fd, .events = POLLIN };
		p[2 * i + 1] = (struct pollfd){ .fd = dev[i]->ctx->async_fd, .events = POLLIN };
	}
	/* Under an RLIMIT_NOFILE below our descriptors (OpenSSH's child runs
	 * under 1) poll() refuses the array (EINVAL): nap instead, and look
	 * at every channel as if it had fired - or this thread spins */
	if (real.poll(p, (nfds_t)(2 * n), timeout_ms) < 0 && errno == EINVAL) {
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
		for (int i = 0; i < 2 * n; i++)
			p[i].revents = POLLIN;
	}
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
	shunt_mutex_lock(&rdma_lock);
	rdma_links_poll();
	rdma_links_retire();
	rdma_dev_sweep(); /* (devices opened before a credential change, unused now) */
	if (shunt_fault_rdma_die())
		for (l = rdma_links; l; l = l->next)
			rdma_link_break(l);
	window_probe();
	rdma_backlog_sweep();
	rdma_fin_sweep();
	shunt_mutex_unlock(&rdma_lock);
	rdma_fo_sweep();
	rdma_close_sweep();
	rdma_spare_refill();
}

/* fn on each open connection of l, under the link's cq lock (which keeps
 * rc->c alive), until fn returns nonzero. */
void rdma_link_each_open(struct rdma_link *l, int (*fn)(struct rdma_conn *rc, void *arg), void *arg)
{
	shunt_mutex_lock(&l->cq_lock);
	for (unsigned s = 0; s < LINK_SLOTS; s++) {
		struct rdma_conn *rc = l->slot_ctx[s];
		if (rc && __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE) == RC_OPEN && rc->c && fn(rc, arg))
			break;
	}
	shunt_mutex_unlock(&l->cq_lock);
}

/* fn on each open connection of every link (rdma_lock held); up: of the
 * links that are up only. */
void rdma_each_open(int (*fn)(struct rdma_conn *rc, void *arg), void *arg, int up)
{
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (!up || __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP)
			rdma_link_each_open(l, fn, arg);
}

/* When *work was set: fn on each open connection of every link
 * (rdma_lock held); *work set again if fn said so (its int *arg). */
void rdma_each_open_flagged(_Atomic int *work, int (*fn)(struct rdma_conn *rc, void *arg), int up)
{
	int again = 0;

	if (!__atomic_exchange_n(work, 0, __ATOMIC_ACQ_REL))
		return;
	rdma_each_open(fn, &again, up);
	if (again)
		__atomic_store_n(work, 1, __ATOMIC_RELEASE);
}

/* Reap every link's completions (rdma_lock held). */
void rdma_links_poll(void)
{
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		rdma_link_poll(l);
}

/* One link's probe (window_probe): 1 once a cursor message went. */
static int probe_one(struct rdma_conn *rc, void *arg)
{
	struct conn *c = rc->c;
	int r;

	(void)arg;
	if (ring_space(&c->tx) || rcn(c)->moved || conn_moving(c) || shunt_mutex_trylock(&rc->lock))
		return 0;
	/* no completion polling here: we hold the cq lock */
	r = rdma_push_locked(c, SHUNT_CDC_F_BLOCKED, 0, NULL);
	shunt_mutex_unlock(&rc->lock);
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
	rdma_each_open(probe_one, NULL, 1);
}

static void *progress(void *arg)
{
	(void)arg;
	for (;;)
		progress_once(20);
	return NULL;
}

/* A detached thread of ours: the application's signals are not for it. */
int rdma_spawn(void *(*fn)(void *), void *arg)
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

void rdma_thread_start(void)
{
	if (rdma_thread_on && rdma_thread_pid == shunt_pid())
		return;
	if (!rdma_spawn(progress, NULL)) {
		rdma_thread_on = 1;
		rdma_thread_pid = shunt_pid();
	}
}

void rdma_fd_nonblock(int fd)
{
	int f = real.fcntl(fd, F_GETFL);

	if (f >= 0)
		real.fcntl(fd, F_SETFL, f | O_NONBLOCK);
}

