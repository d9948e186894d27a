/* SPDX-License-Identifier: MIT */
/* nbdnl.c - see nbdnl.h. */
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <string.h>
#include "nbdnl.h"

#define ALIGN4(n) (((n) + 3u) & ~(size_t)3u)

/* The attributes in [p, p + len): each in turn, its payload and length, or
 * 0 at the end or at one that does not fit. */
struct attrs {
	const uint8_t *p;
	size_t left;
};

static int attr_next(struct attrs *a, uint16_t *type, const uint8_t **pay, size_t *plen)
{
	struct nlattr h;

	if (a->left < sizeof h)
		return 0;
	memcpy(&h, a->p, sizeof h);
	if (h.nla_len < sizeof h || h.nla_len > a->left)
		return 0;
	*type = h.nla_type & NLA_TYPE_MASK;
	*pay = a->p + sizeof h;
	*plen = h.nla_len - sizeof h;
	/* the last one's padding may be cut */
	a->left = ALIGN4(h.nla_len) >= a->left ? 0 : a->left - ALIGN4(h.nla_len);
	a->p += ALIGN4(h.nla_len);
	return 1;
}

/* The descriptors of one NBD_ATTR_SOCKETS payload. */
static int socks_of(const uint8_t *p, size_t len, int *fds, int n, int max)
{
	struct attrs items = { p, len };
	const uint8_t *ip, *fp;
	size_t ilen, flen;
	uint16_t t;

	while (n < max && attr_next(&items, &t, &ip, &ilen)) {
		struct attrs in = { ip, ilen };
		if (t != NBD_SOCK_ITEM)
			continue;
		while (n < max && attr_next(&in, &t, &fp, &flen)) {
			uint32_t fd;
			if (t != NBD_SOCK_FD || flen != sizeof fd)
				continue;
			memcpy(&fd, fp, sizeof fd);
			if (fd <= 0x7fffffffu)
				fds[n++] = (int)fd;
		}
	}
	return n;
}

int shunt_nbdnl_socks(const void *buf, size_t len, uint16_t family, int *fds, int max,
		      uint16_t *type_seen)
{
	const uint8_t *p = buf;
	int n = 0;

	while (n < max && len >= NLMSG_HDRLEN + GENL_HDRLEN) {
		struct nlmsghdr h;
		struct genlmsghdr g;
		memcpy(&h, p, sizeof h);
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len)
			break;
		if (h.nlmsg_len >= NLMSG_HDRLEN + GENL_HDRLEN && (!family || h.nlmsg_type == family)) {
			memcpy(&g, p + NLMSG_HDRLEN, sizeof g);
			if (g.cmd == NBD_CMD_CONNECT || g.cmd == NBD_CMD_RECONFIGURE) {
				struct attrs top = { p + NLMSG_HDRLEN + GENL_HDRLEN,
						     h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN };
				const uint8_t *sp;
				size_t slen;
				uint16_t t;
				int before = n;
				while (n < max && attr_next(&top, &t, &sp, &slen))
					if (t == NBD_ATTR_SOCKETS)
						n = socks_of(sp, slen, fds, n, max);
				if (n > before && type_seen)
					*type_seen = h.nlmsg_type;
			}
		}
		if (NLMSG_ALIGN(h.nlmsg_len) >= len)
			break;
		p += NLMSG_ALIGN(h.nlmsg_len);
		len -= NLMSG_ALIGN(h.nlmsg_len);
	}
	return n;
}

int shunt_genl_getfamily(void *buf, size_t size, const char *name, uint32_t seq)
{
	size_t nlen = strnlen(name, 16) + 1;
	size_t total = NLMSG_HDRLEN + GENL_HDRLEN + NLA_HDRLEN + ALIGN4(nlen);
	struct nlmsghdr h = { .nlmsg_len = (uint32_t)total, .nlmsg_type = GENL_ID_CTRL,
			      .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = seq };
	struct genlmsghdr g = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 };
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + nlen), .nla_type = CTRL_ATTR_FAMILY_NAME };
	uint8_t *p = buf;

	if (nlen > 16 || total > size)
		return -1;
	memset(buf, 0, total);
	memcpy(p, &h, sizeof h);
	memcpy(p + NLMSG_HDRLEN, &g, sizeof g);
	memcpy(p + NLMSG_HDRLEN + GENL_HDRLEN, &a, sizeof a);
	memcpy(p + NLMSG_HDRLEN + GENL_HDRLEN + NLA_HDRLEN, name, nlen - 1);
	return (int)total;
}

int shunt_genl_family_id(const void *buf, size_t len, uint32_t seq)
{
	struct nlmsghdr h;
	struct attrs a;
	const uint8_t *p = buf, *v;
	size_t vlen;
	uint16_t t, id;

	if (len < NLMSG_HDRLEN + GENL_HDRLEN)
		return -1;
	memcpy(&h, p, sizeof h);
	if (h.nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN || h.nlmsg_len > len || h.nlmsg_seq != seq ||
	    h.nlmsg_type != GENL_ID_CTRL)
		return -1;
	a = (struct attrs){ p + NLMSG_HDRLEN + GENL_HDRLEN, h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN };
	while (attr_next(&a, &t, &v, &vlen))
		if (t == CTRL_ATTR_FAMILY_ID && vlen >= sizeof id) {
			memcpy(&id, v, sizeof id);
			return id >= GENL_ID_CTRL ? id : -1;
		}
	return -1;
}
