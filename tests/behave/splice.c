/* Description: splice() moves bytes to and from a TCP socket through a
 * pipe without losing or reordering any: file -> pipe -> socket (8 MiB,
 * as a static file server sends), socket -> pipe -> user space, and a
 * socket -> pipe -> socket echo (as haproxy relays with `option splice-*`);
 * a non-blocking empty socket returns EAGAIN.  (Issue #13, item
 * 2: the kernel's splice went under the rings - the sender was told 8 MiB
 * went, the receiver got none, and the relay hung.) */
#include "common.h"
#include <pthread.h>

#define FILE_N (8u << 20)
#define ECHO_N (1u << 20)

static int sock;

/* splice exactly n bytes from `from` into `to` (one must be a pipe) */
static void splice_n(int from, loff_t *off, int to, size_t n)
{
	while (n) {
		ssize_t r = splice(from, off, to, NULL, n < 65536 ? n : 65536, SPLICE_F_MOVE);
		CHECK(r > 0);
		n -= (size_t)r;
	}
}

static void *echo_writer(void *arg)
{
	static uint8_t buf[ECHO_N];

	(void)arg;
	for (size_t i = 0; i < ECHO_N; i++)
		buf[i] = pattern(i, 9);
	write_all(sock, buf, ECHO_N);
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), pp[2];
	static uint8_t buf[FILE_N];
	char tmpl[] = "/tmp/shunt-splice.XXXXXX";

	deadline(60);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL), got = 0;
		char b;
		CHECK(c >= 0 && pipe(pp) == 0);
		/* 1: socket -> pipe -> here */
		while (got < (int)FILE_N) {
			ssize_t r = splice(c, NULL, pp[1], NULL, 65536, 0);
			CHECK(r > 0);
			read_all(pp[0], buf + got, (size_t)r);
			got += (int)r;
		}
		for (size_t i = 0; i < FILE_N; i++)
			if (buf[i] != pattern(i, 8)) {
				fprintf(stderr, "byte %zu differs\n", i);
				_exit(1);
			}
		/* 2: an empty non-blocking socket: EAGAIN (SPLICE_F_NONBLOCK
		 * is the pipe's side only) */
		CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
		CHECK(splice(c, NULL, pp[1], NULL, 100, SPLICE_F_NONBLOCK) < 0 && errno == EAGAIN);
		CHECK(splice(c, NULL, pp[1], NULL, 100, 0) < 0 && errno == EAGAIN);
		CHECK(fcntl(c, F_SETFL, 0) == 0);
		write_all(c, "k", 1);
		/* 3: echo through the pipe until EOF */
		for (;;) {
			ssize_t r = splice(c, NULL, pp[1], NULL, 65536, 0);
			CHECK(r >= 0);
			if (!r)
				break;
			splice_n(pp[0], NULL, c, (size_t)r);
		}
		CHECK(read(c, &b, 1) == 0);
		_exit(0);
	}
	sock = connect_to(&ss, len);
	expect_mode_peer_forks(sock);

	int f = mkstemp(tmpl);
	CHECK(f >= 0 && pipe(pp) == 0);
	unlink(tmpl);
	for (size_t i = 0; i < FILE_N; i++)
		buf[i] = pattern(i, 8);
	write_all(f, buf, FILE_N);
	loff_t off = 0;
	for (size_t left = FILE_N; left;) {
		ssize_t r = splice(f, &off, pp[1], NULL, left < 65536 ? left : 65536, 0);
		CHECK(r > 0);
		splice_n(pp[0], NULL, sock, (size_t)r);
		left -= (size_t)r;
	}
	CHECK(off == FILE_N);
	char k;
	read_all(sock, &k, 1);
	CHECK(k == 'k');

	pthread_t t;
	CHECK(pthread_create(&t, NULL, echo_writer, NULL) == 0);
	read_all(sock, buf, ECHO_N);
	pthread_join(t, NULL);
	for (size_t i = 0; i < ECHO_N; i++)
		CHECK(buf[i] == pattern(i, 9));
	shutdown(sock, SHUT_WR);
	CHECK(wait_child(p) == 0);
	return 0;
}
