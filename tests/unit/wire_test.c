/* Description: every parser of cross-process input rejects what it must
 * (wrong magic, version, sizes, fd counts, truncation) and accepts exactly
 * the well-formed case; the config parser keeps defaults on bad values. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/config.h"
#include "../../src/common/msg.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void accept_msg(void)
{
	struct shunt_accept_msg m = { .magic = SHUNT_MSG_MAGIC, .version = SHUNT_WIRE_VERSION,
				      .nfds = 3, .nonce = 42, .ring_size = 65536, .slot = 3,
				      .arena = 9, .seg = 1,
				      .flags = SHUNT_MSG_F_ARENA }, out, bad;

	CHECK(shunt_accept_msg_check(&m, sizeof m, 3, 0, &out) == 0 && out.nonce == 42);
	bad = m; bad.flags = 0; bad.nfds = 0; /* a known arena: no descriptors */
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 0, 0, &out) == 0);
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad.nfds = 2; /* version 1's per-segment eventfd pair */
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 2, 0, &out) == -EPROTO);
	bad = m; bad.flags |= 2; /* version 1's eventfd flag */
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.reserved = 1;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.flags |= 4; /* unknown flag */
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.seg = SHUNT_ARENA_SLOTS;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.arena = 0;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	CHECK(shunt_accept_msg_check(&m, sizeof m - 1, 3, 0, &out) == -EPROTO);
	CHECK(shunt_accept_msg_check(&m, sizeof m, 2, 0, &out) == -EPROTO);
	CHECK(shunt_accept_msg_check(&m, sizeof m, 3, 1, &out) == -EPROTO);
	bad = m; bad.magic ^= 1;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.version = 99;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.ring_size = 65537;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.ring_size = 1024;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
	bad = m; bad.slot = SHUNT_REG_SLOTS;
	CHECK(shunt_accept_msg_check(&bad, sizeof bad, 3, 0, &out) == -EPROTO);
}

static void seg_hdr(void)
{
	struct shunt_seg_hdr h;
	struct shunt_arena_hdr a = { .magic = SHUNT_ARENA_MAGIC, .version = SHUNT_WIRE_VERSION,
				     .id = 5, .nslots = SHUNT_ARENA_SLOTS, .ring_size = 65536 };
	size_t full = shunt_arena_size(65536);

	shunt_seg_hdr_init(&h, 65536, 7);
	CHECK(shunt_seg_hdr_check(&h, 7, 65536) == 0);
	CHECK(shunt_seg_hdr_check(&h, 8, 65536) == -EPROTO);     /* someone else's */
	CHECK(shunt_seg_hdr_check(&h, 7, 131072) == -EPROTO);    /* not this arena's size */
	CHECK(shunt_arena_hdr_check(&a, 5, full) == 0);
	CHECK(shunt_arena_hdr_check(&a, 6, full) == -EPROTO);
	CHECK(shunt_arena_hdr_check(&a, 5, full - 1) == -EPROTO); /* would SIGBUS */
	a.ring_size = 3 << 12;
	CHECK(shunt_arena_hdr_check(&a, 5, full) == -EPROTO);
}

static void config(void)
{
	struct shunt_config c;
	const char *bad = NULL;
	char *good[] = { "SHUNT_RING_KB=100", "SHUNT_SPIN_US=-1", "SHUNT_PORTS=80,6379",
			 "SHUNT_ACCEPT_WAIT_MS=5", "SHUNT_DIR=/tmp/x", "SHUNT_LOCAL=0",
			 "SHUNT_RDMA_FORK=keep", "SHUNT_RDMA_ACK_TIMEOUT=18", "SHUNT_BUSY_SHORT=off", "SHUNT_BUSY_RUNNABLE=3", NULL };
	char *badenv[] = { "SHUNT_RING_KB=abc", "SHUNT_SPIN_US=99999999999", "SHUNT_PORTS=1,,0",
			   "SHUNT_DIR=relative", "SHUNT_LOCAL=yes", "SHUNT_RDMA_FORK=sometimes",
			   "SHUNT_RDMA_ACK_TIMEOUT=0", "SHUNT_BUSY_SHORT=sometimes", "SHUNT_BUSY_RUNNABLE=0", NULL };

	CHECK(shunt_config_parse(&c, good, &bad) == 0);
	CHECK(c.ring_size == 128 * 1024 && c.spin_ns == -1 && c.nports == 2 && c.accept_wait_ms == 5);
	CHECK(!strcmp(c.dir, "/tmp/x") && c.local == 0 && c.rdma_fork_keep == 1 &&
	      c.rdma_ack_timeout == 18 && c.busy_short == 0 && c.busy_runnable == 3);
	CHECK(shunt_config_port_allowed(&c, 6379) && !shunt_config_port_allowed(&c, 22));
	CHECK(shunt_config_parse(&c, badenv, &bad) == -EINVAL && bad);
	CHECK(c.ring_size == 256 * 1024 && c.spin_ns == 20000 && c.nports == 0);
	CHECK(c.dir[0] == '/' && strcmp(c.dir, "relative") && c.local == 1 && c.rdma_fork_keep == 0 &&
	      c.rdma_ack_timeout == 14 && c.busy_short == 1 && c.busy_runnable == 40);
	CHECK(shunt_config_port_allowed(&c, 22));
}

int main(void)
{
	accept_msg();
	seg_hdr();
	config();
	printf("wire: ok\n");
	return 0;
}
