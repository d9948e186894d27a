/* SPDX-License-Identifier: MIT */
/*
 * exec.c - accelerated connections survive exec.
 *
 * exec wipes the shim's memory but not the descriptors, so the kernel TCP
 * socket would survive while the rings it depends on were forgotten: the new
 * program would read a TCP socket that carries nothing.  Before exec each
 * connection's transport writes an entry into SHUNT_INHERIT (its exec_tag
 * first, then what it needs: shared memory "s fd,memfd,arena,segment,side,
 * doorbell0,doorbell1;", RDMA - moved to TCP first, the new image has no
 * link - "m fd,memfd,side,reason;" with the region of its unread bytes),
 * the descriptors it names are made inheritable, and the new image loads
 * the shim; its constructor has each transport adopt its entries.  If exec
 * fails, nothing changed.  Sockets marked close-on-exec are not handed
 * over.
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
#include <elf.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <netinet/in.h>
#include "shim.h"
#include "../base/real.h"

extern char **environ;

#define EXEC_CONNS_MAX 256

struct handover {
	char *buf;
	size_t len, cap;
	int count;
	int fds[3 * EXEC_CONNS_MAX];
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
	int n, f, nfds;

	if (s->kind != SK_CONN || !c->tp->exec_item ||
	    h->nfds + EXEC_FDS_MAX > (int)(sizeof h->fds / sizeof h->fds[0]))
		return;
	f = R(fcntl)(fd, F_GETFD);
	if (f < 0 || (f & FD_CLOEXEC))
		return;
	nfds = h->nfds;
	n = c->tp->exec_item(c, fd, item, sizeof item, h->fds, &nfds);
	if (n <= 0)
		return; /* it stays behind: a plain socket after exec */
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
	h->nfds = nfds;
}

static void count_conn(int fd, struct sk *s, void *arg)
{
	(void)fd;
	*(int *)arg += s->kind == SK_CONN;
}

static const char *self_path(void)
{
	static Dl_info info;

	if (!info.dli_fname && !dladdr((void *)self_path, &info))
		return NULL;
	return info.dli_fname;
}

/* ---- will the new image load us? ----
 *
 * Not when the kernel runs it in secure-execution mode (its effective ids
 * differ from our real ones: set-user-ID or set-group-ID to another user,
 * or file capabilities - the loader then ignores LD_PRELOAD's paths), nor
 * when it has no loader (statically linked: no PT_INTERP - Go's programs,
 * busybox-static) or is of another class or machine (the loader says
 * "wrong ELF class" and goes on without us).  A script's interpreter
 * decides for it.  Such a program would read the bare kernel socket of
 * each connection it inherits, while the bytes are in the rings: they move
 * to TCP first, as for posix_spawn.  NULL: it will load us (or there is no
 * telling - a file we may not read, binfmt_misc: as before). */
#if defined(__x86_64__)
#define SELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define SELF_MACHINE EM_AARCH64
#endif
#define SELF_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

static const char *foreign_image(int fd, int depth)
{
	unsigned char b[256];
	struct stat st;
	struct statvfs v;
	Elf64_Ehdr eh;
	ssize_t n;
	int suid;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return NULL;
	suid = fstatvfs(fd, &v) || !(v.f_flag & ST_NOSUID);
	if ((suid && (st.st_mode & S_ISUID) ? st.st_uid : geteuid()) != getuid() ||
	    (suid && (st.st_mode & S_ISGID) ? st.st_gid : getegid()) != getgid())
		return "a set-user-ID or set-group-ID program (secure execution)";
	if (getuid() && suid && fgetxattr(fd, "security.capability", NULL, 0) > 0)
		return "a program with file capabilities (secure execution)";
	n = pread(fd, b, sizeof b - 1, 0);
	if (n >= 2 && b[0] == '#' && b[1] == '!') {
		char *p = (char *)b + 2, *e;
		const char *why = NULL;
		int ifd;
		b[n] = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		for (e = p; *e && *e != ' ' && *e != '\t' && *e != '\n'; e++)
			;
		*e = 0;
		if (depth < 4 && *p && (ifd = R(open)(p, O_RDONLY | O_CLOEXEC)) >= 0) {
			why = foreign_image(ifd, depth + 1);
			R(close)(ifd);
		}
		return why;
	}
	if (n < (ssize_t)sizeof eh || memcmp(b, ELFMAG, SELFMAG))
		return NULL;
	memcpy(&eh, b, sizeof eh);
#ifdef SELF_MACHINE
	if (b[EI_CLASS] != SELF_CLASS || eh.e_machine != SELF_MACHINE)
		return "a program for another architecture";
#endif
	if (b[EI_CLASS] != ELFCLASS64 || eh.e_phentsize < sizeof(Elf64_Phdr))
		return NULL;
	for (unsigned i = 0; i < eh.e_phnum && i < 128; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != sizeof ph)
			return NULL;
		if (ph.p_type == PT_INTERP)
			return NULL;
	}
	return "a statically linked program";
}

/* The image execve(path) runs, opened to look at (-1: no telling). */
static int image_open(const char *path, int search)
{
	const char *dirs, *d;
	char buf[4096];

	if (!path || !*path)
		return -1;
	if (!search || strchr(path, '/'))
		return R(open)(path, O_RDONLY | O_CLOEXEC);
	/* execvp's search: the first executable file along PATH */
	dirs = getenv("PATH");
	for (d = dirs && *dirs ? dirs : "/bin:/usr/bin"; d; d = strchr(d, ':') ? strchr(d, ':') + 1 : NULL) {
		size_t l = strcspn(d, ":");
		if ((size_t)snprintf(buf, sizeof buf, "%.*s%s%s", (int)l, d, l ? "/" : "", path) >= sizeof buf)
			continue;
		if (!access(buf, X_OK))
			return R(open)(buf, O_RDONLY | O_CLOEXEC);
	}
	return -1;
}

/* Does the image (path, along PATH if search; or the descriptor img)
 * run without us?  Why, or NULL. */
static const char *image_foreign(const char *path, int search, int img)
{
	int e = errno, fd = img >= 0 ? img : image_open(path, search);
	const char *why = fd >= 0 ? foreign_image(fd, 0) : NULL;

	if (fd >= 0 && img < 0)
		R(close)(fd);
	errno = e;
	return why;
}

/* Build the environment for the new image; NULL means "use envp as is".
 * The image: path (along PATH if search), or the descriptor img. */
static char **prepare(char *const envp[], struct handover *h, const char *path, int search, int img)
{
	const char *lib = self_path(), *pre = NULL, *why;
	char **out, *pre_new = NULL, *inh = NULL;
	size_t n = 0, k = 0;
	int nconn = 0;

	memset(h, 0, sizeof *h);
	rdv_offers_settle_all(); /* an offer is this process's, not the new image's */
	inband_confirm_all(0);   /* ... and so is a slot offered in an ACCEPT */
	fdtab_each(count_conn, &nconn);
	why = nconn && !shunt_sandboxed ? image_foreign(path, search, img) : NULL;
	if (why) /* no hand-over: what it inherits is plain TCP first (RDMA's unread bytes too) */
		spawn_prepare(0, why);
	transports_share_prepare("exec", SHUNT_R_FORK);
	if (why)
		return NULL;
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
	char **env = prepare(envp, &h, path, 0, -1);
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
	env = prepare(envp, &h, file, 1, -1);
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
	char **env = prepare(envp, &h, NULL, 0, fd);
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
static int install(int fd, struct conn *c)
{
	struct sk *s = sk_new(SK_CONN, AF_INET);

	if (!s) {
		conn_free(c);
		return -ENOMEM;
	}
	s->conn = c;
	s->reason = SHUNT_R_NONE;
	s->is_client = !c->side;
	s->nonblock = !!(R(fcntl)(fd, F_GETFL) & O_NONBLOCK);
	stats_update(s, fd);
	fdtab_set(fd, s);
	return 0;
}

/* SHUNT_INHERIT is an environment variable: anyone who starts the program
 * may have written it.  An entry is adopted only if its descriptors are what
 * it says (a TCP socket, a shared-memory file, two eventfds), and only the
 * descriptors of an adopted entry are closed here: a forged entry naming
 * the program's own stdout changes nothing. */
int exec_is_tcp_socket(int fd)
{
	int t = 0, p = 0;
	socklen_t l = sizeof t, lp = sizeof p;

	return !real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &l) && t == SOCK_STREAM &&
	       !real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &p, &lp) && p == IPPROTO_TCP;
}

int exec_is_shmem(int fd)
{
	return R(fcntl)(fd, F_GET_SEALS) >= 0; /* memfd and tmpfs files only */
}

/* Descriptors of one connection (dup, dup2: git daemon gives its handler
 * the socket as stdin and stdout) are one connection here too, as in the
 * old image: the first entry is adopted, the others share it.  Adopted
 * twice, each copy would drop the process's one share of the rings at its
 * close - the connection ended under the processes that still held it -
 * and read the same bytes.  The socket's identity: its inode. */
struct adopted {
	dev_t dev;
	ino_t ino;
	int fd;
};

static int sock_id(int fd, struct adopted *a)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return -1;
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	a->fd = fd;
	return 0;
}

/* One entry: the transport named by its first character adopts it, unless
 * its socket is one adopted already (done[0..*ndone)). */
static int adopt(const char *item, int *used, int *nused, struct adopted *done, int *ndone)
{
	struct adopted me;
	int fd = atoi(item + 1);

	if (sock_id(fd, &me))
		return -EINVAL;
	for (int i = 0; i < *ndone; i++) {
		struct sk *s;
		if (done[i].dev != me.dev || done[i].ino != me.ino)
			continue;
		if (!(s = fdtab_get(done[i].fd)))
			return -EPROTO;
		fdtab_set(fd, s); /* (our reference is the table's now) */
		return 0;
	}
	for (const struct transport *const *t = shunt_transports; *t; t++) {
		struct conn *c;
		int r;
		if (!(*t)->exec_adopt || item[0] != (*t)->exec_tag)
			continue;
		r = (*t)->exec_adopt(item + 1, &fd, &c, used, nused);
		if (!r && !(r = install(fd, c)) && *ndone < EXEC_CONNS_MAX)
			done[(*ndone)++] = me;
		return r;
	}
	return -EINVAL;
}

void exec_inherit(void)
{
	const char *v = getenv("SHUNT_INHERIT");
	char *copy, *save = NULL, *item;

	if (v) /* sockets from the old image: their options are unknown here */
		__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED);
	if (!v || !(copy = strdup(v)))
		return;
	int inherited[3 * EXEC_CONNS_MAX], n = 0, ndone = 0;
	struct adopted done[EXEC_CONNS_MAX];

	for (item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
		int used[EXEC_FDS_MAX], nused = 0, r = adopt(item, used, &nused, done, &ndone);
		if (r == -EINVAL) {
			shunt_warn("SHUNT_INHERIT entry '%s' invalid: ignored", item);
			continue;
		}
		if (r) {
			shunt_warn("SHUNT_INHERIT entry '%s' rejected", item);
			continue;
		}
		for (int i = 0; i < nused && n < (int)(sizeof inherited / sizeof inherited[0]); i++)
			inherited[n++] = used[i];
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
