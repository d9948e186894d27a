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
 * fails, nothing changed.  A connection whose every descriptor here is
 * marked close-on-exec is the new image's to let go of: the kernel closes
 * its socket at the exec, but this process's share of the rings (a forked
 * child's: socat's `fork EXEC:`, a server's helper) would go with it,
 * dropped by nobody - the segment held for good.  So its entry goes too,
 * prefixed "c ", its socket inheritable for the exec alone, and the new
 * image lets go of it before main(): the transport drops a share others
 * of its side still hold (exec_drop), and the last holder's is adopted and
 * closed (its close ends the connection: a FIN, or a reset with bytes
 * unread, as the kernel's close at the exec does).
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
	int count, listeners;
	int fds[4 * EXEC_CONNS_MAX];
	int nfds;
	const struct sk *sent[EXEC_CONNS_MAX]; /* connections handed over */
	int nsent;
};

static void set_cloexec(int fd, int on)
{
	R(fcntl)(fd, F_SETFD, on ? FD_CLOEXEC : 0); /* (the one descriptor flag) */
}

static int add_item(struct handover *h, const char *item, int n)
{
	if (h->len + (size_t)n + 1 > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		char *b = realloc(h->buf, cap);
		if (!b)
			return -ENOMEM;
		h->buf = b;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, item, (size_t)n + 1);
	h->len += (size_t)n;
	return 0;
}

static int inheritable(int fd)
{
	int f = R(fcntl)(fd, F_GETFD);

	return f >= 0 && !(f & FD_CLOEXEC);
}

static int sent(const struct handover *h, const struct sk *s)
{
	for (int i = 0; i < h->nsent; i++)
		if (h->sent[i] == s)
			return 1;
	return 0;
}

/* A descriptor's entry (each number of a connection has one: the new
 * image knows them all); closing: "c " first, one for the connection, and
 * its socket is made inheritable for the exec too. */
static void collect_one(struct handover *h, int fd, struct sk *s, int closing)
{
	struct conn *c = s->conn;
	char item[96] = "c ";
	int n, nfds, at = closing ? 2 : 0;

	if (s->kind != SK_CONN || !c->tp->exec_item || h->nsent == EXEC_CONNS_MAX ||
	    h->nfds + EXEC_FDS_MAX + 1 > (int)(sizeof h->fds / sizeof h->fds[0]) ||
	    (closing && sent(h, s)))
		return;
	nfds = h->nfds;
	n = c->tp->exec_item(c, fd, item + at, sizeof item - (size_t)at, h->fds, &nfds);
	if (n <= 0 || add_item(h, item, n + at))
		return; /* it stays behind: a plain socket after exec */
	if (closing)
		h->fds[nfds++] = fd;
	h->count++;
	h->nfds = nfds;
	h->sent[h->nsent++] = s;
}

static void collect(int fd, struct sk *s, void *arg)
{
	if (s->kind == SK_CONN && inheritable(fd))
		collect_one(arg, fd, s, 0);
}

/* ... after every inheritable one: a connection none of whose numbers
 * the new image inherits. */
static void collect_closing(int fd, struct sk *s, void *arg)
{
	if (s->kind == SK_CONN && !inheritable(fd))
		collect_one(arg, fd, s, 1);
}

static int int_order(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Each descriptor once (an arena's are every one of its entries'). */
static void fds_unique(struct handover *h)
{
	int n = 0;

	qsort(h->fds, (size_t)h->nfds, sizeof h->fds[0], int_order);
	for (int i = 0; i < h->nfds; i++)
		if (!n || h->fds[n - 1] != h->fds[i])
			h->fds[n++] = h->fds[i];
	h->nfds = n;
}

/* A listener of ours (registered, or marked for the agent) the new image
 * inherits: "l fd;", so that it listens as ours from its start (a client
 * that came before its first accept() would otherwise find no listener). */
static void collect_listener(int fd, struct sk *s, void *arg)
{
	struct handover *h = arg;
	char item[24];
	int n;

	if (s->kind != SK_LISTEN || !(s->listen_port || s->ag_listen) || !inheritable(fd))
		return;
	n = snprintf(item, sizeof item, "l %d;", fd);
	if (!add_item(h, item, n))
		h->listeners++;
}

/* A listener the agent answers for that the new image is given to accept
 * on: as its stdin or stdout (inetd's wait mode), or named by LISTEN_FDS
 * in its environment (systemd's socket activation: descriptors 3 on).  One
 * merely left open across the exec (no close-on-exec: common) is not the
 * new program's to accept on - it would have to guess its number. */
struct given {
	int listen_fds; /* LISTEN_FDS's count, 0 if none */
	int n[2];       /* connections of ours; listeners given */
};

static int listener_given(int fd, struct sk *s, const struct given *g)
{
	return s->kind == SK_LISTEN && s->ag_listen && inheritable(fd) &&
	       (fd <= 2 || (fd >= 3 && fd < 3 + g->listen_fds));
}

static void count_ours(int fd, struct sk *s, void *arg)
{
	struct given *g = arg;

	g->n[0] += s->kind == SK_CONN;
	g->n[1] += listener_given(fd, s, g);
}

static void given_scan(struct given *g, char *const envp[])
{
	memset(g, 0, sizeof *g);
	for (; envp && *envp; envp++)
		if (!strncmp(*envp, "LISTEN_FDS=", 11)) {
			long n = strtol(*envp + 11, NULL, 10);
			g->listen_fds = n > 0 && n < 1024 ? (int)n : 0;
		}
	fdtab_each(count_ours, g);
}

/* Such a listener, given to an image that will not load us: that program
 * would read a client's PROPOSAL as its data, so the agent stops answering
 * for it (agent.c; for good: it may be that image's until it closes). */
struct off_arg {
	const struct given *g;
	const char *why;
};

static void agent_off_given(int fd, struct sk *s, void *arg)
{
	const struct off_arg *a = arg;

	if (listener_given(fd, s, a->g))
		agent_listener_off(fd, a->why);
}

static void agent_off_all_given(const struct given *g, const char *why)
{
	struct off_arg a = { g, why };

	fdtab_each(agent_off_given, &a);
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

/* ---- the new image follows ----
 *
 * Some programs build their children's environment from scratch: dovecot's
 * and postfix's masters pass on only what their configuration imports,
 * xinetd only what a service's passenv names.  LD_PRELOAD and SHUNT_* are
 * then gone, and a child given a listener of ours served it plain for good
 * (its clients: peer-not-shunt; a client of another host that the agent
 * answered for sent its PROPOSAL, which the program read as data), one
 * given a connection read a socket whose bytes were in the rings.  So when
 * the new image inherits a connection or a listener of ours and its
 * environment has lost our library, it gets LD_PRELOAD as we started with
 * it (ours ahead of a list of its own) and the SHUNT_* settings this
 * process started with that it does not set itself (SHUNT_DISABLE=1 there
 * keeps the child's connections plain, docs/configuration.md).  An image
 * that inherits nothing of ours keeps the environment it was given (an
 * sshd's login session, `env -u LD_PRELOAD`). */
static char **start_env; /* "SHUNT_...=..." of our start, NULL-terminated */
static char *start_preload; /* "LD_PRELOAD=..." of our start, if it names us */

void exec_env_save(void)
{
	const char *pre = getenv("LD_PRELOAD"), *lib = self_path();
	size_t n = 0, k = 0;

	for (char **e = environ; e && *e; e++)
		n++;
	if (!(start_env = calloc(n + 1, sizeof *start_env)))
		return;
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "SHUNT_", 6) || !strncmp(*e, "SHUNT_INHERIT=", 14))
			continue;
		if (!(start_env[k] = strdup(*e)))
			break;
		k++;
	}
	/* (the whole list: what came first must stay first - ASan's runtime) */
	if (pre && lib && strstr(pre, lib) && asprintf(&start_preload, "LD_PRELOAD=%s", pre) < 0)
		start_preload = NULL;
}

static int env_has(char *const envp[], const char *var)
{
	size_t l = strcspn(var, "=");

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, var, l) && (*envp)[l] == '=')
			return 1;
	return 0;
}

static int from_start(const char *p)
{
	for (char **e = start_env; e && *e; e++)
		if (*e == p)
			return 1;
	return 0;
}

/* The new image's environment: envp with inh (its SHUNT_INHERIT, or NULL)
 * and, if envp lost our library, the library and the settings we started
 * with that envp does not set.  NULL: envp as is (or no memory).  inh is
 * the environment's now, or freed. */
static char **env_build(char *const envp[], char *inh)
{
	const char *lib = self_path(), *pre = NULL;
	char **out, *pre_new = NULL;
	size_t n = 0, k = 0, nstart = 0;

	for (; envp && envp[n]; n++)
		if (!strncmp(envp[n], "LD_PRELOAD=", 11))
			pre = envp[n] + 11;
	for (; start_env && start_env[nstart]; nstart++)
		;
	if (!pre && start_preload) /* lost with the rest: as we started */
		pre_new = strdup(start_preload);
	else if (lib && (!pre || !strstr(pre, lib)) &&
		 asprintf(&pre_new, "LD_PRELOAD=%s%s%s", lib, pre ? ":" : "", pre ? pre : "") < 0)
		pre_new = NULL;
	if ((!inh && !pre_new) || !(out = calloc(n + nstart + 3, sizeof *out))) {
		free(inh);
		free(pre_new);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(envp[i], "SHUNT_INHERIT=", 14) ||
		    (pre_new && !strncmp(envp[i], "LD_PRELOAD=", 11)))
			continue;
		out[k++] = envp[i];
	}
	if (inh)
		out[k++] = inh;
	if (pre_new) {
		out[k++] = pre_new;
		for (size_t i = 0; i < nstart; i++) /* our settings it lost */
			if (!env_has(envp, start_env[i]))
				out[k++] = start_env[i];
	}
	return out;
}

/* The listeners of ours the new image inherits join h's entries - with
 * SHUNT_DISABLE in its environment too: switched off, shunt still reads
 * and declines the PROPOSAL of a client the agent answered for (the mark
 * is the socket's), which the program would otherwise read as data. */
static void collect_listeners(struct handover *h)
{
	if (shunt_active && !shunt_sandboxed)
		fdtab_each(collect_listener, h);
}

/* An image that inherits nothing of ours keeps the environment it was
 * given, with or without us: one without us is named in the log (the
 * `postfix` command starts its master with only what import_environment
 * names - LD_PRELOAD must be among it - and nothing of ours to inherit;
 * `env -u LD_PRELOAD` means it) - in a log file or on a terminal only: an
 * sshd's login session execs its shell so, and its standard error is the
 * session's, its client's to read. */
static void env_kept(char *const envp[], const char *path)
{
	const char *lib = self_path();

	if (shunt_sandboxed || !lib || !shunt_log_seen())
		return;
	for (; envp && *envp; envp++)
		if (!strncmp(*envp, "LD_PRELOAD=", 11) && strstr(*envp + 11, lib))
			return;
	shunt_log("exec %s: its environment has no LD_PRELOAD of shunt's: it runs without shunt",
		  path ? path : "(a descriptor)");
}

/* h's entries as SHUNT_INHERIT in the new image's environment, with us. */
static char **env_handover(char *const envp[], struct handover *h)
{
	char *inh = NULL;

	if ((!h->count && !h->listeners) || asprintf(&inh, "SHUNT_INHERIT=%s", h->buf) < 0)
		return NULL;
	return env_build(envp, inh);
}

/* Build the environment for the new image; NULL means "use envp as is".
 * The image: path (along PATH if search), or the descriptor img. */
static char **prepare(char *const envp[], struct handover *h, const char *path, int search, int img)
{
	const char *why;
	char **out;
	struct given g;

	memset(h, 0, sizeof *h);
	rdv_offers_settle_all(); /* an offer is this process's, not the new image's */
	inband_confirm_all(0);   /* ... and so is a slot offered in an ACCEPT */
	given_scan(&g, envp);
	why = (g.n[0] || g.n[1]) && !shunt_sandboxed ? image_foreign(path, search, img) : NULL;
	if (why && g.n[0]) /* no hand-over: what it inherits is plain TCP first (RDMA's unread bytes too) */
		spawn_prepare(0, why);
	if (why && g.n[1])
		agent_off_all_given(&g, why);
	transports_share_prepare("exec", SHUNT_R_FORK);
	if (why)
		return NULL;
	fdtab_each_held(collect, h);
	fdtab_each_held(collect_closing, h);
	collect_listeners(h);
	if (!h->count && !h->listeners)
		env_kept(envp, path);
	if (!(out = env_handover(envp, h))) {
		free(h->buf);
		h->buf = NULL;
		return NULL;
	}
	fds_unique(h);
	for (int i = 0; i < h->nfds; i++)
		set_cloexec(h->fds[i], 0);
	return out;
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
		int ours = !from_start(env[i]);
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

/* posix_spawn's child inherits no connection (they moved to TCP first),
 * but may inherit a listener: its environment (NULL: envp as is), and the
 * same to free once the child is made. */
char **exec_spawn_env(char *const envp[], const char *file, int search)
{
	struct handover h = { 0 };
	struct given g;
	char **env;
	const char *why;

	given_scan(&g, envp);
	if (g.n[1] && !shunt_sandboxed && (why = image_foreign(file, search, -1)))
		agent_off_all_given(&g, why);
	collect_listeners(&h);
	env = env_handover(envp, &h);
	free(h.buf);
	return env;
}

void exec_spawn_env_free(char **env, char *const envp[])
{
	struct handover h = { 0 };

	undo(env, envp, &h);
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

/* The adopted connection becomes fd's (listed: in `shunt ss`; one to
 * close at once is not). */
static int install(int fd, struct conn *c, int listed)
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
	if (listed)
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

/* The transport an entry's first character names (NULL: none). */
static const struct transport *tp_of_tag(char tag)
{
	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->exec_tag == tag)
			return *t;
	return NULL;
}

/* One entry: the transport named by its first character adopts it, unless
 * its socket is one adopted already (done[0..*ndone)).  *sock: the entry's
 * socket, the program's number. */
static int adopt(const char *item, int closing, int *used, int *nused, struct adopted *done, int *ndone,
		 int *sock)
{
	const struct transport *t = tp_of_tag(item[0]);
	struct adopted me;
	struct conn *c;
	int fd = *sock = atoi(item + 1), r;

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
	if (!t || !t->exec_adopt)
		return -EINVAL;
	r = t->exec_adopt(item + 1, &fd, &c, used, nused);
	if (!r && !(r = install(fd, c, !closing)) && *ndone < EXEC_CONNS_MAX)
		done[(*ndone)++] = me;
	return r;
}

/* A close-on-exec entry the transport lets go of without a connection
 * (-EAGAIN: adopt it, then close it). */
static int drop(const char *item, int *fd, int *used, int *nused)
{
	const struct transport *t = tp_of_tag(item[0]);

	if (!t)
		return -EINVAL;
	return t->exec_drop ? t->exec_drop(item + 1, fd, used, nused) : -EAGAIN;
}

/* "l fd": a listener the old image had registered.  Only a listening TCP
 * socket is taken (listener_of asks if it is TCP; the entry may be forged:
 * then nothing happens - a listener is the process's own to register); a
 * descriptor a spawn's file actions moved is found at its first accept()
 * instead. */
static void adopt_listener(const char *v)
{
	char *end;
	long fd = strtol(v, &end, 10);
	int on = 0;
	socklen_t l = sizeof on;
	struct sk *s;

	if (end == v || *end || fd < 0 || fd > INT_MAX ||
	    real.getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &l) || !on)
		return;
	if ((s = listener_of((int)fd)))
		sk_put(s);
}

void exec_inherit(void)
{
	const char *v = getenv("SHUNT_INHERIT");
	char *copy, *save = NULL, *item;

	if (v) /* sockets from the old image: their options are unknown here */
		__atomic_store_n(&conn_timeouts_maybe, 1, __ATOMIC_RELAXED);
	if (!v || !(copy = strdup(v)))
		return;
	int inherited[3 * EXEC_CONNS_MAX], n = 0, ndone = 0, closing[EXEC_CONNS_MAX], nclosing = 0;
	struct adopted done[EXEC_CONNS_MAX];

	for (item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
		int c = item[0] == 'c' && item[1] == ' ';
		if (item[0] == 'l' && item[1] == ' ') {
			adopt_listener(item + 2);
			continue;
		}
		int used[EXEC_FDS_MAX], nused = 0, fd = -1, r = -EAGAIN;
		if (c) /* let go of at once, unless it is the last holder */
			r = drop(item + 2, &fd, used, &nused);
		if (r == -EAGAIN)
			r = adopt(item + 2 * c, c, used, &nused, done, &ndone, &fd);
		/* (only an entry's validated socket: a forged one closes nothing) */
		if (c && !r && nclosing < EXEC_CONNS_MAX)
			closing[nclosing++] = fd;
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
	/* close-on-exec in the old image: closed as the program would (the
	 * connection's share goes), then what holds no connection here */
	for (int i = 0; i < nclosing; i++)
		close(closing[i]);
	if (nclosing)
		transports_drop_unused();
	free(copy);
	unsetenv("SHUNT_INHERIT");
}
