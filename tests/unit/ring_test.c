/* Description: the ring copies bytes in order across the wrap, honours
 * capacity, peek does not consume, scatter/gather works, and a producer and
 * a consumer thread move 256 MiB through a small ring without a wrong byte;
 * cursors a hostile peer wrote are refused (-EPROTO) without a byte copied
 * outside the ring, a lock word held for ever is a bounded wait, and one
 * whose holder was killed holding it is taken over at once. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/transport/ring.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static struct shunt_ring_ctl ctl;
static struct ring r;

static ssize_t put(const void *b, size_t n)
{
	struct iovec iov = { (void *)b, n };
	return ring_writev(&r, &iov, 1, n);
}

static ssize_t get(void *b, size_t n, int peek)
{
	struct iovec iov = { b, n };
	return ring_readv(&r, &iov, 1, n, peek);
}

static void basics(void)
{
	char out[8192], in[8192];

	for (size_t i = 0; i < sizeof out; i++)
		out[i] = (char)(i * 7 + 1);
	CHECK(put(out, 5000) == 4096); /* capacity */
	CHECK(put(out, 1) == 0);
	CHECK(ring_space(&r) == 0 && ring_used(&r) == 4096);
	CHECK(get(in, 100, 1) == 100 && !memcmp(in, out, 100)); /* peek */
	CHECK(ring_used(&r) == 4096);
	CHECK(get(in, 3000, 0) == 3000 && !memcmp(in, out, 3000));
	CHECK(put(out + 4096, 2000) == 2000); /* wraps */
	CHECK(get(in, 8192, 0) == 3096);
	CHECK(!memcmp(in, out + 3000, 1096) && !memcmp(in + 1096, out + 4096, 2000));
	CHECK(get(in, 1, 0) == 0);
	/* gather on write, scatter on read, across the wrap */
	struct iovec w[3] = { { out, 10 }, { out + 100, 0 }, { out + 200, 3000 } };
	CHECK(ring_writev(&r, w, 3, 3010) == 3010);
	char a[7], b[3003];
	struct iovec rd[2] = { { a, sizeof a }, { b, sizeof b } };
	CHECK(ring_readv(&r, rd, 2, 3010, 0) == 3010);
	CHECK(!memcmp(a, out, 7) && !memcmp(b, out + 7, 3) && !memcmp(b + 3, out + 200, 3000));
	ring_consume(&r, 0);
}

#define TOTAL (256ull << 20)
static void *producer(void *arg)
{
	static unsigned char buf[3000];
	uint64_t pos = 0;
	(void)arg;
	while (pos < TOTAL) {
		size_t n = 1 + (pos * 31) % sizeof buf;
		if (n > TOTAL - pos)
			n = (size_t)(TOTAL - pos);
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)((pos + i) * 2654435761u >> 13);
		size_t done = 0;
		while (done < n) {
			struct iovec iov = { buf + done, n - done };
			shunt_lock(&ctl.wlock);
			ssize_t w = ring_writev(&r, &iov, 1, n - done);
			CHECK(w >= 0);
			done += (size_t)w;
			shunt_unlock(&ctl.wlock);
		}
		pos += n;
	}
	return NULL;
}

static void concurrent(void)
{
	static unsigned char buf[5000];
	pthread_t t;
	uint64_t pos = 0;

	pthread_create(&t, NULL, producer, NULL);
	while (pos < TOTAL) {
		ssize_t n = get(buf, 1 + (pos * 17) % sizeof buf, 0);
		CHECK(n >= 0);
		for (size_t i = 0; i < (size_t)n; i++)
			CHECK(buf[i] == (unsigned char)((pos + i) * 2654435761u >> 13));
		pos += n;
	}
	pthread_join(t, NULL);
	CHECK(ring_used(&r) == 0);
}

static void reset(void)
{
	memset(&ctl, 0, sizeof ctl);
	r.cons_seen = r.prod_seen = 0;
}

/* What a hostile peer can write: the cursors it owns and ours. */
static void hostile(void)
{
	static char big[1 << 20]; /* a reader's buffer far larger than the ring */
	char in[16] = "0123456789abcdef";

	reset();
	ctl.prod = 8u << 20; /* "8 MiB unread" in a 4 KiB ring */
	CHECK(get(big, sizeof big, 0) == -EPROTO && ctl.cons == 0);
	CHECK(ring_used(&r) == 1 && ring_space(&r) == 1); /* wakes, never a huge count */
	reset();
	ctl.cons = 5000; /* consumed more than was written: found at the refresh */
	CHECK(put(in, sizeof in) == 16);
	CHECK(put(big, 4096) == -EPROTO && ctl.prod == 16);
	reset();
	CHECK(put(in, sizeof in) == 16 && get(in, 8, 0) == 8);
	ctl.prod = 4; /* the writer went back */
	CHECK(get(in, 8, 0) == -EPROTO);
	reset();
	CHECK(put(in, sizeof in) == 16);
	ctl.cons = 8;
	CHECK(put(big, 4096) == 4088); /* legit: the reader moved on */
	ctl.cons = 2; /* the reader went back */
	ctl.prod = 16;
	r.cons_seen = 8;
	CHECK(put(big, 4096) == -EPROTO);
	/* cursors near 2^64 wrap like any others */
	reset();
	ctl.prod = ctl.cons = r.cons_seen = r.prod_seen = UINT64_MAX - 10;
	CHECK(put(in, sizeof in) == 16 && get(big, sizeof big, 0) == 16 && !memcmp(big, in, 16));
	/* a lock word the peer set and never clears, naming a live thread */
	ctl.wlock = (uint32_t)getppid() | 0x80000000u;
	CHECK(shunt_lock_bounded(&ctl.wlock, 200000000ull) == -ETIMEDOUT);
	ctl.wlock = 0;
	CHECK(shunt_lock_bounded(&ctl.wlock, 1) == 0 && ctl.wlock == (uint32_t)gettid());
	shunt_unlock(&ctl.wlock);
	CHECK(ctl.wlock == 0);
}

/* A holder killed with the lock (a forked sharer, SIGKILL inside its few
 * instructions): the next taker gets it within a few probes, not after
 * the bound - the shared word in a MAP_SHARED page, as a segment's is. */
static void dead_holder(void)
{
	_Atomic uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct timespec a, b;
	pid_t p;
	int st;

	CHECK(w != MAP_FAILED);
	*w = 0;
	p = fork();
	if (!p) {
		shunt_lock_forget_self(getpid());
		shunt_lock(w);
		raise(SIGKILL); /* dies holding it */
	}
	CHECK(waitpid(p, &st, 0) == p && WIFSIGNALED(st));
	CHECK((*w & 0x3fffffffu) == (uint32_t)p);
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK(shunt_lock_bounded(w, 2000000000ull) == 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 500);
	CHECK((*w & 0x3fffffffu) == (uint32_t)gettid());
	shunt_unlock(w);
	/* with probes off (a sandbox) the bound decides, as before */
	*w = (uint32_t)p | 0x80000000u;
	shunt_lock_probe_off = 1;
	CHECK(shunt_lock_bounded(w, 100000000ull) == -ETIMEDOUT);
	shunt_lock_probe_off = 0;
	munmap((void *)w, 4096);
}

int main(void)
{
	r.ctl = &ctl;
	r.size = 4096;
	r.data = aligned_alloc(4096, 4096);
	basics();
	hostile();
	dead_holder();
	reset();
	concurrent();
	printf("ring: ok\n");
	return 0;
}
