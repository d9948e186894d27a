/* SPDX-License-Identifier: MIT */
/*
 * offer.c - the in-band handshake's RDMA half (src/setup/inband.c).
 *
 * Client and server each offer a slot on a link (its GID, queue pair,
 * key and ring) in the handshake's messages; the connection attaches to
 * the slot once the other side's CONFIRM (or ACCEPT) named its own.
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

int rdma_available(void)
{
	return shunt_cfg.transport != 1 && !ibv_load();
}

/* ---- the handshake's RDMA half (inband.c) ---- */

struct rdma_offer {
	struct rdma_dev *dev;
	struct rdma_link *link;  /* spare (client, until ACCEPT) or the link used */
	int slot;
	struct rdma_conn *rc;    /* the slot's state */
	int spare;               /* link is a spare not yet connected */
};

void rdma_rc_free(struct rdma_conn *rc)
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
	shunt_mutex_lock(&l->cq_lock);
	slot = rdma_slot_take(l, rc, tag);
	shunt_mutex_unlock(&l->cq_lock);
	if (slot < 0) {
		rdma_rc_free(rc);
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
	shunt_mutex_lock(&x->link->cq_lock);
	rdma_slot_put(x->link, (unsigned)x->slot);
	shunt_mutex_unlock(&x->link->cq_lock);
	rdma_rc_free(x->rc);
	x->slot = -1;
	x->rc = NULL;
}

/* rkey: the slot's key for this connection (rdma_slot_key); 0 in the
 * client's PROPOSAL, made on a spare link that cannot bind yet. */
static void fill(struct shunt_hs_offer *o, struct rdma_link *l, int slot, uint32_t rkey)
{
	memcpy(o->gid, l->dev->gid.raw, 16);
	o->qpn = l->qp->qp_num;
	o->peer_qpn = 0;
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
	shunt_mutex_lock(&rdma_lock);
	x->dev = rdma_dev_for((void *)&ss);
	x->link = x->dev ? rdma_spare_take(x->dev) : NULL;
	x->slot = -1;
	if (x->link && slot_open(x, x->link, tag) < 0) {
		rdma_link_free(x->link);
		x->link = NULL;
	}
	if (x->link)
		rdma_spare_hold(x->link);
	shunt_mutex_unlock(&rdma_lock);
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
	shunt_mutex_lock(&rdma_lock);
	slot_close(x);
	if (x->spare) /* unused: back to the pool */
		rdma_spare_back(x->link);
	shunt_mutex_unlock(&rdma_lock);
	free(x);
}

/* The peer may still write into this slot: it stays reserved until the
 * peer says it closed, or the link ends. */
void rdma_offer_abandon(void *state)
{
	struct rdma_offer *x = state;

	if (x && x->rc) {
		shunt_mutex_lock(&x->link->cq_lock);
		x->rc->closed_sent = 1;
		__atomic_store_n(&x->rc->state, RC_CLOSED, __ATOMIC_RELEASE);
		shunt_mutex_unlock(&x->link->cq_lock);
		x->slot = -1;
		x->rc = NULL;
	}
	rdma_offer_drop(x);
}


/* Client, on ACCEPT(RDMA): the link to that queue pair if we have one,
 * else connect the queue pair of ours the server's is connected to
 * (peer_qpn) - this offer's spare, or another offer's when the server
 * answered that one's PROPOSAL first and named the same link for both.
 * Connecting whichever spare heard first made two half-links that reach
 * nobody (tests/behave/concurrent_connect.c).  Fills *o for the CONFIRM. */
int rdma_client_accept(struct sk *s, int fd, void *state, const struct shunt_hs_msg *a,
		       uint32_t tag, struct shunt_hs_offer *o)
{
	struct rdma_offer *x = state;
	struct rdma_link *l, *mine = x->link;
	uint32_t want = a->offer.peer_qpn ? a->offer.peer_qpn : mine->qp->qp_num, key;
	int r, why = SHUNT_R_RESOURCE, connect_failed = 0;
	union ibv_gid g;

	memcpy(g.raw, a->offer.gid, 16);
	shunt_mutex_lock(&rdma_lock);
	if (!(l = rdma_links_named(&g, a->offer.qpn, x->dev)))
		l = rdma_retiring_named(&g, a->offer.qpn, x->dev);
	if (l && a->offer.peer_qpn && l->qp->qp_num != want) {
		l = NULL; /* theirs reaches another queue pair of ours: a stale link */
	} else if (!l && (l = rdma_spare_connect(want, x->dev, &g, a->offer.qpn, &connect_failed))) {
		rdma_links_add(l, a->offer.host_id, a->offer.proc_id);
	}
	if (!l) {
		shunt_log("rdma: the server's queue pair %u reaches our %u, which we cannot use; "
			  "this connection stays TCP", a->offer.qpn, want);
		/* ours is gone (failed while it carried nothing: the server
		 * never heard): our DECLINE says so, and the server retires
		 * its end, so the next connection makes a new link */
		why = a->offer.peer_qpn && !connect_failed ? SHUNT_R_STALE_LINK : SHUNT_R_HS_NO_TRANSPORT;
	}
	if (l != mine) { /* our slot moves to that link; our spare goes back */
		slot_close(x);
		rdma_spare_back(mine);
		if (l)
			slot_open(x, l, tag);
	}
	x->spare = 0;
	shunt_mutex_unlock(&rdma_lock);
	if (x->slot < 0) {
		rdma_offer_drop(x);
		return why;
	}
	if (rdma_slot_key(x->link, (unsigned)x->slot, &key)) {
		rdma_offer_drop(x);
		return SHUNT_R_LINK_FAILED;
	}
	r = rdma_attach(s, fd, x->rc, a->offer.addr, a->offer.rkey, 0);
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
	shunt_mutex_lock(&rdma_lock);
	x->dev = rdma_dev_for((void *)&ss);
	if (x->dev && (x->link = rdma_links_find(p->offer.host_id, p->offer.proc_id, x->dev))) {
		slot_open(x, x->link, tag);
	} else if (x->dev && (x->link = rdma_spare_take(x->dev))) {
		if (!rdma_link_connect(x->link, &g, p->offer.qpn, shunt_cfg.rdma_ack_timeout)) {
			rdma_links_add(x->link, p->offer.host_id, p->offer.proc_id);
			slot_open(x, x->link, tag);
		} else {
			rdma_link_free(x->link);
		}
	}
	shunt_mutex_unlock(&rdma_lock);
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
	o->peer_qpn = x->link->peer_qpn; /* the client connects exactly that one */
	shunt_fault_rdma_foreign(p->offer.qpn, o); /* tests only (fault.c) */
	*state = x;
	return 0;
}

/* Server, on the client's DECLINE stale-link: its end of the link we named
 * is gone - it failed while it carried nothing, so no post of ours failed
 * and we never heard - and every later ACCEPT naming it would be declined
 * the same way.  The link is retired now if it carries no other
 * connection (this offer's slot is still open; a client that lies only
 * gets a link with nothing on it remade).  One that does carry others is
 * left to them: their next post fails and moves them, and a later decline
 * finds it empty. */
void rdma_offer_stale(void *state)
{
	struct rdma_offer *x = state;
	struct rdma_link *l;

	if (!x || x->slot < 0)
		return;
	l = x->link;
	shunt_mutex_lock(&rdma_lock);
	if (!(__atomic_load_n(&l->used, __ATOMIC_ACQUIRE) & ~(1u << x->slot))) {
		shunt_log("rdma: the client has no queue pair %u any more: our link to it retires",
			  l->peer_qpn);
		rdma_link_down(l);
	}
	shunt_mutex_unlock(&rdma_lock);
}

/* Server, on the client's CONFIRM: it must name the link we answered on. */
int rdma_server_confirm(struct sk *s, int fd, void *state, const struct shunt_hs_msg *c, uint32_t tag)
{
	struct rdma_offer *x = state;
	int r;

	/* After its CONFIRM the client may write into our slot: a failure
	 * here keeps the slot reserved (abandoned) and ends the connection
	 * (inband.c) */
	if (c->offer.qpn != x->link->peer_qpn || c->offer.transports != SHUNT_HS_T_RDMA) {
		shunt_log("rdma: a CONFIRM named queue pair %u, our link reaches %u: refused",
			  c->offer.qpn, x->link->peer_qpn);
		rdma_offer_abandon(x);
		return SHUNT_R_HS_MALFORMED;
	}
	r = rdma_attach(s, fd, x->rc, c->offer.addr, c->offer.rkey, 1);
	if (r)
		rdma_offer_abandon(x);
	else
		free(x);
	return r;
}

