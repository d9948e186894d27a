/* SPDX-License-Identifier: MIT */
/*
 * interpose.h - what the wrappers share (interpose*.c): errno is set here,
 * at the edge, once (musl's __syscall_ret).
 */
#ifndef SHUNT_INTERPOSE_H
#define SHUNT_INTERPOSE_H
#include <errno.h>
#include "shim.h"

static inline long edge(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* A managed socket in the given kind, with a reference, or NULL. */
static inline struct sk *get_kind(int fd, int kind)
{
	struct sk *s = fdtab_get(fd);

	if (s && s->kind != kind) {
		sk_put(s);
		return NULL;
	}
	return s;
}

#endif
