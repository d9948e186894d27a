/* Description: a client's first bytes, written as soon as connect()
 * returned, before the server accepted - as TCP's kernel takes them.
 * shunt leaves the offer pending and carries up to 1020 bytes in the
 * offer's slot, which the server copies into the ring before it answers
 * (src/setup/early.c).  Each case run plain and under shunt: bytes that
 * fit, bytes that do not (300 + 600 + 2000), a write then an immediate
 * close, a server that accepts only after the client's wait for its
 * answer ran out (the early bytes then go onto the socket first), writev
 * and MSG_MORE, a fork with the offer pending, epoll, and a server that
 * speaks first to a client that left the connection untouched. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/uio.h>
#include <sys/wait.h>

enum { C_SIZES, C_CLOSE, C_SLOW, C_VEC, C_FORK, C_EPOLL, C_GREET, NCASES };

#define SIZES_TOTAL (300 + 600 + 2000)

static void echo(int s, size_t n, uint32_t seed)
{
	char *b = malloc(n);

	CHECK(b);
	read_all(s, b, n);
	for (size_t k = 0; k < n; k++)
		CHECK(b[k] == (char)pattern(k, seed));
	write_all(s, b, n);
	free(b);
}

static void server(int l)
{
	for (int c = 0; c < NCASES; c++) {
		int s;
		char b[8];
		if (c == C_SLOW)
			usleep(600000); /* past the client's wait for an answer (200 ms) */
		CHECK((s = accept(l, NULL, NULL)) >= 0);
		if (c != C_SLOW)
			expect_mode_peer_forks(s);
		switch (c) {
		case C_SIZES:
			echo(s, SIZES_TOTAL, 1);
			break;
		case C_CLOSE:
			expect_pattern(s, 700, 2);
			CHECK(recv(s, b, 1, 0) == 0);
			break;
		case C_SLOW:
			echo(s, 100, 3);
			break;
		case C_VEC:
			echo(s, 150, 4);
			break;
		case C_FORK:
			echo(s, 200, 5);
			CHECK(recv(s, b, 1, 0) == 0);
			break;
		case C_EPOLL:
			echo(s, 64, 6);
			break;
		case C_GREET:
			write_all(s, "hi", 2);
			read_all(s, b, 2);
			CHECK(!memcmp(b, "ok", 2));
			break;
		}
		close(s);
	}
}

/* n bytes of pattern(seed) from offset off, in one send (flags) */
static void send_part(int fd, size_t off, size_t n, uint32_t seed, int flags)
{
	char *b = malloc(n);

	CHECK(b);
	for (size_t k = 0; k < n; k++)
		b[k] = (char)pattern(off + k, seed);
	CHECK(send(fd, b, n, flags) == (ssize_t)n);
	free(b);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, ep, st;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	char b[8];
	pid_t p, k;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	p = test_fork();
	if (!p) {
		server(l);
		_exit(0);
	}
	close(l);

	/* bytes that fit, then bytes that do not: the second settles the offer */
	fd = connect_to(&ss, len);
	send_part(fd, 0, 300, 1, 0);
	send_part(fd, 300, 600, 1, 0);
	send_part(fd, 900, 2000, 1, 0);
	expect_pattern(fd, SIZES_TOTAL, 1);
	expect_mode(fd);
	close(fd);

	/* a write, then close at once: the server reads every byte, then EOF */
	fd = connect_to(&ss, len);
	write_pattern(fd, 700, 2);
	close(fd);

	/* the server accepts late: the early bytes reach it on the socket */
	fd = connect_to(&ss, len);
	write_pattern(fd, 100, 3);
	expect_pattern(fd, 100, 3);
	close(fd);

	/* writev of three pieces, then MSG_MORE, then the rest */
	fd = connect_to(&ss, len);
	{
		char v[60];
		for (size_t i = 0; i < sizeof v; i++)
			v[i] = (char)pattern(i, 4);
		struct iovec iov[3] = { { v, 10 }, { v + 10, 20 }, { v + 30, 30 } };
		CHECK(writev(fd, iov, 3) == 60);
	}
	send_part(fd, 60, 40, 4, MSG_MORE);
	send_part(fd, 100, 50, 4, 0);
	expect_pattern(fd, 150, 4);
	expect_mode(fd);
	close(fd);

	/* a fork while the offer is pending: the child goes on with it */
	fd = connect_to(&ss, len);
	send_part(fd, 0, 100, 5, 0);
	k = fork();
	CHECK(k >= 0);
	if (!k) {
		send_part(fd, 100, 100, 5, 0);
		expect_pattern(fd, 200, 5);
		_exit(0);
	}
	close(fd);
	/* (waitpid: split across hosts, wait_child waits for the server) */
	CHECK(waitpid(k, &st, 0) == k && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* epoll: the reply wakes the set */
	fd = connect_to(&ss, len);
	write_pattern(fd, 64, 6);
	CHECK((ep = epoll_create1(0)) >= 0);
	ev.data.fd = fd;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 5000) == 1 && ev.data.fd == fd && (ev.events & EPOLLIN));
	expect_pattern(fd, 64, 6);
	expect_mode(fd);
	close(ep);
	close(fd);

	/* the server speaks first; the client leaves the connection alone a while */
	fd = connect_to(&ss, len);
	usleep(300000);
	read_all(fd, b, 2);
	CHECK(!memcmp(b, "hi", 2));
	write_all(fd, "ok", 2);
	CHECK(recv(fd, b, 1, 0) == 0);
	expect_mode(fd);
	close(fd);

	CHECK(wait_child(p) == 0);
	return 0;
}
