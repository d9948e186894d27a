/* SPDX-License-Identifier: MIT */
/*
 * inband.c - the in-band handshake on the TCP stream (issue #3, in progress).
 *
 * Only after the agent's option exchange said both ends run shunt (client:
 * PEER_OK, server: the SYN carried our nonce) - a plain peer never sees a
 * byte of it.  The client sends PROPOSAL right after connect; the server
 * reads it inside accept(), before its application can write, and answers.
 * A receiver peeks the header and reads exactly one message, never an
 * application byte.  No transport between hosts exists yet (RDMA: issue #4),
 * so the server declines with no-common-transport and both ends continue on
 * the same TCP connection.  A peer that does not answer in time gets the
 * connection shut down rather than risk a late message read as data.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"
#include "real.h"
#include "../common/handshake.h"

#define HS_WAIT_MS 3000

static void host_id(uint8_t id[16])
{
	static uint8_t cached[16];
	static int have;
	char buf[64];
	int fd, k = 0;
	ssize_t n;

	if (!have) {
		fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
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

static int wait_for(int fd, short ev, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };
	uint64_t now = shunt_now_ns();
	int ms = now >= deadline ? 0 : (int)((deadline - now) / 1000000) + 1;

	return real.poll(&p, 1, ms) == 1 ? 0 : -ETIMEDOUT;
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

static int hs_recv(int fd, struct shunt_hs_msg *m, uint64_t deadline)
{
	uint8_t buf[SHUNT_HS_MAX_LEN];
	int len, r;

	if ((r = peek_n(fd, buf, sizeof(struct shunt_hs_hdr), deadline)))
		return r;
	len = shunt_hs_peek(buf, sizeof(struct shunt_hs_hdr));
	if (len < 0)
		return -EPROTO; /* not ours: nothing consumed */
	if ((r = peek_n(fd, buf, (size_t)len, deadline)))
		return r;
	/* A shunt peer wrote these bytes: they are ours, valid or not. */
	if (real.recv(fd, buf, (size_t)len, MSG_DONTWAIT) != len)
		return -EIO;
	return shunt_hs_parse(buf, (size_t)len, m);
}

static int hs_send(int fd, const struct shunt_hs_msg *m, uint64_t deadline)
{
	uint8_t buf[SHUNT_HS_MAX_LEN];
	int n = shunt_hs_encode(m, buf, sizeof buf), off = 0;

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

static void offer(struct shunt_hs_msg *m, uint8_t type)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->version = SHUNT_HS_VERSION;
	host_id(m->offer.host_id);
	m->offer.proc_id = shunt_proc_id();
	m->offer.transports = SHUNT_HS_T_SHM;
	m->offer.ring_size = shunt_cfg.ring_size;
}

/* A peer that will not finish the handshake: end the stream rather than
 * let a late handshake message be read as application data. */
static int give_up(int fd, int reason)
{
	real.shutdown(fd, SHUT_RDWR);
	return reason;
}

/* Client, after connect with PEER_OK.  Returns the fallback reason. */
int inband_client(int fd)
{
	uint64_t deadline = shunt_now_ns() + HS_WAIT_MS * 1000000ull;
	struct shunt_hs_msg m, r;
	int e = errno, rc;

	offer(&m, SHUNT_HS_PROPOSAL);
	if (hs_send(fd, &m, deadline)) {
		errno = e;
		return give_up(fd, SHUNT_R_HS_TIMEOUT);
	}
	rc = hs_recv(fd, &r, deadline);
	errno = e;
	if (rc == -ETIMEDOUT || rc == -ECONNRESET)
		return give_up(fd, SHUNT_R_HS_TIMEOUT);
	if (rc)
		return give_up(fd, SHUNT_R_HS_MALFORMED);
	if (r.type == SHUNT_HS_DECLINE)
		return (int)r.reason;
	/* An ACCEPT needs a transport this version does not carry yet. */
	memset(&m, 0, sizeof m);
	m.type = SHUNT_HS_DECLINE;
	m.version = SHUNT_HS_VERSION;
	m.reason = SHUNT_R_HS_NO_TRANSPORT;
	hs_send(fd, &m, deadline);
	errno = e;
	return give_up(fd, SHUNT_R_HS_NO_TRANSPORT);
}

/* Server, inside accept() when the SYN carried our option. */
int inband_server(int fd)
{
	uint64_t deadline = shunt_now_ns() + HS_WAIT_MS * 1000000ull;
	struct shunt_hs_msg m, d = { .type = SHUNT_HS_DECLINE, .version = SHUNT_HS_VERSION };
	int e = errno, rc = hs_recv(fd, &m, deadline);

	if (rc == -ETIMEDOUT || rc == -ECONNRESET) {
		errno = e;
		return give_up(fd, SHUNT_R_HS_TIMEOUT);
	}
	if (rc || m.type != SHUNT_HS_PROPOSAL)
		d.reason = SHUNT_R_HS_MALFORMED;
	else
		d.reason = SHUNT_R_HS_NO_TRANSPORT; /* no transport between hosts yet (issue #4) */
	rc = hs_send(fd, &d, deadline);
	errno = e;
	return rc ? give_up(fd, SHUNT_R_HS_TIMEOUT) : (int)d.reason;
}
