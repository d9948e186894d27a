/* SPDX-License-Identifier: MIT */
/*
 * rdvdir.c - the rendezvous directory is a trust boundary.
 *
 * Everything in it (port registries, per-process sockets and stats files)
 * decides who gets a process's connections, so a directory another user
 * could have made, or could write, is refused: shunt runs plain TCP then,
 * with reason "unsafe-dir" and a warning.  The caller opens every file in it
 * relative to the fd returned here (openat with O_NOFOLLOW), never by a path
 * that could be swapped after the check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdvdir.h"

int rdvdir_open(const char *path, int create, int explicit, enum rdvdir_kind *kind, char *why,
		size_t whylen)
{
	uid_t me = geteuid();
	struct stat st;
	int fd, e;

	*kind = RDVDIR_PRIVATE;
	if (create && mkdir(path, 0700) && errno != EEXIST) {
		e = errno;
		snprintf(why, whylen, "cannot create %s: %s", path, strerror(e));
		return -e;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		snprintf(why, whylen, "%s: %s", path,
			 e == ELOOP || e == ENOTDIR ? "a symlink or not a directory" : strerror(e));
		return -e;
	}
	if (fstat(fd, &st)) {
		e = errno;
		close(fd);
		snprintf(why, whylen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (st.st_uid != me && !(explicit && st.st_uid == 0)) {
		snprintf(why, whylen, "%s is owned by uid %u, not %u", path, (unsigned)st.st_uid,
			 (unsigned)me);
		close(fd);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		if (!explicit || !(st.st_mode & S_ISVTX)) {
			snprintf(why, whylen, "%s is writable by %s (mode %04o)%s", path,
				 st.st_mode & S_IWOTH ? "other users" : "its group",
				 (unsigned)(st.st_mode & 07777),
				 explicit ? ": a shared SHUNT_DIR must be sticky (chmod +t)" : "");
			close(fd);
			return -EPERM;
		}
		*kind = RDVDIR_SHARED;
	}
	return fd;
}

int rdvdir_open_default(char *path, size_t pathlen, int create, enum rdvdir_kind *kind,
			char *why, size_t whylen)
{
	char base[64], ignored[160];
	int fd, bfd;

	snprintf(path, pathlen, "/tmp/shunt-%u", (unsigned)geteuid());
	fd = rdvdir_open(path, create, 0, kind, why, whylen);
	if (fd >= 0)
		return fd;
	/* Taken by someone else: the per-user runtime directory, when the
	 * system keeps one for us (systemd-logind), cannot be - if it passes
	 * the same checks. */
	snprintf(base, sizeof base, "/run/user/%u", (unsigned)geteuid());
	bfd = rdvdir_open(base, 0, 0, kind, ignored, sizeof ignored);
	if (bfd < 0)
		return fd;
	close(bfd);
	snprintf(path, pathlen, "%s/shunt", base);
	return rdvdir_open(path, create, 0, kind, ignored, sizeof ignored);
}

/* ---- what dead processes left ----
 * A process holds a shared lock on its s<id> file for its life (stats.c),
 * a listener one on its port's p<port> registry (registry.c); the kernel
 * drops them with the process, however it ended.  A clean exit removes
 * its files; a killed process (SIGKILL, SIGTERM without a handler, a
 * crash) leaves them - 100-300 KB each: a pair more for every server
 * killed on a port of its own, until `shunt ss` or a sweep
 * (src/setup/dirsweep.c) finds them. */

static int all_of(const char *s, size_t n, const char *set)
{
	return n && strspn(s, set) == n;
}

int rdvdir_entry_kind(const char *name)
{
	size_t n = strlen(name);
	const char *dot = strchr(name, '.');

	if (name[0] == 's' && n == 17 && all_of(name + 1, 16, "0123456789abcdef"))
		return 's';
	if (name[0] != 'p')
		return 0;
	if (!dot)
		return n <= 6 && all_of(name + 1, n - 1, "0123456789") ? 'p' : 0;
	return dot - name <= 6 && all_of(name + 1, (size_t)(dot - name - 1), "0123456789") &&
			       strlen(dot + 1) == 16 && all_of(dot + 1, 16, "0123456789abcdef")
		       ? 't'
		       : 0;
}

int rdvdir_reap(int dirfd, const char *name, int fd)
{
	int kind = rdvdir_entry_kind(name), gone = 0;
	struct stat st, named;
	struct timespec now;
	char sock[32];

	if (!kind || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    clock_gettime(CLOCK_REALTIME, &now) || now.tv_sec - st.st_ctim.tv_sec < RDVDIR_YOUNG_S)
		return 0;
	if (kind == 't') /* made, linked and removed in one call: its maker died */
		return !unlinkat(dirfd, name, 0);
	if (flock(fd, LOCK_EX | LOCK_NB))
		return 0; /* alive */
	/* the name may lead to a new file by now (a listener replaced it) */
	if (!fstatat(dirfd, name, &named, AT_SYMLINK_NOFOLLOW) && named.st_ino == st.st_ino &&
	    named.st_dev == st.st_dev && !unlinkat(dirfd, name, 0)) {
		gone = 1;
		if (kind == 's') {
			snprintf(sock, sizeof sock, "c%s", name + 1);
			unlinkat(dirfd, sock, 0);
		}
	}
	flock(fd, LOCK_UN);
	return gone;
}
