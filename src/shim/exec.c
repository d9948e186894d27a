/* SPDX-License-Identifier: MIT */
/*
 * exec.c - accelerated connections survive exec.
 *
 * exec wipes the shim's memory but not the descriptors, so the kernel TCP
 * socket would survive while the rings it depends on were forgotten: the new
 * program would read a TCP socket that carries nothing.  Before exec we hand
 * the state over in SHUNT_INHERIT ("fd,memfd,arena,segment,side,doorbell0,doorbell1;...")
 * with the arena and its doorbells made inheritable, and make sure the new image
 * loads the shim; its constructor re-attaches.  If exec fails, nothing
 * changed.  Sockets marked close-on-exec are not handed over.
 *
 * RDMA connections move to TCP first (rdma.c: the new image has no link)
 * and hand over the region with their unread bytes: "m fd,memfd,side,reason;".
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include "shim.h"
#include "real.h"
#include "arena.h"

#define EXPORT __attribute__((visibility("default")))
#define R(name) (real.name ? real.name : (real_init(), real.name))
extern char **environ;

struct handover {
	char *buf;
	size_t len, cap;
	int count;
	int fds[3 * 256];
	int nfds;
};

static void set_cloexec(int fd, int on)
{
	int f = R(fcntl)(fd, F_GETFD);

	if (f >= 0)
		R(fcntl)(fd, F_SETFD, on ? f | FD_CLOEXEC : f & ~FD_CLOEXEC);
}

static void collect(int fd, struct sk *s, void *arg)
{
	struct handover *h = arg;
	struct conn *c = s->conn;
	char item[96];
	int n, f;

	if (s->kind != SK_SHM || (c->rd && !c->moved) ||
	    h->nfds + 3 > (int)(sizeof h->fds / sizeof h->fds[0]))
		return; /* an RDMA connection that could not move stays behind */
	if (!c->rd && (c->passed || c->fo_rx || conn_moving(c)))
		return; /* on its socket (move.c): a plain socket from here on */
	if (c->rd && c->moved_fd < 0) { /* moved with no descriptor to spare (rdma.c) */
		if (ring_used(&c->rx))
			shunt_warn("fd %d: %llu bytes it had not read when it moved to TCP stay "
				   "behind at exec (no descriptor could hold them)", fd,
				   (unsigned long long)ring_used(&c->rx));
		return;
	}
	f = R(fcntl)(fd, F_GETFD);
	if (f < 0 || (f & FD_CLOEXEC))
		return;
	if (c->rd)
		n = snprintf(item, sizeof item, "m%d,%d,%d,%d;", fd, c->moved_fd, c->side,
			     conn_moved_reason(c));
	else
		n = snprintf(item, sizeof item, "%d,%d,%llx,%u,%d,%d,%d;", fd, c->arena->memfd,
			     (unsigned long long)c->arena->id, c->segno, c->side,
			     c->arena->bell[0], c->arena->bell[1]);
	if (h->len + (size_t)n + 1 > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		char *b = realloc(h->buf, cap);
		if (!b)
			return;
		h->buf = b;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, item, (size_t)n + 1);
	h->len += (size_t)n;
	h->count++;
	if (c->rd) {
		h->fds[h->nfds++] = c->moved_fd;
		return;
	}
	h->fds[h->nfds++] = c->arena->memfd;
	h->fds[h->nfds++] = c->arena->bell[0];
	h->fds[h->nfds++] = c->arena->bell[1];
}

static const char *self_path(void)
{
	static Dl_info info;

	if (!info.dli_fname && !dladdr((void *)self_path, &info))
		return NULL;
	return info.dli_fname;
}

/* Build the environment for the new image; NULL means "use envp as is". */
static char **prepare(char *const envp[], struct handover *h)
{
	const char *lib = self_path(), *pre = NULL;
	char **out, *pre_new = NULL, *inh = NULL;
	size_t n = 0, k = 0;

	memset(h, 0, sizeof *h);
	rdma_share_prepare("exec", SHUNT_R_FORK);
	fdtab_each(collect, h);
	if (!h->count)
		return NULL;
	for (; envp && envp[n]; n++)
		if (!strncmp(envp[n], "LD_PRELOAD=", 11))
			pre = envp[n] + 11;
	out = calloc(n + 3, sizeof *out);
	if (!out || asprintf(&inh, "SHUNT_INHERIT=%s", h->buf) < 0)
		goto fail;
	if (lib && (!pre || !strstr(pre, lib)) &&
	    asprintf(&pre_new, "LD_PRELOAD=%s%s%s", lib, pre ? ":" : "", pre ? pre : "") < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(envp[i], "SHUNT_INHERIT=", 14) ||
		    (pre_new && !strncmp(envp[i], "LD_PRELOAD=", 11)))
			continue;
		out[k++] = envp[i];
	}
	out[k++] = inh;
	if (pre_new)
		out[k++] = pre_new;
	for (int i = 0; i < h->nfds; i++)
		set_cloexec(h->fds[i], 0);
	return out;
fail:
	free(out);
	free(inh);
	free(h->buf);
	return NULL;
}

/* exec failed: the process goes on as before. */
static void undo(char **env, char *const envp[], struct handover *h)
{
	int e = errno;

	if (!env)
		return;
	for (int i = 0; i < h->nfds; i++)
		set_cloexec(h->fds[i], 1);
	for (size_t i = 0; env[i]; i++) {
		int ours = 1;
		for (size_t j = 0; envp && envp[j]; j++)
			if (env[i] == envp[j])
				ours = 0;
		if (ours)
			free(env[i]);
	}
	free(env);
	free(h->buf);
	errno = e;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct handover h;
	char **env = prepare(envp, &h);
	int r = R(execve)(path, argv, env ? env : envp);

	undo(env, envp, &h);
	return r;
}

EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static int (*real_execvpe)(const char *, char *const[], char *const[]);
	struct handover h;
	char **env;
	int r;

	if (!real_execvpe)
		*(void **)&real_execvpe = dlsym(RTLD_NEXT, "execvpe");
	if (!real_execvpe) {
		errno = ENOSYS;
		return -1;
	}
	env = prepare(envp, &h);
	r = real_execvpe(file, argv, env ? env : envp);
	undo(env, envp, &h);
	return r;
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct handover h;
	char **env = prepare(envp, &h);
	int r = R(fexecve)(fd, argv, env ? env : envp);

	undo(env, envp, &h);
	return r;
}

/* execl*: collect the variadic arguments, then the vector form. */
#define COLLECT_ARGS(arg0, ap, argv)                                          \
	do {                                                                  \
		size_t n_ = 1;                                                \
		va_list c_;                                                   \
		va_copy(c_, ap);                                              \
		while (va_arg(c_, char *))                                    \
			n_++;                                                 \
		va_end(c_);                                                   \
		argv = alloca((n_ + 1) * sizeof(char *));                     \
		argv[0] = (char *)(arg0);                                     \
		for (size_t i_ = 1; i_ <= n_; i_++)                           \
			argv[i_] = va_arg(ap, char *);                        \
	} while (0)

EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv, **envp;
	va_list ap;

	va_start(ap, arg);
	COLLECT_ARGS(arg, ap, argv);
	envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, argv, envp);
}

/* ---- in the new image ---- */

/* The adopted connection becomes fd's. */
static int install(int fd, struct conn *c, int side)
{
	struct sk *s = sk_new(SK_SHM, AF_INET);

	if (!s) {
		conn_free(c);
		return -ENOMEM;
	}
	s->conn = c;
	s->reason = SHUNT_R_NONE;
	s->is_client = !side;
	s->nonblock = !!(R(fcntl)(fd, F_GETFL) & O_NONBLOCK);
	stats_update(s, fd);
	fdtab_set(fd, s);
	return 0;
}

static int adopt(int fd, int memfd, uint64_t id, unsigned seg, int side, const int bell[2])
{
	int fds[3] = { R(fcntl)(memfd, F_DUPFD_CLOEXEC, 0), R(fcntl)(bell[0], F_DUPFD_CLOEXEC, 0),
		       R(fcntl)(bell[1], F_DUPFD_CLOEXEC, 0) };
	struct arena *a;
	struct conn *c;
	int dupfd;

	/* Several sockets may share the arena: the first adopts it. */
	if (arena_adopt(id, fds, side, &a))
		return -EPROTO;
	dupfd = fd_dup_hidden(fd);
	if (dupfd < 0 || conn_attach(&c, a, seg, side, dupfd, NULL)) {
		fd_close_internal(dupfd);
		arena_put(a);
		return -EPROTO;
	}
	return install(fd, c, side);
}

static int adopt_moved(int fd, int memfd, int side, int reason)
{
	struct conn *c;
	int r = rdma_conn_adopt(fd, memfd, side, reason, &c);

	if (r)
		return r;
	return install(fd, c, side);
}

/* SHUNT_INHERIT is an environment variable: anyone who starts the program
 * may have written it.  An entry is adopted only if its descriptors are what
 * it says (a TCP socket, a shared-memory file, two eventfds), and only the
 * descriptors of an adopted entry are closed here: a forged entry naming
 * the program's own stdout changes nothing. */
static int is_tcp_socket(int fd)
{
	int t = 0, p = 0;
	socklen_t l = sizeof t, lp = sizeof p;

	return !real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) && t == SOCK_STREAM &&
	       !real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &p, &lp) && p == IPPROTO_TCP;
}

static int is_shmem(int fd)
{
	return R(fcntl)(fd, F_GET_SEALS) >= 0; /* memfd and tmpfs files only */
}

void exec_inherit(void)
{
	const char *v = getenv("SHUNT_INHERIT");
	char *copy, *save = NULL, *item;

	if (v) /* sockets from the old image: their options are unknown here */
		__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED);
	if (!v || !(copy = strdup(v)))
		return;
	int inherited[3 * 256], n = 0;

	for (item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
		int fd, memfd, efd[2], side;
		unsigned long long id;
		unsigned seg;
		if (item[0] == 'm') { /* an RDMA connection moved to TCP before exec */
			int reason;
			if (sscanf(item + 1, "%d,%d,%d,%d", &fd, &memfd, &side, &reason) != 4 || fd < 0 ||
			    memfd < 0 || (side != 0 && side != 1) || reason <= 0 || reason >= SHUNT_R_MAX ||
			    fd == memfd || !is_tcp_socket(fd) || !is_shmem(memfd)) {
				shunt_warn("SHUNT_INHERIT entry '%s' invalid: ignored", item);
				continue;
			}
			if (adopt_moved(fd, memfd, side, reason)) {
				shunt_warn("SHUNT_INHERIT entry '%s' rejected", item);
				continue;
			}
			if (n < (int)(sizeof inherited / sizeof inherited[0]))
				inherited[n++] = memfd;
			continue;
		}
		if (sscanf(item, "%d,%d,%llx,%u,%d,%d,%d", &fd, &memfd, &id, &seg, &side, &efd[0],
			   &efd[1]) != 7 || fd < 0 || memfd < 0 || efd[0] < 0 || efd[1] < 0 ||
		    (side != 0 && side != 1) || fd == memfd || fd == efd[0] || fd == efd[1] ||
		    memfd == efd[0] || memfd == efd[1] || efd[0] == efd[1] || !is_tcp_socket(fd) ||
		    !is_shmem(memfd) || !fd_is_eventfd(efd[0]) || !fd_is_eventfd(efd[1])) {
			shunt_warn("SHUNT_INHERIT entry '%s' invalid: ignored", item);
			continue;
		}
		if (adopt(fd, memfd, id, seg, side, efd)) {
			shunt_warn("SHUNT_INHERIT entry '%s' rejected", item);
			continue;
		}
		if (n + 3 <= (int)(sizeof inherited / sizeof inherited[0])) {
			inherited[n++] = memfd;
			inherited[n++] = efd[0];
			inherited[n++] = efd[1];
		}
	}
	/* adopt() took duplicates: the inherited descriptors themselves go. */
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= inherited[j] == inherited[i];
		if (!seen && inherited[i] >= 0)
			real.close(inherited[i]);
	}
	free(copy);
	unsetenv("SHUNT_INHERIT");
}
