/* SPDX-License-Identifier: MIT */
/*
 * transport.h - what carries an accelerated connection's bytes, behind one
 * table of operations (Linux net/smc's struct smcd_ops, in user space).
 *
 * Every transport gives a connection the same two rings (ring.h): the
 * application's data path (src/shim/conn.c) writes c->tx and reads c->rx
 * with the same code and sleeps with the same words.  What a transport
 * decides is how the other end learns that the cursors moved (push, ack),
 * what the kernel socket says (refresh), how a connection ends, moves to
 * its TCP socket, and lives through fork and exec.  The shim core calls
 * only these; it never names a transport.
 *
 * Two implementations: shared memory (src/transport/shm: the peer maps the
 * same rings) and RDMA (src/transport/rdma: the bytes are written into the
 * peer's copy of the ring and cursor messages follow), built only when
 * libibverbs' headers exist.  docs/architecture.md, "Adding a transport".
 */
#ifndef SHUNT_TRANSPORT_H
#define SHUNT_TRANSPORT_H
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "shunt/wire.h"
#include "ring.h"

struct conn;
struct sk;
struct shunt_hs_msg;
struct shunt_hs_offer;

#define EXEC_FDS_MAX 3
/* exec.c: what an adopted entry may claim */
int exec_is_tcp_socket(int fd);
int exec_is_shmem(int fd);   /* a memfd (or tmpfs file) */

/* transport flags */
#define TP_SHARED_RINGS 1u   /* the peer maps our rings: its words (locks,
				rd_left) are read here, and a lock it holds
				for ever must not hang us (conn_lock) */
#define TP_SOCKET_EVENTS 2u  /* readiness merges the kernel socket's at all
				times: a move may begin at any byte (move.c) */

struct transport {
	const char *name;     /* "shm", "rdma": logs */
	int mode;             /* enum shunt_mode its connections report */
	unsigned flags;       /* TP_* */

	/* ---- a connection's data path (c->tp), called by conn.c ---- */
	void (*push)(struct conn *c);          /* bytes or wr_done published in c->tx */
	void (*ack)(struct conn *c);           /* bytes consumed from c->rx */
	void (*tx_blocked)(struct conn *c);    /* a writer waits on a full c->tx (NULL: nothing to do) */
	int (*peer_blocked)(struct conn *c);   /* the peer waits for room in c->rx */
	void (*progress)(struct conn *c);      /* a spinning caller makes progress (NULL: none) */
	void (*refresh)(struct conn *c);       /* look at the kernel socket: FIN, RST, a move */
	void (*probe)(struct conn *c);         /* after FIN: is the peer gone? (NULL: refresh does it) */
	int (*shutdown)(struct conn *c);       /* wr_done set, writer lock held; 1: the kernel FIN later */
	void (*shut_wake)(struct conn *c);     /* after shutdown's unlock (NULL: none) */
	void (*closing)(struct conn *c);       /* the application's last close, in this process */
	int (*release)(struct conn *c);        /* free it; 1: this side's last owner anywhere */
	void (*discard)(struct conn *c);       /* free it, owners untouched */
	int (*idle_here)(const struct conn *c);/* this process alone holds it, nothing in flight:
						  it may be given back (giveback.c; NULL: never) */
	int (*sole_owner)(const struct conn *c);/* no other process holds this side (NULL:
						  never shared: a forked child's copy is not one) */

	/* ---- moving to the TCP socket (move.c) ---- */
	int (*move_tx)(struct conn *c);        /* the sending half moves (writer lock held) */
	int (*peer_left)(struct conn *c);      /* the peer moved without a word on the socket:
						  our sending half moves too (NULL: never) */
	int (*peer_gone)(const struct conn *c);/* the peer's last holder closed it - its kernel
						  socket is closed (a look at shared memory;
						  NULL: the socket alone tells) */
	void (*move_progress)(struct conn *c); /* what a move owes, from any call (NULL: none) */
	/* Our sending half alone to the socket, made by our next write - the
	 * peer's half follows when it hears, as after a failed link - for a
	 * send only the socket carries (urgent data): 0 asked, else -errno
	 * (NULL: the whole connection moves, pass below) */
	int (*move_ask)(struct conn *c, int why);
	/* Both halves to the socket before SCM_RIGHTS carries the descriptor
	 * away, or a give-back (reader lock rx held; why: the reason).  *t:
	 * the writer's lock if it was taken (the caller unlocks it).  1:
	 * moved; 0: nothing to move (a reset); else -errno. */
	int (*pass)(struct conn *c, struct shunt_ring_ctl *rx, struct shunt_ring_ctl **t, int why);
	/* Another process holding our side passed it (its word beside our
	 * reader's lock, rx, or our writer's): the reason, else 0 (NULL:
	 * never shared); follow sets our copy's halves on the socket as the
	 * pass set the mover's (both locks held). */
	int (*side_moved)(const struct conn *c, int rx);
	void (*follow)(struct conn *c, int why);

	/* ---- fork and exec (core.c, exec.c) ---- */
	void (*fork_hold)(struct conn *c, uint64_t gen);   /* before fork: the child's share */
	void (*fork_unhold)(struct conn *c, uint64_t gen); /* no child after all */
	void (*fork_child)(struct conn *c, uint64_t gen);  /* in the child */
	/* Its SHUNT_INHERIT entry (exec_tag first) and the descriptors it
	 * names, for exec: the entry's length, 0 to leave it behind (a plain
	 * socket after exec).  In the new image exec_adopt takes an entry
	 * (after the tag) written by anyone who starts the program: -EINVAL
	 * if it is not what it says; else the socket's descriptor *fd, the
	 * connection, and the descriptors it used (closed once all are
	 * adopted, at most EXEC_FDS_MAX). */
	char exec_tag;
	int (*exec_item)(struct conn *c, int fd, char *item, size_t cap, int *fds, int *nfds);
	int (*exec_adopt)(const char *entry, int *fd, struct conn **out, int *used, int *nused);
	/* An entry whose descriptors were all close-on-exec: the old image's
	 * share let go of without adopting it, its socket *fd (NULL: adopted,
	 * then closed); -EAGAIN: adopt it, then close it (the last holder). */
	int (*exec_drop)(const char *entry, int *fd, int *used, int *nused);

	/* ---- the process (NULL: nothing to do) ---- */
	void (*share_prepare)(const char *why, int reason); /* before fork, exec, a sandbox */
	void (*exit_flush)(void);                           /* the process ends */
	void (*atfork_child)(void);
	void (*creds_changed)(void);                        /* setuid() and its kin */
	int (*drop_unused)(void);   /* a give-back: what holds no connection goes;
				       the descriptors freed */
};

/* The transports this library was built with (transport.c), NULL-ended:
 * shared memory first. */
extern const struct transport *const shunt_transports[];
extern const struct transport shm_transport;
/* The process-wide hooks of every built transport. */
void transports_share_prepare(const char *why, int reason);
void transports_exit_flush(void);
void transports_atfork_child(void);
void transports_creds_changed(void);
int transports_drop_unused(void);

/* The in-band handshake's remote transport (inband.c; RDMA when built and
 * a device is there): offers and answers in the handshake messages. */
struct remote_setup {
	int (*client_offer)(int fd, uint32_t tag, struct shunt_hs_offer *o, void **state);
	int (*client_accept)(struct sk *s, int fd, void *state, const struct shunt_hs_msg *a,
			     uint32_t tag, struct shunt_hs_offer *o);
	int (*server_offer)(int fd, const struct shunt_hs_msg *p, uint32_t tag, struct shunt_hs_offer *o,
			    void **state);
	int (*server_confirm)(struct sk *s, int fd, void *state, const struct shunt_hs_msg *c, uint32_t tag);
	void (*offer_drop)(void *state);
	void (*offer_abandon)(void *state);
	void (*offer_stale)(void *state);   /* the client declined: the link we named is
					       gone at its end (before offer_drop) */
};
extern const struct remote_setup *const shunt_remote; /* NULL: built without one */

/* The move of a live connection to its TCP socket (move.c): its state,
 * for any transport.  Each half moves once, the sending half under the
 * writer lock, the receiving half under mv_lock. */
struct conn_move {
	_Atomic int want;      /* 0, or the reason the sending half is to move */
	_Atomic int tx;        /* our bytes go to the TCP socket */
	_Atomic int rx;        /* 0 ring; 1 peer's message read, skip to drop; 2 TCP */
	uint8_t hdr[32];       /* our FAILOVER message ... */
	unsigned hdr_off;      /* ... sent up to here */
	uint64_t next, end;    /* staged bytes still to send on TCP */
	uint64_t skip;         /* bytes the peer resends that our ring has */
	uint64_t rx_pos;       /* stream offset of the next byte on the socket */
	uint64_t rx_end;       /* ... and where the peer's resend ends: EOF
				  before it is a reset, not an end */
	int rx_err;            /* an error met while skipping, for the reader */
	int pass;              /* moving before a pass or a fork: the socket keeps what we did not read */
	uint64_t start;        /* our resend's first offset (fault.c) */
	/* Bytes taken off the ring when its half moved that the socket will
	 * never carry (the peer had shut its sending side), or that C stdio
	 * could not reach there (stdio.c): read before the socket, rx lock
	 * held; a stdio read gives them to its FILE. */
	uint8_t *held;
	size_t held_off, held_len;
	_Atomic int fin;       /* shutdown(SHUT_WR) owed once the backlog is out */
	_Atomic uint32_t gen;  /* bumped when a half moves: its readiness comes
				  from elsewhere now, a new edge (epoll.c) */
	/* SO_RCVLOWAT while the ring still has bytes (sockinfo.c): the
	 * socket's mark as we set it (0: the program's own, kept in
	 * lowat_app meanwhile); one thread at a time sets it */
	_Atomic int lowat_set, lowat_busy;
	int lowat_app;
	pthread_mutex_t lock;
};

/* An accelerated connection, as the shim core sees it. */
struct conn {
	const struct transport *tp;
	void *tpd;                /* the transport's own state */
	struct ring tx, rx;
	/* Our doorbell (an eventfd), signalled for our poll/epoll sleepers:
	 * shared memory's is the arena's, RDMA's the connection's own. */
	int efd_mine;
	uint64_t bell_id;         /* names efd_mine's file (bell.c, epoll.c) */
	int side;                 /* 0 client, 1 server */
	int tcp_fd;               /* one fd of the kernel socket (for probes); -1 once
				     its last number closed (conn_unborrow) */
	int borrowed;             /* tcp_fd is the program's own number, not a duplicate of
				     ours: valid while the descriptor table maps it to this
				     connection, never closed by us (fdtab.c conn_unborrow) */
	int rcvlowat;             /* SO_RCVLOWAT (0: 1), sockinfo.c */
	int inq;                  /* TCP_INQ: 0 not asked yet, 1 off, 2 on (sockinfo.c) */
	int timeo_ms[2];          /* SO_RCVTIMEO, SO_SNDTIMEO (-1: none), read
				     when attached and kept by setsockopt: a
				     sleeper asks the kernel nothing */
	_Atomic int shut_wr;      /* we did shutdown(SHUT_WR) */
	_Atomic int shut_rd;      /* we did shutdown(SHUT_RD) */
	_Atomic int peer_eof;     /* the kernel socket saw FIN */
	_Atomic int peer_err;     /* the kernel socket saw an error (positive errno) */
	_Atomic int peer_reset;   /* the peer reset it through the transport (its
				     kernel RST may still be on its way) */
	_Atomic int reset_told;   /* a call reported peer_err (ECONNRESET...): as the
				     kernel's, once; then a send says EPIPE, a read EOF */
	_Atomic int64_t spin_ns;  /* adaptive spin budget */
	_Atomic uint64_t last_probe_ns;
	uint64_t last_gone_probe_ns; /* a non-blocking writer's probe (conn.c) */
	int broken;               /* unusable here (positive errno): an RDMA
				     connection in a forked child, a broken ring */
	_Atomic int broke;        /* SHUNT_R_PEER_BROKE once the peer broke the ring */
	struct conn_move mv;      /* move.c */
	/* passed to another process (move.c): both halves are on the socket,
	 * the rings are these two empty control blocks (one allocation) */
	struct shunt_ring_ctl *passed;
	_Atomic uint32_t tx_full; /* times a writer or a poll found no room, as TCP's
				     SOCK_NOSPACE: room given back after it is an edge
				     (epoll.c is_new_edge) */
	_Atomic uint32_t shut_calls; /* shutdown() calls: each one wakes TCP's sleepers */
	int shared;            /* another process may hold it too (a fork, an exec): its
				  locks look for another holder's move (conn_lock) */
};

/* For transports: the data path's words (conn.c). */
/* Take a "wake me" word and wake whoever set it (a futex sleeper, or a
 * poll/epoll sleeper on doorbell efd). */
void conn_wake_word(_Atomic uint32_t *w, int efd);
void conn_wake_local(struct conn *c, unsigned ev);   /* our own sleepers (POLLIN/POLLOUT) */
void conn_wake_all(struct conn *c);                  /* the peer's sleepers and ours */
struct shunt_ring_ctl *conn_lock(struct conn *c, int rx); /* writer's or reader's lock; NULL: broken */
void conn_break(struct conn *c, const char *what);   /* the peer broke the ring: reset */
void conn_init(struct conn *c, const struct transport *tp, void *tpd, int side, int tcp_fd);
#endif
