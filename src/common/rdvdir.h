/* SPDX-License-Identifier: MIT */
/* rdvdir.h - the rendezvous directory, opened only when it is safe. */
#ifndef SHUNT_RDVDIR_H
#define SHUNT_RDVDIR_H
#include <stddef.h>
#include <sys/types.h>

/* What kind of trust domain the directory is. */
enum rdvdir_kind {
	RDVDIR_PRIVATE = 0, /* owned by this euid, writable by it alone */
	RDVDIR_SHARED = 1,  /* configured (SHUNT_DIR), group/other-writable and sticky */
};

/*
 * Open the rendezvous directory `path` (creating it 0700 when create is set),
 * without following a symlink in its last component, and check it:
 *   - a directory owned by our effective uid (or, when `explicit`: by root);
 *   - writable by no one else, unless `explicit` (the operator chose it) and
 *     sticky, so that no member can remove or rename another's files.
 * Returns the directory fd (O_PATH-free, O_CLOEXEC) or -errno with a one-line
 * explanation in why.  *kind says what it is.
 */
int rdvdir_open(const char *path, int create, int explicit, enum rdvdir_kind *kind, char *why,
		size_t whylen);

/* The directory a process of this uid uses when SHUNT_DIR is not set:
 * /tmp/shunt-<uid>, or, when that name is not safe (another user took it),
 * /run/user/<uid>/shunt if /run/user/<uid> is ours.  Returns the fd or
 * -errno; path receives the name used, why the refusal of the first. */
int rdvdir_open_default(char *path, size_t pathlen, int create, enum rdvdir_kind *kind,
			char *why, size_t whylen);

/* ---- what dead processes left (rdvdir.c rdvdir_reap) ---- */
/* A file younger than this is never judged: its process makes it, then
 * takes its lock. */
#define RDVDIR_YOUNG_S 2

/* What a directory entry's name is: 's' a process's stats file (s<id>,
 * with its socket c<id>), 'p' a port's registry (p<port>), 't' a
 * registry's temporary (p<port>.<random>), 0 anything else. */
int rdvdir_entry_kind(const char *name);

/* The file `name` of directory dirfd, open as fd (O_NOFOLLOW, O_NONBLOCK):
 * if it is our user's, not young, and nobody holds its lock - its
 * process is gone, however it ended - it is removed (an s<id> file with
 * its c<id> socket; a registry under its exclusive lock, as its last
 * listener does).  1 if removed. */
int rdvdir_reap(int dirfd, const char *name, int fd);
#endif
