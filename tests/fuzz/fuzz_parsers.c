/* Description: libFuzzer harness for everything shunt parses from other
 * processes, peers or the environment: the accept message, the segment
 * header, the configuration, the in-band handshake and a saved SYN's TCP
 * options, the failover message and the leftovers before it,
 * /proc/loadavg's text, a line of /proc/net/tcp (`shunt ss`), a
 * rendezvous directory entry's name (the sweep), and a generic-netlink
 * send that may hand sockets to the NBD driver and the kernel's answer
 * naming a family, and an iSCSI netlink send that may hand one to the
 * kernel's initiator (kernel_sock.c).  The first input byte selects the
 * parser. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/config.h"
#include "../../src/common/msg.h"
#include "../../src/common/handshake.h"
#include "../../src/common/synopt.h"
#include "../../src/common/failover.h"
#include "../../src/common/loadavg.h"
#include "../../src/common/rdvdir.h"
#include "../../src/common/nbdnl.h"
#include "../../src/common/iscsinl.h"
#include "../../src/tools/procnet.h"

static void fuzz_config(const uint8_t *d, size_t n)
{
	char buf[512], *env[8] = { 0 }, *save = NULL, *tok;
	struct shunt_config c;
	const char *bad;
	int k = 0;

	if (n >= sizeof buf)
		n = sizeof buf - 1;
	memcpy(buf, d, n);
	buf[n] = 0;
	for (tok = strtok_r(buf, "\n", &save); tok && k < 7; tok = strtok_r(NULL, "\n", &save))
		env[k++] = tok;
	shunt_config_parse(&c, env, &bad);
	if (c.dir[0] != '/' || c.ring_size < 4096 || (c.ring_size & (c.ring_size - 1)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct shunt_accept_msg m;
	struct shunt_seg_hdr h;

	if (!n)
		return 0;
	switch (d[0] % 12) {
	case 11: {
		/* an exact-size copy (ASan sees any read past it); never
		 * more than asked, never a negative descriptor */
		uint8_t *copy = malloc(n - 1 ? n - 1 : 1);
		int fds[4], k;
		memcpy(copy, d + 1, n - 1);
		k = shunt_iscsinl_socks(copy, n - 1, fds, 4);
		free(copy);
		if (k < 0 || k > 4)
			abort();
		for (int i = 0; i < k; i++)
			if (fds[i] < 0)
				abort();
		break;
	}
	case 10: {
		/* exact-size copies; never more sockets than asked, nor any
		 * that the same bytes of any one family do not name too */
		uint8_t *copy = malloc(n - 1 ? n - 1 : 1);
		int fds[8], k, any;
		uint16_t type = 0;
		memcpy(copy, d + 1, n - 1);
		any = shunt_nbdnl_socks(copy, n - 1, 0, fds, 8, &type);
		k = any ? shunt_nbdnl_socks(copy, n - 1, type, fds, 8, NULL) : 0;
		if (any < 0 || any > 8 || k < 0 || k > any || (any && !k))
			abort();
		k = shunt_genl_family_id(copy, n - 1, d[0]);
		if (k != -1 && (k < 16 || k > 0xffff))
			abort();
		free(copy);
		break;
	}
	case 9: {
		/* a name (up to its NUL, as readdir gives it): a kind only for
		 * shunt's own names, which a sweep may remove */
		char *name = malloc(n);
		int k;
		memcpy(name, d + 1, n - 1);
		name[n - 1] = 0;
		k = rdvdir_entry_kind(name);
		if (k && (strchr(name, '/') || (k != 's' && k != 'p' && k != 't') || name[0] != (k == 's' ? 's' : 'p') ||
			  strlen(name) > 23))
			abort();
		free(name);
		break;
	}
	case 8: {
		/* text up to its NUL: an exact-size copy, so ASan sees any read past it */
		char *line = malloc(n);
		struct procnet_sock so;
		memcpy(line, d + 1, n - 1);
		line[n - 1] = 0;
		if (!procnet_parse_line(line, &so) && !strchr(line, ':'))
			abort();
		free(line);
		break;
	}
	case 7: {
		/* a count only from digits before a slash after three spaces */
		long r = shunt_loadavg_running((const char *)d + 1, n - 1);
		if (r < -1 || r > 1000000000L)
			abort();
		break;
	}
	case 6: {
		/* the failover message and the receiver's range check */
		struct shunt_fo fo;
		uint64_t prod = n > 9 ? d[1] * 131ull : 0, skip;
		int partial;
		size_t k = shunt_fo_leftovers(d + 1, n - 1, &partial);
		/* leftovers end inside the bytes, at a byte that is neither a
		 * probe nor a whole handshake message */
		if (k > n - 1 || (k < n - 1 && !d[1 + k]))
			abort();
		if (!shunt_fo_parse(d + 1, n - 1, &fo) &&
		    (fo.end < fo.start ||
		     (!shunt_fo_skip(&fo, prod, 65536, &skip) &&
		      (skip > fo.end - fo.start || fo.end - fo.start > 65536))))
			abort();
		break;
	}
	case 4: {
		struct shunt_hs_msg hm;
		uint8_t again[SHUNT_HS_MAX_LEN];
		int len = shunt_hs_peek(d + 1, n - 1);
		/* whatever parses must re-encode to the same bytes */
		if (len > 0 && (size_t)len <= n - 1 && !shunt_hs_parse(d + 1, (size_t)len, &hm) &&
		    (shunt_hs_encode(&hm, again, sizeof again) != len || memcmp(again, d + 1, (size_t)len)))
			abort();
		break;
	}
	case 0:
		if (!shunt_accept_msg_check(d + 1, n - 1, d[0] >> 6, 0, &m) &&
		    (m.ring_size < 4096 || (m.slot >= SHUNT_REG_SLOTS && m.slot != SHUNT_MSG_NO_SLOT) || m.seg >= SHUNT_ARENA_SLOTS ||
		     m.nfds != (d[0] >> 6)))
			abort();
		break;
	case 1:
		if (n - 1 >= sizeof h) {
			memcpy(&h, d + 1, sizeof h);
			shunt_seg_hdr_check(&h, h.nonce, h.ring_size);
		}
		break;
	case 3:
		if (n - 1 >= sizeof(struct shunt_arena_hdr)) {
			struct shunt_arena_hdr a;
			memcpy(&a, d + 1, sizeof a);
			if (!shunt_arena_hdr_check(&a, a.id, n * 4096) &&
			    shunt_arena_size(a.ring_size) != n * 4096)
				abort();
		}
		break;
	case 2:
		fuzz_config(d + 1, n - 1);
		break;
	case 5: {
		/* a saved SYN: only in-bounds reads (ASan), a definite answer */
		uint64_t nonce;
		uint8_t *copy = malloc(n - 1 ? n - 1 : 1);
		memcpy(copy, d + 1, n - 1);
		int r = shunt_syn_nonce(copy, n - 1, &nonce);
		free(copy);
		if (r != 0 && r != 1 && r != -EPROTO)
			abort();
		break;
	}
	}
	return 0;
}
