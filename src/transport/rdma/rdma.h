/* SPDX-License-Identifier: MIT */
/*
 * rdma.h - the RDMA transport's parts, between its files (the shim sees
 * only its operations: transport.h, rdma.c).
 *
 *   rdma.c      the operations table and the in-band handshake's entries
 *   progress.c  the progress thread: completions, device events, probes
 *   links.c     links per peer process, and one spare per device
 *   offer.c     the handshake's RDMA half: slots offered, links chosen
 *   cursor.c    a connection's data path: posts and cursor messages (CDC)
 *   failover.c  a half moves to the TCP socket after the link (wire.h 5c)
 *   share.c     fork, exec, a sandbox, the process's end
 * and under them link.c (queue pairs, registered rings) and ibv.c
 * (libibverbs, dlopened).
 */
#ifndef SHUNT_RDMA_H
#define SHUNT_RDMA_H
#include "../transport.h"
#include "link.h"

struct sk;
struct shunt_hs_msg;
struct shunt_hs_offer;

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
	_Atomic int backlog;      /* staged bytes the full send queue refused (rdma_backlog_sweep) */
	int fin_sent;
	int fin_done;             /* FIN reached the peer's device (shutdown) */
	/* shutdown() posted FIN; the kernel's FIN waits for its completion
	 * (rdma_fin_settle: the progress thread, or the process's end) */
	_Atomic int fin_wait;
	int fin_late;             /* a test's fault: the completion counts as never come */
	/* close(): the closing word, its post (0: not posted yet) and when
	 * the application closed (close_rest finishes what close() began) */
	uint32_t close_word;
	uint64_t close_seq, close_since;
	uint64_t fin_seq;         /* the post that carried FIN (0: none yet), rc->lock */
	uint64_t fin_since;
	_Atomic int closed_sent, closed_rcvd;
	/* CLOSED went with a move (FAILOVER|CLOSED): the applications may
	 * hold the connection long after; the slot waits for both to let go
	 * (SHUNT_CDC_F_RELEASED) */
	_Atomic int fo_closed, peer_released;
	struct conn *c;           /* NULL once the application closed it */
};

/* A closed connection's socket that may still receive, unread, the peer's
 * failover message and the bytes it resends that we have (failover.c,
 * rdma_fo_linger): noted at the close, while the ring is ours. */
struct fo_linger {
	int on;                   /* 1: to be read off; 2: read off */
	int rx;                   /* as mv.rx: 0 before the message, 1 in the resend */
	uint64_t prod, skip;      /* our ring's producer; the resent bytes we have */
	uint32_t size;            /* our ring's size (the message's bound) */
};

/* A connection over RDMA as this process holds it (the conn's tpd): a
 * forked child's or an exec'd image's copy is not the link's owner. */
struct rconn {
	struct conn c;            /* first: the shim core's part */
	struct rdma_conn *rc;
	pid_t pid;                /* the process whose link carries it */
	int close_reset;          /* closing with bytes unread: the peer is reset */
	/* moved before fork or exec (wire.h SHUNT_MOVED_MAGIC): the rings
	 * live in this shared region from then on, in every process */
	struct shunt_seg_hdr *moved;
	size_t moved_len;
	int moved_fd;
	struct rconn *closing_next; /* while close_rest finishes its close (cursor.c) */
	struct fo_linger linger;  /* its socket after the close (failover.c) */
};

static inline struct rconn *rcn(struct conn *c)
{
	return (struct rconn *)c->tpd;
}

extern const struct transport rdma_transport;

/* the process's links (links.c), under rdma_lock */
extern struct rdma_link *rdma_links;     /* connected, per peer process */
extern struct rdma_link *rdma_spares;    /* ready (INIT), one per device */
extern struct rdma_link *rdma_offered;   /* client: spares held by offers in flight */
extern struct rdma_link *rdma_retiring;  /* idle or failed, out of use, to be freed */
extern pthread_mutex_t rdma_lock;
extern const struct link_ops rdma_link_cb; /* cursor messages, a link down (cursor.c) */

/* between the files */
/* progress.c */
void rdma_fd_nonblock(int fd);
void rdma_link_each_open(struct rdma_link *l, int (*fn)(struct rdma_conn *rc, void *arg), void *arg);
void rdma_each_open(int (*fn)(struct rdma_conn *rc, void *arg), void *arg, int up);
void rdma_each_open_flagged(_Atomic int *work, int (*fn)(struct rdma_conn *rc, void *arg), int up);
void rdma_links_poll(void);
int rdma_spawn(void *(*fn)(void *), void *arg);
void rdma_thread_start(void);
/* links.c */
void rdma_links_add(struct rdma_link *l, const uint8_t host[16], uint64_t proc);
struct rdma_link *rdma_links_find(const uint8_t host[16], uint64_t proc, struct rdma_dev *d);
struct rdma_link *rdma_links_named(const union ibv_gid *g, uint32_t qpn, struct rdma_dev *d);
void rdma_spare_refill(void);
void rdma_creds_changed(void); /* setuid() and its kin: devices opened again */
void rdma_links_farewell(void); /* the process ends: idle links' peers told */
void rdma_links_retire(void); /* progress thread, rdma_lock held */
struct rdma_link *rdma_retiring_named(const union ibv_gid *g, uint32_t qpn, struct rdma_dev *d);
struct rdma_link *rdma_spare_take(struct rdma_dev *d);
void rdma_spare_hold(struct rdma_link *l);
void rdma_spare_back(struct rdma_link *l);
struct rdma_link *rdma_spare_connect(uint32_t qpn, struct rdma_dev *d, const union ibv_gid *gid,
				     uint32_t peer_qpn, int *failed);
/* offer.c */
void rdma_rc_free(struct rdma_conn *rc);
/* cursor.c */
int rdma_attach(struct sk *s, int fd, struct rdma_conn *rc, uint64_t raddr, uint32_t rkey, int side);
int rdma_push_and_wait(struct conn *c, uint32_t extra);
int rdma_fin_settle(struct conn *c, int final); /* writer lock held; 1: still waits */
void rdma_fin_sweep(void);
void rdma_backlog_sweep(void);
extern _Atomic int rdma_fin_waits;
extern _Atomic int rdma_closers;
void rdma_closers_forget(void); /* a forked child: its copies of their sockets go */
void rdma_close_sweep(void);
int rdma_push_locked(struct conn *c, uint32_t extra, int flags, uint64_t *seq);
/* A cursor message of flags only, the cursors as last sent (rc->lock held) */
int rdma_post_word(struct rdma_conn *rc, uint32_t flags, int push_flags);
/* failover.c */
void rdma_fo_orphan(struct conn *c);
void rdma_fo_linger_note(struct conn *c);
void rdma_fo_linger(struct conn *c);
void rdma_fo_threads_wait(uint64_t deadline); /* the process's end */
void rdma_fo_threads_forget(void);            /* a forked child */
void rdma_fo_request(struct conn *c, int reason);
void rdma_fo_sweep(void);
int rdma_fo_tx_begin(struct conn *c, int push_flags);
extern int rdma_thread_on;
extern pid_t rdma_thread_pid;
extern _Atomic int rdma_fo_work;

/* the in-band handshake's half */
int rdma_available(void);
int rdma_client_offer(int fd, uint32_t tag, struct shunt_hs_offer *o, void **state);
int rdma_client_accept(struct sk *s, int fd, void *state, const struct shunt_hs_msg *a,
		       uint32_t tag, struct shunt_hs_offer *o);
int rdma_server_offer(int fd, const struct shunt_hs_msg *p, uint32_t tag, struct shunt_hs_offer *o,
		      void **state);
int rdma_server_confirm(struct sk *s, int fd, void *state, const struct shunt_hs_msg *c, uint32_t tag);
void rdma_offer_drop(void *state);
void rdma_offer_abandon(void *state);
void rdma_offer_stale(void *state);

/* a connection's data path */
void rdma_conn_push(struct conn *c);
void rdma_conn_ack(struct conn *c, int force);
void rdma_conn_blocked(struct conn *c);
int rdma_conn_peer_blocked(struct conn *c);
void rdma_conn_poll(struct conn *c);
void rdma_conn_free(struct conn *c);
int rdma_conn_shutdown(struct conn *c);            /* 1: the kernel's FIN comes later */
int rdma_conn_shutdown_wait(struct conn *c);       /* the same, waiting (the process's end) */
void rdma_conn_closing(struct conn *c);            /* the last close: bytes unread make it a reset */

/* failover: the TCP socket after the link */
void rdma_conn_refresh(struct conn *c);            /* the kernel socket: probes, FAILOVER, FIN */
int rdma_fo_begin(struct conn *c);                 /* the sending half moves (writer lock held) */
int rdma_conn_pass(struct conn *c, int why);       /* both halves on TCP before a pass or a give-back (reader's lock held) */

/* the process: fork, exec, a sandbox, its end */
void rdma_share_prepare(const char *why, int reason);
void rdma_exit_flush(void);
int rdma_conn_adopt(int fd, int memfd, int side, int reason, struct conn **out);
void rdma_atfork_child(void);
#endif
