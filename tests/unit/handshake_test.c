/* Description: the in-band handshake codec: every message type round-trips
 * in network byte order; peek finds the length from 8 bytes and nothing
 * more; truncation, a wrong eyecatcher (header or trailer), type, length,
 * version, unknown transports or features, two transports in an ACCEPT, a
 * bad ring size, RDMA fields without RDMA, a peer queue pair outside an
 * RDMA ACCEPT and bad decline reasons are all rejected; and a byte-wise mutation sweep never crashes the parser. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/handshake.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static struct shunt_hs_msg proposal(void)
{
	struct shunt_hs_msg m = { .type = SHUNT_HS_PROPOSAL, .version = SHUNT_HS_VERSION };
	memset(m.offer.host_id, 0xab, sizeof m.offer.host_id);
	m.offer.proc_id = 0x1122334455667788ull;
	m.offer.nonce = 0xdeadbeefcafef00dull;
	m.offer.domain = 0x0102030405060708ull;
	m.offer.transports = SHUNT_HS_T_SHM | SHUNT_HS_T_RDMA;
	m.offer.ring_size = 262144;
	m.offer.qpn = 77;
	m.offer.rkey = 99;
	m.offer.addr = 0x7f0000001000ull;
	return m;
}

int main(void)
{
	uint8_t buf[SHUNT_HS_MAX_LEN], copy[SHUNT_HS_MAX_LEN];
	struct shunt_hs_msg m = proposal(), out, bad;
	int n = shunt_hs_encode(&m, buf, sizeof buf);

	CHECK(n == 8 + 88 + 4);
	CHECK(buf[0] == 'S' && buf[1] == 'H' && buf[2] == 'N' && buf[3] == 'T'); /* network order */
	CHECK(buf[7] == n && buf[6] == 0);
	CHECK(shunt_hs_peek(buf, 7) == -EAGAIN);
	CHECK(shunt_hs_peek(buf, 8) == n);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == 0);
	CHECK(out.type == SHUNT_HS_PROPOSAL && !memcmp(&out.offer, &m.offer, sizeof m.offer));
	CHECK(shunt_hs_parse(buf, (size_t)n - 1, &out) == -EPROTO);   /* truncated */
	CHECK(shunt_hs_encode(&m, buf, (size_t)n - 1) == -ENOSPC);
	n = shunt_hs_encode(&m, buf, sizeof buf);

	/* ACCEPT: exactly one transport */
	bad = m;
	bad.type = SHUNT_HS_ACCEPT;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad.offer.transports = SHUNT_HS_T_SHM;
	bad.offer.qpn = bad.offer.rkey = 0;
	bad.offer.addr = 0;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == 0 && out.offer.transports == SHUNT_HS_T_SHM);
	bad.offer.qpn = 5; /* RDMA fields without RDMA */
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);

	/* peer_qpn: only in an ACCEPT of RDMA (the client queue pair its link reaches) */
	bad = m; bad.type = SHUNT_HS_ACCEPT; bad.offer.transports = SHUNT_HS_T_RDMA;
	bad.offer.peer_qpn = 0x123456;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == 0 && out.offer.peer_qpn == 0x123456);
	bad.type = SHUNT_HS_CONFIRM;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad = m; bad.offer.peer_qpn = 1; /* a proposal */
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);

	/* field checks on the proposal */
	bad = m; bad.offer.transports = 4;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad = m; bad.offer.transports = 0;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad = m; bad.offer.ring_size = 5000;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad = m; bad.offer.features = 1;
	n = shunt_hs_encode(&bad, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	bad = m; bad.version = 0;
	CHECK(shunt_hs_encode(&bad, buf, sizeof buf) == -EINVAL);

	/* decline */
	struct shunt_hs_msg d = { .type = SHUNT_HS_DECLINE, .version = 1, .reason = SHUNT_R_HS_NO_TRANSPORT };
	n = shunt_hs_encode(&d, buf, sizeof buf);
	CHECK(n == 8 + 8 + 4);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == 0 && out.reason == SHUNT_R_HS_NO_TRANSPORT);
	d.reason = 0;
	n = shunt_hs_encode(&d, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);
	d.reason = SHUNT_R_MAX;
	n = shunt_hs_encode(&d, buf, sizeof buf);
	CHECK(shunt_hs_parse(buf, (size_t)n, &out) == -EPROTO);

	/* header and trailer damage; application bytes are not a message */
	n = shunt_hs_encode(&m, buf, sizeof buf);
	memcpy(copy, buf, (size_t)n);
	copy[0] = 'G';
	CHECK(shunt_hs_peek(copy, (size_t)n) == -EPROTO);
	memcpy(copy, buf, (size_t)n);
	copy[n - 1] ^= 1;
	CHECK(shunt_hs_parse(copy, (size_t)n, &out) == -EPROTO);
	memcpy(copy, buf, (size_t)n);
	copy[4] = 9; /* unknown type */
	CHECK(shunt_hs_peek(copy, (size_t)n) == -EPROTO);
	memcpy(copy, buf, (size_t)n);
	copy[7] ^= 4; /* length */
	CHECK(shunt_hs_peek(copy, (size_t)n) == -EPROTO);
	CHECK(shunt_hs_peek("GET / HTTP/1.1\r\n", 16) == -EPROTO);

	/* every single-byte corruption: parse either rejects or yields a
	 * message that re-encodes to exactly those bytes */
	for (int i = 0; i < n; i++)
		for (int v = 0; v < 256; v += 37) {
			memcpy(copy, buf, (size_t)n);
			copy[i] = (uint8_t)v;
			if (shunt_hs_parse(copy, (size_t)n, &out) == 0) {
				uint8_t again[SHUNT_HS_MAX_LEN];
				CHECK(shunt_hs_encode(&out, again, sizeof again) == n);
				CHECK(!memcmp(again, copy, (size_t)n));
			}
		}
	printf("handshake: ok\n");
	return 0;
}
