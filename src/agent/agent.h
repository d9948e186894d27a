/* SPDX-License-Identifier: MIT */
/* agent.h - what shuntd and the shim share: the socket-cookie array. */
#ifndef SHUNT_AGENT_H
#define SHUNT_AGENT_H
#include <stdint.h>

#define SHUNT_AGENT_SOCKS 65536 /* entries; index = cookie & (SOCKS - 1) */

/*
 * Entry lifetime: the shim claims a free (or stale) entry for a socket just
 * before connect() or listen() (state 0 -> BUSY by CAS, fields, then WANT or
 * LISTENER), the program writes its verdict, the shim reads it and frees
 * the entry (state -> 0).  An entry is needed only for a few round trips,
 * so 65536 of them collide only under that many handshakes in flight; a
 * socket whose entry is taken by a live one simply gets no option (reason
 * "resource"), and the program never overwrites a live client's entry.
 */
#define SHUNT_AGENT_STALE_NS 10000000000ull /* an older claim is abandoned */

/* states; written by the shim (BUSY, WANT, LISTENER) and by the BPF program */
enum shunt_agent_state {
	SHUNT_AG_FREE = 0,
	SHUNT_AG_BUSY = 9,               /* the shim is filling the entry in */
	SHUNT_AG_CLIENT_WANT = 1,        /* put our option in this socket's SYN */
	SHUNT_AG_CLIENT_PEER_OK = 2,     /* the SYN-ACK answered with ~nonce */
	SHUNT_AG_CLIENT_PEER_NONE = 3,   /* no answer: the peer or the path is plain */
	SHUNT_AG_CLIENT_PEER_REPLAY = 4, /* the answer was not ~nonce: a replaying peer */
	SHUNT_AG_LISTENER = 10,          /* answer SYNs that carry the option */
	SHUNT_AG_SERVER_SAW = 11,        /* this accepted socket's SYN carried nonce */
};

struct shunt_agent_entry {
	uint64_t cookie;  /* SO_COOKIE of the socket this entry is about */
	uint64_t nonce;
	uint64_t stamp;   /* CLOCK_MONOTONIC ns when claimed (shim) or written (program) */
	uint32_t state;
	uint32_t pad;
};
_Static_assert(sizeof(struct shunt_agent_entry) == 32, "agent entry layout");

/* The greeting shuntd sends with the array's fd; names the entry layout. */
#define SHUNT_AGENT_TAG "SHNTMAP2"
#endif
