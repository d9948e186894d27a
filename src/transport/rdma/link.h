/* SPDX-License-Identifier: MIT */
/*
 * link.h - RDMA links: one RC queue pair between two processes, carrying
 * every shunt connection between them (SMC-R's link group, per process
 * pair: the process owns its queue pairs - see docs/rdma.md for why).
 *
 * Memory of a link: a receive region of LINK_SLOTS rings, registered once
 * with remote write access, which only this link's peer can reach (its own
 * protection domain); and a local region (staging rings the sender copies
 * into and RDMA-WRITEs from, and the receive buffers of cursor messages),
 * registered once without remote access.  Slot i of a connection is ring i
 * of both regions, so data is written at the same offsets it is staged at.
 */
#ifndef SHUNT_RDMA_LINK_H
#define SHUNT_RDMA_LINK_H
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include "ibv.h"
#include "shunt/wire.h"

#define LINK_SLOTS 32
#define LINK_RECVS 256   /* posted cursor-message buffers */
#define LINK_SQ 512      /* send queue depth */
#define LINK_BINDS (2 * LINK_SLOTS) /* the binder's queue: a put's bind and a key's, per slot */

struct rdma_dev {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	char name[32];
	/* opened before the process changed its credentials (link.c,
	 * rdma_dev_renew): no new link on it; closed once none is left */
	int stale;
	_Atomic int users;        /* links and spares made on it */
	struct rdma_dev *next;
};

enum link_state { LINK_IDLE = 0, LINK_UP = 1, LINK_DOWN = 2 };

struct rdma_link;
struct link_ops {
	/* a cursor message for slot (already validated: in range, in use) */
	void (*cdc)(struct rdma_link *l, unsigned slot, const struct shunt_cdc *m);
	/* the queue pair failed: every connection on it must move to TCP */
	void (*down)(struct rdma_link *l);
};

struct rdma_link {
	struct rdma_dev *dev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *rx_mr, *local_mr;
	/* one memory window per ring, re-bound for every connection that gets
	 * the slot: the peer's key reaches that ring only, and only for that
	 * connection (NULL where the device has no windows: rx_mr's key) */
	struct ibv_mw *mw[LINK_SLOTS];
	/* a slot given back is re-bound at once (its old key dies then) and
	 * the next connection takes that bind: seq of the bind, and whether
	 * its key is still unused (under bind_lock) */
	uint64_t mw_seq[LINK_SLOTS];
	uint8_t mw_ready[LINK_SLOTS];
	/* Windows are bound through a queue pair of their own (connected to
	 * itself, it never sends): a bind posted between RDMA writes on qp
	 * can be executed a second time when the device goes back to resend
	 * those writes (Soft-RoCE does) - the second bind fails, and the
	 * link with it (docs/rdma.md) */
	struct ibv_qp *bqp;
	struct ibv_cq *bcq;
	pthread_mutex_t bind_lock;
	uint64_t bposted, bcompleted;
	uint8_t *rx, *local;      /* the two regions (local: staging rings, then receive buffers) */
	size_t rx_len, local_len;
	uint32_t ring_size;
	_Atomic uint32_t used;    /* slots in use (bit i) */
	void *slot_ctx[LINK_SLOTS];
	uint32_t slot_tag[LINK_SLOTS];
	_Atomic int state;        /* enum link_state */
	int fail_status, fail_op;  /* the first failed completion: why it went down */
	const struct link_ops *ops;
	/* the peer, once connected */
	uint8_t peer_host[16];
	uint64_t peer_proc;
	union ibv_gid peer_gid;
	uint32_t peer_qpn;
	/* send side: posts are serialised; completions are requested on every
	 * LINK_SQ/4-th post so the queue never overflows */
	pthread_mutex_t sq_lock;
	uint64_t posted, completed;
	pthread_mutex_t cq_lock;
	/* retiring an idle link (links.c): the peer's last link message
	 * (SHUNT_LINK_*, set by the reaper), when it went idle, and - once
	 * out of use - until when its peer's answer is awaited, whether both
	 * agreed, and our RETIRED's post */
	_Atomic uint32_t link_rx;
	uint64_t idle_since, retire_until, retire_seq;
	/* receives processed; as the progress thread last saw them, and
	 * since when (a quiet link is tested: links.c, SHUNT_LINK_TEST) */
	_Atomic uint64_t rx_count;
	uint64_t test_heard, quiet_since;
	int creds_try;            /* rdma_creds_changed: to be tried (its device just went stale) */
	int retire_agreed;
	struct rdma_link *next;
};

/* The device and GID of a local address (IPv4 or IPv6), or NULL. */
struct rdma_dev *rdma_dev_for(const struct sockaddr *local);
void rdma_dev_forget(void);
int rdma_dev_refused(void);
/* The process changed its credentials: the devices are opened again for
 * the next link; the old ones stay for the links made on them. */
void rdma_dev_renew(void);
/* Close the old devices no link or spare uses any more. */
void rdma_dev_sweep(void);
/* The same device, port and address entry (a and b may be one opened
 * before a credential change and one opened after). */
int rdma_dev_same(const struct rdma_dev *a, const struct rdma_dev *b);
int rdma_link_new(struct rdma_dev *d, uint32_t ring_size, const struct link_ops *ops,
		  struct rdma_link **out);
int rdma_link_connect(struct rdma_link *l, const union ibv_gid *gid, uint32_t qpn, int ack_timeout);
void rdma_link_free(struct rdma_link *l);
int rdma_slot_take(struct rdma_link *l, void *ctx, uint32_t tag);
void rdma_slot_put(struct rdma_link *l, unsigned slot);
/* The key the peer writes slot's ring with, fresh for this connection. */
int rdma_slot_key(struct rdma_link *l, unsigned slot, uint32_t *rkey);
static inline uint8_t *rdma_slot_rx(struct rdma_link *l, unsigned s) { return l->rx + (size_t)s * l->ring_size; }
static inline uint8_t *rdma_slot_tx(struct rdma_link *l, unsigned s) { return l->local + (size_t)s * l->ring_size; }
/* Copy staged bytes [from, to) of slot's ring to the peer's ring at
 * raddr (same offsets), then send the cursor message; one post each.
 * With a full send queue: reap completions for a while (PUSH_MAY_POLL),
 * or -EAGAIN at once (a caller that holds the completion lock).  PUSH_SIGNAL: the message's
 * completion is reported; *seq names it for rdma_link_wait. */
#define PUSH_MAY_POLL 1
#define PUSH_SIGNAL 2
int rdma_push(struct rdma_link *l, unsigned slot, uint64_t raddr, uint32_t rkey,
	      uint64_t from, uint64_t to, const struct shunt_cdc *m, int flags, uint64_t *seq);
/* Wait until post `seq` completed (the peer's device has it), the link
 * failed (-EPIPE) or the time passed (-ETIMEDOUT). */
int rdma_link_wait(struct rdma_link *l, uint64_t seq, uint64_t timeout_ns);
/* Process every completion there is now (waits for a concurrent reaper). */
void rdma_link_drain(struct rdma_link *l);
/* Reap completions; dispatch cursor messages.  Returns how many. */
int rdma_link_poll(struct rdma_link *l);
/* Take a link out of use at once (its queue pair to the error state). */
void rdma_link_down(struct rdma_link *l);
/* Force the queue pair into the error state (tests: link failure). */
void rdma_link_break(struct rdma_link *l);
#endif
