/* SPDX-License-Identifier: MIT */
/*
 * dirsweep.c - what killed processes left in the rendezvous directory goes.
 *
 * A process that ends cleanly removes its files; one killed (SIGKILL, a
 * SIGTERM it does not handle, a crash) leaves its stats file s<id> and
 * socket c<id>, and - a server - its port's registry p<port>: 100-300 KB
 * a file, a pair more for every server killed on a port of its own (a
 * test suite's, a supervisor's restarts), for as long as nobody ran
 * `shunt ss`.  So a process of ours sweeps too: as it ends (cleanly, with
 * files of its own) and as it starts to listen, at most once every
 * SWEEP_EVERY_S seconds for the directory's user (a mark file's time,
 * lastsweep-<uid>, under its lock: one sweeper at a time), removing every file
 * of the user's whose lock nobody holds (src/common/rdvdir.c rdvdir_reap:
 * the rule `shunt ss` and liveness probes follow).  Never in a seccomp
 * sandbox (no system call of shunt's own there); the directory is the
 * checked one, each entry opened without following a link or waiting on a
 * FIFO, and only SWEEP_MAX entries looked at a time.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdv.h"
#include "../base/real.h"
#include "../common/rdvdir.h"

#define SWEEP_EVERY_S 10
#define SWEEP_MAX 4096

/* Is it this user's turn to sweep?  The mark's descriptor (locked, its
 * time now) if so, else -1. */
static int sweep_turn(void)
{
	char mark[32];
	struct timespec now;
	struct stat st;
	int fd;

	snprintf(mark, sizeof mark, "lastsweep-%u", (unsigned)geteuid());
	if (clock_gettime(CLOCK_REALTIME, &now) ||
	    (!fstatat(shunt_dirfd, mark, &st, AT_SYMLINK_NOFOLLOW) && now.tv_sec - st.st_mtim.tv_sec < SWEEP_EVERY_S &&
	     st.st_mtim.tv_sec <= now.tv_sec))
		return -1;
	fd = real.openat(shunt_dirfd, mark, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || flock(fd, LOCK_EX | LOCK_NB) ||
	    futimens(fd, NULL)) {
		real.close(fd);
		return -1;
	}
	return fd;
}

void rdv_dir_sweep(void)
{
	unsigned seen = 0;
	struct dirent *de;
	int mark, fd;
	DIR *d;

	if (shunt_dirfd < 0 || shunt_sandboxed || (mark = sweep_turn()) < 0)
		return;
	fd = real.openat(shunt_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && !(d = fdopendir(fd))) {
		real.close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		while (seen++ < SWEEP_MAX && (de = readdir(d))) {
			int f;
			if (!rdvdir_entry_kind(de->d_name))
				continue;
			f = real.openat(shunt_dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (f < 0)
				continue;
			if (rdvdir_reap(shunt_dirfd, de->d_name, f))
				shunt_log("removed %s, left by a process that ended without cleaning up", de->d_name);
			real.close(f);
		}
		closedir(d);
	}
	real.close(mark);
}
