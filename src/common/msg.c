/* SPDX-License-Identifier: MIT */
/* msg.c - parsers of cross-process data; every field is checked. */
#include <errno.h>
#include <string.h>
#include "msg.h"

static int ring_size_ok(uint32_t rs)
{
	return rs >= 4096 && rs <= (1u << 30) && !(rs & (rs - 1));
}

int shunt_accept_msg_check(const void *buf, size_t len, int nfds, int ctrunc,
			   struct shunt_accept_msg *out)
{
	struct shunt_accept_msg m;

	int want;

	if (len != sizeof m || ctrunc)
		return -EPROTO;
	memcpy(&m, buf, sizeof m);
	want = m.flags & SHUNT_MSG_F_ARENA ? 3 : 0;
	if (m.magic != SHUNT_MSG_MAGIC || m.version != SHUNT_WIRE_VERSION || nfds != want ||
	    m.nfds != want || (m.flags & ~SHUNT_MSG_F_ARENA) || m.reserved ||
	    !ring_size_ok(m.ring_size) || (m.slot >= SHUNT_REG_SLOTS && m.slot != SHUNT_MSG_NO_SLOT) ||
	    m.seg >= SHUNT_ARENA_SLOTS || !m.arena)
		return -EPROTO;
	*out = m;
	return 0;
}

int shunt_seg_hdr_check(const struct shunt_seg_hdr *h, uint64_t nonce, uint32_t ring_size)
{
	if (h->magic != SHUNT_SEG_MAGIC || h->version != SHUNT_WIRE_VERSION ||
	    h->hdr_size != SHUNT_SEG_HDR_SIZE || h->nonce != nonce || h->ring_size != ring_size)
		return -EPROTO;
	return 0;
}

void shunt_seg_hdr_init(struct shunt_seg_hdr *h, uint32_t ring_size, uint64_t nonce)
{
	memset(h, 0, sizeof *h);
	h->magic = SHUNT_SEG_MAGIC;
	h->version = SHUNT_WIRE_VERSION;
	h->ring_size = ring_size;
	h->hdr_size = SHUNT_SEG_HDR_SIZE;
	h->nonce = nonce;
}

size_t shunt_arena_size(uint32_t ring_size)
{
	return SHUNT_ARENA_HDR_SIZE + SHUNT_ARENA_SLOTS * (SHUNT_SEG_HDR_SIZE + 2 * (size_t)ring_size);
}

int shunt_arena_hdr_check(const struct shunt_arena_hdr *h, uint64_t id, size_t file_size)
{
	if (h->magic != SHUNT_ARENA_MAGIC || h->version != SHUNT_WIRE_VERSION || h->id != id ||
	    h->nslots != SHUNT_ARENA_SLOTS || !ring_size_ok(h->ring_size) ||
	    file_size != shunt_arena_size(h->ring_size))
		return -EPROTO;
	return 0;
}

int shunt_registry_check(const struct shunt_registry *r, uint16_t port)
{
	if (r->magic != SHUNT_REG_MAGIC || r->version != SHUNT_WIRE_VERSION ||
	    r->port != port || r->nslots != SHUNT_REG_SLOTS)
		return -EPROTO;
	return 0;
}
