/* SPDX-License-Identifier: MIT */
/* core.c - library start-up, configuration, logging, fork hooks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"
#include "real.h"
#include "../common/rdvdir.h"
#include "../common/loadavg.h"

extern char **environ;
struct shunt_config shunt_cfg;
int shunt_active;
static uint64_t netns_ino;
static uint64_t proc_id;
static pid_t my_pid;
static _Atomic unsigned rand_epoch = 1;
static __thread uint64_t rand_state;
static __thread unsigned rand_seen;

/* getpid() without a system call; refreshed in the fork hook. */
pid_t shunt_pid(void)
{
	return my_pid;
}

/* A fast per-thread generator for nonces and probe orders (reseeded from
 * the kernel per thread and after fork, so no two processes share it). */
uint64_t shunt_fast_random(void)
{
	unsigned e = __atomic_load_n(&rand_epoch, __ATOMIC_RELAXED);

	if (rand_seen != e || !rand_state) {
		rand_state = shunt_random64() | 1;
		rand_seen = e;
	}
	rand_state ^= rand_state << 13;
	rand_state ^= rand_state >> 7;
	rand_state ^= rand_state << 17;
	return rand_state * 0x2545F4914F6CDD1Dull;
}
/* Spinning instead of sleeping pays only while the thread that will end
 * the wait has a CPU of its own.  With more threads waiting than CPUs, a
 * spinner takes the CPU that thread needs: 8 threads a side setting up
 * connections on 2 CPUs spent a third of their CPU time spinning (issue
 * #13, item 10).  So nobody spins while threads wait for a CPU, and at
 * most half the CPUs (at least one) spin for a process at once; its other
 * waiters sleep at once.  A turn is a deadline, not a count: a thread
 * that never gives its turn back (a signal handler that jumped out of a
 * wait, a fork) loses it when its budget is over. */
#define SPIN_TURNS 64
static _Atomic uint64_t spin_turn[SPIN_TURNS];

/* How many threads are runnable now, host-wide: /proc/loadavg's fourth
 * field (the kernel's nr_running, spinners included).  Looked at by one
 * thread at most every CROWD_CHECK_NS; 0 until known. */
#define CROWD_CHECK_NS 10000000ull
static _Atomic uint64_t crowd_checked;
static _Atomic long running_now;

static long cpus_running(uint64_t now)
{
	uint64_t last = __atomic_load_n(&crowd_checked, __ATOMIC_RELAXED);
	char buf[128];
	long running;
	ssize_t n;
	int fd, e;

	if (now - last < CROWD_CHECK_NS || shunt_sandboxed ||
	    !__atomic_compare_exchange_n(&crowd_checked, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return __atomic_load_n(&running_now, __ATOMIC_RELAXED);
	e = errno;
	fd = real.open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : real.read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		real.close(fd);
	errno = e;
	running = n > 0 ? shunt_loadavg_running(buf, (size_t)n) : -1;
	if (running >= 0)
		__atomic_store_n(&running_now, running, __ATOMIC_RELAXED);
	return __atomic_load_n(&running_now, __ATOMIC_RELAXED);
}

int shunt_cpus_crowded(uint64_t now)
{
	return cpus_running(now) > shunt_ncpus;
}

int shunt_cpus_overloaded(uint64_t now)
{
	return cpus_running(now) >= 2 * (long)shunt_ncpus;
}

int shunt_spin_begin(uint64_t budget_ns, uint64_t now)
{
	int cap = shunt_ncpus / 2 > 1 ? shunt_ncpus / 2 : 1;

	if (shunt_cfg.spin_ns < 0) /* SHUNT_SPIN_US=-1: the user chose to busy-poll */
		return SPIN_TURNS + 1;
	if (shunt_cpus_crowded(now))
		return 0;
	if (cap > SPIN_TURNS)
		cap = SPIN_TURNS;
	for (int i = 0; i < cap; i++) {
		uint64_t d = __atomic_load_n(&spin_turn[i], __ATOMIC_RELAXED);
		if (d <= now && __atomic_compare_exchange_n(&spin_turn[i], &d, now + budget_ns, 0,
							    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return i + 1;
	}
	return 0;
}

void shunt_spin_end(int turn)
{
	if (turn > 0 && turn <= SPIN_TURNS)
		__atomic_store_n(&spin_turn[turn - 1], 0, __ATOMIC_RELEASE);
}

static mode_t file_mode = 0600;
int shunt_dirfd = -1;
int shunt_off_reason;
int shunt_sandboxed;
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

/* Names this process's files in SHUNT_DIR (s<id> stats, c<id> socket). */
uint64_t shunt_proc_id(void)
{
	return proc_id;
}

uint64_t shunt_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t shunt_random64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v)
		v = shunt_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)&v;
	return v;
}

uint64_t shunt_netns_ino(void)
{
	return netns_ino;
}

static void vlog(const char *fmt, va_list ap)
{
	char buf[512];
	int n, e = errno;

	n = snprintf(buf, sizeof buf, "shunt[%d]: ", (int)getpid());
	n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	(void)!real.write(2, buf, (size_t)n);
	errno = e;
}

void shunt_log(const char *fmt, ...)
{
	va_list ap;

	if (!shunt_cfg.log)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* What the user must see even without SHUNT_LOG: a refused setting. */
void shunt_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

static void read_netns(void)
{
	struct stat st;

	netns_ino = stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
}


/* Before fork: RDMA connections move to TCP, so the child can use them
 * (unless SHUNT_RDMA_FORK=keep: for programs whose children never touch
 * them, such as a snapshotting redis). */
static void atfork_prepare(void)
{
	if (!shunt_cfg.rdma_fork_keep)
		transports_share_prepare("fork", SHUNT_R_FORK);
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
	transports_share_prepare("a seccomp filter", SHUNT_R_SANDBOX);
	if (__atomic_exchange_n(&shunt_sandboxed, 1, __ATOMIC_ACQ_REL))
		return;
	shunt_lock_probe_off = 1; /* a dead lock holder is waited out (the bound), not probed */
	if (!shunt_off_reason)
		shunt_off_reason = SHUNT_R_SANDBOX;
}

/* The process set up an io_uring (interpose.c saw it): operations it
 * submits go to the kernel sockets, under the rings, and cannot be seen
 * from here.  Connections made from now on stay plain (reason io-uring);
 * ones accelerated before cannot be moved and are named in a warning. */
static void count_accel(int fd, struct sk *s, void *n)
{
	(void)fd;
	*(int *)n += s->kind == SK_CONN;
}

void shunt_uring_seen(void)
{
	static int seen;
	int n = 0;

	if (__atomic_exchange_n(&seen, 1, __ATOMIC_ACQ_REL))
		return;
	if (!shunt_off_reason)
		shunt_off_reason = SHUNT_R_IO_URING;
	fdtab_each(count_accel, &n);
	if (n)
		shunt_warn("io_uring set up with %d accelerated connection(s) open: operations "
			   "submitted through it on them would not see their data; new "
			   "connections stay plain (reason io-uring, docs/architecture.md)", n);
	else
		shunt_log("io_uring set up: new connections stay plain (reason io-uring)");
}

/* fork() through the wrapper (interpose.c): the child's share of every
 * connection is taken here, in the parent, before the child exists (the
 * transport's fork_hold: shared memory's segment owners); forks that do not
 * pass the wrapper (glibc's own, in daemon()) take it in the child.  The
 * generation tells the child which are taken. */
static __thread uint64_t fork_gen_pre;

static void hold_for_child(int fd, struct sk *s, void *gen)
{
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind == SK_CONN && c && c->tp->fork_hold)
		c->tp->fork_hold(c, *(uint64_t *)gen);
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
static void hold_inherited(int fd, struct sk *s, void *gen)
{
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind == SK_CONN && c && c->tp->fork_child)
		c->tp->fork_child(c, *(uint64_t *)gen);
}

void shunt_fork_before(void)
{
	uint64_t gen = shunt_random64() | 1;

	fdtab_each(hold_for_child, &gen);
	fork_gen_pre = gen;
}

void shunt_fork_after(pid_t pid)
{
	uint64_t gen = fork_gen_pre;

	fork_gen_pre = 0;
	if (pid < 0 && gen) /* no child: give its shares back */
		fdtab_each(unhold, &gen);
}

static void atfork_child(void)
{
	uint64_t gen = fork_gen_pre;

	my_pid = getpid();
	shunt_lock_forget_self();
	fork_gen_pre = 0;
	/* sandboxed: no getrandom, no stat (the clock is the vDSO's) */
	if (!gen)
		gen = shunt_sandboxed ? (shunt_now_ns() << 1 ^ (uint64_t)my_pid << 40) | 1
				      : shunt_random64() | 1;
	__atomic_add_fetch(&rand_epoch, 1, __ATOMIC_RELAXED);
	fdtab_each(hold_inherited, &gen);
	if (!shunt_sandboxed) {
		read_netns();
		proc_id = shunt_random64();
	}
	rdv_atfork_child();
	bell_atfork_child();
	stats_atfork_child();
	transports_atfork_child();
}

__attribute__((constructor)) static void shunt_init(void)
{
	const char *bad = NULL;
	int e = errno;

	my_pid = getpid();
	real_init();
	if (!real_ready()) {
		errno = e;
		return;
	}
	if (shunt_config_parse(&shunt_cfg, environ, &bad))
		shunt_warn("invalid %s: its safe default applies (docs/configuration.md)", bad);
	read_netns();
	proc_id = shunt_random64();
	shunt_ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (shunt_ncpus < 1)
		shunt_ncpus = 1;
	if (shunt_cfg.disabled)
		shunt_off_reason = SHUNT_R_POLICY;
	else
		open_dir();
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	shunt_active = 1;
	exec_inherit();
	errno = e;
}
