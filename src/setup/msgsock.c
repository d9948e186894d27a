/* SPDX-License-Identifier: MIT */
/*
 * msgsock.c - the accept messages: the client's per-process datagram socket
 * (c<id>) and its stash of early messages, and the server's sender that
 * carries a new arena's descriptors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
#include "rdv.h"
#include "../base/real.h"
#include "../common/msg.h"
#include "../transport/shm/arena.h"
#include "../transport/shm/shm.h"
#include "../common/agent.h"

/* ---- the client's per-process socket and its stash of early messages ---- */


static int csock = -1;
static pid_t csock_pid;
static uint64_t csock_id;
static struct got_msg stash[256]; /* others' messages, one per waiting thread */
static int nstash;
static pthread_mutex_t csock_lock = PTHREAD_MUTEX_INITIALIZER;

int rdv_csock_get(uint64_t *id)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, r = 0;

	/* made already (every offer but the first asks): no lock - the id
	 * and the socket are written before the pid that publishes them */
	if (__atomic_load_n(&csock_pid, __ATOMIC_ACQUIRE) == shunt_pid() && csock_id) {
		*id = csock_id;
		return 0;
	}
	shunt_mutex_lock(&csock_lock);
	if (csock >= 0 && csock_pid == shunt_pid())
		goto out;
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	csock_id = shunt_proc_id(); /* (our s<id> file first: `shunt ss` learns from
				     * it that a dead process's c<id> is to be reaped) */
	rdv_path_of(sun.sun_path, sizeof sun.sun_path, 'c', csock_id);
	/* every message then carries its sender's credentials (the kernel's) */
	if (real.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)) ||
	    real.bind(fd, (void *)&sun, sizeof sun)) {
		r = -errno;
		real.close(fd);
		goto out;
	}
	chmod(sun.sun_path, shunt_file_mode());
	csock = fd_hide(fd);
	if (csock >= 0)
		__atomic_store_n(&csock_pid, shunt_pid(), __ATOMIC_RELEASE);
out:
	*id = csock_id;
	shunt_mutex_unlock(&csock_lock);
	return r;
}

void rdv_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			real.close(fds[i]);
}

/* The arena a message of our own user brings is taken in the order the
 * messages arrive, not when the thread it is for gets to it: two server
 * threads may send a new arena's first connection (with its memfd and
 * doorbells) after its second - taken late or lost with a failed attach,
 * every later connection of that arena would fail (issue #13, item 10: a
 * third of 64 concurrent connections fell back).  Another user's message
 * (a shared directory) is checked against its connection first, in
 * client_attach. */
static void take_arena_state(struct got_msg *g)
{
	struct arena *a;

	if (!g->has_uid || g->uid != (uint32_t)geteuid() || !(g->m.flags & SHUNT_MSG_F_ARENA))
		return;
	if (!arena_client_get(g->m.arena, g->fds, &g->uid, &a)) {
		arena_put(a); /* mapped: it stays, as arenas do */
		g->m.flags &= ~(uint32_t)SHUNT_MSG_F_ARENA;
	} /* else the connection falls back (client_attach: an arena sent
	   * and not taken is not looked up by its id) */
	g->fds[0] = g->fds[1] = g->fds[2] = -1; /* consumed either way */
}

/* Receive every queued message; keep those for other threads' connects. */
static void csock_pump(void)
{
	union { char buf[CMSG_SPACE(SHUNT_MSG_MAX_FDS * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align; } u;
	struct shunt_accept_msg m;
	char data[64];

	for (;;) {
		struct ucred cr = { .uid = (uid_t)-1 };
		int has_cr = 0;
		struct iovec iov = { data, sizeof data };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = u.buf, .msg_controllen = sizeof u.buf };
		int fds[SHUNT_MSG_MAX_FDS] = { -1, -1, -1 }, nfds = 0;
		ssize_t n = real.recvmsg(csock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
			    c->cmsg_len >= CMSG_LEN(sizeof cr)) {
				memcpy(&cr, CMSG_DATA(c), sizeof cr);
				has_cr = 1;
			}
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int f;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
				if (nfds < SHUNT_MSG_MAX_FDS)
					fds[nfds] = f;
				else
					real.close(f);
				nfds++;
			}
		}
		if (n == 0 && !nfds)
			continue; /* a wake-up (rdv_send_wake): nothing to take */
		if (shunt_accept_msg_check(data, (size_t)n, nfds, mh.msg_flags & MSG_CTRUNC, &m)) {
			shunt_log("malformed or unexpected accept message dropped");
			rdv_close_fds(fds, nfds < SHUNT_MSG_MAX_FDS ? nfds : SHUNT_MSG_MAX_FDS);
			continue;
		}
		/* Full: the oldest goes - its connect gave up long ago (a
		 * message for a waiting thread is taken within its wait). */
		if (nstash == (int)(sizeof stash / sizeof stash[0])) {
			rdv_close_fds(stash[0].fds, SHUNT_MSG_MAX_FDS);
			memmove(&stash[0], &stash[1], (size_t)--nstash * sizeof stash[0]);
		}
		stash[nstash] = (struct got_msg){ .m = m, .uid = (uint32_t)cr.uid, .has_uid = has_cr };
		memcpy(stash[nstash].fds, fds, sizeof fds);
		take_arena_state(&stash[nstash]);
		nstash++;
	}
}

/* Read what is queued on our socket: the arenas it carries are mapped
 * (an answer in the slot may name one whose descriptors came by a message
 * for another of our offers, not read yet). */
void rdv_msg_pump(void)
{
	shunt_mutex_lock(&csock_lock);
	if (csock >= 0 && csock_pid == shunt_pid())
		csock_pump();
	shunt_mutex_unlock(&csock_lock);
}

/* Our socket, for an epoll set that waits on it (epoll.c): -1 if this
 * process has none. */
int rdv_msg_fd(void)
{
	return __atomic_load_n(&csock_pid, __ATOMIC_ACQUIRE) == shunt_pid() ? csock : -1;
}

int rdv_stash_take(uint64_t nonce, struct got_msg *out)
{
	int found = 0;

	shunt_mutex_lock(&csock_lock);
	csock_pump();
	for (int i = 0; i < nstash; i++) {
		if (stash[i].m.nonce != nonce)
			continue;
		*out = stash[i];
		memmove(&stash[i], &stash[i + 1], (size_t)(--nstash - i) * sizeof stash[0]); /* oldest first */
		found = 1;
		break;
	}
	shunt_mutex_unlock(&csock_lock);
	return found;
}

SHUNT_CHILD_PATH void rdv_msgsock_atfork_child(void)
{
	/* The parent keeps its socket and its messages: start afresh. */
	if (csock >= 0)
		fd_close_internal(csock);
	SHUNT_RESET(csock, -1);
	for (int i = 0; i < nstash; i++)
		rdv_close_fds(stash[i].fds, SHUNT_MSG_MAX_FDS);
	SHUNT_RESET(nstash, 0);
	shunt_mutex_reset(&csock_lock);
}

/* The message with this nonce, already on its way (the in-band handshake's
 * ACCEPT announced it): 0, or -ETIMEDOUT at the deadline. */
int rdv_msg_await(uint64_t nonce, struct got_msg *out, uint64_t deadline)
{
	while (!rdv_stash_take(nonce, out)) {
		if (shunt_now_ns() >= deadline)
			return -ETIMEDOUT;
		fd_wait(csock, POLLIN, deadline, 1);
	}
	return 0;
}

/* A clean exit removes this process's socket; `shunt ss` reaps the rest. */
SHUNT_CHILD_PATH void rdv_msgsock_exit(void)
{
	char name[SHUNT_DIR_NAME_MAX];

	if (csock >= 0 && csock_pid == getpid()) {
		shunt_dir_name(name, 'c', csock_id);
		unlinkat(shunt_dirfd, name, 0);
	}
}

/* One unbound datagram socket per process sends every accept message. */
static int sender_socket(void)
{
	static int sfd = -1;
	static pid_t owner;
	int fd;

	if (sfd >= 0 && owner == shunt_pid())
		return sfd;
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	fd = fd_hide(fd);
	if (__atomic_compare_exchange_n(&sfd, &(int){ sfd }, fd, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		owner = shunt_pid();
	else
		fd_close_internal(fd);
	return sfd;
}

int rdv_send_accept(uint64_t sock_id, unsigned slot, uint64_t nonce, struct arena *a,
		    unsigned seg, int send_fds)
{
	struct shunt_accept_msg m = { .magic = SHUNT_MSG_MAGIC, .version = SHUNT_WIRE_VERSION,
				      .nonce = nonce, .ring_size = a->ring_size, .slot = slot,
				      .arena = a->id, .seg = seg,
				      .flags = send_fds ? SHUNT_MSG_F_ARENA : 0 };
	union { char buf[CMSG_SPACE(SHUNT_MSG_MAX_FDS * sizeof(int))]; struct cmsghdr align; } u;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct iovec iov = { &m, sizeof m };
	struct msghdr mh = { .msg_name = &sun, .msg_namelen = sizeof sun, .msg_iov = &iov,
			     .msg_iovlen = 1, .msg_control = u.buf };
	int fds[SHUNT_MSG_MAX_FDS], n = 0, sfd;
	struct cmsghdr *c;

	if (send_fds) {
		fds[n++] = a->memfd;
		fds[n++] = a->bell[0];
		fds[n++] = a->bell[1];
	}
	m.nfds = (uint16_t)n;
	if (n) {
		mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
	} else {
		mh.msg_control = NULL;
	}
	rdv_path_of(sun.sun_path, sizeof sun.sun_path, 'c', sock_id);
	sfd = sender_socket();
	if (sfd < 0)
		return sfd;
	/* A full queue (net.unix.max_dgram_qlen, 10 by default: many threads
	 * of one client connecting at once) drains as the client's threads
	 * pump it: retry, bounded, rather than fall back. */
	for (int i = 0;; i++) {
		ssize_t sent = real.sendmsg(sfd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent == (ssize_t)sizeof m)
			return 0;
		if (sent >= 0 || errno != EAGAIN || i == SEND_RETRIES)
			return -EPIPE;
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	}
}

/* An empty datagram to the client's socket c<sock_id>: its offer, waited
 * for in an epoll set that holds the socket (SHUNT_WAIT_EPOLL), is
 * answered in its slot.  Never waits: a full queue has wake-ups enough
 * for the set, whose thread drains it before it looks at its offers. */
void rdv_send_wake(uint64_t sock_id)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int sfd = sender_socket();

	if (sfd < 0)
		return;
	rdv_path_of(sun.sun_path, sizeof sun.sun_path, 'c', sock_id);
	(void)!real.sendto(sfd, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sun, sizeof sun);
}
