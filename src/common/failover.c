/* SPDX-License-Identifier: MIT */
/* failover.c - encode, parse and check the failover message (failover.h). */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "failover.h"
#include "handshake.h"

/* The peer only tells a pass and a failed link from the rest: causes
 * newer than its parser go as the older ones it knows (shunt_fo_parse) -
 * a sandbox's move as fork-exec's, a stalled one's as a move of ours, a
 * stdio, urgent data's (unsupported-feature), full rings', an io_uring's
 * or a kernel driver's as a pass. */
static uint32_t wire_reason(uint32_t reason)
{
	if (reason == SHUNT_R_SANDBOX)
		return SHUNT_R_FORK;
	if (reason == SHUNT_R_RDMA_STALLED)
		return SHUNT_R_PEER_FAILOVER;
	if (reason == SHUNT_R_STDIO || reason == SHUNT_R_UNSUPPORTED || reason == SHUNT_R_RINGS_FULL ||
	    reason == SHUNT_R_IO_URING || reason == SHUNT_R_KERNEL_SOCKET)
		return SHUNT_R_FD_PASSED;
	return reason;
}

int shunt_fo_encode(void *buf, uint64_t start, uint64_t end, uint32_t reason)
{
	struct shunt_fo m = {
		.kind = SHUNT_FO_KIND,
		.version = SHUNT_FO_VERSION,
		.reason = htobe32(wire_reason(reason)),
		.magic = htobe64(SHUNT_FO_MAGIC),
		.start = htobe64(start),
		.end = htobe64(end),
	};

	memcpy(buf, &m, sizeof m);
	return (int)sizeof m;
}

int shunt_fo_parse(const void *buf, size_t len, struct shunt_fo *out)
{
	const uint8_t *b = buf;
	struct shunt_fo m;

	/* what is there already can say it is not one (a closed socket's
	 * linger must not wait for the rest of something else) */
	if ((len >= 1 && b[0] != SHUNT_FO_KIND) || (len >= 2 && b[1] != SHUNT_FO_VERSION))
		return -EPROTO;
	if (len < sizeof m)
		return -EAGAIN;
	memcpy(&m, buf, sizeof m);
	m.reason = be32toh(m.reason);
	m.magic = be64toh(m.magic);
	m.start = be64toh(m.start);
	m.end = be64toh(m.end);
	if (m.kind != SHUNT_FO_KIND || m.version != SHUNT_FO_VERSION || m.pad ||
	    m.magic != SHUNT_FO_MAGIC || m.end < m.start ||
	    (m.reason != SHUNT_R_LINK_FAILED && m.reason != SHUNT_R_PEER_FAILOVER &&
	     m.reason != SHUNT_R_FORK && m.reason != SHUNT_R_FD_PASSED &&
	     m.reason != SHUNT_R_DESCRIPTORS))
		return -EPROTO;
	*out = m;
	return 0;
}

int shunt_fo_skip(const struct shunt_fo *m, uint64_t prod, uint32_t ring_size, uint64_t *skip)
{
	if (m->start > prod || prod > m->end || m->end - m->start > ring_size)
		return -EPROTO;
	*skip = prod - m->start;
	return 0;
}

size_t shunt_fo_leftovers(const void *buf, size_t len, int *partial)
{
	const uint8_t *b = buf;
	size_t k = 0;

	*partial = 0;
	while (k < len) {
		int m;
		if (!b[k]) {
			k++;
			continue;
		}
		m = shunt_hs_peek(b + k, len - k);
		if (m == -EAGAIN) /* a header's first bytes, or anything short */
			*partial = b[k] == (uint8_t)(SHUNT_HS_EYECATCHER >> 24);
		if (m < 0)
			break;
		if ((size_t)m > len - k) {
			*partial = 1;
			break;
		}
		k += (size_t)m;
	}
	return k;
}
