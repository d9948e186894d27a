/* SPDX-License-Identifier: MIT */
/*
 * common.h - helpers for the behaviour tests.
 *
 * Every test is one program checking one behaviour of a TCP connection.  The
 * runner executes it twice: without shunt (SHUNT_EXPECT unset: the kernel's
 * TCP is the reference) and under shunt with SHUNT_EXPECT=shm, where
 * expect_mode() also asserts that the connection really was accelerated.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "shunt/shunt.h"

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n",   \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

static inline double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A listener on an ephemeral port of addr (IPv4 or IPv6 literal). */
/* SHUNT_TEST_ADDR replaces 127.0.0.1: the RDMA suite runs every program
 * between two devices' addresses (tests/rdma/run.sh). */
static inline int listen_on(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	const char *over = getenv("SHUNT_TEST_ADDR");
	int fam, one = 1;

	if (over && !strcmp(addr, "127.0.0.1"))
		addr = over;
	fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	int l = socket(fam, SOCK_STREAM, 0);
	CHECK(l >= 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(ss, 0, sizeof *ss);
	if (fam == AF_INET) {
		struct sockaddr_in *in = (void *)ss;
		in->sin_family = AF_INET;
		CHECK(inet_pton(AF_INET, addr, &in->sin_addr) == 1);
		*len = sizeof *in;
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;
		in6->sin6_family = AF_INET6;
		CHECK(inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1);
		*len = sizeof *in6;
	}
	CHECK(bind(l, (void *)ss, *len) == 0);
	CHECK(listen(l, 128) == 0);
	CHECK(getsockname(l, (void *)ss, len) == 0);
	return l;
}

static inline int connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (const void *)ss, len) == 0);
	return fd;
}

/* Under shunt with SHUNT_EXPECT=shm the socket must be accelerated;
 * with SHUNT_EXPECT=tcp it must be plain; unset: plain kernel run.  With
 * SHUNT_EXPECT=rdma a connection that moved to TCP because its process
 * forked or exec'd counts too (that is how RDMA connections survive those). */
static inline void expect_mode_ex(int fd, int peer_forks)
{
	const char *want = getenv("SHUNT_EXPECT");
	struct shunt_info info;
	socklen_t l = sizeof info;
	int r = getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l);

	if (!want)
		return;
	if (r) {
		fprintf(stderr, "expect_mode: shunt is not loaded\n");
		exit(1);
	}
	if ((!strcmp(want, "shm") && info.mode != 1) || (!strcmp(want, "tcp") && info.mode != 0) ||
	    (!strcmp(want, "rdma") && info.mode != 3 &&
	     !(info.mode == 0 && (info.reason == 18 || (peer_forks && info.reason == 17))))) {
		fprintf(stderr, "expect_mode: fd %d is in mode %u (reason %u), wanted %s\n", fd,
			info.mode, info.reason, want);
		exit(1);
	}
}

static inline void expect_mode(int fd)
{
	expect_mode_ex(fd, 0);
}

/* A client whose server forks per connection: over RDMA the server's fork
 * moves the connection to TCP, which the client may have heard already
 * (reason 17, peer-failover). */
static inline void expect_mode_peer_forks(int fd)
{
	expect_mode_ex(fd, 1);
}

static inline void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		CHECK(w > 0);
		p += w;
		n -= (size_t)w;
	}
}

static inline void read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		p += r;
		n -= (size_t)r;
	}
}

/* A deterministic byte stream: position -> byte. */
static inline uint8_t pattern(uint64_t pos, uint32_t seed)
{
	uint64_t x = pos * 0x9E3779B97F4A7C15ull + seed;
	x ^= x >> 29;
	return (uint8_t)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

static inline int wait_child(pid_t p)
{
	int st;
	CHECK(waitpid(p, &st, 0) == p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Fail instead of hanging: every test arms this. */
static inline void deadline(unsigned sec)
{
	alarm(sec);
}
#endif
