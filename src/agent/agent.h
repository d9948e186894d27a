/* SPDX-License-Identifier: MIT */
/* agent.h - what shuntd and the shim share: the socket-cookie array. */
#ifndef SHUNT_AGENT_H
#define SHUNT_AGENT_H
#include <stdint.h>

#define SHUNT_AGENT_SOCKS 65536 /* entries; index = cookie & (SOCKS - 1) */

/* states; written by the shim (WANT, LISTENER) and by the BPF program */
enum shunt_agent_state {
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
	uint32_t state;
	uint32_t pad;
};
_Static_assert(sizeof(struct shunt_agent_entry) == 24, "agent entry layout");
#endif
