/* SPDX-License-Identifier: MIT */
/*
 * rendezvous.c - deciding, without a byte on the TCP stream, that both ends
 * of one kernel TCP connection run shunt, and handing them a segment.
 *
 *   client connect()                         server accept()
 *   ----------------                         ---------------
 *   registry p<port> has a live listener?
 *   reserve a slot: FREE -> CONNECTING
 *   real connect() (SYN leaves only now)
 *   write the 4-tuple, CONNECTING -> OFFERED  scan slots for its own 4-tuple
 *   spin, then sleep on the slot (bounded)    (CONNECTING ones: wait <= 20 ms)
 *                                             OFFERED -> CLAIMED (CAS)
 *                                             take a segment, attach
 *                                             an arena the client maps: its
 *                                             id and segment into the slot;
 *   <------ else accept message + 3 fds ----- a new one: sendmsg to c<id>
 *                                             CLAIMED -> ANSWERED (CAS)
 *   attach, segment.confirm 0 -> 1 (CAS)      wait for confirm (CAS 0->2 on
 *   free the slot                             time-out), return
 *
 * Why it never guesses: the slot is reserved before the SYN exists, so when
 * the server holds the accepted socket, a shunt client's offer is either
 * visible or in CONNECTING.  No offer and no CONNECTING slot means the
 * client is not shunt: plain, with no wait.  Each side commits with one CAS
 * (OFFERED->CLAIMED against OFFERED->ABANDONED, CLAIMED->ANSWERED against
 * CLAIMED->FAILED, then confirm 0->1 against 0->2), so exactly one outcome
 * exists and both sides see it.  A shunt server writes nothing before it
 * claims, so a client that sees bytes or FIN on the TCP socket while it
 * waits knows the server is plain and stops.  Most connections between two
 * processes that met before take no system call of the set-up beyond the
 * duplicate of the socket: the answer is in the slot, the decision in the
 * segment (issue #13, item 10).
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
#include "shim.h"
#include "../base/real.h"
#include "../common/msg.h"
#include "../transport/shm/arena.h"
#include "../transport/shm/shm.h"
#include "../common/agent.h"

#define SERVER_CONNECTING_WAIT_NS 20000000ull  /* server waits for CONNECTING slots to its address */
#define CONNECTING_FRESH_NS 50000000ull        /* older CONNECTING slots are ignored */
#define STALE_SLOT_NS 30000000000ull           /* abandoned by a dead process: reaped */
#define CONFIRM_WAIT_NS 1000000000ull          /* server waits for the client's attach */
#define CLAIMED_WAIT_NS 5000000000ull          /* client waits for a claimed message */
#define SPIN_MSG_NS 50000ull                   /* client spins this long before sleeping */
#define SPIN_OFFER_NS 20000ull                 /* server spins this long for an offer */
#define SEND_RETRIES 1000                      /* x 0.1 ms: an accept message into a full queue */

struct portreg {
	struct shunt_registry *r;
	int probe_fd;     /* for the liveness probe (flock EX|NB) */
	int lock_fd;      /* LOCK_SH held while this process listens on the port */
	int nlisten;
	ino_t ino;        /* the file mapped: the name may since point elsewhere */
};

static struct portreg *_Atomic ports[65536];
static int nports_listened; /* non-zero once this process listened (rdv_exit) */
static _Atomic int connects_in_setup; /* threads in connect_offer (busy_short) */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- small helpers ---- */

static int sys(long r)
{
	return r < 0 ? -errno : (int)r;
}

/* A unix socket is reached by path: bind and sendto take no directory fd.
 * The directory was checked (core.c) and nobody else may rename it or its
 * entries (ours, or sticky), so the path names what the check saw. */
static void path_of(char *buf, size_t n, char kind, uint64_t id)
{
	char name[SHUNT_DIR_NAME_MAX];

	/* SHUNT_DIR is at most 79 bytes (config.c), so these always fit. */
	if (n < sizeof shunt_cfg.dir + sizeof name)
		return;
	shunt_dir_name(name, kind, id);
	snprintf(buf, n, "%s/%s", shunt_cfg.dir, name);
}

/* Files are opened relative to the checked directory, never through a
 * symlink, and must be regular files (*st: what fstat said). */
static int reg_openat(const char *name, int flags, struct stat *st)
{
	int fd = real.openat(shunt_dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		real.close(fd);
		return -EINVAL;
	}
	return fd;
}

int shunt_addr_from_sockaddr(struct shunt_addr *a, const struct sockaddr *sa)
{
	memset(a, 0, sizeof *a);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		a->ip[10] = a->ip[11] = 0xff;
		memcpy(&a->ip[12], &in->sin_addr, 4);
		a->port = ntohs(in->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		memcpy(a->ip, &in6->sin6_addr, 16);
		a->port = ntohs(in6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

static int is_loopback(const struct shunt_addr *a)
{
	static const uint8_t v6lo[16] = { [15] = 1 };
	static const uint8_t v4pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->ip, v6lo, 16) || (!memcmp(a->ip, v4pfx, 12) && a->ip[12] == 127);
}

static int is_any(const struct shunt_addr *a)
{
	static const uint8_t zero[16], v4any[16] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->ip, zero, 16) || !memcmp(a->ip, v4any, 16);
}

/* The 4-tuple as the kernel sees it; the remote end may be known already
 * (remote_sa: accept's address, a connect's concrete destination), which
 * saves a system call on the set-up's path. */
static int sock_tuple_known(int fd, struct shunt_addr *local, struct shunt_addr *remote,
			    const struct sockaddr *remote_sa)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;

	if (getsockname(fd, (void *)&ss, &l) || shunt_addr_from_sockaddr(local, (void *)&ss))
		return -ENOTCONN;
	if (remote_sa)
		return shunt_addr_from_sockaddr(remote, remote_sa) ? -ENOTCONN : 0;
	l = sizeof ss;
	if (getpeername(fd, (void *)&ss, &l) || shunt_addr_from_sockaddr(remote, (void *)&ss))
		return -ENOTCONN;
	return 0;
}

static int sock_tuple(int fd, struct shunt_addr *local, struct shunt_addr *remote)
{
	return sock_tuple_known(fd, local, remote, NULL);
}

/* A connection to this host's own addresses gets a source address equal to
 * its destination (or loopback); any other source means another host. */
static int is_other_host(int fd, const struct shunt_addr *dst)
{
	struct shunt_addr l, r;
	int e = errno, o = !is_loopback(dst) && !sock_tuple(fd, &l, &r) &&
			   memcmp(l.ip, r.ip, sizeof l.ip);

	errno = e;
	return o;
}

static int tuple_eq(const struct shunt_tuple *a, const struct shunt_tuple *b)
{
	return !memcmp(a->client.ip, b->client.ip, 16) && a->client.port == b->client.port &&
	       !memcmp(a->server.ip, b->server.ip, 16) && a->server.port == b->server.port;
}

/* ---- the per-port registry ---- */

/* Create the registry file under a private name, initialise it, then link it
 * into place: a reader never sees a half-written header. */
static int reg_create(const char *name, uint16_t port)
{
	char tmp[64];
	struct shunt_registry *r;
	int fd, err = 0;

	snprintf(tmp, sizeof tmp, "%s.%016llx", name, (unsigned long long)shunt_random64());
	fd = real.openat(shunt_dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	fchmod(fd, shunt_file_mode()); /* not subject to the umask */
	if (ftruncate(fd, sizeof *r)) {
		err = -errno;
		goto out;
	}
	r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	r->magic = SHUNT_REG_MAGIC;
	r->version = SHUNT_WIRE_VERSION;
	r->port = port;
	r->nslots = SHUNT_REG_SLOTS;
	munmap(r, sizeof *r);
	if (linkat(shunt_dirfd, tmp, shunt_dirfd, name, 0) && errno != EEXIST)
		err = -errno;
out:
	unlinkat(shunt_dirfd, tmp, 0);
	real.close(fd);
	return err;
}

/* A listener found the port's file unusable - another wire version's (a
 * server of the old library killed before an upgrade: its file stayed,
 * and the port was never accelerated again), truncated, corrupt: if no
 * process listens through it (nobody holds its lock), it goes, and the
 * caller opens the name again (a new file).  Else - a live listener of
 * another version - the port's connections stay plain.  1: open again. */
static int reg_replace(const char *name, int fd, const struct stat *st)
{
	struct stat now;
	int again = 0;

	if (flock(fd, LOCK_EX | LOCK_NB))
		return 0;
	if (fstatat(shunt_dirfd, name, &now, AT_SYMLINK_NOFOLLOW) || now.st_ino != st->st_ino) {
		again = 1; /* another listener replaced it already */
	} else if (!unlinkat(shunt_dirfd, name, 0)) {
		shunt_log("registry %s was unusable and unused: replaced", name);
		again = 1;
	}
	flock(fd, LOCK_UN);
	return again;
}

static struct portreg *reg_open(uint16_t port, int create)
{
	char path[SHUNT_DIR_NAME_MAX];
	struct portreg *p;
	struct stat st;
	void *m = MAP_FAILED;
	int fd;

	if (shunt_dirfd < 0)
		return NULL;
	shunt_dir_name(path, 'p', port);
	fd = reg_openat(path, O_RDWR, &st);
	if (fd == -ENOENT && create && !reg_create(path, port))
		fd = reg_openat(path, O_RDWR, &st);
	if (fd < 0)
		return NULL;
	if ((size_t)st.st_size >= sizeof(struct shunt_registry))
		m = mmap(NULL, sizeof(struct shunt_registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || shunt_registry_check(m, port)) {
		if (m != MAP_FAILED)
			munmap(m, sizeof(struct shunt_registry));
		if (create == 1 && reg_replace(path, fd, &st)) {
			real.close(fd);
			return reg_open(port, 2); /* once: a new file, or nothing */
		}
		shunt_log("registry %s is unusable (another version, or corrupt): ignored", path);
		goto fail;
	}
	p = calloc(1, sizeof *p);
	if (!p) {
		munmap(m, sizeof(struct shunt_registry));
		goto fail;
	}
	p->r = m;
	p->probe_fd = fd_hide(fd);
	p->lock_fd = -1;
	p->ino = st.st_ino;
	return p;
fail:
	real.close(fd);
	return NULL;
}

/* Does the port's name still lead to this registry?  The last listener of
 * a port removes the file (rdv_unlisten), a new one makes a new file. */
static int reg_current(const struct portreg *p, uint16_t port)
{
	char path[SHUNT_DIR_NAME_MAX];
	struct stat st;

	shunt_dir_name(path, 'p', port);
	return !fstatat(shunt_dirfd, path, &st, AT_SYMLINK_NOFOLLOW) && st.st_ino == p->ino;
}

/* Registries replaced by a newer file stay mapped a while: a thread inside
 * a connect may still read one.  The oldest of RETIRED goes when another
 * comes (a connect lasts well under the time RETIRED re-creations take). */
#define RETIRED 16
static struct portreg *retired[RETIRED];
static unsigned nretired;

static void reg_retire(struct portreg *p) /* reg_lock held */
{
	struct portreg *old = retired[nretired % RETIRED];

	retired[nretired++ % RETIRED] = p;
	if (!old)
		return;
	munmap(old->r, sizeof(struct shunt_registry));
	fd_close_internal(old->probe_fd);
	if (old->lock_fd >= 0)
		fd_close_internal(old->lock_fd);
	free(old);
}

/* The port's registry, mapped once per process.  fresh: make sure it is
 * the file the name leads to now; one that was replaced is retired and the
 * new one used from then on. */
static struct portreg *reg_get(uint16_t port, int create, int fresh)
{
	struct portreg *p = __atomic_load_n(&ports[port], __ATOMIC_ACQUIRE);

	if (p && (!fresh || reg_current(p, port)))
		return p;
	pthread_mutex_lock(&reg_lock);
	if (ports[port] == p) {
		struct portreg *n = reg_open(port, create);
		if (n || !p) {
			__atomic_store_n(&ports[port], n, __ATOMIC_RELEASE);
			if (p && !p->nlisten)
				reg_retire(p);
		}
	}
	p = ports[port];
	pthread_mutex_unlock(&reg_lock);
	return p;
}

/* This process holds no listener of the port any more: its descriptor of
 * the lock goes; if no process holds the lock then - no listener anywhere,
 * a forked child's inherited copy counting as its parent's - the file is
 * removed, under the exclusive lock, so a directory does not keep one file
 * per port ever listened on (issue #13, item 9), whichever process closes
 * last.  reg_lock held. */
static void reg_release(struct portreg *p, uint16_t port)
{
	char path[SHUNT_DIR_NAME_MAX];

	fd_close_internal(p->lock_fd);
	p->lock_fd = -1;
	if (!flock(p->probe_fd, LOCK_EX | LOCK_NB)) {
		shunt_dir_name(path, 'p', port);
		if (reg_current(p, port))
			unlinkat(shunt_dirfd, path, 0);
		flock(p->probe_fd, LOCK_UN);
	}
}

/* Our last listener on the port closed (fdtab.c, as the socket goes). */
void rdv_unlisten(uint16_t port)
{
	struct portreg *p = __atomic_load_n(&ports[port], __ATOMIC_ACQUIRE);

	if (!p || shunt_sandboxed)
		return;
	pthread_mutex_lock(&reg_lock);
	if (p->nlisten > 0 && --p->nlisten == 0 && p->lock_fd >= 0)
		reg_release(p, port);
	pthread_mutex_unlock(&reg_lock);
}

/* Is some process holding the listener lock?  flock locks die with their
 * holder, so a crashed server never looks alive. */
static int reg_live(struct portreg *p)
{
	if (flock(p->probe_fd, LOCK_EX | LOCK_NB) == 0) {
		flock(p->probe_fd, LOCK_UN);
		return 0;
	}
	return 1;
}

static void reg_add_listener(struct portreg *p, const struct shunt_addr *addr)
{
	struct shunt_listener_rec *l = p->r->listeners, *free_rec = NULL;
	uint64_t ns = shunt_netns_ino();

	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		if (l[i].used && l[i].netns == ns && !memcmp(&l[i].addr, addr, sizeof *addr)) {
			l[i].pid = (uint32_t)getpid();
			return;
		}
		if (!l[i].used && !free_rec)
			free_rec = &l[i];
	}
	/* Full: overwrite a record at random; it is a hint, liveness is the lock. */
	if (!free_rec)
		free_rec = &l[shunt_random64() % SHUNT_REG_LISTENERS];
	free_rec->netns = ns;
	free_rec->addr = *addr;
	free_rec->pid = (uint32_t)getpid();
	__atomic_store_n(&free_rec->used, 1, __ATOMIC_RELEASE);
}

/* Could a registered listener be the one this connect() reaches?  Loopback
 * never leaves a network namespace; other addresses may (veth, bridges). */
static int reg_may_match(struct portreg *p, const struct shunt_addr *dst)
{
	uint64_t ns = shunt_netns_ino();

	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		const struct shunt_listener_rec *l = &p->r->listeners[i];
		if (!__atomic_load_n(&l->used, __ATOMIC_ACQUIRE))
			continue;
		if (l->netns == ns && (is_any(&l->addr) || !memcmp(l->addr.ip, dst->ip, 16)))
			return 1;
		if (l->netns != ns && !is_loopback(dst))
			return 1;
	}
	return 0;
}

int rdv_listen(int fd, struct sk *s)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	struct shunt_addr a;
	struct portreg *p;
	char path[SHUNT_DIR_NAME_MAX];
	struct stat st;

	s->kind = SK_LISTEN;
	if (s->listen_port)
		return 0; /* registered already (listen() again) */
	if (!shunt_active || shunt_off_reason || getsockname(fd, (void *)&ss, &l) || shunt_addr_from_sockaddr(&a, (void *)&ss))
		return 0;
	if (!shunt_config_port_allowed(&shunt_cfg, a.port))
		return 0;
	for (int tries = 0; tries < 3; tries++) {
		int lk = -1;
		p = reg_get(a.port, 1, 1);
		if (!p)
			return 0;
		pthread_mutex_lock(&reg_lock);
		if (p->lock_fd < 0) {
			/* the lock, then the check that the name still leads to
			 * this file: the last listener elsewhere may have removed
			 * it meanwhile (it removes under the exclusive lock) */
			shunt_dir_name(path, 'p', a.port);
			lk = reg_openat(path, O_RDONLY, &st);
			if (lk >= 0 && (st.st_ino != p->ino || flock(lk, LOCK_SH) ||
					!reg_current(p, a.port))) {
				real.close(lk);
				pthread_mutex_unlock(&reg_lock);
				continue; /* replaced: the next turn maps the new one */
			}
			if (lk >= 0)
				p->lock_fd = fd_hide(lk);
		}
		p->nlisten++;
		__atomic_store_n(&nports_listened, 1, __ATOMIC_RELAXED);
		reg_add_listener(p, &a);
		pthread_mutex_unlock(&reg_lock);
		s->listen_port = a.port;
		return 0;
	}
	return 0;
}

/* ---- the client's per-process socket and its stash of early messages ---- */

struct got_msg {
	struct shunt_accept_msg m;
	int fds[SHUNT_MSG_MAX_FDS]; /* as the flags say: a new arena's memfd and doorbells */
	uint32_t uid; /* the sender's, as the kernel says (SCM_CREDENTIALS) */
	int has_uid;
	int in_slot;  /* an answer in the slot of a private directory: our user's */
};

static int csock = -1;
static pid_t csock_pid;
static uint64_t csock_id;
static struct got_msg stash[256]; /* others' messages, one per waiting thread */
static int nstash;
static pthread_mutex_t csock_lock = PTHREAD_MUTEX_INITIALIZER;

static int csock_get(uint64_t *id)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, r = 0;

	stats_adopt_maybe(); /* the s<id> file first: `shunt ss` learns from it
				 * that a dead process's c<id> is to be reaped */
	pthread_mutex_lock(&csock_lock);
	if (csock >= 0 && csock_pid == shunt_pid())
		goto out;
	fd = real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	csock_id = shunt_proc_id();
	path_of(sun.sun_path, sizeof sun.sun_path, 'c', csock_id);
	/* every message then carries its sender's credentials (the kernel's) */
	if (real.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)) ||
	    real.bind(fd, (void *)&sun, sizeof sun)) {
		r = -errno;
		real.close(fd);
		goto out;
	}
	chmod(sun.sun_path, shunt_file_mode());
	csock = fd_hide(fd);
	csock_pid = shunt_pid();
out:
	*id = csock_id;
	pthread_mutex_unlock(&csock_lock);
	return r;
}

static void close_fds(int *fds, int n)
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
	if (!arena_client_get(g->m.arena, g->fds, &a)) {
		arena_put(a); /* mapped: it stays, as arenas do */
		g->m.flags &= ~(uint32_t)SHUNT_MSG_F_ARENA;
	} /* else the connection falls back (client_attach) */
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
		if (shunt_accept_msg_check(data, (size_t)n, nfds, mh.msg_flags & MSG_CTRUNC, &m)) {
			shunt_log("malformed or unexpected accept message dropped");
			close_fds(fds, nfds < SHUNT_MSG_MAX_FDS ? nfds : SHUNT_MSG_MAX_FDS);
			continue;
		}
		/* Full: the oldest goes - its connect gave up long ago (a
		 * message for a waiting thread is taken within its wait). */
		if (nstash == (int)(sizeof stash / sizeof stash[0])) {
			close_fds(stash[0].fds, SHUNT_MSG_MAX_FDS);
			memmove(&stash[0], &stash[1], (size_t)--nstash * sizeof stash[0]);
		}
		stash[nstash].m = m;
		memcpy(stash[nstash].fds, fds, sizeof fds);
		stash[nstash].uid = (uint32_t)cr.uid;
		stash[nstash].has_uid = has_cr;
		take_arena_state(&stash[nstash]);
		nstash++;
	}
}

static int stash_take(uint64_t nonce, struct got_msg *out)
{
	int found = 0;

	pthread_mutex_lock(&csock_lock);
	csock_pump();
	for (int i = 0; i < nstash; i++) {
		if (stash[i].m.nonce != nonce)
			continue;
		*out = stash[i];
		memmove(&stash[i], &stash[i + 1], (size_t)(--nstash - i) * sizeof stash[0]); /* oldest first */
		found = 1;
		break;
	}
	pthread_mutex_unlock(&csock_lock);
	return found;
}

void rdv_atfork_child(void)
{
	/* The parent keeps its socket and its messages: start afresh. */
	if (csock >= 0)
		fd_close_internal(csock);
	csock = -1;
	for (int i = 0; i < nstash; i++)
		close_fds(stash[i].fds, SHUNT_MSG_MAX_FDS);
	nstash = 0;
	connects_in_setup = 0; /* the threads counted are the parent's */
	arena_atfork_child();
	pthread_mutex_init(&csock_lock, NULL);
	pthread_mutex_init(&reg_lock, NULL);
}

/* ---- slots ---- */

static void slot_reap_if_stale(struct shunt_slot *sl, uint64_t now)
{
	uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);

	if (st != SLOT_FREE && now - sl->stamp_ns > STALE_SLOT_NS)
		__atomic_compare_exchange_n(&sl->state, &st, SLOT_FREE, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
}

static struct shunt_slot *slot_reserve(struct portreg *p, uint64_t sock_id, uint64_t *nonce,
				       const struct shunt_addr *dst)
{
	unsigned start = (unsigned)(shunt_fast_random() % SHUNT_REG_SLOTS);
	uint64_t now = shunt_now_ns();

	for (unsigned i = 0; i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &p->r->slots[(start + i) % SHUNT_REG_SLOTS];
		uint32_t st = SLOT_FREE;
		slot_reap_if_stale(sl, now);
		if (!__atomic_compare_exchange_n(&sl->state, &st, SLOT_CONNECTING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		*nonce = shunt_fast_random();
		sl->stamp_ns = now;
		sl->client_pid = (uint32_t)shunt_pid();
		sl->nonce = *nonce;
		sl->sock_id = sock_id;
		sl->netns = shunt_netns_ino();
		sl->client_waiting = 0;
		/* The destination is known before the SYN; the client's own
		 * address and port only once connect() returns. */
		memset(&sl->tuple.client, 0, sizeof sl->tuple.client);
		sl->tuple.server = *dst;
		return sl;
	}
	return NULL;
}

static void slot_free(struct shunt_slot *sl)
{
	__atomic_store_n(&sl->state, SLOT_FREE, __ATOMIC_RELEASE);
}

static int slot_cas(struct shunt_slot *sl, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(&sl->state, &from, to, 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/* ---- client side ---- */

/* Wait for the TCP handshake of a non-blocking connect, without consuming
 * the socket's pending error (SO_ERROR belongs to the application). */
static int wait_established(int fd, int ms)
{
	int r = fd_wait(fd, POLLOUT, shunt_now_ns() + (uint64_t)ms * 1000000ull, 0);

	return r > 0 && !(r & (POLLERR | POLLHUP)) && (r & POLLOUT);
}

/* The server is plain if it wrote or closed before claiming. */
static int tcp_has_input(int fd)
{
	return fd_wait(fd, POLLIN | POLLRDHUP, 0, 0) > 0;
}

/* The server's answer in the slot: the segment of an arena we map
 * already.  Only our own user can write a private directory's registry;
 * in a shared one the answer must come as a message (its sender's uid is
 * the kernel's word), so a slot answer there is refused. */
static int slot_answer(struct shunt_slot *sl, uint64_t nonce, struct got_msg *got)
{
	uint32_t seg = sl->answer_seg;

	if (seg == SHUNT_SLOT_BY_MSG) /* queued before the state changed */
		return stash_take(nonce, got) ? 0 : SHUNT_R_HANDSHAKE;
	if (shunt_dir_shared())
		return SHUNT_R_HANDSHAKE;
	memset(got, 0, sizeof *got);
	got->m.nonce = nonce;
	got->m.arena = sl->answer_arena;
	got->m.seg = seg; /* checked by shm_attach */
	got->m.slot = SHUNT_MSG_NO_SLOT;
	got->fds[0] = got->fds[1] = got->fds[2] = -1;
	got->in_slot = 1;
	return 0;
}

/* Wait for the server's answer.  Each state the client may leave is left
 * by one CAS against the server's; any other value (a member of a shared
 * directory may write the registry) ends the wait, plain. */
static int client_wait_answer(struct shunt_slot *sl, uint64_t nonce, int tcp_fd, struct got_msg *got,
			      uint64_t start, uint64_t wait_ns, uint64_t spin_ns)
{
	for (;;) {
		uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
		uint64_t el = shunt_now_ns() - start;

		if (st == SLOT_ANSWERED)
			return slot_answer(sl, nonce, got);
		if (st == SLOT_FAILED)
			return SHUNT_R_HANDSHAKE;
		if (st == SLOT_DECLINED)
			return SHUNT_R_DESCRIPTORS;
		if (st != SLOT_OFFERED && st != SLOT_CLAIMED && st != SLOT_NEED_ARENA)
			return SHUNT_R_HANDSHAKE;
		/* The server is usually microseconds away: spin on the slot
		 * first, then sleep on it in short steps, looking at the TCP
		 * socket between them (a plain server may write first). */
		if (el < spin_ns) {
			__builtin_ia32_pause();
			continue;
		}
		if (st == SLOT_OFFERED && (el >= wait_ns || tcp_has_input(tcp_fd)) &&
		    slot_cas(sl, SLOT_OFFERED, SLOT_ABANDONED))
			return el >= wait_ns ? SHUNT_R_TIMEOUT : SHUNT_R_PEER_NOT_SHUNT;
		if (st != SLOT_OFFERED && (el >= CLAIMED_WAIT_NS || tcp_has_input(tcp_fd)) &&
		    slot_cas(sl, st, SLOT_FAILED))
			return SHUNT_R_HANDSHAKE;
		/* the flag first: a server answering now either sees it or
		 * changes the state before the futex looks */
		__atomic_store_n(&sl->client_waiting, 1, __ATOMIC_SEQ_CST);
		shunt_futex_wait(&sl->state, st, 1000000);
	}
}

/* The wait for the answer, with this process's turn to spin (core.c)
 * taken for its spin and given back however it ends. */
static int client_wait_msg(struct shunt_slot *sl, uint64_t nonce, int tcp_fd, struct got_msg *got)
{
	uint64_t start = shunt_now_ns(), wait_ns = (uint64_t)shunt_cfg.accept_wait_ms * 1000000ull;
	/* with more connects in set-up than CPUs a spinning client takes the
	 * CPU its server needs */
	uint64_t spin_ns = __atomic_load_n(&connects_in_setup, __ATOMIC_RELAXED) <= shunt_ncpus
				   ? SPIN_MSG_NS : 0;
	int turn = spin_ns ? shunt_spin_begin(spin_ns, start) : 0, r;

	if (!turn)
		spin_ns = 0;
	r = client_wait_answer(sl, nonce, tcp_fd, got, start, wait_ns, spin_ns);
	shunt_spin_end(turn);
	return r;
}

/* The slot answer names an arena we do not map: one we dropped when our
 * descriptors ran out (giveback.c), while the server still counts on it.
 * Ask again: the server sends the arena with the answer, by message. */
static int client_need_arena(struct shunt_slot *sl, uint64_t nonce, int tcp_fd, struct got_msg *got)
{
	int r;

	if (!slot_cas(sl, SLOT_ANSWERED, SLOT_NEED_ARENA))
		return SHUNT_R_HANDSHAKE;
	r = client_wait_answer(sl, nonce, tcp_fd, got, shunt_now_ns(),
			       (uint64_t)shunt_cfg.accept_wait_ms * 1000000ull, 0);
	return !r && got->in_slot ? SHUNT_R_HANDSHAKE : r; /* it must come with its descriptors */
}

/* Is the sender of an accept message the server of this connection?  Our
 * own user always is (only it can reach our socket in a private directory);
 * another user of a shared directory must own the server's end of the TCP
 * connection (the accepting process's user: peercred.c) - else a member
 * could take our connections to a plain server (and answer for it). */
static int sender_is_server(int fd, const struct got_msg *g)
{
	struct shunt_addr local, remote;
	uint32_t owner;

	if (g->in_slot)
		return 1;
	if (!g->has_uid)
		return 0;
	if (g->uid == (uint32_t)geteuid())
		return 1;
	return shunt_dir_shared() && !sock_tuple(fd, &local, &remote) &&
	       !tcp_owner_uid(&remote, &local, &owner) && owner == g->uid;
}

/* The client's decision in the segment's confirm word (1 attached, 2
 * declined), once, against the server's time-out; a server asleep on the
 * word (confirm_waiter, set before it sleeps) is woken.  0 if the word was
 * decided already. */
static int confirm_decide(struct shunt_seg_hdr *h, uint32_t v)
{
	uint32_t pending = 0;

	if (!__atomic_compare_exchange_n(&h->confirm, &pending, v, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_ACQUIRE))
		return 0;
	if (__atomic_load_n(&h->confirm_waiter, __ATOMIC_SEQ_CST))
		shunt_futex_wake(&h->confirm, 1);
	return 1;
}

/* Our duplicate of a new connection's socket: if the program's
 * descriptors ran out, ours go back first (giveback.c) - this one too
 * will be given back when the program needs it. */
static int dup_or_give_back(int fd)
{
	int d = fd_dup_hidden(fd);

	AGAIN_IF_EMFILE(d, fd_dup_hidden(fd));
	return d;
}

/* Attach the segment the accept message names.  If we cannot, decline
 * through the segment's confirm word when we can reach it (the server then
 * falls back at once), else the server times out to TCP. */
static int client_attach(struct sk *s, int fd, uint64_t nonce, struct got_msg *g)
{
	int has_arena = !!(g->m.flags & SHUNT_MSG_F_ARENA);
	struct arena *a;
	struct conn *c;
	int dupfd;

	if (!sender_is_server(fd, g)) {
		shunt_warn("accept message from uid %d, who does not own this connection's server: refused",
			   g->has_uid ? (int)g->uid : -1);
		close_fds(g->fds, has_arena ? 3 : 0);
		return SHUNT_R_HANDSHAKE;
	}
	/* An answer without the arena names one we confirmed a connection in
	 * (every answer before that carries it): if it is not mapped here we
	 * dropped it since - the server declines once our TCP bytes or its
	 * time-out tell it, and sends the arena with its next answer. */
	if (arena_client_get(g->m.arena, has_arena ? g->fds : NULL, &a))
		return SHUNT_R_HANDSHAKE;
	dupfd = dup_or_give_back(fd);
	if (dupfd < 0 || shm_attach(&c, a, g->m.seg, 0, dupfd, &nonce)) {
		if (g->m.seg < SHUNT_ARENA_SLOTS && arena_seg(a, g->m.seg)->nonce == nonce)
			confirm_decide(arena_seg(a, g->m.seg), 2);
		fd_close_internal(dupfd);
		arena_put(a); /* the server drops our owner when it sees the decline */
		return SHUNT_R_RESOURCE;
	}
	if (!confirm_decide(shm_of(c)->seg, 1)) {
		conn_discard(c); /* the server timed out first and dropped our owner */
		return SHUNT_R_HANDSHAKE;
	}
	s->conn = c;
	s->kind = SK_CONN;
	s->reason = SHUNT_R_NONE;
	return 0;
}

/* ---- short-lived connections under load ----
 *
 * Setting a connection up takes two processes scheduled in turn: a slot,
 * the server's answer, the client's confirmation.  With a CPU free each
 * side spins through its turn and the set-up is faster than TCP's (one
 * thread: 1.2-1.7x); with more threads than CPUs each turn is a sleep and
 * a wake-up, and a burst of short connections queued on them: connect +
 * one byte + close ran at a third of TCP's rate (issue #13, item 10).
 * Linux SMC learned the same ("skipped under load": 247 -> 34,488 short
 * connections a second).  So each port's registry keeps a score of its
 * connections' lifetimes: one that ended within SHUNT_SHORT_MS adds 1 (up
 * to 255), a longer one halves it (under load a short one's end may be
 * late now and then).  While it is SHORT_RUN_MIN or more, a new
 * connection stays plain (reason busy-short) - its set-up is TCP's - when
 * this process has as many other connects in their set-up as CPUs, or any
 * while the CPUs are crowded (threads wait for one: core.c), or when they
 * are overloaded (as many threads wait as there are CPUs): then nobody
 * spins and even a lone connecting thread sleeps through the turns.  8
 * threads a side on 2 CPUs, every connection offered ran at 0.66x TCP's
 * rate, shunt's interposition alone at 0.99x, with this rule 0.96x
 * (docs/benchmarks.md).  A lone thread on CPUs that are merely busy is
 * accelerated: it is the case spinning serves (1.4x TCP's rate).  Plain
 * ones report their lifetimes too, so the port is accelerated again once
 * its connections live longer, or when the burst is over.
 * SHUNT_BUSY_SHORT=0 turns the rule off (tests of other behaviour, which
 * expect every connection accelerated on a host other jobs may load). */
#define SHORT_RUN_MIN 16

static int busy_short(const struct portreg *p)
{
	int others = __atomic_load_n(&connects_in_setup, __ATOMIC_RELAXED);
	uint64_t now = shunt_now_ns();

	return shunt_cfg.busy_short && __atomic_load_n(&p->r->short_run, __ATOMIC_RELAXED) >= SHORT_RUN_MIN &&
	       (others >= shunt_ncpus || (others > 0 && shunt_cpus_crowded(now)) ||
		shunt_cpus_overloaded(now));
}

/* The last close of a client's connection that took part. */
void rdv_note_end(struct sk *s)
{
	struct portreg *p = __atomic_load_n(&ports[s->short_port], __ATOMIC_ACQUIRE);
	uint32_t v;

	if (!p)
		return;
	/* racy read-modify-writes: a lost update between two closers does
	 * not matter, and the value is advice */
	v = __atomic_load_n(&p->r->short_run, __ATOMIC_RELAXED);
	if (shunt_now_ns() - s->born_ns >= SHUNT_SHORT_MS * 1000000ull) {
		if (v)
			__atomic_store_n(&p->r->short_run, v / 2, __ATOMIC_RELAXED);
	} else if (v < 255) {
		__atomic_store_n(&p->r->short_run, v + 1, __ATOMIC_RELAXED);
	}
}

/* Something a server waiting for its offer must look at was published
 * (an offer, a plain connection's tuple): the futex word moves, and the
 * servers asleep on it - counted before they sleep (await_offer) - wake. */
static void offers_changed(struct portreg *p)
{
	__atomic_add_fetch(&p->r->offers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->r->offer_waiters, __ATOMIC_SEQ_CST))
		shunt_futex_wake(&p->r->offers, INT32_MAX);
}

/* A busy-short connection's tuple, once its connect returned (0 or
 * EINPROGRESS: the port is bound either way): a server that accepts it
 * while other clients' offers are in CONNECTING finds it here instead of
 * waiting for them (issue #13, item 10: 64 threads a side waited 75-110
 * us on average for each plain connection, some for milliseconds).  Advice
 * only, like the score: a member of a shared directory who writes records
 * can only make connections plain. */
#define PLAIN_FRESH_NS 100000000ull

static void plain_announce(struct portreg *p, int fd, const struct shunt_addr *dst,
			   const struct sockaddr *addr, struct sk *s)
{
	struct shunt_tuple tu;
	struct shunt_plain_rec *r;
	uint32_t seq;

	if (is_any(dst) || sock_tuple_known(fd, &tu.client, &tu.server, addr))
		return;
	s->tuple = tu; /* `shunt ss` (stats.c) needs no look of its own */
	s->has_tuple = 1;
	r = &p->r->plain[__atomic_fetch_add(&p->r->plain_head, 1, __ATOMIC_RELAXED) % SHUNT_REG_PLAIN];
	seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
	if (seq & 1 || !__atomic_compare_exchange_n(&r->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return; /* another writer wraps onto it: skip, the server waits as before */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	r->stamp_ns = shunt_now_ns();
	r->tuple = tu;
	__atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
	offers_changed(p); /* a server asleep for an offer looks again */
}

/* Did this connection's client announce it plain? */
static int plain_seen(struct portreg *p, const struct shunt_tuple *t, uint64_t now)
{
	for (unsigned i = 0; i < SHUNT_REG_PLAIN; i++) {
		struct shunt_plain_rec *r = &p->r->plain[i];
		uint32_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE), s2;
		struct shunt_tuple tu;
		uint64_t stamp;
		if (s1 & 1 || !s1)
			continue;
		stamp = r->stamp_ns;
		tu = r->tuple;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		if (s1 == s2 && now - stamp < PLAIN_FRESH_NS && tuple_eq(&tu, t))
			return 1;
	}
	return 0;
}

static int connect_offer(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len,
			 struct portreg *p, const struct shunt_addr *dst);

/* Called instead of the real connect() for TCP sockets.  Returns what the
 * real connect returned (0 or -errno); the decision lands in s. */
int rdv_connect(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len)
{
	struct shunt_addr dst;
	struct portreg *p;
	uint64_t nonce;
	int ret, live;

	s->is_client = 1;
	if (shunt_addr_from_sockaddr(&dst, addr) || !shunt_active)
		return sys(real.connect(fd, addr, len));
	s->reason = shunt_off_reason ? shunt_off_reason : SHUNT_R_POLICY;
	if (shunt_off_reason || !shunt_config_port_allowed(&shunt_cfg, dst.port))
		return sys(real.connect(fd, addr, len));
	if (fd_pressure()) { /* out of descriptors a moment ago (giveback.c) */
		s->reason = SHUNT_R_DESCRIPTORS;
		return sys(real.connect(fd, addr, len));
	}
	s->reason = SHUNT_R_PEER_NOT_SHUNT;
	p = shunt_cfg.local ? reg_get(dst.port, 0, 0) : NULL;
	if (p && busy_short(p)) {
		s->reason = SHUNT_R_BUSY_SHORT;
		s->short_port = dst.port;
		s->born_ns = shunt_now_ns();
		ret = sys(real.connect(fd, addr, len));
		if (!ret || ret == -EINPROGRESS)
			plain_announce(p, fd, &dst, addr, s);
		return ret;
	}
	live = p && reg_live(p);
	if (p && !live && (p = reg_get(dst.port, 0, 1))) /* its listeners gone: a new file? */
		live = reg_live(p);
	if (!live || !reg_may_match(p, &dst)) {
		/* Not a local shunt server: the agent, if any, signals in the SYN. */
		int marked = agent_mark_client(fd), st;
		ret = sys(real.connect(fd, addr, len));
		if (marked == -ENOENT) /* nobody to ask a peer on another host */
			s->reason = is_other_host(fd, &dst) ? SHUNT_R_NO_AGENT : SHUNT_R_PEER_NOT_SHUNT;
		else if (marked)
			s->reason = SHUNT_R_RESOURCE; /* no storage for it: no option sent */
		if (marked || (ret && ret != -EINPROGRESS) ||
		    (ret == -EINPROGRESS && !wait_established(fd, shunt_cfg.accept_wait_ms))) {
			/* No verdict to wait for: a shunt server that saw our
			 * option waits for no PROPOSAL either (inband.c). */
			if (!marked)
				s->reason = ret == -EINPROGRESS ? SHUNT_R_CONNECT_SLOW : s->reason;
			return ret;
		}
		st = agent_take(fd, &nonce);
		s->reason = st == SHUNT_AG_CLIENT_PEER_OK ? inband_client(s, fd, nonce)
							  : agent_reason_of(st);
		return ret;
	}
	__atomic_add_fetch(&connects_in_setup, 1, __ATOMIC_RELAXED);
	ret = connect_offer(fd, s, addr, len, p, &dst);
	__atomic_sub_fetch(&connects_in_setup, 1, __ATOMIC_RELAXED);
	s->short_port = dst.port;
	s->born_ns = shunt_now_ns();
	return ret;
}

/* A local shunt server listens on the port: offer it the connection. */
static int connect_offer(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len,
			 struct portreg *p, const struct shunt_addr *dst)
{
	struct shunt_slot *sl;
	uint64_t nonce, sock_id;
	struct shunt_tuple tu;
	struct got_msg got;
	int ret, reason;

	s->reason = SHUNT_R_RESOURCE;
	if (csock_get(&sock_id) || !(sl = slot_reserve(p, sock_id, &nonce, dst)))
		return sys(real.connect(fd, addr, len));

	ret = sys(real.connect(fd, addr, len));
	if (ret && ret != -EINPROGRESS) {
		slot_free(sl);
		return ret;
	}
	if (ret == -EINPROGRESS && !wait_established(fd, shunt_cfg.accept_wait_ms)) {
		s->reason = SHUNT_R_CONNECT_SLOW;
		slot_free(sl);
		return ret;
	}
	/* Build the tuple aside: a server scanning CONNECTING slots reads
	 * tuple.server meanwhile and must never see it half rewritten. */
	if (sock_tuple_known(fd, &tu.client, &tu.server, is_any(dst) ? NULL : addr)) {
		s->reason = SHUNT_R_HANDSHAKE;
		slot_free(sl);
		return ret;
	}
	sl->tuple.client = tu.client;
	if (memcmp(&sl->tuple.server, &tu.server, sizeof tu.server))
		sl->tuple.server = tu.server;
	s->tuple = tu;
	s->has_tuple = 1;
	__atomic_store_n(&sl->state, SLOT_OFFERED, __ATOMIC_RELEASE);
	offers_changed(p);
	reason = client_wait_msg(sl, nonce, fd, &got);
	if (!reason && got.in_slot && !arena_client_maps(got.m.arena))
		reason = client_need_arena(sl, nonce, fd, &got);
	slot_free(sl);
	if (!reason)
		reason = client_attach(s, fd, nonce, &got);
	s->reason = reason;
	return ret;
}

/* ---- server side ---- */

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

static int send_accept(uint64_t sock_id, unsigned slot, uint64_t nonce, struct arena *a,
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
	path_of(sun.sun_path, sizeof sun.sun_path, 'c', sock_id);
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

/* Find this connection's offer; *busy is set if a client may still be
 * between reserving its slot and publishing its tuple. */
static struct shunt_slot *find_offer(struct portreg *p, const struct shunt_tuple *t, int *busy,
				     unsigned *idx)
{
	uint64_t now = shunt_now_ns();

	*busy = 0;
	for (unsigned i = 0; i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &p->r->slots[i];
		uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
		/* A client between reserving and publishing, dialling this very
		 * address: it may be the one we accepted (a plain client never
		 * reserves, so it never waits for this). */
		if (st == SLOT_CONNECTING && now - sl->stamp_ns < CONNECTING_FRESH_NS &&
		    sl->tuple.server.port == t->server.port &&
		    !memcmp(sl->tuple.server.ip, t->server.ip, 16))
			*busy = 1;
		if (st == SLOT_OFFERED && tuple_eq(&sl->tuple, t)) {
			*idx = i;
			return sl;
		}
	}
	return NULL;
}

/* Claim the offer; the slot may have been recycled between read and CAS. */
static int claim(struct shunt_slot *sl, const struct shunt_tuple *t, uint64_t *nonce,
		 uint64_t *sock_id, uint64_t *netns)
{
	uint64_t n = sl->nonce, id = sl->sock_id, ns = sl->netns;

	if (!slot_cas(sl, SLOT_OFFERED, SLOT_CLAIMED))
		return 0;
	if (sl->nonce != n || !tuple_eq(&sl->tuple, t)) {
		slot_cas(sl, SLOT_CLAIMED, SLOT_OFFERED);
		return 0;
	}
	*nonce = n;
	*sock_id = id;
	*netns = ns;
	return 1;
}

/* The offer a server answered, for answering again (NEED_ARENA); sl is
 * NULL for the in-band handshake. */
struct answered {
	struct shunt_slot *sl;
	unsigned idx;
	uint64_t nonce, sock_id;
};

/* The answer is in: CLAIMED (or NEED_ARENA) -> ANSWERED (the client may
 * have given up meanwhile, -> FAILED: then no), and the client woken if
 * asleep. */
static int slot_answered(struct shunt_slot *sl, uint32_t from)
{
	if (!slot_cas(sl, from, SLOT_ANSWERED))
		return 0;
	/* a wake of a slot that was freed and reused is spurious, harmless */
	if (__atomic_load_n(&sl->client_waiting, __ATOMIC_SEQ_CST))
		shunt_futex_wake(&sl->state, 1);
	return 1;
}

/* The client asked for the arena again (it dropped it: giveback.c): send
 * it with the answer, by message.  -1 if that failed (we decline). */
static int answer_need_arena(struct conn *c, const struct answered *o)
{
	struct shunt_slot *sl = o ? o->sl : NULL;

	if (!sl || __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != SLOT_NEED_ARENA || sl->nonce != o->nonce)
		return 0;
	__atomic_store_n(&shm_of(c)->arena->peer_maps, 0, __ATOMIC_RELEASE);
	sl->answer_seg = SHUNT_SLOT_BY_MSG;
	if (send_accept(o->sock_id, o->idx, o->nonce, shm_of(c)->arena, shm_of(c)->segno, 1)) {
		slot_cas(sl, SLOT_NEED_ARENA, SLOT_FAILED);
		return -1;
	}
	slot_answered(sl, SLOT_NEED_ARENA);
	return 0;
}

/* The server's side of the segment's confirm word: decline (0 -> 2)
 * unless the client decided first.  The word's decided value: 2 if we
 * declined (or the client did), 1 if the client attached. */
static uint32_t server_decline(struct conn *c)
{
	uint32_t v = 0;

	if (__atomic_compare_exchange_n(&shm_of(c)->seg->confirm, &v, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 2;
	return v;
}

static int server_wait_confirm(struct conn *c, int tcp_fd, uint64_t wait_ns, const struct answered *o)
{
	_Atomic uint32_t *confirm = &shm_of(c)->seg->confirm;
	uint64_t start = shunt_now_ns(), spin = (uint64_t)(shunt_cfg.spin_ns > 0 ? shunt_cfg.spin_ns : 0);
	uint32_t v;
	/* The client is inside connect(), a few microseconds from answering:
	 * spin for the data path's budget if this process has a turn, then
	 * sleep on the word (with more threads than cores the client may need
	 * this very CPU). */
	int turn = spin ? shunt_spin_begin(spin, start) : 0;

	if (!turn)
		spin = 0;
	for (unsigned i = 0; !(v = __atomic_load_n(confirm, __ATOMIC_ACQUIRE)); i++) {
		if ((i & 63) || shunt_now_ns() - start < spin) {
			__builtin_ia32_pause();
			continue;
		}
		shunt_spin_end(turn);
		turn = 0;
		if (shunt_now_ns() - start > wait_ns || tcp_has_input(tcp_fd) ||
		    answer_need_arena(c, o)) {
			v = server_decline(c);
			if (v == 2 && o && o->sl) /* a client waiting for the arena again */
				slot_cas(o->sl, SLOT_NEED_ARENA, SLOT_FAILED);
			break;
		}
		/* asleep until the client's decision wakes us (1 ms steps:
		 * the socket is looked at between them); the flag first, so a
		 * client deciding now either sees it or we see its word */
		__atomic_store_n(&shm_of(c)->seg->confirm_waiter, 1, __ATOMIC_SEQ_CST);
		shunt_futex_wait(confirm, 0, 1000000);
	}
	shunt_spin_end(turn);
	return v == 1;
}

/* Take a segment for the client process sock_id, attach our side and tell
 * the client: through the slot sl when the client confirmed a connection
 * in that arena (a private directory: only our user writes it), else - a new arena's
 * descriptors, another user's client, the in-band handshake (sl NULL) - by
 * an accept message.  0 and *out, or the fallback reason. */
static int server_offer(int fd, uint64_t sock_id, struct shunt_slot *sl, unsigned idx,
			uint64_t nonce, struct conn **out)
{
	int dupfd = -1, send_fds, by_msg;
	struct arena *a;
	unsigned seg;
	struct conn *c;

	if (arena_server_take(sock_id, nonce, &a, &seg, &send_fds))
		return SHUNT_R_RESOURCE;
	dupfd = dup_or_give_back(fd);
	if (dupfd < 0 || shm_attach(&c, a, seg, 1, dupfd, &nonce)) {
		fd_close_internal(dupfd);
		arena_drop_owner(a, seg, 0);
		arena_release(a, seg, 1);
		return SHUNT_R_RESOURCE;
	}
	by_msg = !sl || send_fds || shunt_dir_shared();
	shunt_fault_answer_stall(); /* tests only (fault.c) */
	if (sl) {
		sl->answer_arena = a->id;
		sl->answer_seg = by_msg ? SHUNT_SLOT_BY_MSG : seg;
	}
	if ((by_msg && send_accept(sock_id, idx, nonce, a, seg, send_fds)) ||
	    /* our CLAIMED -> ANSWERED failed: the client gave up (-> FAILED),
	     * or - the slot reused while we stalled past the client's wait -
	     * another server's stale answer took the slot's next offer, whose
	     * client may then attach to our segment all the same: the confirm
	     * word decides, as always */
	    (sl && !slot_answered(sl, SLOT_CLAIMED) && server_decline(c) != 1)) {
		arena_drop_owner(a, seg, 0);
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	*out = c;
	return 0;
}

/* The client's decision, through the segment's confirm word. */
static int server_commit(struct sk *s, int fd, struct conn *c, uint64_t wait_ns, const struct answered *o)
{
	if (!server_wait_confirm(c, fd, wait_ns, o)) {
		/* maybe it could not map the arena: the next answer carries it */
		__atomic_store_n(&shm_of(c)->arena->peer_maps, 0, __ATOMIC_RELEASE);
		arena_drop_owner(shm_of(c)->arena, shm_of(c)->segno, 0); /* the client never took its share */
		conn_free(c);
		return SHUNT_R_HANDSHAKE;
	}
	__atomic_store_n(&shm_of(c)->arena->peer_maps, 1, __ATOMIC_RELEASE);
	s->conn = c;
	s->kind = SK_CONN;
	return SHUNT_R_NONE;
}

static int server_build(struct sk *s, int fd, unsigned idx, struct shunt_slot *sl,
			uint64_t nonce, uint64_t sock_id)
{
	struct conn *c;
	int r = server_offer(fd, sock_id, sl, idx, nonce, &c);

	if (r) {
		slot_cas(sl, SLOT_CLAIMED, SLOT_FAILED);
		s->reason = r;
		return 0;
	}
	s->reason = server_commit(s, fd, c, CONFIRM_WAIT_NS,
				  &(struct answered){ .sl = sl, .idx = idx, .nonce = nonce, .sock_id = sock_id });
	return 0;
}

/* ---- in-band shared memory ----
 * Both ends on one host with one SHUNT_DIR, reached through a path the
 * registry cannot see (DNAT, a container port mapping): the in-band
 * handshake (inband.c) names the client process and the option's nonce,
 * and the segment travels as above, with the confirm word as the one
 * decision point. */
uint64_t rdv_domain(void)
{
	static uint64_t d;
	struct stat st;

	/* 0 means unknown and matches nothing (inband.c). */
	if (!d && shunt_dirfd >= 0 && !fstat(shunt_dirfd, &st))
		d = (uint64_t)st.st_ino ^ ((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ull);
	return d;
}

int rdv_inband_ready(uint64_t *sock_id)
{
	return csock_get(sock_id);
}

int rdv_inband_offer(int fd, uint64_t sock_id, uint64_t nonce, struct conn **c)
{
	return server_offer(fd, sock_id, NULL, SHUNT_MSG_NO_SLOT, nonce, c);
}

int rdv_inband_commit(struct sk *s, int fd, struct conn *c, uint64_t wait_ns)
{
	return server_commit(s, fd, c, wait_ns, NULL);
}

/* Client: the accept message the ACCEPT announced is already queued on our
 * socket (the server sends it first); take it and attach. */
int rdv_inband_attach(struct sk *s, int fd, uint64_t nonce, uint64_t deadline)
{
	struct got_msg got;

	while (!stash_take(nonce, &got)) {
		if (shunt_now_ns() >= deadline)
			return SHUNT_R_HANDSHAKE;
		fd_wait(csock, POLLIN, deadline, 1);
	}
	return client_attach(s, fd, nonce, &got);
}

/* No local offer: if the SYN carried our option, the client's PROPOSAL is
 * on its way and is answered here, before the application sees the socket. */
static int server_agent_path(const struct sk *ls, int fd, struct sk *s)
{
	if (inband_syn_had_option(ls, fd))
		s->reason = inband_server(s, fd);
	return 0;
}

/* In a shared directory, an offer for this tuple could be any member's:
 * the segment goes only to a socket of the user who owns the client's end
 * of the TCP connection (and nobody else can replace that user's file in a
 * sticky directory). */
static int offer_is_client(const struct shunt_tuple *t, uint64_t sock_id)
{
	char name[SHUNT_DIR_NAME_MAX];
	struct stat st;
	uint32_t owner;

	if (!shunt_dir_shared())
		return 1;
	shunt_dir_name(name, 'c', sock_id);
	if (fstatat(shunt_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode) ||
	    tcp_owner_uid(&t->client, &t->server, &owner) || owner != (uint32_t)st.st_uid) {
		shunt_warn("offer for %s's connection names another user's socket: refused", name);
		return 0;
	}
	return 1;
}

/* The offer for this connection, claimed; NULL if there is none: no offer
 * and no client of ours in the middle of its connect to this address. */
static struct shunt_slot *await_offer(struct portreg *p, const struct shunt_tuple *t, unsigned *idx,
				      uint64_t *nonce, uint64_t *sock_id, uint64_t *netns)
{
	uint64_t start = shunt_now_ns();
	struct shunt_slot *sl;
	int busy, turn = -1;

	for (;;) {
		uint32_t gen = __atomic_load_n(&p->r->offers, __ATOMIC_ACQUIRE);
		uint64_t el = shunt_now_ns() - start;
		sl = find_offer(p, t, &busy, idx);
		if (sl && claim(sl, t, nonce, sock_id, netns))
			break;
		if (sl)
			continue; /* the slot changed under us: look again */
		if (!busy || el > SERVER_CONNECTING_WAIT_NS || plain_seen(p, t, start + el))
			break;
		/* The client publishes microseconds after its connect returned:
		 * spin if this process has a turn, then sleep until the next
		 * offer (its client wakes us) - not yielding: with more threads
		 * than cores, the client that must publish needs this CPU. */
		if (turn < 0)
			turn = shunt_spin_begin(SPIN_OFFER_NS, start + el);
		if (turn > 0 && el < SPIN_OFFER_NS) {
			__builtin_ia32_pause();
			continue;
		}
		shunt_spin_end(turn);
		turn = 0;
		/* counted first: a client that bumps the word after we read gen
		 * makes the wait return at once, one that bumps it before sees
		 * us counted and wakes us */
		__atomic_add_fetch(&p->r->offer_waiters, 1, __ATOMIC_SEQ_CST);
		shunt_futex_wait(&p->r->offers, gen, 1000000);
		__atomic_sub_fetch(&p->r->offer_waiters, 1, __ATOMIC_SEQ_CST);
	}
	shunt_spin_end(turn);
	return sl;
}

int rdv_accept(const struct sk *ls, int fd, struct sk *s, const struct sockaddr *peer)
{
	struct shunt_tuple t;
	struct portreg *p;
	struct shunt_slot *sl;
	uint64_t nonce, sock_id, netns;
	unsigned idx = 0;

	s->is_client = 0;
	s->reason = shunt_off_reason ? shunt_off_reason : SHUNT_R_POLICY;
	if (!shunt_active || shunt_off_reason)
		return 0;
	s->reason = SHUNT_R_PEER_NOT_SHUNT;
	if (sock_tuple_known(fd, &t.server, &t.client, peer))
		return 0;
	s->tuple = t;
	s->has_tuple = 1;
	if (!shunt_config_port_allowed(&shunt_cfg, t.server.port)) {
		s->reason = SHUNT_R_POLICY;
		return 0;
	}
	p = shunt_cfg.local ? reg_get(t.server.port, 1, 0) : NULL;
	if (!p)
		return server_agent_path(ls, fd, s);
	sl = await_offer(p, &t, &idx, &nonce, &sock_id, &netns);
	if (!sl)
		return server_agent_path(ls, fd, s); /* a shunt client from another host? */
	if (is_loopback(&t.server) && netns != shunt_netns_ino()) {
		slot_cas(sl, SLOT_CLAIMED, SLOT_FAILED);
		s->reason = SHUNT_R_NETNS;
		return 0;
	}
	if (fd_pressure()) { /* out of descriptors a moment ago (giveback.c) */
		slot_cas(sl, SLOT_CLAIMED, SLOT_DECLINED);
		s->reason = SHUNT_R_DESCRIPTORS;
		return 0;
	}
	if (!offer_is_client(&t, sock_id)) {
		slot_cas(sl, SLOT_CLAIMED, SLOT_FAILED);
		s->reason = SHUNT_R_HANDSHAKE;
		return 0;
	}
	return server_build(s, fd, idx, sl, nonce, sock_id);
}

/* A clean exit removes this process's socket; `shunt ss` reaps the rest. */
void rdv_exit(void)
{
	char name[SHUNT_DIR_NAME_MAX];

	if (shunt_sandboxed || shunt_dirfd < 0)
		return;
	if (csock >= 0 && csock_pid == getpid()) {
		shunt_dir_name(name, 'c', csock_id);
		unlinkat(shunt_dirfd, name, 0);
	}
	/* listeners the program never closed (most servers end by exit or a
	 * signal's handler): their ports' files go as a close would take them */
	if (!__atomic_load_n(&nports_listened, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&reg_lock);
	for (unsigned port = 1; port < 65536; port++) {
		struct portreg *p = ports[port];
		if (p && p->nlisten > 0 && p->lock_fd >= 0) {
			p->nlisten = 0;
			reg_release(p, (uint16_t)port);
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

__attribute__((destructor)) static void rdv_exit_dtor(void)
{
	rdv_exit();
}
