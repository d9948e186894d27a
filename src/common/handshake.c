/* SPDX-License-Identifier: MIT */
/* handshake.c - the in-band handshake codec; network byte order on the wire. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "handshake.h"

static size_t body_len(uint8_t type)
{
	switch (type) {
	case SHUNT_HS_PROPOSAL:
	case SHUNT_HS_ACCEPT:
	case SHUNT_HS_CONFIRM:
		return sizeof(struct shunt_hs_offer);
	case SHUNT_HS_DECLINE:
		return sizeof(struct shunt_hs_decline);
	default:
		return 0;
	}
}

static size_t total_len(uint8_t type)
{
	size_t b = body_len(type);

	return b ? sizeof(struct shunt_hs_hdr) + b + sizeof(struct shunt_hs_trailer) : 0;
}

int shunt_hs_peek(const void *buf, size_t len)
{
	struct shunt_hs_hdr h;

	if (len < sizeof h)
		return -EAGAIN;
	memcpy(&h, buf, sizeof h);
	if (ntohl(h.eyecatcher) != SHUNT_HS_EYECATCHER || !total_len(h.type) ||
	    ntohs(h.length) != total_len(h.type) || h.version == 0)
		return -EPROTO;
	return (int)total_len(h.type);
}

/* Host <-> network order: the same byte swap serves both directions. */
static void offer_swap(struct shunt_hs_offer *o)
{
	o->proc_id = be64toh(o->proc_id);
	o->nonce = be64toh(o->nonce);
	o->domain = be64toh(o->domain);
	o->transports = ntohl(o->transports);
	o->ring_size = ntohl(o->ring_size);
	o->features = ntohl(o->features);
	o->peer_qpn = ntohl(o->peer_qpn);
	o->qpn = ntohl(o->qpn);
	o->rkey = ntohl(o->rkey);
	o->addr = be64toh(o->addr);
}

static int offer_ok(const struct shunt_hs_offer *o, uint8_t type)
{
	uint32_t known = SHUNT_HS_T_SHM | SHUNT_HS_T_RDMA;
	uint32_t rs = o->ring_size;

	if (o->features || !o->transports || (o->transports & ~known))
		return 0;
	if (o->peer_qpn && (type != SHUNT_HS_ACCEPT || o->transports != SHUNT_HS_T_RDMA))
		return 0;
	/* ACCEPT and CONFIRM name exactly one transport. */
	if (type != SHUNT_HS_PROPOSAL && (o->transports & (o->transports - 1)))
		return 0;
	if (rs < 4096 || rs > (1u << 30) || (rs & (rs - 1)))
		return 0;
	if (!(o->transports & SHUNT_HS_T_RDMA) && (o->qpn || o->rkey || o->addr))
		return 0;
	return 1;
}

int shunt_hs_parse(const void *buf, size_t len, struct shunt_hs_msg *out)
{
	const uint8_t *p = buf;
	struct shunt_hs_hdr h;
	struct shunt_hs_trailer t;
	struct shunt_hs_decline d;
	int n = shunt_hs_peek(buf, len);

	if (n < 0 || (size_t)n != len)
		return -EPROTO;
	memcpy(&h, p, sizeof h);
	memcpy(&t, p + len - sizeof t, sizeof t);
	if (ntohl(t.eyecatcher) != SHUNT_HS_EYECATCHER)
		return -EPROTO;
	memset(out, 0, sizeof *out);
	out->type = h.type;
	out->version = h.version;
	if (h.type == SHUNT_HS_DECLINE) {
		memcpy(&d, p + sizeof h, sizeof d);
		out->reason = ntohl(d.reason);
		if (d.pad || !out->reason || out->reason >= SHUNT_R_MAX)
			return -EPROTO;
		return 0;
	}
	memcpy(&out->offer, p + sizeof h, sizeof out->offer);
	offer_swap(&out->offer);
	return offer_ok(&out->offer, h.type) ? 0 : -EPROTO;
}

int shunt_hs_encode(const struct shunt_hs_msg *m, void *buf, size_t cap)
{
	size_t n = total_len(m->type);
	struct shunt_hs_hdr h;
	struct shunt_hs_trailer t = { htonl(SHUNT_HS_EYECATCHER) };
	uint8_t *p = buf;

	if (!n || !m->version)
		return -EINVAL;
	if (cap < n)
		return -ENOSPC;
	h = (struct shunt_hs_hdr){ htonl(SHUNT_HS_EYECATCHER), m->type, m->version, htons((uint16_t)n) };
	memcpy(p, &h, sizeof h);
	if (m->type == SHUNT_HS_DECLINE) {
		struct shunt_hs_decline d = { htonl(m->reason), 0 };
		memcpy(p + sizeof h, &d, sizeof d);
	} else {
		struct shunt_hs_offer o = m->offer;
		offer_swap(&o);
		memcpy(p + sizeof h, &o, sizeof o);
	}
	memcpy(p + n - sizeof t, &t, sizeof t);
	return (int)n;
}
