/* SPDX-License-Identifier: MIT */
/*
 * agent.h - what shuntd's BPF programs and the shim share: socket options.
 *
 * The shim registers a socket and reads its verdict through the socket
 * itself, with setsockopt/getsockopt at a level of shunt's own that shuntd's
 * cgroup sockopt programs answer (the kernel alone answers ENOPROTOOPT: no
 * agent).  The state lives in the socket's BPF local storage, so a process
 * reaches only the sockets it holds: no other user can read, write or forge
 * the verdict of a connection it does not own (docs/security.md).  Nothing
 * is mapped into processes and no agent socket hands anything out.
 */
#ifndef SHUNT_AGENT_H
#define SHUNT_AGENT_H
#include <stdint.h>

#define SHUNT_AG_SOL 0x5348 /* "SH": a level no protocol of the kernel uses */

/* option names at SHUNT_AG_SOL */
#define SHUNT_AG_OPT_CLIENT 1   /* set, uint64_t nonce: put our option in this socket's SYN */
#define SHUNT_AG_OPT_LISTENER 2 /* set, uint32_t 1: answer SYNs that carry the option */
#define SHUNT_AG_OPT_VERDICT 3  /* get, struct shunt_agent_verdict */
#define SHUNT_AG_OPT_LISTENER_OFF 4 /* set, int32_t 1: a holder may accept past the shim - answer no
				     * SYN on this port of this network namespace while it is open */

/* states (the verdict's), written by the BPF programs only */
enum shunt_agent_state {
	SHUNT_AG_FREE = 0,               /* nothing known of this socket */
	SHUNT_AG_CLIENT_WANT = 1,        /* registered; no SYN-ACK seen yet */
	SHUNT_AG_CLIENT_PEER_OK = 2,     /* the SYN-ACK answered with ~nonce */
	SHUNT_AG_CLIENT_PEER_NONE = 3,   /* no answer: the peer or the path is plain */
	SHUNT_AG_CLIENT_PEER_REPLAY = 4, /* the answer was not ~nonce: a replaying peer */
	SHUNT_AG_LISTENER = 10,          /* answers SYNs that carry the option */
	SHUNT_AG_SERVER_SAW = 11,        /* this accepted socket's SYN carried nonce */
	SHUNT_AG_SERVER_SAW_OFF = 12,    /* ... and its listener was off: no PROPOSAL is due */
};

struct shunt_agent_verdict {
	uint32_t state;  /* enum shunt_agent_state */
	uint32_t pad;
	uint64_t nonce;  /* the client's nonce (client: ours; server: the SYN's) */
};
_Static_assert(sizeof(struct shunt_agent_verdict) == 16, "agent verdict layout");

#define SHUNT_AGENT_MAX_UIDS 64 /* --allow-uid entries */
#endif
