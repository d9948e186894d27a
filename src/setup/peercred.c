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
 *
 * The lookup's netlink socket is made once a process and kept (one of
 * shunt's hidden descriptors): made and closed for each lookup it cost
 * 9.4 us where the query alone costs 3.7 (each end of a connection across
 * users makes one - nginx's www-data workers and their clients).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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

static int diag_fd = -1;
static pid_t diag_pid; /* the process that made it (a child makes its own) */
static pthread_mutex_t diag_lock = PTHREAD_MUTEX_INITIALIZER;

/* The query on the process's socket (made if need be), its answer into
 * u: its length, or -errno.  Each query its own sequence number, and only
 * the answer that carries it counts: one left unread by a call cut short
 * (a signal in recv) is never taken for the next one's.  diag_lock held. */
static ssize_t diag_query(struct nlmsghdr *req, void *u, size_t ulen)
{
	static uint32_t seq;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	const struct nlmsghdr *h = u;
	ssize_t n;

	if (diag_fd < 0 || diag_pid != shunt_pid()) {
		int fd = real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		if (fd < 0)
			return -errno;
		diag_fd = fd_hide(fd);
		diag_pid = shunt_pid();
	}
	req->nlmsg_seq = ++seq ? seq : ++seq;
	if (real.sendto(diag_fd, req, req->nlmsg_len, 0, (void *)&nl, sizeof nl) != (ssize_t)req->nlmsg_len)
		return -errno;
	for (int stale = 0; stale < 64; stale++) {
		n = real.recv(diag_fd, u, ulen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n >= (ssize_t)sizeof *h && h->nlmsg_seq == req->nlmsg_seq)
			return n;
	}
	return -EPROTO;
}

/* A forked child: the parent's socket is not its own (its answers could go
 * to either process); its first lookup makes one. */
SHUNT_CHILD_PATH void peercred_atfork_child(void)
{
	if (diag_fd >= 0)
		fd_close_internal(diag_fd);
	SHUNT_RESET(diag_fd, -1);
	shunt_mutex_reset(&diag_lock);
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
	int r = -ENOENT, cs;
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
	/* (no cancellation point with the lock held: a query and its
	 * answer go together) */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	shunt_mutex_lock(&diag_lock);
	n = diag_query(&req.nh, u.buf, sizeof u.buf);
	shunt_mutex_unlock(&diag_lock);
	pthread_setcancelstate(cs, NULL);
	if (n < 0)
		return (int)n;
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) || !NLMSG_OK(&u.align, (unsigned)n))
		return r;
	if (u.align.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
		const struct inet_diag_msg *m = NLMSG_DATA(&u.align);
		*uid = m->idiag_uid;
		r = 0;
	}
	return r;
}

/* Could a listener bound to a (family fam, address bytes ip) take a
 * connection to dst?  The wildcard or dst's own address; an IPv6 wildcard
 * may take IPv4 too (dual stack) - counted, the safe side. */
static int listen_covers(int fam, const uint8_t *ip, const struct shunt_addr *dst)
{
	static const uint8_t zero[16];

	if (fam == AF_INET)
		return v4mapped(dst) && (!memcmp(ip, zero, 4) || !memcmp(ip, dst->ip + 12, 4));
	return !memcmp(ip, zero, 16) || !memcmp(ip, dst->ip, 16);
}

/* One family's dump of listening TCP sockets into the inode list; -errno,
 * or 0.  diag_lock held.  Each message is checked whole before it is read
 * (the kernel's, but a truncated datagram must not be read past). */
static int listen_dump(int fam, uint16_t port, const struct shunt_addr *dst, uint32_t *inos, int cap, int *n)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req = { .nh = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		  .r = { .sdiag_family = (uint8_t)fam, .sdiag_protocol = IPPROTO_TCP,
			 .idiag_states = 1u << 10 /* TCP_LISTEN */ } };
	union { char buf[8192]; struct nlmsghdr align; } u;
	ssize_t len = diag_query(&req.nh, u.buf, sizeof u.buf);

	for (;;) {
		const struct nlmsghdr *h = &u.align;
		int rem = (int)len;
		if (len < 0)
			return (int)len;
		for (; NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem)) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);
			if (h->nlmsg_seq != req.nh.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR)
				return -EPROTO;
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof *m) ||
			    ntohs(m->id.idiag_sport) != port ||
			    (dst && !listen_covers(m->idiag_family, (const uint8_t *)m->id.idiag_src, dst)))
				continue;
			if (*n < cap)
				inos[*n] = m->idiag_inode;
			++*n;
		}
		do
			len = real.recv(diag_fd, u.buf, sizeof u.buf, 0);
		while (len < 0 && errno == EINTR);
		if (len < 0)
			len = -errno;
		else if (len == 0)
			return -EPROTO;
	}
}

/* The inodes of the listening TCP sockets of this network namespace on
 * port (whose address could take dst; NULL: any) into inos[cap]: how many
 * there are (more than cap: only cap were written), or -errno. */
int tcp_listen_inodes(uint16_t port, const struct shunt_addr *dst, uint32_t *inos, int cap)
{
	int n = 0, r, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	shunt_mutex_lock(&diag_lock);
	r = listen_dump(AF_INET, port, dst, inos, cap, &n);
	if (!r)
		r = listen_dump(AF_INET6, port, dst, inos, cap, &n);
	shunt_mutex_unlock(&diag_lock);
	pthread_setcancelstate(cs, NULL);
	return r < 0 ? r : n;
}
