/* SPDX-License-Identifier: MIT */
/*
 * early.c - a connection's first bytes, written before the server's answer.
 *
 * TCP's client writes its request as soon as connect() returns: the kernel
 * made the handshake, the server process need not have run yet.  Ours needs
 * the server's answer (a segment) before a byte can go into a ring, and
 * waiting for it inside connect() cost a short connection two more turns of
 * the two processes than TCP's (issue #13, item 10: 4.3 context switches a
 * connection against TCP's 2.2; 1.7x its CPU time with every CPU busy).
 *
 * So when connect() returns with the connection up, its offer stays
 * pending: the program's first writes - while they fit in the slot's
 * early[] area (SHUNT_EARLY_MAX bytes) and the server has not taken them -
 * go there, and any other call on the connection (a read, poll, epoll_ctl,
 * a bigger write, close, dup2 over it; fork, exec and exit for all of them)
 * first waits for the answer and attaches: rdv_offer_settle, from fdtab.c's
 * lookups.  The server copies the early bytes into the ring before it
 * answers, and its answer in the slot is final (server.c): its accept()
 * returns with the request readable, the client's read finds the reply.
 * The turns are TCP's.
 *
 * Without an answer - a slow or plain accept, a refusal, an answer by
 * message the client could not take - the early bytes go onto the socket
 * before anything else, and the server, plain for this connection, reads
 * them there.  Only in a private directory (a shared one's members could
 * read or write the slot), and for at most PENDING_MAX offers of a process
 * at once (each holds a slot of its port until it settles).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "rdv.h"
#include "../base/real.h"

#define PENDING_MAX 32

static _Atomic int pending; /* offers of this process left pending */

int rdv_early_ok(void)
{
	return !shunt_dir_shared() && __atomic_load_n(&pending, __ATOMIC_RELAXED) < PENDING_MAX;
}

void rdv_early_begin(struct sk *s, int fd)
{
	s->offer->counted = 1;
	s->offer->fd = fd;
	__atomic_add_fetch(&pending, 1, __ATOMIC_RELAXED);
}

/* No answer we could take: the bytes the program wrote into the slot
 * head the stream on the socket (the server reads them there). */
static void send_early(const struct offer *o)
{
	size_t off = 0;

	while (off < o->len) {
		ssize_t n = real.send(o->dupfd, o->early->data + off, o->len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) { /* the program's O_NONBLOCK */
			struct pollfd p = { .fd = o->dupfd, .events = POLLOUT };
			(void)!real.poll(&p, 1, 1000);
			continue;
		}
		if (n <= 0)
			return; /* a reset: the program's next call says so */
		off += (size_t)n;
	}
}

void rdv_offer_settle(struct sk *s)
{
	int e = errno, resend, cut, reason, fd;
	struct offer *o;

	pthread_mutex_lock(&s->offer_lock);
	o = s->offer;
	if (!o) { /* another thread settled it */
		pthread_mutex_unlock(&s->offer_lock);
		return;
	}
	reason = rdv_offer_finish(s, o, &resend, &cut);
	if (resend) {
		send_early(o);
	} else if (cut) {
		/* A final answer we cannot take - only a registry or arena
		 * written against the protocol - leaves the server with rings
		 * we never read: end the connection rather than hang it. */
		shunt_warn("connection to port %u: the server's answer names a segment we cannot map: "
			   "connection ended", (unsigned)s->tuple.server.port);
		real.shutdown(o->dupfd, SHUT_RDWR);
	}
	fd_close_internal(o->dupfd); /* -1 once the connection took it */
	s->reason = reason;
	fd = o->fd;
	if (o->counted)
		__atomic_sub_fetch(&pending, 1, __ATOMIC_RELAXED);
	/* what settled is visible to whoever sees no offer (fdtab.c) */
	__atomic_store_n(&s->offer, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->offer_lock);
	free(o);
	if (fd >= 0) {
		stats_update(s, fd);
		if (s->kind == SK_CONN)
			shunt_log("connect fd %d: accelerated (%s)", fd, s->conn->tp->name);
		else
			shunt_log("connect fd %d: tcp, %s", fd, shunt_reason_str((unsigned)s->reason));
	}
	errno = e;
}

/* A send while the offer is pending: into the slot if the bytes fit and
 * the server has not taken the slot's bytes yet (its copy stops them);
 * else -EAGAIN, the offer settled: the caller sends as on any connection. */
ssize_t rdv_early_send(struct sk *s, const struct iovec *iov, int cnt, int flags, const struct msghdr *ctl)
{
	size_t total = 0;
	struct offer *o;
	uint32_t v, len;

	if ((flags & ~(MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE)) || (ctl && ctl->msg_controllen) || cnt < 0 ||
	    cnt > IOV_MAX)
		goto settle;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > SHUNT_EARLY_MAX - total)
			goto settle;
		total += iov[i].iov_len;
	}
	pthread_mutex_lock(&s->offer_lock);
	o = s->offer;
	if (!o) {
		pthread_mutex_unlock(&s->offer_lock);
		return -EAGAIN;
	}
	v = __atomic_load_n(&o->early->len, __ATOMIC_ACQUIRE);
	len = SHUNT_EARLY_LEN(v);
	if ((v & SHUNT_EARLY_TAKEN) || len != o->len || total > SHUNT_EARLY_MAX - len) { /* taken, or full */
		pthread_mutex_unlock(&s->offer_lock);
		goto settle;
	}
	for (int i = 0, off = 0; i < cnt; off += (int)iov[i].iov_len, i++)
		if (iov[i].iov_len)
			memcpy(o->early->data + len + off, iov[i].iov_base, iov[i].iov_len);
	/* the server's SHUNT_EARLY_TAKEN makes this fail: it copied only
	 * what was there before */
	if (!__atomic_compare_exchange_n(&o->early->len, &v, v + (uint32_t)total, 0, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&s->offer_lock);
		goto settle;
	}
	o->len = len + (uint32_t)total;
	pthread_mutex_unlock(&s->offer_lock);
	return (ssize_t)total;
settle:
	rdv_offer_settle(s);
	return -EAGAIN;
}

static void settle_one(int fd, struct sk *s, void *arg)
{
	(void)fd;
	(void)arg;
	if (__atomic_load_n(&s->offer, __ATOMIC_ACQUIRE))
		rdv_offer_settle(s);
}

/* Before fork, exec and exit: every pending offer settles (a child must
 * not find the slot's offer half ours). */
void rdv_offers_settle_all(void)
{
	if (__atomic_load_n(&pending, __ATOMIC_RELAXED))
		fdtab_each(settle_one, NULL);
}
