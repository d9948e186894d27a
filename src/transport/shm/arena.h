/* SPDX-License-Identifier: MIT */
/* arena.h - per-process-pair pools of segments (see wire.h, section 2). */
#ifndef SHUNT_ARENA_H
#define SHUNT_ARENA_H
#include <stdint.h>
#include "shunt/wire.h"

struct arena {
	uint64_t id;
	uint64_t peer;        /* the other process's id (its s<id> file) */
	int side;             /* 0: we are the client of its connections, 1: the server */
	int memfd;
	dev_t dev;            /* the memfd's identity: an arena sent again must be it */
	ino_t ino;
	struct shunt_arena_hdr *hdr;
	size_t len;
	uint32_t ring_size;
	_Atomic int held;     /* segments this process holds: raised under arena.c's
				 lock (a look-up and its count are one step), lowered
				 without it; read under it before an unmap */
	/* The doorbells ([0] the client's, [1] the server's): eventfds made
	 * with the arena and sent with its memfd, so every process holding
	 * the arena (fork, exec) has the same two.  A side's poll/epoll
	 * sleepers on any of its segments wait on its doorbell (bell.c);
	 * nobody reads one: see bell.c. */
	int bell[2];
	_Atomic int forked;   /* server side: a connection of it went to a forked child
				 and no segment was taken in it since (arena.c) */
	int adopted;          /* mapped across an exec: others may hold it */
	unsigned epoch;       /* made here: shunt_forks() then (0: mapped, another's) */
	unsigned hi;          /* made here: segments [0, hi) were ever taken */
	uint32_t closes_seen; /* client side: hdr->closes when last looked at */
	/* Client side: the user of the process that sent it (the accept
	 * message's credentials, the kernel's word), or -1: unknown (adopted
	 * across an exec).  A shared directory's
	 * answer in the slot names it only when that user owns the server's
	 * end of the connection (client.c).  Server side: our real uid when
	 * we last sent it, the uid that client recorded. */
	_Atomic uint32_t uid;
	_Atomic uint32_t client_uid; /* server side: its client's user, as its c<id>
					file said when we sent it (server.c), or -1 */
	struct arena *next;
};

/* Server: a free segment in an arena shared with client process `peer`,
 * creating the arena if needed (*send_fds = 1: new, or not known to be
 * mapped by the client - its memfd and doorbells must be sent).  The
 * segment is initialised (rings empty, nonce, both owners 1). */
int arena_server_take(uint64_t peer, uint64_t nonce, struct arena **out, unsigned *seg, int *send_fds);
/* Server: the user of client process peer as an arena of ours for it was
 * sent (its client_uid), or -1: none sent yet. */
uint32_t arena_server_client_uid(uint64_t peer);
/* Client: the arena with this id; fds (NULL: it must be mapped already):
 * its memfd and doorbells, mapped if new, consumed on success and failure;
 * uid (NULL: none): the user who sent them, recorded with the arena. */
int arena_client_get(uint64_t id, int *fds, const uint32_t *uid, struct arena **out);
/* Adopt an arena across exec (either side); fds as above. */
int arena_adopt(uint64_t id, int *fds, int side, struct arena **out);
struct shunt_seg_hdr *arena_seg(struct arena *a, unsigned seg);
/* Drop one owner of `side`; the segment is free once both sides are 0.
 * An arena whose peer process is gone and that we no longer use is unmapped. */
void arena_release(struct arena *a, unsigned seg, int side);
/* Drop an owner without ending our use of the arena (a declined offer:
 * the server drops the client's pre-charged owner). */
int arena_drop_owner(struct arena *a, unsigned seg, int side);
void arena_atfork_child(void);
/* A connection of a goes to a forked child too (either side calls it; a
 * server's arena takes no new segment from then on: arena.c). */
void arena_forked(struct arena *a);
/* Unmap the arenas this process holds no segment of, their peers alive or
 * not (a give-back, giveback.c): how many. */
int arena_drop_unused(void);
/* Client: an offer of ours is in flight (from its slot's reservation to
 * the answer's end): no arena of ours is unmapped meanwhile. */
void arena_offer_begin(void);
void arena_offer_end(void);
/* Client: could a new arena be mapped now (1), given the process's memory
 * limits?  Asked before an offer: a server's answer is final, and an
 * arena we then could not map ended the connection.  arena_limits_changed:
 * RLIMIT_AS or RLIMIT_MEMLOCK set, or mlockall() made (future_locked: its
 * MCL_FUTURE; -1: as it was). */
int arena_mappable(void);
void arena_limits_changed(int future_locked);
/* We no longer use one segment of the arena (owners untouched). */
void arena_put(struct arena *a);
/* fork: the child is one more owner of every segment it inherited. */
void arena_hold_more(struct arena *a, unsigned seg, int side);
/* A holder of the segment's side begins its last close (once each, or
 * its fork is undone): 1 if it is the side's last to - every other holder
 * closed or closing, reading the ring no more (wire.h unclosed[]). */
int arena_close_begin(struct arena *a, unsigned seg, int side);
/* A holder's share let go of, if others of its side still hold it (its
 * close changes nothing at the peer then): 0; -EAGAIN if it is the last
 * (its close ends the side: the connection's own close does that). */
int arena_let_go_shared(struct arena *a, unsigned seg, int side);
#endif
