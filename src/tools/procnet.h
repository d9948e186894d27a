/* SPDX-License-Identifier: MIT */
/* procnet.h - TCP sockets of a process's network namespace, by inode. */
#ifndef SHUNT_PROCNET_H
#define SHUNT_PROCNET_H
#include <stddef.h>
#include "shunt/wire.h"

struct procnet_sock {
	unsigned long long ino;
	struct shunt_addr local, remote;
};

struct procnet {
	struct procnet_sock *v;
	size_t n, cap;
};

/* One line of /proc/net/tcp or tcp6 (not the header); -EINVAL if malformed. */
int procnet_parse_line(const char *line, struct procnet_sock *out);
/* /proc/PID/net/tcp and tcp6, sorted by inode (t zeroed the first time). */
int procnet_load(struct procnet *t, unsigned pid);
/* The socket PID's descriptor FD is, if t holds it. */
const struct procnet_sock *procnet_of_fd(const struct procnet *t, unsigned pid, int fd);
/* Does a process hold a socket (TIME_WAIT's have no inode) connected to
 * remote from local port lport (0: any)? */
int procnet_holds(const struct procnet *t, uint16_t lport, const struct shunt_addr *remote);
void procnet_free(struct procnet *t);
#endif
