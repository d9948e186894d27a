/* SPDX-License-Identifier: MIT */
/*
 * fault.c - fault injection for tests, compiled only into
 * build/libshunt-faults.so (-DSHUNT_FAULTS); the real library has none.
 *
 *   SHUNT_FAULT_HS=SEED   every in-band handshake message this process
 *                         sends gets one byte of its body or trailer
 *                         changed (which byte and how follow from SEED), so
 *                         the peer receives a well-framed but hostile
 *                         message: it must decline or ignore it, never
 *                         crash, hang or lose a data byte.
 *   SHUNT_FAULT_RDMA=BYTES   the first RDMA connection of this process
 *                         whose staged bytes reach BYTES has its link's
 *                         queue pair forced into the error state right
 *                         after that post (SHUNT_FAULT_RDMA_ONCE=0: every
 *                         link, once each): a link failure at an exact
 *                         byte, which its connections must survive on TCP.
 */
#ifdef SHUNT_FAULTS
#define _GNU_SOURCE
#include <stdlib.h>
#include "shim.h"

int shunt_fault_rdma(uint64_t staged)
{
	static uint64_t at;
	static int armed = -1, once = 1, fired;
	const char *v;

	if (armed < 0) {
		v = getenv("SHUNT_FAULT_RDMA");
		armed = v && *v;
		at = armed ? strtoull(v, NULL, 0) : 0;
		v = getenv("SHUNT_FAULT_RDMA_ONCE");
		once = !(v && *v == '0');
	}
	if (!armed || staged < at || (once && fired))
		return 0;
	fired = 1;
	shunt_log("fault: link broken after %llu staged bytes", (unsigned long long)staged);
	return 1;
}

void shunt_fault_hs(uint8_t *msg, int len)
{
	static uint64_t state;
	static int armed = -1;
	const char *v;
	int span = len - 8; /* after the 8-byte header */

	if (armed < 0) {
		v = getenv("SHUNT_FAULT_HS");
		armed = v && *v;
		state = armed ? strtoull(v, NULL, 0) * 0x9e3779b97f4a7c15ull + 1 : 0;
	}
	if (!armed || span <= 0)
		return;
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	msg[8 + (int)(state % (uint64_t)span)] ^= (uint8_t)(1 + (state >> 32) % 255);
	shunt_log("fault: handshake message of %d bytes mutated", len);
}
#endif
