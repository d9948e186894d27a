/* SPDX-License-Identifier: MIT */
/*
 * agent.c - the shim's side of shuntd (issue #3, in progress).
 *
 * If an agent runs (its socket at SHUNT_AGENT_SOCK, default
 * /run/shunt/agent.sock), the shim maps its socket-cookie array once and
 * registers the sockets it connects and listens with; the sock_ops program
 * then signals capability in their SYN/SYN-ACK and leaves its verdict in the
 * array, which the shim reads once and frees (src/agent/agent.h has the
 * entry's lifetime).  Without an agent nothing changes but the reason of
 * connections to other hosts: "no agent".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>
#include "shim.h"
#include "real.h"
#include "../agent/agent.h"

static struct shunt_agent_entry *tab;
static int tried;
static uint64_t retry_at;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct shunt_agent_entry *map_from_agent(void)
{
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = getenv("SHUNT_AGENT_SOCK");
	char tag[8];
	struct iovec iov = { tag, sizeof tag };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof u.buf };
	void *m = NULL;
	int s, fd = -1;

	if (!path)
		path = "/run/shunt/agent.sock";
	if (strlen(path) >= sizeof sun.sun_path)
		return NULL;
	strcpy(sun.sun_path, path);
	s = real.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return NULL;
	if (!real.connect(s, (void *)&sun, sizeof sun) &&
	    real.recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof tag && CMSG_FIRSTHDR(&mh) &&
	    CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS) {
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fd);
		if (!memcmp(tag, SHUNT_AGENT_TAG, 8))
			m = mmap(NULL, sizeof *tab * SHUNT_AGENT_SOCKS, PROT_READ | PROT_WRITE,
				 MAP_SHARED, fd, 0);
		else
			shunt_log("agent %s speaks another version: ignored", path);
		if (m == MAP_FAILED)
			m = NULL;
		real.close(fd);
	}
	real.close(s);
	shunt_log("agent %s: %s", path, m ? "connected" : "absent");
	return m;
}

static struct shunt_agent_entry *table(void)
{
	if (__atomic_load_n(&tried, __ATOMIC_ACQUIRE))
		return tab;
	pthread_mutex_lock(&lock);
	if (!tried) {
		/* A table from an agent that has gone stays mapped (other
		 * threads may hold entries of it): a restart costs one array. */
		tab = map_from_agent();
		__atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return tab;
}

/* The program did not run for a socket we registered: the agent has gone
 * (its program went with it).  Ask again, at most once a second, so a
 * restarted agent is found by running processes too. */
static void agent_lost(void)
{
	uint64_t now = shunt_now_ns();

	pthread_mutex_lock(&lock);
	if (now >= retry_at) {
		retry_at = now + 1000000000ull;
		__atomic_store_n(&tried, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
}

static int cookie_of(int fd, uint64_t *c)
{
	socklen_t l = sizeof *c;
	int e = errno, r = real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, c, &l);

	errno = e;
	return r || !*c ? -1 : 0;
}

static struct shunt_agent_entry *entry(struct shunt_agent_entry *t, uint64_t cookie)
{
	return &t[cookie & (SHUNT_AGENT_SOCKS - 1)];
}

/* Claim this socket's entry: free, or abandoned by a claim long past. */
static int mark(int fd, uint64_t nonce, uint32_t state)
{
	struct shunt_agent_entry *t = table(), *e;
	uint64_t c, now = shunt_now_ns();
	uint32_t st;

	if (!t)
		return -ENOENT;
	if (cookie_of(fd, &c))
		return -EINVAL;
	e = entry(t, c);
	st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	if (st != SHUNT_AG_FREE && now - e->stamp < SHUNT_AGENT_STALE_NS)
		return -EBUSY;
	if (!__atomic_compare_exchange_n(&e->state, &st, SHUNT_AG_BUSY, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	e->cookie = c;
	e->nonce = nonce;
	e->stamp = now;
	__atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
	return 0;
}

int agent_mark_client(int fd)
{
	return mark(fd, shunt_fast_random(), SHUNT_AG_CLIENT_WANT);
}

int agent_mark_listener(int fd)
{
	return mark(fd, 0, SHUNT_AG_LISTENER);
}

/* Read this socket's entry and free it: its verdict is read once.  Returns
 * the state (enum shunt_agent_state), 0 if the entry is not this socket's. */
int agent_take(int fd, uint64_t *nonce)
{
	struct shunt_agent_entry *t = tab, *e;
	uint64_t c;
	uint32_t st;

	if (!t || cookie_of(fd, &c))
		return 0;
	e = entry(t, c);
	st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	if (e->cookie != c || st == SHUNT_AG_FREE || st == SHUNT_AG_BUSY)
		return 0;
	if (nonce)
		*nonce = e->nonce;
	if (!__atomic_compare_exchange_n(&e->state, &st, SHUNT_AG_FREE, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED) || e->cookie != c)
		return 0;
	if (st == SHUNT_AG_CLIENT_WANT)
		agent_lost(); /* established, yet no verdict: no program ran */
	return (int)st;
}

int agent_present(void)
{
	return table() != NULL;
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
