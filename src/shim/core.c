/* SPDX-License-Identifier: MIT */
/*
 * core.c - the library's start-up and the process's state: configuration,
 * the rendezvous directory, fork hooks, a seccomp sandbox or an io_uring
 * seen.  (The helpers under everything are src/base; who may spin is
 * spin.c.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"
#include "../common/rdvdir.h"

extern char **environ;
struct shunt_config shunt_cfg;
int shunt_active;
/* The network namespace and the process's id are a forked child's own,
 * read or drawn at its first need: each valid while its forks count is
 * shunt_forks() (a count, so that the child writes neither at its fork:
 * base.h, SHUNT_RESET). */
static uint64_t netns_ino;
static _Atomic unsigned netns_forks;
static uint64_t proc_id;
static _Atomic unsigned proc_id_forks;
static pthread_mutex_t proc_id_lock = PTHREAD_MUTEX_INITIALIZER;

static mode_t file_mode = 0600;
int shunt_dirfd = -1;
int shunt_off_reason;
int shunt_ncpus = 1;
static int dir_shared;

/* SHUNT_DIR is the trust domain: files we create there are as open as the
 * directory itself (0600 in a private one, 0660 if it is group-writable,
 * 0666 if world-writable), so several users share acceleration exactly when
 * an operator made a (sticky) directory they can all write. */
mode_t shunt_file_mode(void)
{
	return file_mode;
}

int shunt_dir_shared(void)
{
	return dir_shared;
}

void shunt_dir_name(char name[SHUNT_DIR_NAME_MAX], char kind, uint64_t id)
{
	if (kind == 'p')
		snprintf(name, SHUNT_DIR_NAME_MAX, "p%u", (unsigned)id);
	else
		snprintf(name, SHUNT_DIR_NAME_MAX, "%c%016llx", kind, (unsigned long long)id);
}

/* Open and check the rendezvous directory (src/common/rdvdir.c); a refused
 * one leaves every connection plain, with a reason and one warning line. */
static void open_dir(void)
{
	char why[256] = "";
	enum rdvdir_kind kind;
	struct stat st;
	int fd = shunt_cfg.dir_explicit
		 ? rdvdir_open(shunt_cfg.dir, 1, 1, &kind, why, sizeof why)
		 : rdvdir_open_default(shunt_cfg.dir, sizeof shunt_cfg.dir, 1, &kind, why, sizeof why);

	if (fd < 0) {
		shunt_warn("rendezvous directory refused: %s; connections stay plain TCP "
			   "(reason unsafe-dir, docs/security.md)", why);
		shunt_off_reason = SHUNT_R_UNSAFE_DIR;
		return;
	}
	if (why[0])
		shunt_warn("%s: using %s instead", why, shunt_cfg.dir);
	dir_shared = kind == RDVDIR_SHARED;
	if (!fstat(fd, &st))
		file_mode = (st.st_mode & S_IWOTH) ? 0666 : (st.st_mode & S_IWGRP) ? 0660 : 0600;
	shunt_dirfd = fd_hide(fd);
}

/* A random odd number - under a seccomp filter without getrandom (the
 * clock is the vDSO's). */
static uint64_t draw_odd(void)
{
	return (shunt_sandboxed ? shunt_now_ns() << 1 ^ (uint64_t)shunt_pid() << 40 : shunt_random64()) | 1;
}

/* Names this process's files in SHUNT_DIR (s<id> stats, c<id> socket):
 * drawn at start, and in a forked child at its first need - most children
 * of a forking server never make a file or an offer (a PostgreSQL backend
 * serves the connection it inherited), and each getrandom() was one more
 * system call a fork. */
uint64_t shunt_proc_name(void)
{
	unsigned f = shunt_forks();

	/* (a sandboxed process's child keeps its parent's, as it keeps the
	 * parent's files: it makes none under a filter) */
	if (__builtin_expect(__atomic_load_n(&proc_id_forks, __ATOMIC_ACQUIRE) != f, 0) &&
	    !__atomic_load_n(&shunt_sandboxed, __ATOMIC_ACQUIRE)) {
		/* (drawn before a sandbox, but a filter installed past our
		 * wrappers is met only here: draw_odd asks no system call then) */
		shunt_mutex_lock(&proc_id_lock);
		if (__atomic_load_n(&proc_id_forks, __ATOMIC_RELAXED) != f) {
			proc_id = draw_odd();
			__atomic_store_n(&proc_id_forks, f, __ATOMIC_RELEASE);
		}
		shunt_mutex_unlock(&proc_id_lock);
	}
	return proc_id;
}

/* ... given to another process (an offer, an arena, an in-band answer),
 * which judges us alive by the lock on our s<id> file: the file first. */
uint64_t shunt_proc_id(void)
{
	stats_ensure_file();
	return shunt_proc_name();
}

/* Is process `id` of SHUNT_DIR alive?  It holds a lock on its s<id> file
 * while it lives (stats.c); no file: gone.  Unknown counts as alive. */
int shunt_proc_alive(uint64_t id)
{
	char path[SHUNT_DIR_NAME_MAX];
	int fd, alive;

	if (shunt_dirfd < 0)
		return 1;
	shunt_dir_name(path, 's', id);
	/* O_NONBLOCK: a FIFO planted under that name must not hang us */
	fd = real.openat(shunt_dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	alive = flock(fd, LOCK_EX | LOCK_NB) != 0;
	real.close(fd);
	return alive;
}

static void read_netns(void);

uint64_t shunt_netns_ino(void)
{
	if (__builtin_expect(__atomic_load_n(&netns_forks, __ATOMIC_ACQUIRE) != shunt_forks(), 0) &&
	    !shunt_sandboxed)
		read_netns(); /* (sandboxed: the parent's, read before the filter) */
	return netns_ino;
}

/* (two threads may both read it: the same) */
static void read_netns(void)
{
	struct stat st;
	unsigned f = shunt_forks();

	netns_ino = stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
	__atomic_store_n(&netns_forks, f, __ATOMIC_RELEASE);
}


/* Before fork: RDMA connections move to TCP, so the child can use them
 * (unless SHUNT_RDMA_FORK=keep: for programs whose children never touch
 * them, such as a snapshotting redis). */
static void atfork_prepare(void)
{
	if (!shunt_cfg.rdma_fork_keep)
		transports_share_prepare("fork", SHUNT_R_FORK);
}

/* From now on every connection of this process is plain, for reason why
 * (the first reason stays): its listeners' records say so, so that
 * clients stop offering (registry.c rdv_listen_off); an offer already
 * made is refused at accept() (server.c) - in a sandbox, whose accept()
 * makes no call of ours, here, as the filter goes in.  If its accepts may not come
 * through us any more (io_uring's IORING_OP_ACCEPT; a seccomp sandbox,
 * where we make no call to read a PROPOSAL), the agent stops answering
 * for its listeners as well (past: a PROPOSAL's bytes - a client of
 * another host's, or any under the agent - read as the program's data).
 * Before a seccomp filter goes in, too (which is why: not after it). */
static void listener_off(int fd, struct sk *s, void *why)
{
	if (s->kind != SK_LISTEN)
		return;
	rdv_listen_off(s, shunt_sandboxed);
	if (why && s->ag_listen)
		agent_listener_off(fd, why);
}

static void shunt_go_off(int why, const char *past_us)
{
	if (!shunt_off_reason)
		shunt_off_reason = why;
	fdtab_each(listener_off, (void *)past_us);
}

/* What a forked child reads at first need (a stat of /proc, a
 * getrandom), read now: before a seccomp filter, which may forbid them,
 * and before a chroot, whose root may have no /proc. */
void shunt_read_ahead(void)
{
	if (!shunt_active)
		return;
	(void)shunt_netns_ino();
	(void)shunt_proc_name();
}

static void count_listener(int fd, struct sk *s, void *n)
{
	(void)fd;
	*(int *)n += s->kind == SK_LISTEN && s->listen_port;
}

/* Going off costs a server its clients: a warning then; else the log's
 * line (postfix's queue manager, pickup and cleanup chroot and drop root
 * too, and make no TCP connection). */
static int listening(void)
{
	int n = 0;

	fdtab_each(count_listener, &n);
	return n;
}

/* The process chrooted (dovecot's login processes, OpenSSH's privilege
 * separation): if SHUNT_DIR's path no longer leads to the directory we
 * hold, no message reaches a client from here, nor one us (unix sockets
 * are reached by path): new connections stay plain, reason unsafe-dir,
 * and clients of our listeners stop offering. */
void shunt_chrooted(void)
{
	struct stat a, b;

	if (!shunt_active || shunt_dirfd < 0 || shunt_sandboxed || shunt_off_reason)
		return;
	if (!stat(shunt_cfg.dir, &a) && !fstat(shunt_dirfd, &b) && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		return;
	(listening() ? shunt_warn : shunt_log)(
		"chroot: %s is out of sight: new connections stay plain (reason unsafe-dir)", shunt_cfg.dir);
	shunt_go_off(SHUNT_R_UNSAFE_DIR, NULL); /* (its accept()s decline) */
}

/* The process changed its user or groups for good (a daemon that drops
 * root after it started: postfix's smtpd, registered as root from its
 * master's listener and serving as postfix; Apache's and dovecot's
 * workers): if the rendezvous directory, opened as the first user, is no
 * longer the process's to use (a private one: no message reaches a client
 * from here, no segment is passed), new connections stay plain (reason
 * unsafe-dir) and clients of its listeners stop offering - said once.
 * Before, each connection made a 16 MB segment, failed to pass it, and
 * fell back as handshake-failed.  A change the process can undo (its saved
 * user id is still another: seteuid() for a moment) goes on as it is. */
void shunt_creds_changed(void)
{
	uid_t r, e, s;
	int err = errno;

	if (shunt_active && !shunt_sandboxed)
		transports_creds_changed(); /* (RDMA: its devices are opened again) */
	if (!shunt_active || shunt_dirfd < 0 || shunt_sandboxed || shunt_off_reason ||
	    !faccessat(shunt_dirfd, ".", W_OK | X_OK, AT_EACCESS) || errno != EACCES ||
	    getresuid(&r, &e, &s) || r != e || e != s) {
		errno = err;
		return;
	}
	(listening() ? shunt_warn : shunt_log)(
		"uid %u cannot use the rendezvous directory %s (the process changed its user since it "
		"started): its new connections stay plain TCP (reason unsafe-dir); a SHUNT_DIR shared by "
		"both users (sticky: chmod 1777) accelerates them (docs/configuration.md)",
		(unsigned)e, shunt_cfg.dir);
	shunt_go_off(SHUNT_R_UNSAFE_DIR, NULL); /* (its accept()s decline) */
	errno = err;
}

/* A seccomp filter is being installed (interpose.c saw prctl or seccomp):
 * from now on shunt makes no system call of its own that the program would
 * not make on a plain socket - its filter may kill for one (OpenSSH's
 * pre-authentication sandbox does).  New connections stay plain (reason
 * `sandboxed`); a fork makes no stats file, an exit removes none (`shunt ss`
 * reaps what a dead process left); shared-memory connections made before
 * go on through their rings, which need only futex, read/write on eventfds
 * and poll; RDMA ones move to TCP first (reason `sandboxed`, both ends). */
void shunt_sandbox_enter(void)
{
	if (__atomic_load_n(&shunt_sandboxed, __ATOMIC_ACQUIRE))
		return;
	/* RDMA connections go to their TCP sockets first, while every system
	 * call is still allowed: their data path calls libibverbs, whose verbs
	 * make system calls of their own (ioctl on the verbs device) */
	inband_confirm_all(0); /* (a CONFIRM's connection attaches through libibverbs too) */
	shunt_log_check();     /* (no fstat of ours under the filter) */
	transports_share_prepare("a seccomp filter", SHUNT_R_SANDBOX);
	shunt_read_ahead(); /* (the filter may forbid them) */
	if (__atomic_exchange_n(&shunt_sandboxed, 1, __ATOMIC_ACQ_REL))
		return;
	shunt_lock_probe_off = 1; /* a dead lock holder is waited out (the bound), not probed */
	shunt_go_off(SHUNT_R_SANDBOX, "a seccomp filter");
}

/* The process set up an io_uring (interpose.c saw it): operations it
 * submits go to the kernel sockets, under the rings, and cannot be seen
 * from here.  Connections made from now on stay plain (reason io-uring);
 * each one accelerated before moves to TCP at the exact byte first, as
 * before a descriptor pass (move.c: the peer resends onto the socket what
 * our ring held unread), so that the ring's operations find the whole
 * stream on the socket.  One that cannot (a peer that shut its sending
 * side with bytes unread here - they are only in memory; a sandbox) is
 * named in a warning.  Offers and CONFIRMs still pending settle first:
 * a pending one's first bytes, or its client's word, are on no socket. */
static int uring_move(int fd, struct sk *s)
{
	int r = conn_move_retire(fd, s, SHUNT_R_IO_URING, "io_uring set up");

	return r < 0 ? r : 0;
}

void shunt_uring_seen(void)
{
	static int seen;
	int e = errno, *fds, n, left = 0, r = 0;

	if (__atomic_exchange_n(&seen, 1, __ATOMIC_ACQ_REL))
		return;
	shunt_go_off(SHUNT_R_IO_URING, "io_uring set up");
	rdv_offers_settle_all();
	inband_confirm_all(0);
	n = fdtab_conns(&fds);
	for (int i = 0; i < n; i++) {
		struct sk *s = fdtab_get(fds[i]);
		if (s && s->kind == SK_CONN && (r = uring_move(fds[i], s)))
			left++;
		sk_put(s);
	}
	free(fds);
	if (n < 0 || left)
		shunt_warn("io_uring set up with accelerated connections open: %d could not move to "
			   "TCP (%s), operations submitted through the ring on them would not see "
			   "their data; new connections stay plain (reason io-uring, "
			   "docs/architecture.md)", n < 0 ? -1 : left, strerror(n < 0 ? -n : -r));
	else
		shunt_log("io_uring set up: %d accelerated connection(s) moved to TCP; new connections "
			  "stay plain (reason io-uring)", n);
	errno = e;
}

/* fork() through the wrapper (interpose.c): the child's share of every
 * connection is taken here, in the parent, before the child exists (the
 * transport's fork_hold: shared memory's segment owners); forks that do not
 * pass the wrapper (glibc's own, in daemon()) take it in the child.  The
 * generation tells the child which are taken. */
static __thread uint64_t fork_gen_pre;

/* The fork's generation, drawn at its first need: a process with no
 * connection to hold (a forking server's clients kept plain) asks for no
 * random number a fork. */
SHUNT_CHILD_PATH static uint64_t gen_of(void *gen)
{
	uint64_t *g = gen;

	if (!*g)
		*g = draw_odd();
	return *g;
}

static void hold_for_child(int fd, struct sk *s, void *gen)
{
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind == SK_CONN && c && c->tp->fork_hold)
		c->tp->fork_hold(c, gen_of(gen));
	else if (s->kind == SK_TCP)
		stats_fork_mark(s);
	if (!s->is_client && s->has_tuple && !s->fork_pid)
		s->fork_pid = shunt_pid(); /* (before the fork: the child's copy has it too) */
}

static void unhold(int fd, struct sk *s, void *gen)
{
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind == SK_CONN && c && c->tp->fork_unhold)
		c->tp->fork_unhold(c, *(uint64_t *)gen);
}

/* The child holds every inherited connection too (those the fork()
 * wrapper took already carry its generation). */
SHUNT_CHILD_PATH static void hold_inherited(int fd, struct sk *s, void *gen)
{
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind == SK_CONN && c && c->tp->fork_child)
		c->tp->fork_child(c, gen_of(gen));
}

void shunt_fork_before(void)
{
	uint64_t gen = 0;

	rdv_offers_settle_all();
	inband_confirm_all(0); /* the slot is this process's (its queue pair stays here) */
	fdtab_each_held(hold_for_child, &gen);
	SHUNT_RESET(fork_gen_pre, gen);
}

void shunt_fork_after(pid_t pid)
{
	uint64_t gen = fork_gen_pre;

	SHUNT_RESET(fork_gen_pre, 0); /* (most often 0: no page of ours written after the fork) */
	if (pid < 0 && gen) /* no child: give its shares back */
		fdtab_each_held(unhold, &gen);
}

SHUNT_CHILD_PATH static void atfork_child(void)
{
	uint64_t gen = fork_gen_pre;

	base_atfork_child();
	shunt_lock_forget_self(shunt_pid());
	/* first: what follows takes them (tests/behave/fork_threads) */
	fdtab_atfork_child();
	ep_atfork_child();
	giveback_atfork_child();
	SHUNT_RESET(fork_gen_pre, 0);
	/* (none drawn before: at the first need - sandboxed, no getrandom;
	 * no stat either) */
	fdtab_each(hold_inherited, &gen);
	/* (the namespace and the id: read and drawn at first need - a
	 * program's unshare() before its fork is seen; sandboxed, the
	 * parent's stay: no stat, no getrandom under a filter) */
	shunt_mutex_reset(&proc_id_lock);
	rdv_atfork_child();
	bell_atfork_child();
	stats_atfork_child();
	transports_atfork_child();
}

/* A process made by clone() without CLONE_VM - libc's clone(), or the
 * system call through syscall() (vsftpd's isolated session processes) -
 * runs no fork handlers: ours run around it as around fork(), or the
 * child would take itself for its parent (a parent's close then ended
 * the connection under the child that serves it). */
void shunt_clone_before(void)
{
	shunt_fork_before();
	atfork_prepare();
}

void shunt_clone_child(void)
{
	atfork_child();
}

__attribute__((constructor)) static void shunt_init(void)
{
	const char *bad = NULL;
	int e = errno;

	base_atfork_child();
	real_init();
	if (!real_ready()) {
		errno = e;
		return;
	}
	if (shunt_config_parse(&shunt_cfg, environ, &bad))
		shunt_warn("invalid %s: its safe default applies (docs/configuration.md)", bad);
	shunt_log_on = shunt_cfg.log;
	shunt_log_file(getenv("SHUNT_LOG_FILE"));
	read_netns();
	proc_id = shunt_random64() | 1;
	__atomic_store_n(&proc_id_forks, shunt_forks(), __ATOMIC_RELEASE);
	shunt_ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (shunt_ncpus < 1)
		shunt_ncpus = 1;
	if (shunt_cfg.disabled)
		shunt_off_reason = SHUNT_R_POLICY;
	else
		open_dir();
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	shunt_active = 1;
	exec_env_save();
	exec_inherit();
	errno = e;
}
