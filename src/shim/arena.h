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
	struct shunt_arena_hdr *hdr;
	size_t len;
	uint32_t ring_size;
	int held;             /* segments this process holds */
	/* Each segment's eventfd pair ([0] the client's, [1] the server's),
	 * kept across connections like the memory.  A process whose copy is
	 * of an older generation than the segment's (a forked sibling made a
	 * new pair) makes and sends a new one. */
	int efd[SHUNT_ARENA_SLOTS][2];
	uint32_t efd_gen[SHUNT_ARENA_SLOTS];
	struct arena *next;
};

/* Server: a free segment in an arena shared with client process `peer`,
 * creating the arena if needed (*created = 1: its memfd must be sent).
 * The segment is initialised (rings empty, nonce, both owners 1). */
int arena_server_take(uint64_t peer, uint64_t nonce, struct arena **out, unsigned *seg, int *created);
/* Client: the arena with this id, mapping memfd (>= 0, consumed) if new. */
int arena_client_get(uint64_t id, int memfd, struct arena **out);
/* Adopt an arena across exec (either side). */
int arena_adopt(uint64_t id, int memfd, int side, struct arena **out);
struct shunt_seg_hdr *arena_seg(struct arena *a, unsigned seg);
/* Drop one owner of `side`; the segment is free once both sides are 0.
 * An arena whose peer process is gone and that we no longer use is unmapped. */
void arena_release(struct arena *a, unsigned seg, int side);
/* Server: the segment's eventfd pair, made anew (*fresh = 1: to be sent,
 * with the new generation in *gen) when ours is missing or stale. */
int arena_server_efds(struct arena *a, unsigned seg, int *fresh, uint32_t *gen);
/* Client (and exec): adopt the pair sent (fds != NULL) or check ours is of
 * generation gen.  Consumes fds on success and on failure. */
int arena_set_efds(struct arena *a, unsigned seg, uint32_t gen, int *fds);
/* Drop an owner without ending our use of the arena (a declined offer:
 * the server drops the client's pre-charged owner). */
int arena_drop_owner(struct arena *a, unsigned seg, int side);
void arena_atfork_child(void);
/* We no longer use one segment of the arena (owners untouched). */
void arena_put(struct arena *a);
/* fork: the child is one more owner of every segment it inherited. */
void arena_hold_more(struct arena *a, unsigned seg, int side);
#endif
