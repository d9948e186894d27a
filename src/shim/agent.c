/* SPDX-License-Identifier: MIT */
/*
 * agent.c - the shim's side of shuntd (issue #3, in progress).
 *
 * If an agent runs (its socket at SHUNT_AGENT_SOCK, default
 * /run/shunt/agent.sock), the shim maps its socket-cookie array once and
 * registers the sockets it connects and listens with; the sock_ops program
 * then signals capability in their SYN/SYN-ACK and leaves its verdict in the
 * array.  Without an agent nothing changes.  The in-band handshake that
 * would follow a positive verdict between hosts is not wired yet: such a
 * connection stays plain with reason no-common-transport, visibly.
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
	    real.recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof tag &&
	    !memcmp(tag, "SHNTMAP1", 8) && CMSG_FIRSTHDR(&mh) &&
	    CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS) {
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fd);
		m = mmap(NULL, sizeof *tab * SHUNT_AGENT_SOCKS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
		tab = map_from_agent();
		__atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return tab;
}

static int cookie_of(int fd, uint64_t *c)
{
	socklen_t l = sizeof *c;
	int e = errno, r = real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, c, &l);

	errno = e;
	return r || !*c ? -1 : 0;
}

static struct shunt_agent_entry *entry(uint64_t cookie)
{
	return &tab[cookie & (SHUNT_AGENT_SOCKS - 1)];
}

static int mark(int fd, uint64_t nonce, uint32_t state)
{
	struct shunt_agent_entry *e;
	uint64_t c;

	if (!table() || cookie_of(fd, &c))
		return -1;
	e = entry(c);
	__atomic_store_n(&e->state, 0, __ATOMIC_RELAXED);
	e->cookie = c;
	e->nonce = nonce;
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

/* The agent's verdict on this socket (enum shunt_agent_state), or 0. */
int agent_state(int fd)
{
	struct shunt_agent_entry *e;
	uint64_t c;

	if (!tab || cookie_of(fd, &c))
		return 0;
	e = entry(c);
	return e->cookie == c ? (int)__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) : 0;
}

/* The fallback reason a verdict implies (a capable peer goes on to the
 * in-band handshake instead), or 0 if it says nothing. */
int agent_reason_of(int state)
{
	switch (state) {
	case SHUNT_AG_CLIENT_PEER_REPLAY:
		return SHUNT_R_OPTION_REPLAYED;
	case SHUNT_AG_CLIENT_PEER_NONE:
		return SHUNT_R_PEER_NOT_SHUNT;
	default:
		return 0;
	}
}
