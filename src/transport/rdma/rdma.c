/* SPDX-License-Identifier: MIT */
/*
 * rdma.c - the RDMA transport's operations (transport.h) and its entries
 * for the in-band handshake.
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
 *
 * The parts are listed in rdma.h.
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

static void op_ack(struct conn *c)
{
	rdma_conn_ack(c, 0);
}

static void op_closing(struct conn *c)
{
	if (!c->broken && !shunt_sandboxed)
		rdma_conn_closing(c);
}

static int op_release(struct conn *c)
{
	rdma_conn_free(c);
	return 1;
}

static int op_pass(struct conn *c, struct shunt_ring_ctl *rx, struct shunt_ring_ctl **t, int why)
{
	int r = rdma_conn_pass(c, why); /* takes the writer's lock itself */

	(void)rx;
	if (r > 0)
		return 0; /* on the socket, the rings' last bytes still to read: they stay */
	if (!r && (*t = conn_lock(c, 0))) {
		shunt_log("move: %s: RDMA connection (tcp fd %d) is plain TCP",
			  move_cause(why), c->tcp_fd);
		r = 1;
	}
	return r;
}

/* Urgent data: a failover's first half, now, without the peer's answer -
 * a peer whose application calls nothing for a while (a server asleep,
 * whose accept() left the client's CONFIRM unread: it answers at its
 * first call) held a whole move (op_pass) past its 5 s, and the send
 * failed with EOPNOTSUPP between two hosts.  Not a link of another
 * process's (SHUNT_RDMA_FORK=keep's child): that one moves whole. */
static int op_move_ask(struct conn *c, int why)
{
	const struct rconn *x = c->tpd;

	if (x->pid != shunt_pid() || x->moved || c->broken)
		return -EBUSY;
	rdma_fo_request(c, why);
	return 0;
}

/* This process's link carries it, nothing moves it already, nobody shut
 * it - or a pass of this process's moved it to its socket already: a
 * give-back may move it to TCP (if it is not) and close its two
 * descriptors (its doorbell and the socket's duplicate; giveback.c). */
static int op_idle_here(const struct conn *c)
{
	const struct rconn *x = c->tpd;

	if (x->pid != shunt_pid() || x->moved || c->broken)
		return 0;
	if (c->passed) /* moved by a pass of ours (a spawn's, stdio's): on its socket, no FIN owed */
		return !c->mv.fin;
	return !c->shut_wr && !c->shut_rd && !c->peer_eof && !c->peer_err && !c->mv.rx && !c->mv.tx &&
	       !c->mv.want;
}

/* In a forked child: moved to TCP before the fork, or it stays the parent's. */
static void op_fork_child(struct conn *c, uint64_t gen)
{
	(void)gen;
	if (!rcn(c)->moved)
		c->broken = EIO;
}

/* Across exec only once moved (the new image has no link): its region. */
static int op_exec_item(struct conn *c, int fd, char *item, size_t cap, int *fds, int *nfds)
{
	struct rconn *x = rcn(c);
	int n;

	if (!x->moved)
		return 0; /* an RDMA connection that could not move stays behind */
	if (x->moved_fd < 0) { /* moved with no descriptor to spare */
		if (ring_used(&c->rx))
			shunt_warn("fd %d: %llu bytes it had not read when it moved to TCP stay "
				   "behind at exec (no descriptor could hold them)", fd,
				   (unsigned long long)ring_used(&c->rx));
		return 0;
	}
	n = snprintf(item, cap, "m%d,%d,%d,%d;", fd, x->moved_fd, c->side, conn_moved_reason(c));
	if (n < 0 || (size_t)n >= cap)
		return 0;
	fds[(*nfds)++] = x->moved_fd;
	return n;
}

/* "<fd>,<memfd>,<side>,<reason>": a connection moved to TCP before exec */
static int op_exec_adopt(const char *e, int *fdp, struct conn **out, int *used, int *nused)
{
	int fd, memfd, side, reason, r;

	if (sscanf(e, "%d,%d,%d,%d", &fd, &memfd, &side, &reason) != 4 || fd < 0 || memfd < 0 ||
	    (side != 0 && side != 1) || reason <= 0 || reason >= SHUNT_R_MAX || fd == memfd ||
	    !exec_is_tcp_socket(fd) || !exec_is_shmem(memfd))
		return -EINVAL;
	r = rdma_conn_adopt(fd, memfd, side, reason, out);
	if (r)
		return r;
	*fdp = fd;
	used[(*nused)++] = memfd;
	return 0;
}

/* The peer's application closed it: its closing word came (its socket
 * closes after it).  A moved connection's word (FAILOVER with it) moved
 * ours first. */
static int op_peer_gone(const struct conn *c)
{
	const struct rdma_conn *rc = ((const struct rconn *)c->tpd)->rc;

	/* (a CLOSED that came with FAILOVER is a move, never an end) */
	return rc && __atomic_load_n(&rc->closed_rcvd, __ATOMIC_ACQUIRE) && !rc->fo_closed;
}

const struct transport rdma_transport = {
	.name = "rdma",
	.mode = SHUNT_M_RDMA,
	.flags = TP_SOCKET_EVENTS,
	.push = rdma_conn_push,
	.ack = op_ack,
	.tx_blocked = rdma_conn_blocked,
	.peer_blocked = rdma_conn_peer_blocked,
	.progress = rdma_conn_poll,
	.refresh = rdma_conn_refresh,
	.shutdown = rdma_conn_shutdown,
	.closing = op_closing,
	.release = op_release,
	.discard = rdma_conn_free,
	.move_tx = rdma_fo_begin,
	.peer_gone = op_peer_gone,
	.move_ask = op_move_ask,
	.pass = op_pass,
	.idle_here = op_idle_here,
	.fork_child = op_fork_child,
	.exec_tag = 'm',
	.exec_item = op_exec_item,
	.exec_adopt = op_exec_adopt,
	.share_prepare = rdma_share_prepare,
	.exit_flush = rdma_exit_flush,
	.atfork_child = rdma_atfork_child,
	.creds_changed = rdma_creds_changed,
};

const struct remote_setup rdma_setup = {
	.client_offer = rdma_client_offer,
	.client_accept = rdma_client_accept,
	.server_offer = rdma_server_offer,
	.server_confirm = rdma_server_confirm,
	.offer_drop = rdma_offer_drop,
	.offer_abandon = rdma_offer_abandon,
	.offer_stale = rdma_offer_stale,
};

