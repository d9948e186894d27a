/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the shared-memory transport: a connection is a segment of an
 * arena (arena.h) that both processes map; each writes its ring and reads
 * the other's, and wakes the other through the arena's doorbells.
 */
#ifndef SHUNT_SHM_H
#define SHUNT_SHM_H
#include "../transport.h"

struct arena;

struct shm_conn {
	struct conn c;            /* first: the shim core's part */
	struct shunt_seg_hdr *seg;
	struct arena *arena;      /* owns the mapping */
	unsigned segno;           /* index of seg in the arena */
	int efd_peer;             /* the peer side's doorbell (the arena's) */
	uint64_t fork_gen;        /* de-duplicates dup'd fds in the fork hooks */
	int close_begun;          /* our arena_close_begin is done (shm_closing, release) */
	int sock_clean;           /* made by the registry's rendezvous: its socket carries
				     nothing of shunt's (no handshake bytes) until a FIN of
				     ours draws a probe or a move says so (shm_closing) */
	/* server: a client asleep on its slot's state word until we first
	 * wake its reader (shm_wake_owed); NULL once woken */
	_Atomic uint32_t *_Atomic owed;
};

static inline struct shm_conn *shm_of(const struct conn *c)
{
	return (struct shm_conn *)c->tpd;
}

/* Attach to segment `seg` of arena `a`; take ownership of tcp_fd (on
 * success only) - or, borrowed, use the program's own number as the
 * connection's socket (conn.borrowed).  nonce, when given, must match. */
int shm_attach(struct conn **out, struct arena *a, unsigned seg, int side, int tcp_fd, int borrowed,
	       const uint64_t *nonce);
/* This thread's last refusal of a segment's header by shm_attach: what
 * it held (for a warning) */
extern __thread char shm_refused[160];
/* The client sleeps on its slot's word w until our first push (server.c). */
void shm_wake_owed(struct conn *c, _Atomic uint32_t *w);
/* This process holds the connection alone (the segment's owner count). */
int shm_sole_owner(const struct conn *c);

/* shm_move.c: moving a shared-memory connection to its TCP socket */
int shm_peer_left(struct conn *c);      /* the peer left our ring (rd_left): we move too */
int shm_move_tx(struct conn *c);        /* our sending half (writer lock held) */
void shm_move_progress(struct conn *c); /* the move's resend, from any call */
int shm_settle(struct conn *c);         /* refresh's part: leftovers, the peer's move; 1: FIN */
int shm_pass(struct conn *c, struct shunt_ring_ctl *rx, struct shunt_ring_ctl **t, int why);
int shm_side_moved(const struct conn *c, int rx);
void shm_follow(struct conn *c, int why);
#endif
