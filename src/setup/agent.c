/* SPDX-License-Identifier: MIT */
/*
 * agent.c - the shim's side of shuntd.
 *
 * If an agent's programs watch this process's cgroup, a socket registered
 * with setsockopt(SHUNT_AG_SOL) carries shunt's option in its SYN (client)
 * or answers it (listener), and getsockopt(SHUNT_AG_SOL) reads what the
 * handshake showed (src/common/agent.h).  The state is the socket's own: a
 * process can neither see nor change another's.  Without an agent the
 * kernel answers ENOPROTOOPT and nothing changes but the reason of
 * connections to other hosts: "no agent".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include "../shim/shim.h"
#include "../base/real.h"
#include "../common/agent.h"

static _Atomic int logged; /* "agent: present/absent" once per process */

static int mark(int fd, int opt, const void *val, socklen_t len)
{
	int e = errno, r = real.setsockopt(fd, SHUNT_AG_SOL, opt, val, len) ? -errno : 0;

	if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		shunt_log("agent: %s", r == -ENOPROTOOPT ? "absent" : r ? strerror(-r) : "present");
	errno = e;
	if (r == -ENOPROTOOPT || r == -EOPNOTSUPP)
		return -ENOENT; /* no program answered: no agent for us */
	return r ? -EINVAL : 0;
}

int agent_mark_client(int fd)
{
	uint64_t nonce = shunt_fast_random();

	return mark(fd, SHUNT_AG_OPT_CLIENT, &nonce, sizeof nonce);
}

int agent_mark_listener(int fd)
{
	uint32_t one = 1;

	return mark(fd, SHUNT_AG_OPT_LISTENER, &one, sizeof one);
}

/* Listener fd may be accepted past us from now on (this process set up
 * io_uring or goes into a seccomp sandbox, or an image that will not load
 * us is given it): the agent answers no SYN on its port any more, or a
 * client's PROPOSAL would reach the program as its data (sockops.bpf.c). */
void agent_listener_off(int fd, const char *why)
{
	int32_t one = 1;
	int r = mark(fd, SHUNT_AG_OPT_LISTENER_OFF, &one, sizeof one);

	if (r && r != -ENOENT) /* (no agent: no answer to stop) */
		shunt_warn("listener fd %d: %s, but the agent would not stop answering for it: a "
			   "client of another host may send it shunt's handshake", fd, why);
	else if (!r)
		shunt_log("listener fd %d: %s: the agent answers no SYN for its port now", fd, why);
}

/* The socket's verdict: its state (enum shunt_agent_state), 0 if there is
 * none (no agent, or the socket was never registered). */
int agent_take(int fd, uint64_t *nonce)
{
	struct shunt_agent_verdict v;
	socklen_t l = sizeof v;
	int e = errno;

	if (real.getsockopt(fd, SHUNT_AG_SOL, SHUNT_AG_OPT_VERDICT, &v, &l) || l != sizeof v) {
		errno = e;
		return 0;
	}
	if (nonce)
		*nonce = v.nonce;
	return (int)v.state;
}

/* The fallback reason a client's verdict implies (a capable peer goes on to
 * the in-band handshake instead, reason 0). */
int agent_reason_of(int state)
{
	switch (state) {
	case SHUNT_AG_CLIENT_PEER_OK:
		return 0;
	case SHUNT_AG_CLIENT_PEER_REPLAY:
		return SHUNT_R_OPTION_REPLAYED;
	case SHUNT_AG_CLIENT_PEER_NONE:
		return SHUNT_R_PEER_NOT_SHUNT;
	default:
		return SHUNT_R_NO_AGENT; /* no program saw the handshake */
	}
}
