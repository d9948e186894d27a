/* SPDX-License-Identifier: MIT */
/* iscsinl.c - see iscsinl.h. */
#include <linux/netlink.h>
#include <string.h>
#include "iscsinl.h"

#define EPH_OFF 24u   /* u.b_conn.transport_eph in struct iscsi_uevent */
#define BIND_LEN 36u  /* ... through is_leading */

int shunt_iscsinl_socks(const void *buf, size_t len, int *fds, int max)
{
	const uint8_t *p = buf;
	int n = 0;

	while (n < max && len >= NLMSG_HDRLEN) {
		struct nlmsghdr h;
		uint64_t eph;
		memcpy(&h, p, sizeof h);
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len)
			break;
		if (h.nlmsg_type == SHUNT_ISCSI_UEVENT_BIND_CONN && h.nlmsg_len >= NLMSG_HDRLEN + BIND_LEN) {
			memcpy(&eph, p + NLMSG_HDRLEN + EPH_OFF, sizeof eph);
			if (eph <= 0x7fffffffu)
				fds[n++] = (int)eph;
		}
		if (NLMSG_ALIGN(h.nlmsg_len) >= len)
			break;
		p += NLMSG_ALIGN(h.nlmsg_len);
		len -= NLMSG_ALIGN(h.nlmsg_len);
	}
	return n;
}
