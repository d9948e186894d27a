/* SPDX-License-Identifier: MIT */
/*
 * interpose_libc.c - libc's functions that make a descriptor through
 * libc's own internal calls, past shunt's open()/pipe() wrappers: fopen,
 * opendir, tmpfile, popen (and system, freopen: their children and
 * closes, below).  When one fails with EMFILE while shunt holds
 * descriptors of its own (about one per accelerated connection), idle
 * connections move to TCP and give theirs back, and the call is made again
 * (giveback.c) - as for open() and the rest: the program opens whatever
 * TCP would have let it open (issue #13, item 9).  And POSIX AIO, whose
 * threads read and write with libc's internal calls.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include "shim.h"
#include "../base/real.h"

#define AGAIN_IF_NULL_EMFILE(p, call)                                   \
	do {                                                            \
		if (!(p) && errno == EMFILE && fd_give_back() > 0)      \
			(p) = (call);                                   \
	} while (0)

EXPORT FILE *fopen(const char *path, const char *mode)
{
	FILE *f = R(fopen)(path, mode);

	AGAIN_IF_NULL_EMFILE(f, R(fopen)(path, mode));
	return f;
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	FILE *f = R(fopen64)(path, mode);

	AGAIN_IF_NULL_EMFILE(f, R(fopen64)(path, mode));
	return f;
}

EXPORT DIR *opendir(const char *path)
{
	DIR *d = R(opendir)(path);

	AGAIN_IF_NULL_EMFILE(d, R(opendir)(path));
	return d;
}

EXPORT FILE *tmpfile(void)
{
	FILE *f = R(tmpfile)();

	AGAIN_IF_NULL_EMFILE(f, R(tmpfile)());
	return f;
}

/* Its pipe is made before its child: a failed one leaves no child.  The
 * child, a shell spawned inside libc, inherits our standard descriptors:
 * a connection there moves to TCP first (interpose_proc.c, posix_spawn). */
EXPORT FILE *popen(const char *cmd, const char *type)
{
	FILE *f;

	spawn_prepare(1, "a standard descriptor of a system()/popen() shell");
	f = R(popen)(cmd, type);

	AGAIN_IF_NULL_EMFILE(f, R(popen)(cmd, type));
	return f;
}

/* The same for system()'s child (a shell given our standard output, which
 * an inetd-style service's connection may be). */
EXPORT int system(const char *cmd)
{
	if (cmd)
		spawn_prepare(1, "a standard descriptor of a system()/popen() shell");
	return R(system)(cmd);
}

/* POSIX AIO: glibc's helper threads read and write the descriptor with
 * libc's internal calls, past the wrappers - on an accelerated connection
 * they would see the kernel socket while the bytes are in the rings.  So
 * it moves to TCP at the exact byte first (reason unsupported-feature),
 * as for C stdio; for lio_listio, each descriptor its list names.  (glibc
 * has an older lio_listio too, GLIBC_2.2.5's, for programs linked before
 * 2.4: their calls reach the current one through us.) */
static int aio_prepare(int fd, const void *next)
{
	struct sk *s;

	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	if ((s = fdtab_get(fd))) {
		if (s->kind == SK_CONN)
			conn_move_for(s, "POSIX AIO (aio_read, aio_write, lio_listio)");
		sk_put(s);
	}
	return 0;
}

EXPORT int aio_read(struct aiocb *cb)
{
	return aio_prepare(cb->aio_fildes, R(aio_read)) ?: R(aio_read)(cb);
}

EXPORT int aio_write(struct aiocb *cb)
{
	return aio_prepare(cb->aio_fildes, R(aio_write)) ?: R(aio_write)(cb);
}

EXPORT int aio_read64(struct aiocb64 *cb)
{
	return aio_prepare(cb->aio_fildes, R(aio_read64)) ?: R(aio_read64)(cb);
}

EXPORT int aio_write64(struct aiocb64 *cb)
{
	return aio_prepare(cb->aio_fildes, R(aio_write64)) ?: R(aio_write64)(cb);
}

/* (a list glibc refuses - a mode it does not know - moves nothing; it
 * skips NULL entries and LIO_NOP, and so do we) */
#define LIO_PREPARE(mode, list, n, next)                                                      \
	do {                                                                                  \
		if (!(next)) {                                                                \
			errno = ENOSYS;                                                       \
			return -1;                                                            \
		}                                                                             \
		for (int i_ = 0; ((mode) == LIO_WAIT || (mode) == LIO_NOWAIT) && i_ < (n); i_++) \
			if ((list)[i_] && (list)[i_]->aio_lio_opcode != LIO_NOP)              \
				aio_prepare((list)[i_]->aio_fildes, (next));                   \
	} while (0)

EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	LIO_PREPARE(mode, list, n, R(lio_listio));
	return R(lio_listio)(mode, list, n, sev);
}

EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	LIO_PREPARE(mode, list, n, R(lio_listio64));
	return R(lio_listio64)(mode, list, n, sev);
}
