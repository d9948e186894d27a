/* SPDX-License-Identifier: MIT */
/*
 * inband.c - the in-band handshake on the TCP stream (issue #3).
 *
 * Only when the agent's option exchange says both ends run shunt (client:
 * PEER_OK; server: the SYN carried our nonce).  A plain peer never sees a
 * byte of it.
 *
 *   client (in connect)                   server (in accept)
 *   PROPOSAL: host, SHUNT_DIR, process,   waits briefly for it; reads exactly
 *   nonce, transports offered  ------->   one message, never a data byte
 *                              <-------   ACCEPT (a transport) or DECLINE
 *   CONFIRM or DECLINE         ------->   (after ACCEPT)
 *
 * Shared memory is chosen when both ends share the host and the SHUNT_DIR
 * (a connection the registry could not match: DNAT, a port mapping); the
 * segment then travels as in server.c, whose confirm word is the one
 * decision point.  Between hosts nothing is offered yet (RDMA: issue #4):
 * DECLINE no-common-transport.
 *
 * Nothing ever waits without bound and nothing is shut down.  The rule that
 * makes late messages safe is TCP's order: each side's first bytes after the
 * SYN are its handshake message or its application's data, never both in
 * the wrong order, so a side that sees data where it awaited a message knows
 * the other side went plain, and a message that arrives after its side gave
 * up waiting is found at the head of the stream and removed (s->hs) before
 * the application reads: the server strips a PROPOSAL that comes after its
 * application wrote (the client saw that data first and went plain) or
 * answers it if it has not; the client strips a late answer, declining a
 * late ACCEPT if it has written nothing since; the server strips a late
 * CONFIRM or DECLINE after its own wait ended.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../shim/shim.h"
#include "../base/real.h"
#include "../common/agent.h"
#include "../common/handshake.h"
#include "../common/synopt.h"

#define REST_WAIT_NS 1000000000ull     /* the rest of a message whose header came */
#define PREFIX_WAIT_NS 50000000ull     /* a few bytes that might start a header */
#define CONFIRM_WAIT_NS 10000000000ull /* server: the client's word after ACCEPT(RDMA) */

static void host_id(uint8_t id[16])
{
	static uint8_t cached[16];
	static int have;
	char buf[64];
	int fd, k = 0;
	ssize_t n;

	if (!have) {
		fd = real.open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			real.close(fd);
		for (ssize_t i = 0; i + 1 < n && k < 16; i++) {
			unsigned v;
			if (buf[i] == '-' || sscanf(buf + i, "%2x", &v) != 1)
				continue;
			cached[k++] = (uint8_t)v;
			i++;
		}
		have = 1;
	}
	memcpy(id, cached, 16);
}

/* Two round trips as the kernel estimates them. */
static uint64_t two_rtt_ns(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	int e = errno;

	if (real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l)) {
		errno = e;
		return 0;
	}
	return 2ull * ti.tcpi_rtt * 1000ull;
}

static int wait_for(int fd, short ev, uint64_t deadline)
{
	return fd_wait(fd, ev, deadline, 0) > 0 ? 0 : -ETIMEDOUT;
}

/* Peek until n bytes are queued; never consumes. */
static int peek_n(int fd, uint8_t *buf, size_t n, uint64_t deadline)
{
	for (;;) {
		ssize_t r = real.recv(fd, buf, n, MSG_PEEK | MSG_DONTWAIT);
		if (r == (ssize_t)n)
			return 0;
		if (r == 0)
			return -ECONNRESET;
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (r > 0) {
			/* Part of it is queued, so poll would not sleep: wait a
			 * little for the rest instead of spinning. */
			if (shunt_now_ns() >= deadline)
				return -ETIMEDOUT;
			nanosleep(&(struct timespec){ 0, 50000 }, NULL);
			continue;
		}
		if (wait_for(fd, POLLIN, deadline))
			return -ETIMEDOUT;
	}
}

/*
 * What starts the stream: a whole handshake message (consumed, parsed into
 * *m; returns 1, or -EPROTO if it was ours but malformed), or something
 * else (0: data, end of stream or an error the application will see,
 * nothing consumed), or nothing yet (-EAGAIN, or -ETIMEDOUT by deadline).
 * A message is written with one send(), so its bytes come together; a
 * prefix of the eyecatcher that stays short is data.
 */
static int head(int fd, struct shunt_hs_msg *m, uint64_t deadline)
{
	static const uint8_t eye[4] = { 'S', 'H', 'N', 'T' };
	uint8_t buf[SHUNT_HS_MAX_LEN];
	ssize_t r;
	int len;

	for (;;) {
		r = real.recv(fd, buf, sizeof(struct shunt_hs_hdr), MSG_PEEK | MSG_DONTWAIT);
		if (r > 0 || (r == 0) || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			break;
		if (wait_for(fd, POLLIN, deadline))
			return deadline ? -ETIMEDOUT : -EAGAIN;
	}
	if (r <= 0 || memcmp(buf, eye, r < 4 ? (size_t)r : 4))
		return 0;
	if (r < (ssize_t)sizeof(struct shunt_hs_hdr) &&
	    peek_n(fd, buf, sizeof(struct shunt_hs_hdr), shunt_now_ns() + PREFIX_WAIT_NS))
		return 0;
	len = shunt_hs_peek(buf, sizeof(struct shunt_hs_hdr));
	if (len < 0)
		return 0; /* not a header of ours: data */
	if (peek_n(fd, buf, (size_t)len, shunt_now_ns() + REST_WAIT_NS))
		return 0;
	/* A shunt peer wrote these bytes: they are ours, valid or not. */
	if (real.recv(fd, buf, (size_t)len, MSG_DONTWAIT) != len)
		return -EIO;
	return shunt_hs_parse(buf, (size_t)len, m) ? -EPROTO : 1;
}

static int hs_send(int fd, const struct shunt_hs_msg *m, uint64_t deadline)
{
	uint8_t buf[SHUNT_HS_MAX_LEN];
	int n = shunt_hs_encode(m, buf, sizeof buf), off = 0;

	shunt_fault_hs(buf, n);
	while (n > 0 && off < n) {
		ssize_t w = real.send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (int)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (wait_for(fd, POLLOUT, deadline))
			return -ETIMEDOUT;
	}
	return n < 0 ? n : 0;
}

static void offer(struct shunt_hs_msg *m, uint8_t type, uint64_t nonce, uint64_t proc,
		  uint32_t transports)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->version = SHUNT_HS_VERSION;
	host_id(m->offer.host_id);
	m->offer.proc_id = proc;
	m->offer.nonce = nonce;
	m->offer.domain = rdv_domain();
	m->offer.transports = transports;
	m->offer.ring_size = shunt_cfg.ring_size;
}

/* The remote transport's part of an offer (its link and slot: RDMA's GID,
 * queue pair, key and ring). */
static void remote_fields(struct shunt_hs_offer *o, const struct shunt_hs_offer *r)
{
	memcpy(o->gid, r->gid, sizeof o->gid);
	o->qpn = r->qpn;
	o->peer_qpn = r->peer_qpn;
	o->rkey = r->rkey;
	o->addr = r->addr;
}

static void remote_drop(void *state)
{
	if (shunt_remote)
		shunt_remote->offer_drop(state);
}

static int decline(int fd, int reason, uint64_t deadline)
{
	struct shunt_hs_msg d = { .type = SHUNT_HS_DECLINE, .version = SHUNT_HS_VERSION,
				  .reason = (uint32_t)reason };

	hs_send(fd, &d, deadline);
	return reason;
}

/* Did this accepted socket's SYN carry our option?  The agent's program
 * recorded it in the socket's storage (2: while its listener was off, so
 * our answer most likely did not go); failing that (an agent restarted
 * meanwhile), the SYN the kernel saved for our registered listener decides. */
int inband_syn_had_option(const struct sk *ls, int fd)
{
	uint8_t syn[256];
	socklen_t l = sizeof syn;
	uint64_t nonce;
	int e = errno, r;

	if (!ls->ag_listen)
		return 0;
	r = agent_take(fd, &nonce);
	if (r == SHUNT_AG_SERVER_SAW)
		return 1;
	if (r == SHUNT_AG_SERVER_SAW_OFF)
		return 2;
	r = real.getsockopt(fd, IPPROTO_TCP, TCP_SAVED_SYN, syn, &l);
	errno = e;
	return !r && shunt_syn_nonce(syn, l, &nonce) == 1;
}

/* Client, after connect with PEER_OK: the server's answer waited for
 * max_wait (client.c: less in a non-blocking connect) and two round trips.
 * Returns the fallback reason (0 when the connection became shared memory
 * or RDMA). */
int inband_client(struct sk *s, int fd, uint64_t nonce, uint64_t max_wait)
{
	uint64_t wait = max_wait + two_rtt_ns(fd);
	uint64_t deadline = shunt_now_ns() + wait, proc = 0;
	uint32_t tag = (uint32_t)nonce, t = 0;
	struct shunt_hs_msg m, r;
	struct shunt_hs_offer ro;
	void *rst = NULL;
	int e = errno, rc, shm = shunt_cfg.transport != 2 && !rdv_inband_ready(&proc);

	proc = shunt_proc_id();
	if (shm)
		t |= SHUNT_HS_T_SHM;
	int rdma = shunt_remote ? shunt_remote->client_offer(fd, tag, &ro, &rst) : -ENODEV;
	if (!rdma)
		t |= SHUNT_HS_T_RDMA;
	/* Nothing to offer: a shared-memory offer no server can match. */
	offer(&m, SHUNT_HS_PROPOSAL, nonce, proc, t ? t : SHUNT_HS_T_SHM);
	if (!shm)
		m.offer.domain = 0;
	if (rst)
		remote_fields(&m.offer, &ro);
	shunt_fault_publish(); /* tests only (fault.c): a late PROPOSAL */
	rc = hs_send(fd, &m, deadline);
	if (rc) {
		remote_drop(rst);
		errno = e;
		return rc == -ETIMEDOUT ? SHUNT_R_HS_TIMEOUT : SHUNT_R_HANDSHAKE;
	}
	rc = head(fd, &r, deadline);
	shunt_log("handshake fd %d: answer %d type %d after %llu us", fd, rc, rc == 1 ? r.type : 0,
		  (unsigned long long)(shunt_now_ns() + wait - deadline) / 1000);
	if (rc == -ETIMEDOUT) {
		s->hs = HS_STRIP_ANSWER; /* the answer may still come: removed on arrival */
		rc = SHUNT_R_HS_TIMEOUT;
	} else if (rc == 0) {
		rc = SHUNT_R_HS_TIMEOUT; /* the server's application spoke first */
	} else if (rc < 0) {
		rc = SHUNT_R_HS_MALFORMED;
	} else if (r.type == SHUNT_HS_DECLINE) {
		/* we could not offer RDMA for want of resources: say that */
		rc = r.reason == SHUNT_R_HS_NO_TRANSPORT && rdma == -ENOMEM ? SHUNT_R_RESOURCE
									     : (int)r.reason;
	} else if (r.type != SHUNT_HS_ACCEPT) {
		rc = SHUNT_R_HS_MALFORMED; /* the server waits for nothing more */
	} else if (r.offer.nonce != nonce || !(r.offer.transports & t)) {
		rc = decline(fd, SHUNT_R_HS_NO_TRANSPORT, deadline);
	} else if (r.offer.transports == SHUNT_HS_T_RDMA) {
		/* the link and slot the server chose; CONFIRM names ours.  The
		 * connection exists from client_accept on, but the stream is
		 * the handshake's until CONFIRM is on it: another thread's fork
		 * does not move it meanwhile (rdma/share.c) - its failover
		 * message ahead of CONFIRM, the server took it for data */
		__atomic_store_n(&s->hs_confirming, 1, __ATOMIC_RELEASE);
		rc = shunt_remote->client_accept(s, fd, rst, &r, tag, &ro);
		rst = NULL;
		if (rc) {
			decline(fd, rc, deadline);
		} else {
			offer(&m, SHUNT_HS_CONFIRM, nonce, proc, SHUNT_HS_T_RDMA);
			remote_fields(&m.offer, &ro);
			shunt_fault_confirm(); /* tests only (fault.c): a slow client */
			hs_send(fd, &m, deadline);
		}
		__atomic_store_n(&s->hs_confirming, 0, __ATOMIC_RELEASE);
	} else if ((rc = rdv_inband_attach(s, fd, nonce, deadline))) {
		decline(fd, rc, deadline);
	} else {
		offer(&m, SHUNT_HS_CONFIRM, nonce, proc, SHUNT_HS_T_SHM);
		hs_send(fd, &m, deadline);
	}
	remote_drop(rst);
	errno = e;
	return rc;
}

static int same_host(const struct shunt_hs_offer *o)
{
	uint8_t me[16];

	host_id(me);
	return !memcmp(me, o->host_id, 16) && o->domain && o->domain == rdv_domain() && o->proc_id;
}

/* Server, RDMA: the client's word after our ACCEPT (rc and c as head()
 * gave them) decides, st the slot we offered.  The client writes over
 * RDMA from its CONFIRM on: this TCP stream cannot stand in for the link
 * it named (a wrong one, or our slot would not attach) - the connection
 * ends, the client's application sees an error, never our bytes read as
 * its own or its writes lost in a link we don't use.  A client that never
 * answers (-ETIMEDOUT) leaves our slot reserved, never reused: it might
 * still write into it. */
static int confirm_end(struct sk *s, int fd, int rc, const struct shunt_hs_msg *c, void *st, uint32_t tag)
{
	shunt_log("rdma handshake fd %d: client's word %d type %d", fd, rc, rc == 1 ? c->type : 0);
	if (rc == 1 && c->type == SHUNT_HS_CONFIRM) {
		rc = shunt_remote->server_confirm(s, fd, st, c, tag);
		if (rc)
			real.shutdown(fd, SHUT_RDWR);
		return rc;
	}
	if (rc == -ETIMEDOUT) {
		shunt_remote->offer_abandon(st);
		real.shutdown(fd, SHUT_RDWR);
		return SHUNT_R_HS_TIMEOUT;
	}
	if (rc == 1 && c->type == SHUNT_HS_DECLINE && c->reason == SHUNT_R_STALE_LINK)
		shunt_remote->offer_stale(st);
	remote_drop(st);
	if (rc == 1 && c->type == SHUNT_HS_DECLINE)
		return (int)c->reason;
	return rc == 0 ? SHUNT_R_HS_TIMEOUT : SHUNT_R_HS_MALFORMED; /* data: it gave up */
}

static _Atomic int confirms; /* sockets of this process in HS_CONFIRM */

/* Server, RDMA chosen: ACCEPT with our link and slot, then the client's
 * CONFIRM is the decision (it may write as soon as it sent it).  It is
 * waited for as long as the PROPOSAL was (span: it follows our ACCEPT by
 * a round trip); past that accept() returns the socket, plain until its
 * first call settles it (HS_CONFIRM, inband_confirm) - a client that is
 * slow, stopped or hostile holds up its own connection's first write at
 * most, never the server's accept() nor the connections behind it (it
 * held accept() up to 10 s before the thirty-second session). */
static int server_remote(struct sk *s, int fd, const struct shunt_hs_msg *p, uint64_t wait, uint64_t span)
{
	uint32_t tag = (uint32_t)p->offer.nonce;
	struct shunt_hs_msg a, c;
	struct shunt_hs_offer ro;
	void *st = NULL;
	int rc = shunt_remote->server_offer(fd, p, tag, &ro, &st);

	if (rc)
		return decline(fd, rc, shunt_now_ns() + wait);
	offer(&a, SHUNT_HS_ACCEPT, p->offer.nonce, shunt_proc_id(), SHUNT_HS_T_RDMA);
	remote_fields(&a.offer, &ro);
	if (hs_send(fd, &a, shunt_now_ns() + wait)) {
		remote_drop(st);
		return SHUNT_R_HANDSHAKE;
	}
	rc = head(fd, &c, shunt_now_ns() + span);
	if (rc != -ETIMEDOUT)
		return confirm_end(s, fd, rc, &c, st, tag);
	/* (not in the table yet: nobody else sees s) */
	s->hs_remote = st;
	s->hs_tag = tag;
	s->hs_pid = shunt_pid();
	s->hs_until = shunt_now_ns() + CONFIRM_WAIT_NS;
	__atomic_add_fetch(&confirms, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->hs, HS_CONFIRM, __ATOMIC_RELEASE);
	shunt_log("rdma handshake fd %d: the client's word has not come: plain until its first call", fd);
	return SHUNT_R_HS_TIMEOUT;
}

/* Server, inside accept() when the SYN carried our option; nonblock: a
 * non-blocking accept(), a call TCP never blocks in; quick: the listener
 * was off (sockops.bpf.c) - the SYN-ACK most likely went without our
 * answer and no PROPOSAL is due: one already here is taken, none waited
 * for (one in flight, answered just before the listener went off, is
 * still read off the stream before the program's first read). */
int inband_server(struct sk *s, int fd, int nonblock, int quick)
{
	uint64_t rtt2 = two_rtt_ns(fd), now = shunt_now_ns();
	uint64_t wait = (nonblock ? shunt_nonblock_wait_ns(&shunt_cfg) : shunt_accept_wait_ns(&shunt_cfg)) + rtt2;
	struct shunt_hs_msg m, a;
	struct conn *c;
	/* The PROPOSAL follows the client's ACK at once: a tenth of the
	 * client's wait beyond two round trips (20 ms by default), a fortieth
	 * in a non-blocking accept() (5 ms: a client preempted, or a peer
	 * that sent our option and nothing else, does not hold an event
	 * loop longer).  Shared memory's confirmation, RDMA's CONFIRM then:
	 * the same wait (server_remote). */
	uint64_t until = quick ? now : now + (nonblock ? wait : wait / 10 + rtt2);
	int e = errno, rc = head(fd, &m, until);
	int shm;

	if (rc == -ETIMEDOUT || rc == 0) {
		/* Not here yet: whatever comes first decides (inband_settle);
		 * data: the client went plain and spoke */
		if (rc)
			s->hs = HS_LAZY;
		/* quick: the client most likely had no answer from us */
		rc = !quick ? SHUNT_R_HS_TIMEOUT : shunt_off_reason ? shunt_off_reason : SHUNT_R_PEER_NOT_SHUNT;
		goto out;
	} else if (rc < 0 || m.type != SHUNT_HS_PROPOSAL) {
		rc = decline(fd, SHUNT_R_HS_MALFORMED, now + wait);
		goto out;
	}
	if (shunt_off_reason) { /* off since it listened (io_uring, a chroot: core.c) */
		rc = decline(fd, shunt_off_reason, now + wait);
		goto out;
	}
	shm = (m.offer.transports & SHUNT_HS_T_SHM) && same_host(&m.offer) && shunt_cfg.transport != 2;
	if (!shm && (m.offer.transports & SHUNT_HS_T_RDMA) && shunt_remote) {
		rc = server_remote(s, fd, &m, wait, until - now);
	} else if (!shm) {
		rc = decline(fd, SHUNT_R_HS_NO_TRANSPORT, now + wait);
	} else if ((rc = rdv_inband_offer(fd, m.offer.proc_id, m.offer.nonce, &c))) {
		decline(fd, rc, now + wait);
	} else {
		offer(&a, SHUNT_HS_ACCEPT, m.offer.nonce, shunt_proc_id(), SHUNT_HS_T_SHM);
		/* Unsent, the client cannot confirm: decline at once. */
		rc = rdv_inband_commit(s, fd, c, hs_send(fd, &a, now + wait) ? 0 : wait);
		/* The client's CONFIRM or DECLINE follows.  Declined: a late one
		 * is removed from the head of the stream on arrival.  Shared
		 * memory: the stream carries nothing else, and the connection
		 * drains it (conn_refresh), so nobody waits for it. */
		if (rc) {
			s->hs = HS_STRIP_REPLY;
			inband_settle(s, fd, 0, 1);
		}
	}
out:
	errno = e;
	return rc;
}

/*
 * Before the application reads or writes a plain socket whose handshake
 * ended by a timeout: remove a late message from the head of the stream,
 * answering it if the order still allows.  Reading, a blocking socket
 * waits for the first bytes as the read itself would (SO_RCVTIMEO and
 * signals included); a read that finds nothing queued is answered here
 * (EAGAIN without waiting, or waits again), never passed on to the kernel
 * after we let go: a message arriving in between would be read as the
 * application's data.  Returns 0 or -errno for the application's call.
 */
int inband_settle(struct sk *s, int fd, int writing, int nonblock)
{
	struct shunt_hs_msg m;
	char b;
	int st, rc;

	for (;;) {
		if (!writing && !nonblock) {
			ssize_t r = real.recv(fd, &b, 1, MSG_PEEK);
			if (r < 0)
				return -errno;
		}
		shunt_mutex_lock(&s->hs_lock);
		st = s->hs;
		if (st == HS_CONFIRM) {
			/* (its callers settle it first: interpose_io.c confirm_first;
			 * one that did not must not reach the kernel's socket) */
			shunt_mutex_unlock(&s->hs_lock);
			rc = inband_confirm(s, fd, writing, nonblock);
			return rc < 0 ? rc : s->kind == SK_CONN ? -EAGAIN : 0;
		}
		if (!st || (writing && st != HS_LAZY && st != HS_STRIP_ANSWER)) {
			shunt_mutex_unlock(&s->hs_lock);
			return 0;
		}
		if (writing && st == HS_STRIP_ANSWER) {
			/* Our data follows the PROPOSAL now: the server reads it as
			 * "gave up", so a late ACCEPT is only removed, not declined. */
			s->hs = HS_STRIP_ANSWER_WROTE;
			shunt_mutex_unlock(&s->hs_lock);
			return 0;
		}
		rc = head(fd, &m, 0);
		if (rc != -EAGAIN)
			break;
		if (writing) /* HS_LAZY: the client sees our data first */
			s->hs = HS_STRIP_PROPOSAL;
		shunt_mutex_unlock(&s->hs_lock);
		if (writing)
			return 0;
		if (nonblock)
			return -EAGAIN; /* what the kernel's read says now */
		/* another thread's read took the bytes we waited for: again */
	}
	__atomic_store_n(&s->hs, HS_NONE, __ATOMIC_RELEASE);
	if (rc == 1 && st == HS_LAZY && m.type == SHUNT_HS_PROPOSAL)
		decline(fd, SHUNT_R_HS_TIMEOUT, shunt_now_ns() + REST_WAIT_NS);
	else if (rc == 1 && st == HS_STRIP_ANSWER && m.type == SHUNT_HS_ACCEPT)
		decline(fd, SHUNT_R_HS_TIMEOUT, shunt_now_ns() + REST_WAIT_NS);
	shunt_mutex_unlock(&s->hs_lock);
	ep_pend_settled(fd, s); /* (an epoll set's registration: the program's own now) */
	return 0;
}

/* A socket in a handshake state, looked at by a call that reads nothing
 * (poll, select, FIONREAD): a late message already all there is taken off
 * (answered if the order allows), a CONFIRM attaches - so that neither
 * wakes a poll nor counts as the program's bytes; nothing is waited for
 * (HS_CONFIRM: not even another thread's settle).  1 if the state
 * changed (the socket may be the connection now), else 0. */
int inband_settle_nb(struct sk *s, int fd)
{
	int st = __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE), e = errno;

	if (st == HS_NONE || s->kind == SK_CONN)
		return 0;
	if (st == HS_CONFIRM)
		inband_confirm_try(s, fd);
	else
		(void)inband_settle(s, fd, 0, 1);
	errno = e;
	return __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != st || s->kind == SK_CONN;
}

/*
 * HS_CONFIRM: our ACCEPT(RDMA) went, the client's word did not come while
 * accept() waited for it.  Until it does the socket is plain and carries
 * nothing of ours: the client may have confirmed (then it reads only
 * cursor messages and a FAILOVER message from the stream, and writes over
 * RDMA) or declined or gone plain (then it reads our data from the
 * stream).  So a read waits for the client's first bytes as the kernel's
 * read would and settles on them (EAGAIN without waiting in a
 * non-blocking one); whatever puts bytes of ours on the stream (a write,
 * a shutdown, a descriptor passed, a fork or exec) waits for the word -
 * a fortieth of SHUNT_ACCEPT_WAIT_MS in a call TCP never blocks in (then
 * EAGAIN), else until hs_until (CONFIRM_WAIT_NS from the accept: then
 * the slot stays reserved and the connection is shut, as accept() did
 * when it waited).  Settled by a CONFIRM, the socket becomes the RDMA
 * connection (its epoll registrations follow: epoll.c ep_pend_settled);
 * by anything else, plain for good.
 */

/* mode: how long to wait (CF_QUICK: the process's end, which gives up
 * after it); s->hs_lock held, s->hs == HS_CONFIRM.  1 once settled, or
 * -EAGAIN. */
enum { CF_TRY, CF_READ, CF_WRITE_NB, CF_WRITE, CF_QUICK, CF_LAST };

static int confirm_step(struct sk *s, int fd, int mode)
{
	struct shunt_hs_msg m;
	uint64_t now = shunt_now_ns(), dl = 0, nb = now + shunt_nonblock_wait_ns(&shunt_cfg);
	void *st = s->hs_remote;
	int rc;

	if (mode == CF_WRITE)
		dl = s->hs_until;
	else if (mode == CF_WRITE_NB || mode == CF_QUICK)
		dl = nb < s->hs_until ? nb : s->hs_until;
	if (s->hs_pid != shunt_pid()) {
		/* a fork raced with the accept: the slot is the parent's (it
		 * settles its copy); nothing of ours here reads or writes it */
		st = NULL;
	} else if ((rc = head(fd, &m, dl)) == -EAGAIN || (rc == -ETIMEDOUT && shunt_now_ns() < s->hs_until)) {
		if (mode != CF_QUICK && mode != CF_LAST)
			return -EAGAIN;
		/* the process ends: the slot stays reserved (the client may write) */
		shunt_remote->offer_abandon(st);
	} else {
		s->reason = confirm_end(s, fd, rc, &m, st, s->hs_tag);
	}
	s->hs_remote = NULL;
	__atomic_sub_fetch(&confirms, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->hs, HS_NONE, __ATOMIC_RELEASE);
	return 1;
}

/* One look under the lock - no cancellation point while it is held; try:
 * not even waiting for the lock - and, settled, the registrations and
 * the record follow (outside it).  1 settled here, 0 settled before,
 * -EAGAIN. */
static int confirm_locked(struct sk *s, int fd, int mode, int try)
{
	int e = errno, r = 0, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (try ? shunt_mutex_trylock(&s->hs_lock) : shunt_mutex_lock(&s->hs_lock)) {
		r = -EAGAIN;
	} else {
		if (__atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) == HS_CONFIRM)
			r = confirm_step(s, fd, mode);
		shunt_mutex_unlock(&s->hs_lock);
	}
	pthread_setcancelstate(cs, NULL);
	if (r > 0) {
		shunt_log("rdma handshake fd %d: settled at its first call: %s, %s", fd,
			  s->kind == SK_CONN ? s->conn->tp->name : "tcp",
			  shunt_reason_str((unsigned)s->reason));
		stats_update(s, fd);
		ep_pend_settled(fd, s);
	}
	errno = e;
	return r;
}

/* A blocking read waits for the client's first bytes as the kernel's
 * would (SO_RCVTIMEO and signals: the read's own answer), in naps: another
 * thread's call may take the word off the socket meanwhile and attach the
 * connection, whose bytes then never come here (a read asleep on the
 * socket would wait for ever; CONFIRM_NAP_MS: shim.h). */

int inband_confirm(struct sk *s, int fd, int writing, int nonblock)
{
	int mode = writing ? (nonblock ? CF_WRITE_NB : CF_WRITE) : (nonblock ? CF_TRY : CF_READ);
	int r, left = -2;

	if (mode == CF_READ)
		shunt_fault_confirm_read(); /* tests only (fault.c): preempted before the sleep */
	for (;;) {
		if (mode == CF_READ) {
			if ((r = sock_nap_in(fd, CONFIRM_NAP_MS, &left)) < 0)
				return r;
			if (__atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) != HS_CONFIRM)
				return 0; /* settled by another thread: the read goes on there */
			if (!r)
				continue;
		}
		r = confirm_locked(s, fd, mode, 0);
		/* again: a blocking read whose bytes another thread's read
		 * took, a blocking write whose wait a signal cut short (TCP's
		 * first write never waits, so none interrupts it) */
		if (r != -EAGAIN || (mode != CF_READ && mode != CF_WRITE))
			return r < 0 ? r : 0;
	}
}

/* Any other call (fdtab.c): settled if the word is there, never waiting
 * (nor for another thread's settle). */
void inband_confirm_try(struct sk *s, int fd)
{
	confirm_locked(s, fd, CF_TRY, 1);
}

struct confirm_list {
	int fd[64], n;
};

static void confirm_collect(int fd, struct sk *s, void *arg)
{
	struct confirm_list *l = arg;

	if (l->n < 64 && __atomic_load_n(&s->hs, __ATOMIC_ACQUIRE) == HS_CONFIRM)
		l->fd[l->n++] = fd;
}

SHUNT_CHILD_PATH void inband_confirm_all(int quick)
{
	/* quick: 5 ms in all, not each (a flood of silent clients at exit) */
	uint64_t end;
	struct confirm_list l;

	if (!__atomic_load_n(&confirms, __ATOMIC_RELAXED))
		return; /* (no clock read: a forked child's end touches no page for it) */
	end = shunt_now_ns() + shunt_nonblock_wait_ns(&shunt_cfg);
	while (__atomic_load_n(&confirms, __ATOMIC_RELAXED)) {
		l.n = 0;
		fdtab_each(confirm_collect, &l);
		for (int i = 0; i < l.n; i++) {
			struct sk *s = fdtab_peek(l.fd[i]);
			if (!s)
				continue;
			if (quick)
				confirm_locked(s, l.fd[i], shunt_now_ns() < end ? CF_QUICK : CF_LAST, 0);
			else
				inband_confirm(s, l.fd[i], 1, 0);
			sk_put(s);
		}
		if (l.n < 64)
			break; /* (one not in the table: a socket closed meanwhile, or a dup's) */
	}
}

/* s's last reference: a slot offered and never settled stays reserved
 * (the client may still write into it). */
void inband_confirm_drop(struct sk *s)
{
	if (__atomic_exchange_n(&s->hs, HS_NONE, __ATOMIC_ACQ_REL) != HS_CONFIRM)
		return;
	__atomic_sub_fetch(&confirms, 1, __ATOMIC_RELAXED);
	if (s->hs_pid == shunt_pid())
		shunt_remote->offer_abandon(s->hs_remote);
	s->hs_remote = NULL;
}
