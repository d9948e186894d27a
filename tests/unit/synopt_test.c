/* Description: finding shunt's option in a saved SYN (what the server's
 * shim reads when an accepted socket has no verdict from the agent):
 * IPv4 and IPv6 SYNs with the option among others (MSS, NOPs, SACK,
 * timestamps, another experimental option), without it, and malformed
 * headers (truncated, bad header lengths, option lengths running past the
 * header, zero option length) rejected; every truncation of a valid SYN
 * is answered without reading past the buffer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/synopt.h"
#include "shunt/wire.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

/* Build a SYN: network header (v4 or v6), TCP header with the options. */
static size_t syn(uint8_t *p, int v6, const uint8_t *opts, size_t olen)
{
	size_t hl = v6 ? 40 : 20, tl = 20 + olen;

	memset(p, 0, hl + tl);
	if (v6) {
		p[0] = 0x60;
		p[6] = 6;
	} else {
		p[0] = 0x45;
		p[9] = 6;
	}
	p[hl + 12] = (uint8_t)((tl / 4) << 4);
	p[hl + 13] = 0x02;
	memcpy(p + hl + 20, opts, olen);
	return hl + tl;
}

static const uint8_t ours[12] = { 254, 12, 0x53, 0x48, 1, 2, 3, 4, 5, 6, 7, 8 };

int main(void)
{
	uint8_t p[128], opts[40], *heap;
	uint64_t nonce = 0;
	size_t n, k = 0;

	/* MSS, SACK-permitted, timestamps, NOP, window scale, then ours */
	const uint8_t lead[] = { 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7 };
	memcpy(opts, lead, sizeof lead);
	k = sizeof lead;
	memcpy(opts + k, ours, sizeof ours);
	k += sizeof ours;
	for (int v6 = 0; v6 < 2; v6++) {
		n = syn(p, v6, opts, k);
		CHECK(shunt_syn_nonce(p, n, &nonce) == 1 && nonce == 0x0102030405060708ull);
		/* every truncation: an answer, and reads stay inside (ASan) */
		for (size_t t = 0; t < n; t++) {
			heap = malloc(t ? t : 1);
			memcpy(heap, p, t);
			int r = shunt_syn_nonce(heap, t, &nonce);
			CHECK(r == 0 || r == -EPROTO);
			free(heap);
		}
	}
	/* without ours, and with another experiment's ExID under kind 254 */
	n = syn(p, 0, lead, sizeof lead);
	CHECK(shunt_syn_nonce(p, n, &nonce) == 0);
	uint8_t other[12 + 4] = { 254, 12, 0x12, 0x34, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0 };
	n = syn(p, 0, other, sizeof other);
	CHECK(shunt_syn_nonce(p, n, &nonce) == 0);
	/* an end-of-options before ours hides it */
	uint8_t eol[16] = { 0 };
	memcpy(eol + 4, ours, sizeof ours);
	n = syn(p, 0, eol, sizeof eol);
	CHECK(shunt_syn_nonce(p, n, &nonce) == 0);
	/* malformed: option length 0 or 1, past the header; bad data offset;
	 * bad IP header length; not TCP; unknown IP version */
	uint8_t zero[4] = { 8, 0, 1, 1 };
	n = syn(p, 0, zero, sizeof zero);
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	uint8_t over[4] = { 8, 10, 1, 1 };
	n = syn(p, 0, over, sizeof over);
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	uint8_t lonely[4] = { 1, 1, 1, 8 };
	n = syn(p, 0, lonely, sizeof lonely);
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	n = syn(p, 0, ours, sizeof ours);
	p[20 + 12] = 0x40; /* data offset 16 bytes */
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	p[20 + 12] = 0xf0; /* 60 bytes: more than there is */
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	n = syn(p, 0, ours, sizeof ours);
	p[0] = 0x44;
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	p[0] = 0x45;
	p[9] = 17;
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	p[0] = 0x55;
	CHECK(shunt_syn_nonce(p, n, &nonce) == -EPROTO);
	CHECK(shunt_syn_nonce(p, 0, &nonce) == -EPROTO);
	printf("synopt: ok\n");
	return 0;
}
