/* Description: the failover message (wire.h 5c): what is encoded parses
 * back to the same fields; every single-byte change of the fixed fields,
 * a short buffer and a backwards range are rejected; the receiver's check
 * accepts exactly start <= prod <= end within one ring and gives the bytes
 * to drop; fd-passed (23) and descriptors (24) are reasons it carries;
 * the leftovers before it on a shared-memory connection's socket (probes,
 * a whole handshake message) are measured exactly, a cut message is "partial", anything
 * else ends them. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/failover.h"
#include "../../src/common/handshake.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

int main(void)
{
	uint8_t b[sizeof(struct shunt_fo)], bad[sizeof b];
	struct shunt_fo m;
	uint64_t skip;

	CHECK(shunt_fo_encode(b, 1000, 5000, SHUNT_R_LINK_FAILED) == (int)sizeof b);
	CHECK(!shunt_fo_parse(b, sizeof b, &m));
	CHECK(m.start == 1000 && m.end == 5000 && m.reason == SHUNT_R_LINK_FAILED);
	CHECK(b[0] != 0); /* never taken for a zero-byte probe */
	for (size_t k = 0; k < sizeof b; k++)
		CHECK(shunt_fo_parse(b, k, &m) == -EAGAIN);
	/* a start that is not one says so at once (a closed socket's linger
	 * does not wait for the rest of an application's bytes) */
	memcpy(bad, b, sizeof b);
	bad[0] = 'G';
	CHECK(shunt_fo_parse(bad, 1, &m) == -EPROTO && shunt_fo_parse(bad, 20, &m) == -EPROTO);
	memcpy(bad, b, sizeof b);
	bad[1] ^= 1;
	CHECK(shunt_fo_parse(bad, 1, &m) == -EAGAIN && shunt_fo_parse(bad, 2, &m) == -EPROTO);
	/* kind, version, pad, reason, magic: any change is refused */
	for (size_t k = 0; k < 16; k++) {
		memcpy(bad, b, sizeof b);
		bad[k] ^= 0x10;
		CHECK(shunt_fo_parse(bad, sizeof bad, &m) == -EPROTO);
	}
	shunt_fo_encode(bad, 5000, 1000, SHUNT_R_PEER_FAILOVER);
	CHECK(shunt_fo_parse(bad, sizeof bad, &m) == -EPROTO);
	shunt_fo_encode(bad, 1, 2, SHUNT_R_FORK); /* moved before fork or exec */
	CHECK(!shunt_fo_parse(bad, sizeof bad, &m) && m.reason == SHUNT_R_FORK);
	shunt_fo_encode(bad, 1, 2, SHUNT_R_POLICY);
	CHECK(shunt_fo_parse(bad, sizeof bad, &m) == -EPROTO);

	CHECK(!shunt_fo_parse(b, sizeof b, &m));
	CHECK(!shunt_fo_skip(&m, 1000, 65536, &skip) && skip == 0);
	CHECK(!shunt_fo_skip(&m, 4321, 65536, &skip) && skip == 3321);
	CHECK(!shunt_fo_skip(&m, 5000, 65536, &skip) && skip == 4000);
	CHECK(shunt_fo_skip(&m, 999, 65536, &skip) == -EPROTO);   /* we lack bytes it will not send */
	CHECK(shunt_fo_skip(&m, 5001, 65536, &skip) == -EPROTO);  /* we have bytes it never sent */
	CHECK(shunt_fo_skip(&m, 2000, 2048, &skip) == -EPROTO);   /* more than a ring was unconsumed */
	shunt_fo_encode(bad, 7, 7, SHUNT_R_FD_PASSED); /* a passed descriptor */
	CHECK(!shunt_fo_parse(bad, sizeof bad, &m) && m.reason == SHUNT_R_FD_PASSED && m.start == 7);
	shunt_fo_encode(bad, 9, 9, SHUNT_R_DESCRIPTORS); /* descriptors given back */
	CHECK(!shunt_fo_parse(bad, sizeof bad, &m) && m.reason == SHUNT_R_DESCRIPTORS && m.end == 9);
	shunt_fo_encode(bad, 9, 9, SHUNT_R_DESCRIPTORS + 1); /* no such reason */
	CHECK(shunt_fo_parse(bad, sizeof bad, &m) == -EPROTO);

	/* leftovers: 3 probes, a CONFIRM, the message */
	uint8_t s[512];
	struct shunt_hs_msg hm = { .type = SHUNT_HS_CONFIRM, .version = SHUNT_HS_VERSION };
	int hl, part;
	memset(s, 0, 3);
	hl = shunt_hs_encode(&hm, s + 3, sizeof s - 3);
	CHECK(hl > 8);
	memcpy(s + 3 + hl, bad, sizeof bad);
	CHECK(shunt_fo_leftovers(s, 3 + (size_t)hl + sizeof bad, &part) == 3 + (size_t)hl && !part);
	CHECK(shunt_fo_leftovers(s, 3 + (size_t)hl - 1, &part) == 3 && part);  /* cut message */
	CHECK(shunt_fo_leftovers(s, 5, &part) == 3 && part);                   /* cut header */
	CHECK(shunt_fo_leftovers(s, 3, &part) == 3 && !part);                  /* only probes */
	s[4] ^= 1;                                                             /* not a message */
	CHECK(shunt_fo_leftovers(s, 3 + (size_t)hl, &part) == 3 && !part);
	CHECK(shunt_fo_leftovers(bad, sizeof bad, &part) == 0 && !part);
	printf("failover message: encode/parse, corruptions, receiver's range, leftovers: ok\n");
	return 0;
}
