/* Description: libFuzzer harness for the shared ring as a hostile peer sees
 * it (issue #12): the input is a script of operations in which the peer
 * writes any value into the cursors, lock and flag words it shares with us,
 * interleaved with our reads, peeks, writes and consumes through iovecs of
 * any shape, and with the arena and segment header checks.  The ring's data
 * is its own allocation, so ASan reports any byte touched outside it; the
 * harness aborts if a call returns more than it may, or a count above the
 * ring's size. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/transport/ring.h"
#include "../../src/common/msg.h"

#define RS 4096u

static uint64_t take(const uint8_t **d, size_t *n, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && *n; i++, (*d)++, (*n)--)
		v |= (uint64_t)**d << (8 * i);
	return v;
}

/* Up to three iovecs over a heap buffer of exactly len bytes. */
static int make_iov(struct iovec *iov, uint8_t *buf, size_t len, uint64_t shape)
{
	size_t a = len ? (size_t)(shape % (len + 1)) : 0, b = len - a ? (size_t)((shape >> 16) % (len - a + 1)) : 0;

	iov[0] = (struct iovec){ buf, a };
	iov[1] = (struct iovec){ buf + a, b };
	iov[2] = (struct iovec){ buf + a + b, len - a - b };
	return 3;
}

static void check(ssize_t r, size_t max)
{
	if (r != -EPROTO && (r < 0 || (size_t)r > max || (size_t)r > RS))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct shunt_ring_ctl *ctl = calloc(1, sizeof *ctl);
	struct ring r = { .ctl = ctl, .data = malloc(RS), .size = RS };

	while (n) {
		unsigned op = (unsigned)take(&d, &n, 1) % 10;
		uint64_t v = take(&d, &n, op < 4 ? 8 : 3);
		struct iovec iov[3];
		size_t len = (size_t)(v & 0x3fff);
		uint8_t *buf;

		switch (op) {
		case 0: /* the peer writes a cursor: ours or its own */
			__atomic_store_n(&ctl->prod, v, __ATOMIC_RELAXED);
			break;
		case 1:
			__atomic_store_n(&ctl->cons, v, __ATOMIC_RELAXED);
			break;
		case 2: /* a legal-looking nudge: cursors near each other */
			__atomic_store_n(&ctl->prod, __atomic_load_n(&ctl->cons, __ATOMIC_RELAXED) + (v % (2 * RS)),
					 __ATOMIC_RELAXED);
			break;
		case 3: /* the other words it can scribble on */
			ctl->wr_done = (uint32_t)v;
			ctl->rd_want = (uint32_t)(v >> 32);
			break;
		case 4:
		case 5: /* read or peek */
			buf = malloc(len ? len : 1);
			make_iov(iov, buf, len, v);
			check(ring_readv(&r, iov, 3, len, op == 5), len);
			free(buf);
			break;
		case 6: /* write */
			buf = malloc(len ? len : 1);
			memset(buf, 0x5a, len);
			make_iov(iov, buf, len, v);
			check(ring_writev(&r, iov, 3, len), len);
			free(buf);
			break;
		case 7:
			if (ring_used(&r) > RS || ring_space(&r) > RS)
				abort();
			break;
		case 8: { /* a header from the peer: never accepted unless consistent */
			struct shunt_arena_hdr h;
			memset(&h, 0, sizeof h);
			h.magic = SHUNT_ARENA_MAGIC;
			h.version = SHUNT_WIRE_VERSION;
			h.id = 7;
			h.nslots = (uint32_t)(v & 1 ? SHUNT_ARENA_SLOTS : v);
			h.ring_size = (uint32_t)(v & 2 ? RS : v >> 3);
			size_t fsize = (v & 4) ? shunt_arena_size(h.ring_size) : (size_t)(v >> 5);
			if (!shunt_arena_hdr_check(&h, 7, fsize) &&
			    (fsize != shunt_arena_size(h.ring_size) || h.ring_size < 4096 ||
			     (h.ring_size & (h.ring_size - 1))))
				abort();
			break;
		}
		case 9: { /* a segment header the peer rewrote */
			struct shunt_seg_hdr h;
			memset(&h, (int)(v & 0xff), sizeof h);
			if (v & 0x100)
				shunt_seg_hdr_init(&h, RS, 11);
			h.ring_size = (v & 0x200) ? (uint32_t)(v >> 10) : h.ring_size;
			if (!shunt_seg_hdr_check(&h, 11, RS) && h.ring_size != RS)
				abort();
			break;
		}
		}
	}
	free(r.data);
	free(ctl);
	return 0;
}
