/* SPDX-License-Identifier: MIT */
/*
 * interpose_proc.c - the process around the sockets: fork, _exit, and what a
 * program may do behind the wrappers (prctl, syscall, io_uring set-up).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/seccomp.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sched.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "interpose.h"
#include "../base/real.h"
#include "../transport/shm/arena.h"
#include "shunt/shunt.h"



/* ---- processes ---- */

/* vfork's child shares our stack and may not return through a wrapper:
 * fork instead (the child only execs or exits; copy-on-write is cheap). */
SHUNT_CHILD_PATH EXPORT pid_t fork(void)
{
	pid_t p;
	int e;

	shunt_fork_before();
	p = R(fork)();
	if (p) { /* the parent (the child's hook is core.c's atfork_child) */
		e = errno;
		shunt_fork_after(p);
		errno = e;
	}
	return p;
}

EXPORT pid_t vfork(void)
{
	return fork();
}

/* The process ends without exit()'s destructors: what write() accepted
 * over RDMA must still reach the peer before the kernel's FIN. */
EXPORT void _exit(int status)
{
	transports_exit_flush();
	conn_exit_all(); /* what exit()'s destructors would do */
	rdv_exit();
	stats_exit();
	for (;;)
		syscall(SYS_exit_group, status);
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

/* ---- posix_spawn: a fork and an exec that run none of ours ----
 *
 * glibc's posix_spawn clones and execs by itself, past fork() and
 * execve(): no share of the rings is taken for the child and no hand-over
 * tells the new image which descriptors are connections, so a connection
 * it inherits would be a bare kernel socket there while the bytes are in
 * the rings.  So every accelerated connection the child will have moves
 * to TCP first, at the exact byte (move.c; reason fork-exec): one that a
 * file action dup2()s into the child (when the action is added), and one
 * without close-on-exec (when the child is spawned).  system() and
 * popen() spawn inside libc too (interpose_libc.c): their child is a shell
 * running a command, which uses its standard descriptors and knows no
 * other number - only connections on 0, 1 and 2 move for them.
 * Connections with close-on-exec that no action names stay as they are. */
static void spawn_move(int fd, struct sk *s, const char *why)
{
	static int warned;
	int r = move_pass_wait(s, SHUNT_R_FORK);

	if (!r)
		shunt_log("fd %d: %s: the connection is plain TCP now (reason fork-exec)", fd, why);
	else if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("fd %d, an accelerated connection, goes to a program without shunt (%s) but "
			   "could not move to TCP first (%s): it will not see its data; keep this service "
			   "plain (SHUNT_PORTS, SHUNT_DISABLE: docs/architecture.md)", fd, why, strerror(-r));
}

void spawn_prepare(int std_only, const char *why)
{
	int e = errno, fl, *fds, n;

	if (!shunt_active || shunt_sandboxed) /* (a sandbox: no call of ours; no move either) */
		return;
	rdv_offers_settle_all(); /* the child's program must find connections, not offers */
	inband_confirm_all(0);
	n = fdtab_conns(&fds); /* (no memory: we move none, the spawn goes on as before) */
	for (int i = 0; i < n; i++) {
		struct sk *s = fds[i] > 2 && std_only ? NULL : get_kind(fds[i], SK_CONN);
		if (!s)
			continue;
		if ((fl = R(fcntl)(fds[i], F_GETFD)) >= 0 && !(fl & FD_CLOEXEC) && !s->conn->passed)
			spawn_move(fds[i], s, why);
		sk_put(s);
	}
	free(fds);
	errno = e;
}

EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd)
{
	static int (*next)(posix_spawn_file_actions_t *, int, int);
	struct sk *s;
	int r;

	if (!next && !(*(void **)&next = dlsym(RTLD_NEXT, "posix_spawn_file_actions_adddup2")))
		return ENOSYS;
	r = next(fa, fd, newfd);
	if (!r && shunt_active && (s = get_kind(fd, SK_CONN))) {
		int e = errno;
		if (!s->conn->passed)
			spawn_move(fd, s, "a posix_spawn file action dup2()s it into a child");
		sk_put(s);
		errno = e;
	}
	return r;
}

/* chroot: SHUNT_DIR may be out of sight after it (core.c shunt_chrooted) */
EXPORT int chroot(const char *path)
{
	static int (*next)(const char *);
	int r, e;

	if (!next && !(*(void **)&next = dlsym(RTLD_NEXT, "chroot"))) {
		errno = ENOSYS;
		return -1;
	}
	shunt_read_ahead();
	r = next(path);
	e = errno;
	if (!r)
		shunt_chrooted();
	errno = e;
	return r;
}

/* setuid() and its kin: a daemon dropping root may lose the rendezvous
 * directory with it (core.c shunt_creds_changed) */
#define CREDS_WRAPPER(name, params, args)                                  \
	EXPORT int name params                                             \
	{                                                                  \
		static int(*next) params;                                  \
		int res;                                                   \
		if (!next && !(*(void **)&next = dlsym(RTLD_NEXT, #name))) { \
			errno = ENOSYS;                                    \
			return -1;                                         \
		}                                                          \
		if (!(res = next args))                                    \
			shunt_creds_changed();                             \
		return res;                                                \
	}
CREDS_WRAPPER(setuid, (uid_t u), (u))
CREDS_WRAPPER(seteuid, (uid_t u), (u))
CREDS_WRAPPER(setreuid, (uid_t r, uid_t e), (r, e))
CREDS_WRAPPER(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
CREDS_WRAPPER(setgid, (gid_t g), (g))
CREDS_WRAPPER(setegid, (gid_t g), (g))
CREDS_WRAPPER(setregid, (gid_t r, gid_t e), (r, e))
CREDS_WRAPPER(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
CREDS_WRAPPER(setgroups, (size_t n, const gid_t *g), (n, g))

typedef int spawn_fn(pid_t *, const char *, const posix_spawn_file_actions_t *,
		     const posix_spawnattr_t *, char *const[], char *const[]);

/* posix_spawn and posix_spawnp (libc's `name`; search: along PATH): what
 * the child inherits is plain TCP first, and a listener of ours keeps us in
 * its environment (exec.c). */
static int spawn_via(spawn_fn **next, const char *name, int search, pid_t *pid, const char *file,
		     const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
		     char *const argv[], char *const envp[])
{
	char **env;
	int r;

	if (!*next && !(*(void **)next = dlsym(RTLD_NEXT, name)))
		return ENOSYS;
	spawn_prepare(0, "inherited by a posix_spawn child");
	env = exec_spawn_env(envp, file, search);
	r = (*next)(pid, file, fa, attr, argv, env ? env : envp);
	exec_spawn_env_free(env, envp);
	return r;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	static spawn_fn *next;

	return spawn_via(&next, "posix_spawn", 0, pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	static spawn_fn *next;

	return spawn_via(&next, "posix_spawnp", 1, pid, file, fa, attr, argv, envp);
}

/* ---- daemon(): a fork, an exit and dup2s that run none of ours ----
 *
 * glibc's daemon() forks, ends the parent and puts /dev/null on 0-2 with
 * its internal fork, _exit and dup2: the child took its share of the rings
 * late (core.c), the parent left without _exit()'s flush, and a connection
 * on 0, 1 or 2 (an exec'd handler's, inetd-style) stayed in the descriptor
 * table - a later write(1, ...), meant for /dev/null, went to the peer.
 * So it is done here, as glibc does it, through the wrappers. */
EXPORT int daemon(int nochdir, int noclose)
{
	struct stat st;
	int fd;

	switch (fork()) {
	case -1:
		return -1;
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() == -1)
		return -1;
	if (!nochdir && chdir("/")) {
		/* ignored, as glibc's */
	}
	if (noclose)
		return 0;
	if ((fd = open("/dev/null", O_RDWR)) < 0)
		return -1;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
		close(fd);
		errno = ENODEV; /* not /dev/null: glibc's answer */
		return -1;
	}
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > 2)
		close(fd);
	return 0;
}

/* ---- the descriptor limit: the program's reserve below it (hidefd.c)
 * follows a new one.  glibc's setrlimit is prlimit on this process,
 * called here directly: the sanitizers' runtime sets limits before any
 * constructor has run, when resolving libc's symbol (dlsym) would crash
 * it.  A program calling prlimit() itself is seen at its next EMFILE. */
static int limit_set(__rlimit_resource_t resource, int r)
{
	if (!r && resource == RLIMIT_NOFILE)
		fd_reserve_mark(1);
	if (!r && (resource == RLIMIT_AS || resource == RLIMIT_MEMLOCK))
		arena_limits_changed(-1); /* a new arena's mapping may be refused */
	return r;
}

/* Every mapping made after mlockall(MCL_FUTURE) is locked, within
 * RLIMIT_MEMLOCK: an arena's too (arena.c arena_mappable). */
EXPORT int mlockall(int flags)
{
	int r = R(mlockall)(flags);

	if (!r)
		arena_limits_changed(!!(flags & MCL_FUTURE));
	return r;
}

EXPORT int munlockall(void)
{
	int r = R(munlockall)();

	if (!r)
		arena_limits_changed(0);
	return r;
}

EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
	return limit_set(resource, prlimit(0, resource, rl, NULL));
}

EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
	return limit_set(resource, prlimit64(0, resource, rl, NULL));
}

/* ---- prctl and syscall: what a program may do behind the wrappers ---- */

EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP)
		shunt_sandbox_enter(); /* before: other threads may be filtered too (TSYNC) */
	return R(prctl)(option, a[0], a[1], a[2], a[3]);
}

/* clone without CLONE_VM is a fork (interpose_proc.c syscall, clone):
 * one that goes on on its own stack (given) is not a caller's to return
 * to, so only a fork-like one without a stack is one of ours. */
static int clone_is_fork(uint64_t flags, uint64_t stack)
{
	return !(flags & (CLONE_VM | CLONE_THREAD)) && !stack;
}

/* The system call itself, as a fork (core.c shunt_clone_before). */
static long fork_syscall(long nr, const long *a)
{
	long r;
	int e;

	shunt_clone_before();
	r = R(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	e = errno;
	if (!r)
		shunt_clone_child();
	else
		shunt_fork_after((pid_t)r);
	errno = e;
	return r;
}

struct clone_tramp {
	int (*fn)(void *);
	void *arg;
};

static int clone_child(void *p)
{
	struct clone_tramp *t = p; /* (a copy in the child's own memory: no CLONE_VM) */

	shunt_clone_child();
	return t->fn(t->arg);
}

/* libc's clone(): as a fork when the child gets its own memory. */
EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	struct clone_tramp t = { fn, arg };
	pid_t *ptid, *ctid;
	void *tls;
	va_list ap;
	int r, e;

	va_start(ap, arg);
	ptid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (!clone_is_fork((uint64_t)(unsigned)flags, 0)) /* (its own stack is libc's to run fn on) */
		return R(clone)(fn, stack, flags, arg, ptid, tls, ctid);
	shunt_clone_before();
	r = R(clone)(clone_child, stack, flags, &t, ptid, tls, ctid);
	e = errno;
	shunt_fork_after(r);
	errno = e;
	return r;
}

/* libc's syscall(): the calls that bypass every wrapper above.  The
 * arguments are read as six longs whatever the call, as musl's and glibc's
 * own syscall() do. */
EXPORT long syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	switch (nr) {
	case SYS_close:
		return close((int)a[0]);
	case SYS_close_range:
		return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]); /* the wrapper's */
	case SYS_seccomp:
		if (a[0] == SECCOMP_SET_MODE_STRICT || a[0] == SECCOMP_SET_MODE_FILTER)
			shunt_sandbox_enter();
		break;
	case SYS_prctl:
		if (a[0] == PR_SET_SECCOMP)
			shunt_sandbox_enter();
		break;
	case SYS_io_uring_setup:
		shunt_uring_seen();
		break;
	case SYS_clone: /* (x86-64: flags, stack, parent tid, child tid, tls) */
		if (clone_is_fork((uint64_t)a[0], (uint64_t)a[1]))
			return fork_syscall(nr, a);
		break;
	case SYS_clone3:
		if (a[0] && (size_t)a[1] >= offsetof(struct clone_args, stack_size) &&
		    clone_is_fork(((const struct clone_args *)a[0])->flags, ((const struct clone_args *)a[0])->stack))
			return fork_syscall(nr, a);
		break;
	}
	return R(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* liburing's set-up functions (liburing makes its system calls itself, so
 * these exported names are where a program using it can be seen; one
 * linked statically cannot).  Each is the next library's, called after. */
#define URING_NEXT(name, ...)                                               \
	do {                                                                \
		int (*next)() = (int (*)())dlsym(RTLD_NEXT, name);          \
		shunt_uring_seen();                                         \
		if (!next)                                                  \
			return -ENOSYS;                                     \
		return next(__VA_ARGS__);                                   \
	} while (0)

EXPORT int io_uring_queue_init(unsigned entries, void *ring, unsigned flags)
{
	URING_NEXT("io_uring_queue_init", entries, ring, flags);
}

EXPORT int io_uring_queue_init_params(unsigned entries, void *ring, void *p)
{
	URING_NEXT("io_uring_queue_init_params", entries, ring, p);
}

EXPORT int io_uring_queue_init_mem(unsigned entries, void *ring, void *p, void *buf, size_t size)
{
	URING_NEXT("io_uring_queue_init_mem", entries, ring, p, buf, size);
}

EXPORT int io_uring_setup(unsigned entries, void *p)
{
	URING_NEXT("io_uring_setup", entries, p);
}
