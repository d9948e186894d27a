/* SPDX-License-Identifier: MIT */
/*
 * peercred.c - who owns the other end of a TCP connection on this host.
 *
 * In a shared rendezvous directory (an operator's SHUNT_DIR that several
 * users write), a message or an offer names a process by a file any member
 * could have made.  Before a connection's bytes move to shared memory, the
 * end that hands out (or accepts) a segment checks that the process it
 * deals with belongs to the user who owns the kernel socket at the other
 * end of this very connection, as sock_diag (the kernel's own table, what
 * `ss -e` reads) reports it.  In a private directory only our own user can
 * reach us, and no lookup is made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../shim/shim.h"
#include "../base/real.h"

static int v4mapped(const struct shunt_addr *a)
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(a->ip, pfx, sizeof pfx);
}

/* The uid of the TCP socket whose own address is `src` and whose peer is
 * `dst`, or -errno (-ENOENT: no such socket in this network namespace).
 * An accepted socket belongs to the user of the process that accepted it
 * (the kernel sets its owner when accept() grafts it), so a worker that
 * runs as another user than its listener's owns what it serves. */
int tcp_owner_uid(const struct shunt_addr *src, const struct shunt_addr *dst, uint32_t *uid)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req = { .nh = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			  .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		  .r = { .sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u,
			 .id = { .idiag_sport = htons(src->port), .idiag_dport = htons(dst->port),
				 .idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } } } };
	union { char buf[1024]; struct nlmsghdr align; } u;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	int fd, r = -ENOENT;
	ssize_t n;

	if (v4mapped(src) && v4mapped(dst)) {
		req.r.sdiag_family = AF_INET;
		memcpy(req.r.id.idiag_src, src->ip + 12, 4);
		memcpy(req.r.id.idiag_dst, dst->ip + 12, 4);
	} else {
		req.r.sdiag_family = AF_INET6;
		memcpy(req.r.id.idiag_src, src->ip, 16);
		memcpy(req.r.id.idiag_dst, dst->ip, 16);
	}
	fd = real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	if (real.sendto(fd, &req, sizeof req, 0, (void *)&nl, sizeof nl) != (ssize_t)sizeof req) {
		r = -errno;
		goto out;
	}
	n = real.recv(fd, u.buf, sizeof u.buf, 0);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) || !NLMSG_OK(&u.align, (unsigned)n))
		goto out;
	if (u.align.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
		const struct inet_diag_msg *m = NLMSG_DATA(&u.align);
		*uid = m->idiag_uid;
		r = 0;
	}
out:
	real.close(fd);
	return r;
}
