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
#include <sys/stat.h>
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
