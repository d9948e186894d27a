/* SPDX-License-Identifier: MIT */
/*
 * links.c - the RDMA links a process holds: one per peer process, and one
 * spare per device kept ready.
 *
 * A connection to a new peer takes the spare (its queue pair made off the
 * connection's path) and a new spare is made by the progress thread.
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

/* ---- links ---- */

static int link_new(struct rdma_dev *d, struct rdma_link **out)
{
	static int said;
	int r = rdma_link_new(d, shunt_cfg.ring_size, &rdma_link_cb, out);

	if (!r && !(*out)->mw[0] && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		shunt_log("rdma: %s has no memory windows: a peer's key reaches every ring of "
			  "its link (isolation per peer process, not per connection)", d->name);
	return r;
}

struct rdma_link *rdma_spare_take(struct rdma_dev *d)
{
	struct rdma_link **pp, *l = NULL;

	for (pp = &rdma_spares; *pp; pp = &(*pp)->next)
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

void rdma_spare_refill(void)
{
	struct rdma_dev *need = NULL;
	struct rdma_link *l, *n;

	shunt_mutex_lock(&rdma_lock);
	for (l = rdma_links; l && !need; l = l->next) {
		need = l->dev->stale ? NULL : l->dev; /* (no link is made there: rdma_dev_renew) */
		for (n = rdma_spares; n; n = n->next)
			if (n->dev == need)
				need = NULL;
	}
	shunt_mutex_unlock(&rdma_lock);
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
	shunt_mutex_lock(&rdma_lock);
	if (need->stale) { /* the process changed its credentials meanwhile */
		rdma_link_free(n);
	} else {
		n->next = rdma_spares;
		rdma_spares = n;
	}
	shunt_mutex_unlock(&rdma_lock);
}

/* Client: the spares that offers in flight hold (each its own): the
 * server may answer any of them with a queue pair it connected to another
 * (wire.h, the ACCEPT's peer_qpn). */
struct rdma_link *rdma_offered;

static int unlink_from(struct rdma_link **head, struct rdma_link *l)
{
	for (struct rdma_link **pp = head; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			l->next = NULL;
			return 1;
		}
	return 0;
}

void rdma_spare_hold(struct rdma_link *l)
{
	l->next = rdma_offered;
	rdma_offered = l;
}

/* An offer lets go of its spare (its slot closed): back to the pool,
 * unless an answer to another offer connected it meanwhile (it is one of
 * rdma_links then) - or failed to (freed: its queue pair is in no state
 * to be offered again). */
void rdma_spare_back(struct rdma_link *l)
{
	if (!unlink_from(&rdma_offered, l))
		return;
	if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_DOWN || l->dev->stale) {
		rdma_link_free(l);
		return;
	}
	l->idle_since = 0; /* (one of several spares then: rdma_links_retire) */
	l->next = rdma_spares;
	rdma_spares = l;
}

/* Client: connect the unconnected queue pair qpn of ours - one of the
 * offers' spares or the pool's - to the server's queue pair at gid; the
 * link (to be added to rdma_links), or NULL: no such spare, or its
 * connect failed (a GID no route reaches: a hostile or broken server).
 * A spare whose connect failed is never offered again: one an offer holds
 * goes when the offer lets go of it (rdma_spare_back), the pool's at once
 * - before, it was left on the offers' list, where nothing freed it: a
 * queue pair and 16 MiB of rings per such ACCEPT (tests/rdma/foreign.sh). */
struct rdma_link *rdma_spare_connect(uint32_t qpn, struct rdma_dev *d, const union ibv_gid *gid,
				     uint32_t peer_qpn, int *failed)
{
	struct rdma_link *heads[2] = { rdma_offered, rdma_spares };

	*failed = 0;
	for (int h = 0; h < 2; h++)
		for (struct rdma_link *l = heads[h]; l; l = l->next) {
			if (l->dev != d || l->qp->qp_num != qpn ||
			    __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_DOWN)
				continue;
			if (!rdma_link_connect(l, gid, peer_qpn, shunt_cfg.rdma_ack_timeout)) {
				unlink_from(h ? &rdma_spares : &rdma_offered, l);
				return l;
			}
			*failed = 1;
			__atomic_store_n(&l->state, LINK_DOWN, __ATOMIC_RELEASE);
			if (h) { /* the pool's: no offer holds it */
				unlink_from(&rdma_spares, l);
				rdma_link_free(l);
			}
			return NULL;
		}
	return NULL;
}

/* (a link made before a credential change is on the device opened then:
 * the same device for this) */
static int up_on(struct rdma_link *l, struct rdma_dev *d)
{
	return rdma_dev_same(l->dev, d) && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP;
}

static int usable(struct rdma_link *l, struct rdma_dev *d)
{
	return up_on(l, d) && __atomic_load_n(&l->used, __ATOMIC_ACQUIRE) != 0xffffffffu &&
	       !l->retire_agreed; /* (the peer retired it: it goes once empty) */
}

/* Server: a link to that client process with a free slot (a full one is
 * joined by another: the link group grows a queue pair). */
struct rdma_link *rdma_links_find(const uint8_t host[16], uint64_t proc, struct rdma_dev *d)
{
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (usable(l, d) && l->peer_proc == proc && !memcmp(l->peer_host, host, 16))
			return l;
	return NULL;
}

/* Client: the link the server answered on, if it is one of ours - full
 * or not (a full one is no reason to connect a second queue pair to it). */
struct rdma_link *rdma_links_named(const union ibv_gid *g, uint32_t qpn, struct rdma_dev *d)
{
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (up_on(l, d) && l->peer_qpn == qpn && !memcmp(l->peer_gid.raw, g->raw, 16))
			return l;
	return NULL;
}

void rdma_links_add(struct rdma_link *l, const uint8_t host[16], uint64_t proc)
{
	memcpy(l->peer_host, host, 16);
	l->peer_proc = proc;
	l->next = rdma_links;
	rdma_links = l;
	rdma_fd_nonblock(l->dev->ch->fd);
	rdma_fd_nonblock(l->dev->ctx->async_fd);
	/* the program's close_range() or closefrom() must not take them */
	fd_mark_internal(l->dev->ch->fd);
	fd_mark_internal(l->dev->ctx->async_fd);
	fd_mark_internal(l->dev->ctx->cmd_fd);
	rdma_thread_start();
}

/* ---- idle links retire (wire.h, SHUNT_CDC_F_LINK) ----
 *
 * A second link to a peer is made when every slot of the first is taken -
 * under load, closes whose words are still on their way hold slots too -
 * and would stay for the process's life: a queue pair and 16 MiB of rings
 * that nothing uses.  One idle LINK_IDLE_NS, with another link up to the
 * same peer, leaves the list the server side searches (it is named in no
 * ACCEPT from then on) and its peer is asked; the peer agrees only if it
 * has nothing there either, and then names it no more.  Either side frees
 * it once both agreed (the answerer once its answer was delivered), on a
 * KEEP it is back in use, and without an answer in LINK_RETIRE_NS (a peer
 * gone, or one that does not know the message) it is freed: an ACCEPT that
 * names it later is declined stale-link and the peer retires its end.
 * Links that failed go once nothing holds a slot on them. */
#define LINK_IDLE_NS 2000000000ull
#define LINK_RETIRE_NS 5000000000ull
/* A link that heard nothing from its peer for 2 s is tried (wire.h,
 * SHUNT_LINK_TEST; SMC-R's TEST_LINK): a link learns that its peer
 * process ended - a forking server's child that served one connection, a
 * client killed - only by posting, and the slots of its closed connections
 * wait for the peer's closing words, which a process that ended without
 * its exit path never sent.  Before, such a link held its queue pair and
 * 32 MiB of registered rings for the process's life: a client of a server
 * whose children each accept and end kept a link per child
 * (tests/behave/child_servers over RDMA, 8 mappings a connection).  The
 * test's retries run out, the link goes down (its connections, if any, to
 * TCP, where the peer's end is closed too) and it is freed. */
#define LINK_TEST_NS 2000000000ull

static int link_say(struct rdma_link *l, uint32_t op, uint64_t *seq)
{
	struct shunt_cdc m = { .prod = op, .flags = SHUNT_CDC_F_LINK };

	return rdma_push(l, 0, 0, 0, 0, 0, &m, PUSH_SIGNAL, seq);
}

static void link_test(struct rdma_link *l, uint64_t now, int up)
{
	uint64_t heard = __atomic_load_n(&l->rx_count, __ATOMIC_RELAXED);

	if (heard != l->test_heard || !up) {
		l->test_heard = heard;
		l->quiet_since = now;
	} else if (now - l->quiet_since >= LINK_TEST_NS) {
		l->quiet_since = now; /* (its peer hears it: one end tests) */
		(void)link_say(l, SHUNT_LINK_TEST, NULL);
	}
}

struct rdma_link *rdma_retiring;

/* A link's name both ends compute alike: its two ends (GID, queue pair),
 * the lesser first. */
static void link_key(const struct rdma_link *l, uint8_t k[40])
{
	uint8_t a[20], b[20];

	memcpy(a, l->dev->gid.raw, 16);
	memcpy(b, l->peer_gid.raw, 16);
	for (int i = 0; i < 4; i++) {
		a[16 + i] = (uint8_t)(l->qp->qp_num >> (24 - 8 * i));
		b[16 + i] = (uint8_t)(l->peer_qpn >> (24 - 8 * i));
	}
	int a_first = memcmp(a, b, 20) < 0;

	memcpy(k, a_first ? a : b, 20);
	memcpy(k + 20, a_first ? b : a, 20);
}

/* x is not the link to its peer both ends keep - the least name among
 * those up (another is up, then): two ends that asked at once about two
 * different idle links would otherwise retire both. */
static int retirable(const struct rdma_link *x)
{
	uint8_t kx[40], k[40];

	link_key(x, kx);
	for (struct rdma_link *l = rdma_links; l; l = l->next) {
		if (l == x || !up_on(l, x->dev) || l->peer_proc != x->peer_proc ||
		    memcmp(l->peer_host, x->peer_host, 16))
			continue;
		link_key(l, k);
		if (memcmp(k, kx, 40) < 0)
			return 1; /* a lesser one is kept */
	}
	return 0;
}

static void retire_start(struct rdma_link *l, uint64_t now, int agreed)
{
	unlink_from(&rdma_links, l);
	l->retire_until = now + LINK_RETIRE_NS;
	l->retire_agreed = agreed;
	if (!agreed)
		l->retire_seq = 0; /* (set by an answer of ours) */
	l->next = rdma_retiring;
	rdma_retiring = l;
}

/* A link we asked about is in use again (the peer's KEEP, or an ACCEPT of
 * its that names it). */
static void retire_undo(struct rdma_link *l)
{
	unlink_from(&rdma_retiring, l);
	l->idle_since = 0;
	l->next = rdma_links;
	rdma_links = l;
}

/* Client, on an ACCEPT naming a link we asked to retire: the peer took a
 * slot on it before our question came (it will say KEEP): back in use. */
struct rdma_link *rdma_retiring_named(const union ibv_gid *g, uint32_t qpn, struct rdma_dev *d)
{
	for (struct rdma_link *l = rdma_retiring; l; l = l->next)
		if (!l->retire_agreed && up_on(l, d) && l->peer_qpn == qpn &&
		    !memcmp(l->peer_gid.raw, g->raw, 16)) {
			retire_undo(l);
			return l;
		}
	return NULL;
}

static void retire_free(struct rdma_link *l)
{
	/* a thread that gave back the last slot may be inside these locks */
	shunt_mutex_lock(&l->cq_lock);
	shunt_mutex_unlock(&l->cq_lock);
	shunt_mutex_lock(&l->sq_lock);
	shunt_mutex_unlock(&l->sq_lock);
	rdma_link_free(l);
}

/* Progress thread, rdma_lock held. */
void rdma_links_retire(void)
{
	uint64_t now = shunt_now_ns();
	struct rdma_link *l, **pp;

	for (pp = &rdma_links; (l = *pp);) {
		uint32_t op = __atomic_exchange_n(&l->link_rx, 0, __ATOMIC_ACQ_REL);
		uint32_t used = __atomic_load_n(&l->used, __ATOMIC_ACQUIRE);
		int up = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP;

		/* our question came after a connection on it that ended (its
		 * ACCEPT had called the link back): the peer retired it */
		if (op == SHUNT_LINK_RETIRED)
			l->retire_agreed = 1;
		if (!used && (!up || l->retire_agreed)) { /* failed, or gone there: nothing on it */
			retire_start(l, now, 1);
			continue;
		}
		if (op == SHUNT_LINK_RETIRE) {
			if (!used && up && !link_say(l, SHUNT_LINK_RETIRED, &l->retire_seq)) {
				shunt_log("rdma: idle link to qp %u retires (the peer asked)", l->peer_qpn);
				retire_start(l, now, 1);
				continue;
			}
			(void)link_say(l, SHUNT_LINK_KEEP, NULL);
		}
		link_test(l, now, up);
		if (used || !up) {
			l->idle_since = 0;
		} else if (!l->idle_since) {
			l->idle_since = now;
		} else if (now - l->idle_since >= LINK_IDLE_NS && retirable(l) &&
			   !link_say(l, SHUNT_LINK_RETIRE, NULL)) {
			shunt_log("rdma: idle link to qp %u retires (another carries this peer's "
				  "connections)", l->peer_qpn);
			retire_start(l, now, 0);
			continue;
		}
		pp = &l->next;
	}
	/* spares: offers in flight each hold one, and give it back when the
	 * server answered on a link we have - the pool keeps one per device,
	 * the others go once unused LINK_IDLE_NS */
	for (pp = &rdma_spares; (l = *pp);) {
		struct rdma_link *k = rdma_spares;
		while (k != l && k->dev != l->dev)
			k = k->next;
		if (k != l && l->idle_since && now - l->idle_since >= LINK_IDLE_NS) {
			*pp = l->next;
			rdma_link_free(l);
			continue;
		}
		if (k != l && !l->idle_since)
			l->idle_since = now;
		pp = &l->next;
	}
	for (pp = &rdma_retiring; (l = *pp);) {
		uint32_t op;

		rdma_link_poll(l);
		op = __atomic_exchange_n(&l->link_rx, 0, __ATOMIC_ACQ_REL);
		if (op == SHUNT_LINK_KEEP && !l->retire_agreed) {
			shunt_log("rdma: idle link to qp %u stays (the peer uses it)", l->peer_qpn);
			retire_undo(l); /* (*pp is the next one then) */
			continue;
		}
		if (op == SHUNT_LINK_RETIRED || op == SHUNT_LINK_RETIRE) /* (ours crossed theirs) */
			l->retire_agreed = 1;
		if ((l->retire_agreed && __atomic_load_n(&l->completed, __ATOMIC_ACQUIRE) >= l->retire_seq) ||
		    __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP || now >= l->retire_until) {
			*pp = l->next;
			retire_free(l);
			continue;
		}
		pp = &l->next;
	}
}

/* The process changed its credentials (setuid() and its kin, core.c): the
 * devices are opened again for new links (link.c, rdma_dev_renew), the
 * spares made on the old ones go (their queue pairs can no longer be
 * connected), and every link's data path is tried at once with a word to
 * its peer (TEST, which asks nothing) - Soft-RoCE rings its doorbell with
 * write(), which the kernel now refuses: such a link is taken down here,
 * its connections moved to TCP, instead of at their next write, and it is
 * no longer offered to a new connection, which makes a link on the devices
 * opened again.  Before, each new connection
 * was put on the dead link and paid its failure (62-137 ms) before it
 * went on over TCP (tests/behave/seteuid_back over RDMA). */
void rdma_creds_changed(void)
{
	struct rdma_link *l, **pp;

	shunt_mutex_lock(&rdma_lock);
	/* each link is tried once, at the first change after it was made: a
	 * provider that posts from user space posts after any later one too
	 * (a process that changes its user at every request, as smbd does,
	 * would else send a word on every link at each change) */
	for (l = rdma_links; l; l = l->next)
		l->creds_try = !l->dev->stale;
	rdma_dev_renew();
	for (pp = &rdma_spares; (l = *pp);) {
		if (l->dev->stale) {
			*pp = l->next;
			rdma_link_free(l);
			continue;
		}
		pp = &l->next;
	}
	for (l = rdma_links; l; l = l->next)
		if (l->creds_try && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP &&
		    link_say(l, SHUNT_LINK_TEST, NULL) == -EPIPE) {
			shunt_log("rdma: the link to qp %u cannot post since the process changed its "
				  "credentials: its connections move to TCP", l->peer_qpn);
			rdma_link_down(l);
		}
	rdma_dev_sweep();
	shunt_mutex_unlock(&rdma_lock);
}

/* The process ends (share.c, rdma_exit_flush): each link that carries
 * nothing says RETIRED to its peer, which frees its end at once instead of
 * when a TEST of its finds the queue pair gone (a forking server's child,
 * a command-line client).  The words are waited for a little: the end of
 * the process destroys the queue pairs, maybe before the device sent
 * them. */
void rdma_links_farewell(void)
{
	uint64_t deadline = shunt_now_ns() + 20000000ull, now;

	if (shunt_sandboxed)
		return; /* (a post is a system call: the filter may forbid it) */
	shunt_mutex_lock(&rdma_lock);
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (!__atomic_load_n(&l->used, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP &&
		    !link_say(l, SHUNT_LINK_RETIRED, &l->retire_seq))
			l->retire_agreed = 2; /* (said here: waited for below) */
	for (struct rdma_link *l = rdma_links; l; l = l->next)
		if (l->retire_agreed == 2 && (now = shunt_now_ns()) < deadline)
			rdma_link_wait(l, l->retire_seq, deadline - now);
	shunt_mutex_unlock(&rdma_lock);
}
