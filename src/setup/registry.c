/* SPDX-License-Identifier: MIT */
/*
 * registry.c - the per-port registry in the rendezvous directory: its
 * listeners and its offer slots (p<port>, wire.h).
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

static struct portreg *_Atomic ports[65536];
static int nports_listened; /* non-zero once this process listened (rdv_exit) */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- small helpers ---- */

int rdv_sys(long r)
{
	return r < 0 ? -errno : (int)r;
}

/* A unix socket is reached by path: bind and sendto take no directory fd.
 * The directory was checked (core.c) and nobody else may rename it or its
 * entries (ours, or sticky), so the path names what the check saw. */
void rdv_path_of(char *buf, size_t n, char kind, uint64_t id)
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

int rdv_is_loopback(const struct shunt_addr *a)
{
	static const uint8_t v6lo[16] = { [15] = 1 };
	static const uint8_t v4pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->ip, v6lo, 16) || (!memcmp(a->ip, v4pfx, 12) && a->ip[12] == 127);
}

int rdv_is_any(const struct shunt_addr *a)
{
	static const uint8_t zero[16], v4any[16] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->ip, zero, 16) || !memcmp(a->ip, v4any, 16);
}

/* The 4-tuple as the kernel sees it; the remote end may be known already
 * (remote_sa: accept's address, a connect's concrete destination), which
 * saves a system call on the set-up's path. */
int rdv_sock_tuple_known(int fd, struct shunt_addr *local, struct shunt_addr *remote,
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

int rdv_sock_tuple(int fd, struct shunt_addr *local, struct shunt_addr *remote)
{
	return rdv_sock_tuple_known(fd, local, remote, NULL);
}

/* A connection to this host's own addresses gets a source address equal to
 * its destination (or loopback); any other source means another host. */
int rdv_is_other_host(int fd, const struct shunt_addr *dst)
{
	struct shunt_addr l, r;
	int e = errno, o = !rdv_is_loopback(dst) && !rdv_sock_tuple(fd, &l, &r) &&
			   memcmp(l.ip, r.ip, sizeof l.ip);

	errno = e;
	return o;
}

int rdv_tuple_eq(const struct shunt_tuple *a, const struct shunt_tuple *b)
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

static struct portreg *all_regs; /* every one mapped, current or retired */

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
	p->port = port;
	p->all_next = all_regs; /* reg_lock held (rdv_reg_get) */
	all_regs = p;
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

static void reg_free(struct portreg *p) /* reg_lock held */
{
	for (struct portreg **pp = &all_regs; *pp; pp = &(*pp)->all_next)
		if (*pp == p) {
			*pp = p->all_next;
			break;
		}
	munmap(p->r, sizeof(struct shunt_registry));
	fd_close_internal(p->probe_fd);
	if (p->lock_fd >= 0)
		fd_close_internal(p->lock_fd);
	free(p);
}

static void reg_retire(struct portreg *p) /* reg_lock held */
{
	struct portreg *old = retired[nretired % RETIRED];

	retired[nretired++ % RETIRED] = p;
	if (old)
		reg_free(old);
}

/* A forked child has one thread, inside no connect: what it maps of the
 * ports it does not listen on - every port its parent ever contacted or
 * listened on, a descriptor each, and the retired ones - goes now (it maps
 * again what it uses).  A server forking a child per connection would
 * otherwise hand each child a descriptor per port it ever knew, and a
 * child near its limit would meet EMFILE sooner than under TCP. */
SHUNT_CHILD_PATH static void reg_forget_unused(void)
{
	struct portreg *p, *next;

	for (unsigned i = 0; i < RETIRED; i++)
		SHUNT_RESET(retired[i], NULL);
	SHUNT_RESET(nretired, 0);
	for (p = all_regs; p; p = next) {
		next = p->all_next;
		if (p->nlisten || p->lock_fd >= 0)
			continue;
		if (ports[p->port] == p)
			ports[p->port] = NULL;
		reg_free(p);
	}
}

/* The port's registry, mapped once per process.  fresh: make sure it is
 * the file the name leads to now; one that was replaced is retired and the
 * new one used from then on. */
struct portreg *rdv_reg_get(uint16_t port, int create, int fresh)
{
	struct portreg *p = __atomic_load_n(&ports[port], __ATOMIC_ACQUIRE);

	if (p && (!fresh || reg_current(p, port)))
		return p;
	shunt_mutex_lock(&reg_lock);
	if (ports[port] == p) {
		struct portreg *n = reg_open(port, create);
		if (n || !p) {
			__atomic_store_n(&ports[port], n, __ATOMIC_RELEASE);
			if (p && !p->nlisten)
				reg_retire(p);
		}
	}
	p = ports[port];
	shunt_mutex_unlock(&reg_lock);
	return p;
}

/* This process holds no listener of the port any more: its descriptor of
 * the lock goes; if no process holds the lock then - no listener anywhere,
 * a forked child's inherited copy counting as its parent's - the file is
 * removed, under the exclusive lock, so a directory does not keep one file
 * per port ever listened on (issue #13, item 9), whichever process closes
 * last.  reg_lock held. */
static int reg_release(struct portreg *p, uint16_t port)
{
	char path[SHUNT_DIR_NAME_MAX];
	int gone = 0;

	fd_close_internal(p->lock_fd);
	p->lock_fd = -1;
	if (!flock(p->probe_fd, LOCK_EX | LOCK_NB)) {
		shunt_dir_name(path, 'p', port);
		if (reg_current(p, port)) {
			__atomic_store_n(&p->r->retired, 1, __ATOMIC_RELEASE);
			gone = !unlinkat(shunt_dirfd, path, 0);
		}
		flock(p->probe_fd, LOCK_UN);
	}
	return gone;
}

/* Our last listener on the port closed (fdtab.c, as the socket goes). */
void rdv_unlisten(uint16_t port)
{
	struct portreg *p = __atomic_load_n(&ports[port], __ATOMIC_ACQUIRE);

	if (!p || shunt_sandboxed)
		return;
	shunt_mutex_lock(&reg_lock);
	/* the file removed: its mapping and descriptor retire (kept a while:
	 * a thread of ours may be inside a connect to the port), so a
	 * process listening on port after port holds a bounded number */
	if (p->nlisten > 0 && --p->nlisten == 0 && p->lock_fd >= 0 && reg_release(p, port) &&
	    ports[port] == p) {
		__atomic_store_n(&ports[port], NULL, __ATOMIC_RELEASE);
		reg_retire(p);
	}
	shunt_mutex_unlock(&reg_lock);
}

/* Is some process holding the listener lock?  flock locks die with their
 * holder, so a crashed server never looks alive.  A yes holds LIVE_FOR_NS
 * (a probe per connect cost a system call) unless the last listener
 * retired the file: one killed since leaves an offer nobody takes - a
 * refused connect, or the client's wait for the answer, then plain. */
#define LIVE_FOR_NS 10000000ull

int rdv_reg_live(struct portreg *p)
{
	uint64_t now = shunt_now_ns();

	if (now < __atomic_load_n(&p->live_until, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&p->r->retired, __ATOMIC_ACQUIRE))
		return 1;
	if (flock(p->probe_fd, LOCK_EX | LOCK_NB) == 0) {
		flock(p->probe_fd, LOCK_UN);
		return 0;
	}
	__atomic_store_n(&p->live_until, now + LIVE_FOR_NS, __ATOMIC_RELAXED);
	return 1;
}

static uint32_t listener_word(const struct sk *s)
{
	return SHUNT_LISTENER_USED | (s->defer_accept ? SHUNT_LISTENER_DEFERRED : 0) |
	       (s->listen_reuseport ? SHUNT_LISTENER_REUSEPORT : 0);
}

static int ino_listed(uint32_t ino, const uint32_t *inos, int n)
{
	for (int i = 0; i < n; i++)
		if (inos[i] == ino)
			return 1;
	return 0;
}

#define GROUP_MAX 256 /* listening sockets a port's group check reads */

/* A full table: the records of our namespace whose socket no longer
 * listens are freed (a reuseport record is a socket's, and a server that
 * made new sockets leaves its old ones' behind). */
static void reg_free_gone(struct portreg *p, uint64_t ns)
{
	uint32_t inos[GROUP_MAX];
	int n = tcp_listen_inodes(p->port, NULL, inos, GROUP_MAX);

	if (n < 0 || n > GROUP_MAX)
		return;
	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		struct shunt_listener_rec *l = &p->r->listeners[i];
		if (l->used && l->netns == ns && !ino_listed(l->sock_ino, inos, n))
			__atomic_store_n(&l->used, 0, __ATOMIC_RELEASE);
	}
}

/* Listener s's record: one an address (every process that listens there
 * holds the same socket), or one a socket of a SO_REUSEPORT group. */
static void reg_add_listener(struct portreg *p, const struct sk *s)
{
	struct shunt_listener_rec *l = p->r->listeners, *free_rec = NULL;
	uint64_t ns = shunt_netns_ino();

	for (int pass = 0; pass < 2 && !free_rec; pass++) {
		for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
			if (l[i].used && l[i].netns == ns && !memcmp(&l[i].addr, &s->listen_addr, sizeof l[i].addr) &&
			    (!s->listen_reuseport || l[i].sock_ino == s->listen_ino)) {
				l[i].pid = (uint32_t)getpid();
				l[i].sock_ino = s->listen_ino;
				__atomic_store_n(&l[i].used, listener_word(s), __ATOMIC_RELEASE);
				return;
			}
			if (!l[i].used && !free_rec)
				free_rec = &l[i];
		}
		if (!free_rec && !pass)
			reg_free_gone(p, ns);
	}
	/* Full: overwrite a record at random; it is a hint, liveness is the
	 * lock (a reuseport group whose record went: its clients stay plain,
	 * reason reuseport-foreign - the safe side). */
	if (!free_rec)
		free_rec = &l[shunt_random64() % SHUNT_REG_LISTENERS];
	free_rec->netns = ns;
	free_rec->addr = s->listen_addr;
	free_rec->pid = (uint32_t)getpid();
	free_rec->sock_ino = s->listen_ino;
	__atomic_store_n(&free_rec->used, listener_word(s), __ATOMIC_RELEASE);
}

/* The records of listener address a in netns ns made by process pid (0:
 * by any) say the listener is off (wire.h SHUNT_LISTENER_OFF). */
static void mark_off(struct portreg *p, const struct shunt_addr *a, uint64_t ns, uint32_t pid)
{
	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		struct shunt_listener_rec *l = &p->r->listeners[i];
		if (__atomic_load_n(&l->used, __ATOMIC_ACQUIRE) && l->netns == ns && (!pid || l->pid == pid) &&
		    !memcmp(&l->addr, a, sizeof l->addr))
			__atomic_fetch_or(&l->used, SHUNT_LISTENER_OFF, __ATOMIC_ACQ_REL);
	}
}

/* This process went off (core.c shunt_go_off): listener s's record says
 * so (wire.h SHUNT_LISTENER_OFF) if this process made it.  One record
 * serves every process that listens at the address; one that a parent
 * made stays as it is until this process refuses an offer there
 * (rdv_listen_refused): a forked child that chroots or sets up io_uring
 * while it holds a copy of the listener it never accepts on must not turn
 * its parent's clients away. */
void rdv_listen_off(struct sk *s, int refuse)
{
	struct portreg *p;
	uint64_t ns = shunt_netns_ino();

	if (!s->listen_port || !(p = __atomic_load_n(&ports[s->listen_port], __ATOMIC_ACQUIRE)))
		return;
	mark_off(p, &s->listen_addr, ns, (uint32_t)getpid());
	/* (refused whoever registered it: a forked server's parent, which
	 * may claim some of them, loses those to plain, once - the safe side) */
	if (refuse)
		rdv_offers_refuse(p, &s->listen_addr, ns);
}

/* This process, off, accepted an offered connection on listener s, and
 * refused it: offers to s's address reach a process that refuses them
 * (nginx's and Apache's workers, which change their user from root's
 * after the master registered the listener in a private directory, or set
 * up io_uring), so its records say off whoever made them, and clients go
 * plain at once instead of offering each connection to be refused (0.75x
 * TCP's rate for nginx's short connections).  A parent that accepts too
 * loses its clients' acceleration from then on, never a byte; a listener
 * that registers again clears it. */
void rdv_listen_refused(const struct sk *s)
{
	struct portreg *p;

	if (!s->listen_port || !(p = __atomic_load_n(&ports[s->listen_port], __ATOMIC_ACQUIRE)))
		return;
	mark_off(p, &s->listen_addr, shunt_netns_ino(), 0);
}

/* Listener s's TCP_DEFER_ACCEPT changed: its record says so (wire.h). */
void rdv_listen_deferred(struct sk *s)
{
	struct portreg *p;

	if (!s->listen_port || !(p = __atomic_load_n(&ports[s->listen_port], __ATOMIC_ACQUIRE)))
		return;
	shunt_mutex_lock(&reg_lock);
	reg_add_listener(p, s);
	shunt_mutex_unlock(&reg_lock);
}

/* Could a registered listener be the one this connect() reaches?  Loopback
 * never leaves a network namespace; other addresses may (veth, bridges).
 * *deferred: one that could waits for the first byte (TCP_DEFER_ACCEPT). */
int rdv_reg_may_match(struct portreg *p, const struct shunt_addr *dst, int *deferred, int *reuseport)
{
	uint64_t ns = shunt_netns_ino();
	int may = 0;

	*deferred = *reuseport = 0;
	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		const struct shunt_listener_rec *l = &p->r->listeners[i];
		uint32_t u = __atomic_load_n(&l->used, __ATOMIC_ACQUIRE);
		if (!u || (u & SHUNT_LISTENER_OFF))
			continue;
		if ((l->netns == ns && (rdv_is_any(&l->addr) || !memcmp(l->addr.ip, dst->ip, 16))) ||
		    (l->netns != ns && !rdv_is_loopback(dst))) {
			may = 1;
			*deferred |= (u & SHUNT_LISTENER_DEFERRED) != 0;
			*reuseport |= l->netns == ns && (u & SHUNT_LISTENER_REUSEPORT);
		}
	}
	return may;
}

/* A port whose listener has SO_REUSEPORT (rdv_reg_may_match): does every
 * listening socket of this namespace that could take a connection to dst
 * have a record here, not off?  The kernel hands each connection to one of
 * them by a hash of its addresses; one that shunt does not serve (a
 * process not under shunt, or under another directory; a process gone
 * off) takes no offer, and its clients waited for a claim until they gave
 * up (200 ms a connection).  Asked of the kernel (sock_diag) at most once
 * in GROUP_VALID_NS a port; a group the kernel cannot tell us of is taken
 * as ours (what was done before). */
#define GROUP_VALID_NS 1000000000ull

int rdv_reg_group_ours(struct portreg *p, const struct shunt_addr *dst)
{
	uint64_t now = shunt_now_ns(), ns = shunt_netns_ino();
	uint32_t inos[GROUP_MAX];
	int n, ours = 1;

	if (now < __atomic_load_n(&p->group_until, __ATOMIC_ACQUIRE))
		return __atomic_load_n(&p->group_ours, __ATOMIC_RELAXED);
	n = tcp_listen_inodes(p->port, dst, inos, GROUP_MAX);
	if (n > GROUP_MAX)
		ours = 0;
	for (int i = 0; i < n && i < GROUP_MAX && ours; i++) {
		int found = 0;
		for (int j = 0; j < SHUNT_REG_LISTENERS && !found; j++) {
			const struct shunt_listener_rec *l = &p->r->listeners[j];
			uint32_t u = __atomic_load_n(&l->used, __ATOMIC_ACQUIRE);
			found = u && !(u & SHUNT_LISTENER_OFF) && l->netns == ns && l->sock_ino == inos[i];
		}
		ours = found;
	}
	__atomic_store_n(&p->group_ours, ours, __ATOMIC_RELAXED);
	__atomic_store_n(&p->group_until, now + GROUP_VALID_NS, __ATOMIC_RELEASE);
	return ours;
}

/* A listener whose port's registry could not be opened or made: if the
 * directory is not writable by this process - one that changed its user
 * after it started (mosquitto, a daemon dropping root before it listens:
 * the directory, opened then, is the first user's) - its clients find no
 * listener, and its connections say why (reason unsafe-dir), once in a
 * warning too.  (Else: a registry of another version, logged there.) */
static void listen_unregistered(struct sk *s, uint16_t port)
{
	static int warned;
	int e = errno;

	if (!faccessat(shunt_dirfd, ".", W_OK, AT_EACCESS) || errno != EACCES) {
		errno = e;
		return;
	}
	s->listen_unreg = 1;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("port %u: its listener cannot be registered - the rendezvous directory %s is not "
			   "writable by uid %u (the process changed its user since it started?): its "
			   "connections stay plain TCP (reason unsafe-dir); a SHUNT_DIR shared by both users "
			   "(sticky: chmod 1777) accelerates them (docs/configuration.md)",
			   port, shunt_cfg.dir, (unsigned)geteuid());
	errno = e;
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
	/* off for its user (core.c shunt_creds_changed): said here, where it
	 * costs the process its clients (mosquitto drops root, then listens) */
	if (shunt_active && shunt_off_reason == SHUNT_R_UNSAFE_DIR && !shunt_sandboxed &&
	    !getsockname(fd, (void *)&ss, &l) && !shunt_addr_from_sockaddr(&a, (void *)&ss))
		listen_unregistered(s, a.port);
	if (!shunt_active || shunt_off_reason || getsockname(fd, (void *)&ss, &l) || shunt_addr_from_sockaddr(&a, (void *)&ss))
		return 0;
	if (!shunt_config_port_allowed(&shunt_cfg, a.port))
		return 0;
	l = sizeof s->listen_reuseport;
	if (real.getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &s->listen_reuseport, &l))
		s->listen_reuseport = 0;
	s->listen_ino = fstat(fd, &st) ? 0 : (uint32_t)st.st_ino;
	for (int tries = 0; tries < 3; tries++) {
		int lk = -1;
		p = rdv_reg_get(a.port, 1, 1);
		if (!p) {
			listen_unregistered(s, a.port);
			return 0;
		}
		shunt_mutex_lock(&reg_lock);
		if (p->lock_fd < 0) {
			/* the lock, then the check that the name still leads to
			 * this file: the last listener elsewhere may have removed
			 * it meanwhile (it removes under the exclusive lock) */
			shunt_dir_name(path, 'p', a.port);
			lk = reg_openat(path, O_RDONLY, &st);
			if (lk >= 0 && (st.st_ino != p->ino || flock(lk, LOCK_SH) ||
					!reg_current(p, a.port))) {
				real.close(lk);
				shunt_mutex_unlock(&reg_lock);
				continue; /* replaced: the next turn maps the new one */
			}
			if (lk >= 0)
				p->lock_fd = fd_hide(lk);
		}
		p->nlisten++;
		__atomic_store_n(&nports_listened, 1, __ATOMIC_RELAXED);
		s->listen_addr = a;
		reg_add_listener(p, s);
		shunt_mutex_unlock(&reg_lock);
		s->listen_port = a.port;
		rdv_dir_sweep(); /* (a server restarted: what its killed self left) */
		return 0;
	}
	return 0;
}

/* ---- slots ---- */

/* The registry's count of slots not FREE (wire.h: advice for accept's
 * fast path) moves with every transition to or from FREE.  A slot is
 * reaped once its client is gone: a live one may keep its offer pending
 * for as long as its program leaves the connection untouched (early.c).
 *
 * What a reaper reads must be the reservation's own: the reservation time
 * is written before the slot is taken (a reaper that sees the taken word
 * sees it - before, a fresh registry's 0, or an old use's time, made a
 * slot taken a moment ago look 30 s old, and its previous owner's dead
 * process made it reapable: another client then took it too, and two
 * connections' offers shared one slot - cut connections under load, the
 * twenty-first session's floor.sh failures); the owner's process is named
 * only from RESERVING's end on; and the reaper's CAS is on the whole word,
 * generation included, so a slot reaped and taken by someone else while it
 * looked is never freed under its new owner. */
static void slot_reap_if_stale(struct portreg *p, struct shunt_slot *sl, uint64_t now)
{
	uint32_t w = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), st = SHUNT_SLOT_STATE(w);
	uint64_t age;

	if (st == SLOT_FREE)
		return;
	age = now - __atomic_load_n(&sl->stamp_ns, __ATOMIC_RELAXED);
	/* RESERVING: its client died between taking the slot and naming
	 * itself - a few instructions; or is stopped there: a long wait */
	if (st == SLOT_RESERVING ? age <= STALE_RESERVING_NS
				 : age <= STALE_SLOT_NS || shunt_proc_alive(sl->sock_id))
		return;
	if (__atomic_compare_exchange_n(&sl->state, &w, SHUNT_SLOT_GEN(w) | SLOT_FREE, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		__atomic_sub_fetch(&p->r->reserved, 1, __ATOMIC_RELEASE);
}

/* Slots are taken low: from a random one of the first twice as many as
 * are reserved (and 16) - few collisions between clients reserving at
 * once, and an accepting server scans only as far as slots were ever
 * used (slots_used: 256 slots are 24 KiB of lines other processes write,
 * read at every accept). */
#define SLOT_WINDOW_MIN 16u

static void slots_used_raise(struct portreg *p, unsigned n)
{
	uint32_t u = __atomic_load_n(&p->r->slots_used, __ATOMIC_RELAXED);

	while (u < n && !__atomic_compare_exchange_n(&p->r->slots_used, &u, n, 1, __ATOMIC_SEQ_CST,
						    __ATOMIC_RELAXED))
		;
}

/* Take a FREE slot: FREE -> RESERVING (the next generation, *gen), our
 * fields, -> CONNECTING.  NULL if none is free. */
struct shunt_slot *rdv_slot_reserve(struct portreg *p, uint64_t sock_id, uint64_t *nonce,
				    const struct shunt_addr *dst, uint32_t *gen)
{
	/* (64 bits: the count is anyone's to write, and a window of 0 divides) */
	uint64_t window = 2ull * __atomic_load_n(&p->r->reserved, __ATOMIC_RELAXED) + SLOT_WINDOW_MIN;
	unsigned start = (unsigned)(shunt_fast_random() % (window < SHUNT_REG_SLOTS ? window : SHUNT_REG_SLOTS));
	uint64_t now = shunt_now_ns();

	for (unsigned i = 0; i < SHUNT_REG_SLOTS; i++) {
		unsigned idx = (start + i) % SHUNT_REG_SLOTS;
		struct shunt_slot *sl = &p->r->slots[idx];
		uint32_t w, g;
		slot_reap_if_stale(p, sl, now);
		w = __atomic_load_n(&sl->state, __ATOMIC_RELAXED);
		if (SHUNT_SLOT_STATE(w) != SLOT_FREE)
			continue;
		/* the time first (a client that loses the slot to us writes
		 * its own "now" too: as good) */
		__atomic_store_n(&sl->stamp_ns, now, __ATOMIC_RELAXED);
		g = SHUNT_SLOT_GEN(w + SHUNT_SLOT_GEN_ONE);
		if (!__atomic_compare_exchange_n(&sl->state, &w, g | SLOT_RESERVING, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		/* counted, and the scan's bound raised, before the SYN leaves:
		 * a server that accepts this connection reads both after it
		 * (the kernel orders them) */
		slots_used_raise(p, idx + 1);
		__atomic_add_fetch(&p->r->reserved, 1, __ATOMIC_SEQ_CST);
		shunt_fault_reserve(); /* tests only (fault.c) */
		*nonce = shunt_fast_random();
		sl->client_pid = (uint32_t)shunt_pid();
		sl->nonce = *nonce;
		sl->sock_id = sock_id;
		sl->netns = shunt_netns_ino();
		sl->client_waiting = 0;
		/* The destination is known before the SYN; the client's own
		 * address and port only once connect() returns. */
		memset(&sl->tuple.client, 0, sizeof sl->tuple.client);
		sl->tuple.server = *dst;
		if (!rdv_slot_cas(sl, g, SLOT_RESERVING, SLOT_CONNECTING))
			return NULL; /* reaped: we were stopped for minutes */
		*gen = g;
		return sl;
	}
	return NULL;
}

/* Our reservation (generation gen) ends: the slot is FREE, unless it was
 * reaped meanwhile (its count went down then). */
void rdv_slot_free(struct portreg *p, struct shunt_slot *sl, uint32_t gen)
{
	uint32_t w = __atomic_load_n(&sl->state, __ATOMIC_RELAXED);

	while (SHUNT_SLOT_GEN(w) == gen && SHUNT_SLOT_STATE(w) != SLOT_FREE)
		if (__atomic_compare_exchange_n(&sl->state, &w, gen | SLOT_FREE, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_sub_fetch(&p->r->reserved, 1, __ATOMIC_RELEASE);
			return;
		}
}

/* The reservation gen's state from -> to: 0 if it is not in from (or not
 * that reservation's any more). */
int rdv_slot_cas(struct shunt_slot *sl, uint32_t gen, uint32_t from, uint32_t to)
{
	uint32_t w = gen | from;

	return __atomic_compare_exchange_n(&sl->state, &w, gen | to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A clean exit removes this process's files; `shunt ss` reaps the rest. */
SHUNT_CHILD_PATH void rdv_exit(void)
{
	if (shunt_sandboxed || shunt_dirfd < 0)
		return;
	rdv_msgsock_exit();
	/* listeners the program never closed (most servers end by exit or a
	 * signal's handler): their ports' files go as a close would take them */
	if (!__atomic_load_n(&nports_listened, __ATOMIC_RELAXED))
		return;
	/* (the mapped ones, not the 65,536 ports: every forked child of a
	 * server ends here - PostgreSQL's backends, one a connection - and
	 * the port table's 512 KB, never touched in the child, cost a page
	 * fault each 4 KB) */
	shunt_mutex_lock(&reg_lock);
	for (struct portreg *p = all_regs; p; p = p->all_next)
		if (p->nlisten > 0 && p->lock_fd >= 0 && ports[p->port] == p) {
			p->nlisten = 0;
			reg_release(p, p->port);
		}
	shunt_mutex_unlock(&reg_lock);
}

SHUNT_CHILD_PATH __attribute__((destructor)) static void rdv_exit_dtor(void)
{
	rdv_exit();
}

/* The port's registry if this process has it mapped (no reference). */
struct portreg *rdv_reg_peek(uint16_t port)
{
	return __atomic_load_n(&ports[port], __ATOMIC_ACQUIRE);
}

/* A forked child: the parent's locks and set-up state are not its own. */
SHUNT_CHILD_PATH void rdv_atfork_child(void)
{
	rdv_msgsock_atfork_child();
	peercred_atfork_child();
	rdv_client_atfork_child();
	arena_atfork_child();
	shunt_mutex_reset(&reg_lock);
	if (!shunt_sandboxed)
		reg_forget_unused();
}
