/* SPDX-License-Identifier: MIT */
/*
 * hidefd.c - shunt's own descriptors: moved out of the application's low
 * numbers (when RLIMIT_NOFILE leaves room: above half of it, or 512) and marked,
 * so that the application's close(), close_range() and closefrom() - daemons
 * close "all" descriptors - leave them alone (the shim's wrappers ask
 * fdtab_is_internal).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base.h"
#include "real.h"

#define INTERNAL_MAX (1u << 20)
static _Atomic uint64_t internal[INTERNAL_MAX / 64];
static int hide_base = -1;

static void mark(int fd, int on)
{
	uint64_t bit = 1ull << ((unsigned)fd % 64);

	if (fd < 0 || (unsigned)fd >= INTERNAL_MAX)
		return;
	if (on)
		__atomic_fetch_or(&internal[(unsigned)fd / 64], bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&internal[(unsigned)fd / 64], ~bit, __ATOMIC_RELAXED);
}

int fdtab_is_internal(int fd)
{
	if (fd < 0 || (unsigned)fd >= INTERNAL_MAX)
		return 0;
	return !!(__atomic_load_n(&internal[(unsigned)fd / 64], __ATOMIC_RELAXED) &
		  (1ull << ((unsigned)fd % 64)));
}

/* The upper half of the limit as the process loaded, up to HIDE_MAX:
 * programs put their own files on low numbers they never opened (a
 * shell's `exec 7>file`, a daemon's dup2() onto 3..9), and Debian's
 * default limit is 1,024 (before the thirty-seventh session only a limit
 * of 2,048 or more moved them: under 1,024 they sat at 3-9).  Below
 * HIDE_MIN there is no half to spare.  Not higher than HIDE_MAX: the
 * kernel sizes a process's descriptor table to its highest number (to a
 * power of two), and under a container's 1,048,576 half of it made every
 * process's table 1,048,576 slots - 8 MiB of kernel memory, charged to its
 * cgroup, copied by each fork (milliseconds; until the forty-seventh
 * session, tests/behave/fd_table).  At 512 the table has the 1,024 slots
 * Debian's default limit gives shunt's processes anyway. */
#define HIDE_MIN 64
#define HIDE_MAX 512

static int base(void)
{
	struct rlimit rl;

	if (hide_base < 0)
		hide_base = !getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur >= HIDE_MIN
				    ? (rl.rlim_cur / 2 < HIDE_MAX ? (int)(rl.rlim_cur / 2) : HIDE_MAX)
				    : 0;
	return hide_base;
}

/* ---- room left for the program ----
 *
 * A program's own call that meets EMFILE makes shunt give its descriptors
 * back and is made again (giveback.c), but libc's calls inside libc -
 * getaddrinfo's /etc/hosts and DNS socket, getpwnam's files, syslog's
 * socket - and a descriptor received with SCM_RIGHTS (the kernel drops
 * what does not fit) cannot be made again: under TCP they would have
 * found room that shunt's descriptors took.  So the last FD_RESERVE
 * numbers below RLIMIT_NOFILE are the program's: shunt takes none of them
 * for a connection's duplicate, and a descriptor the program gets there
 * makes shunt give some back at once.  Since the kernel hands out the
 * lowest free number, one that high means the table is that full.  The
 * limit is read again whenever the mark is met or EMFILE is (a program
 * that raised or lowered it). */
#define FD_RESERVE 16

static _Atomic int reserve_mark = -1;

int fd_reserve_mark(int reread)
{
	int m = __atomic_load_n(&reserve_mark, __ATOMIC_RELAXED);
	struct rlimit rl;

	if (m < 0 || reread) {
		m = INT_MAX;
		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur <= (rlim_t)INT_MAX)
			m = rl.rlim_cur > 4 * FD_RESERVE ? (int)rl.rlim_cur - FD_RESERVE : INT_MAX;
		__atomic_store_n(&reserve_mark, m, __ATOMIC_RELAXED);
	}
	return m;
}

/* fd, just made, is in the program's reserve (the limit read again). */
int fd_in_reserve(int fd)
{
	return fd >= fd_reserve_mark(0) && fd >= fd_reserve_mark(1);
}

/* A close-on-exec duplicate of fd among shunt's own descriptors, in one
 * call; -1 with EMFILE rather than one of the program's reserve. */
int fd_dup_hidden(int fd)
{
	int n = real.fcntl(fd, F_DUPFD_CLOEXEC, base());

	if (n >= 0 && base() && fd_in_reserve(n)) { /* the upper half is full: below it */
		real.close(n);
		n = -1;
	}
	if (n < 0 && base())
		n = real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (n >= 0 && fd_in_reserve(n)) {
		real.close(n);
		errno = EMFILE;
		return -1;
	}
	if (n >= 0)
		mark(n, 1);
	return n;
}

int fd_hide(int fd)
{
	int n;

	if (fd < 0)
		return fd;
	if (base() && fd < hide_base) {
		n = real.fcntl(fd, F_DUPFD_CLOEXEC, hide_base);
		if (n >= 0) {
			real.close(fd);
			fd = n;
		}
	}
	mark(fd, 1);
	return fd;
}

/* A descriptor a library opened for shunt (libibverbs' device and
 * channel): its number stays, close() and close_range() leave it alone. */
void fd_mark_internal(int fd)
{
	mark(fd, 1);
}

void fd_unmark_internal(int fd)
{
	if (fd >= 0)
		mark(fd, 0);
}

void fd_close_internal(int fd)
{
	if (fd < 0)
		return;
	mark(fd, 0);
	real.close(fd);
}

/* An eventfd: what a doorbell must be (a peer, or whoever wrote
 * SHUNT_INHERIT, may hand us anything). */
int fd_is_eventfd(int fd)
{
	char path[32], target[32];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof target - 1);
	if (n > 0) {
		target[n] = 0;
		return !strcmp(target, "anon_inode:[eventfd]");
	}
	/* no /proc (a chroot, a sandbox): at least an anonymous inode, never
	 * a terminal, pipe, file or socket the program itself uses */
	return !fstat(fd, &st) && (st.st_mode & S_IFMT) == 0;
}

/* The first of shunt's descriptors in [from, last], or UINT_MAX: a word of
 * the marks at a time. */
unsigned fd_next_internal(unsigned from, unsigned last)
{
	unsigned end = last < INTERNAL_MAX ? last : INTERNAL_MAX - 1;

	for (unsigned fd = from; fd <= end; fd = (fd | 63) + 1) {
		uint64_t w = __atomic_load_n(&internal[fd / 64], __ATOMIC_RELAXED) >> (fd % 64);
		if (w) {
			fd += (unsigned)__builtin_ctzll(w);
			return fd <= end ? fd : UINT_MAX;
		}
	}
	return UINT_MAX;
}
