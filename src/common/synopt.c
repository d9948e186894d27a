/* SPDX-License-Identifier: MIT */
/* synopt.c - parse a saved SYN's headers for shunt's option; bounds-checked. */
#include <errno.h>
#include "synopt.h"
#include "shunt/wire.h"

#define IPPROTO_TCP_ 6

static int tcp_opts(const uint8_t *t, size_t len, uint64_t *nonce)
{
	size_t doff, i;

	if (len < 20)
		return -EPROTO;
	doff = (size_t)(t[12] >> 4) * 4;
	if (doff < 20 || doff > len)
		return -EPROTO;
	for (i = 20; i < doff;) {
		uint8_t kind = t[i], olen;
		if (kind == 0)
			break;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= doff)
			return -EPROTO;
		olen = t[i + 1];
		if (olen < 2 || i + olen > doff)
			return -EPROTO;
		if (kind == SHUNT_OPT_KIND && olen == SHUNT_OPT_LEN &&
		    ((t[i + 2] << 8) | t[i + 3]) == SHUNT_OPT_EXID) {
			uint64_t v = 0;
			for (int k = 0; k < 8; k++)
				v = (v << 8) | t[i + 4 + k];
			*nonce = v;
			return 1;
		}
		i += olen;
	}
	return 0;
}

int shunt_syn_nonce(const void *pkt, size_t len, uint64_t *nonce)
{
	const uint8_t *p = pkt;
	size_t hl;

	if (len < 1)
		return -EPROTO;
	switch (p[0] >> 4) {
	case 4:
		hl = (size_t)(p[0] & 15) * 4;
		if (hl < 20 || len < hl || p[9] != IPPROTO_TCP_)
			return -EPROTO;
		break;
	case 6:
		/* The kernel saves the headers it parsed; a SYN with extension
		 * headers before TCP is not one shunt ever signals in. */
		hl = 40;
		if (len < hl || p[6] != IPPROTO_TCP_)
			return 0;
		break;
	default:
		return -EPROTO;
	}
	return tcp_opts(p + hl, len - hl, nonce);
}
