/* Description: a socket added to epoll before its connect() - nginx's
 * upstream connections (proxy_pass, fastcgi_pass): socket(), epoll_ctl
 * ADD for in, out and hang-up, edge-triggered, then a non-blocking
 * connect() - gets every edge TCP gives it: room at once, room again as
 * the server reads a request larger than the ring, and the reply's bytes
 * and its end.  Found with nginx in front of PHP-FPM: the reply never
 * reached nginx (504 after 60 s), its registration still the unconnected
 * socket's, not the accelerated connection's.  Also a listener added
 * before its listen(): its connections are reported, and accepted. */
#include "common.h"
#include <sys/epoll.h>

#define REQ (600 * 1024)
#define REPLY (1024 * 1024)

static void server(int l)
{
	for (int round = 0; round < 3; round++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_pattern(c, REQ, 11); /* read while the client still writes */
		write_pattern(c, REPLY, 12);
		close(c);
	}
	_exit(0);
}

static const char *phase = "";
static int cur_round;

static int wait_for(int ep, int fd, uint32_t what)
{
	struct epoll_event out[4];
	uint32_t got = 0;

	while (!(got & what)) {
		int n = epoll_wait(ep, out, 4, 10000);
		if (n <= 0) {
			char b[16];
			ssize_t k = read(fd, b, sizeof b);
			fprintf(stderr, "no edge (events 0x%x) %s, round %d; a read now: %zd (errno %d)\n", what, phase, cur_round, k, errno);
		}
		CHECK(n > 0); /* (time-out: an edge lost) */
		for (int i = 0; i < n; i++) {
			CHECK(out[i].data.fd == fd);
			got |= out[i].events;
		}
	}
	return (int)got;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p;
	int e;

	deadline(60);
	p = serve_in_child(server, &ss, &len);
	for (int round = 0; round < 3; round++) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		cur_round = round;
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = fd };
		static uint8_t req[REQ], buf[65536];
		size_t sent = 0, got = 0;

		CHECK(ep >= 0 && fd >= 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0); /* before the connect */
		CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS);
		phase = "after connect";
		wait_for(ep, fd, EPOLLOUT);
		CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &(socklen_t){ sizeof e }) == 0 && e == 0);
		for (size_t i = 0; i < REQ; i++)
			req[i] = pattern(i, 11);
		while (sent < REQ) { /* the request: more than a ring holds */
			ssize_t n = write(fd, req + sent, REQ - sent);
			if (n < 0) {
				CHECK(errno == EAGAIN);
				phase = "writing the request";
				wait_for(ep, fd, EPOLLOUT);
				continue;
			}
			sent += (size_t)n;
		}
		for (;;) { /* the reply, to its end */
			ssize_t n = read(fd, buf, sizeof buf);
			if (n < 0) {
				CHECK(errno == EAGAIN);
				phase = "reading the reply";
				wait_for(ep, fd, EPOLLIN | EPOLLRDHUP);
				continue;
			}
			if (!n)
				break;
			for (ssize_t i = 0; i < n; i++)
				CHECK(buf[i] == pattern(got + (size_t)i, 12));
			got += (size_t)n;
		}
		CHECK(got == REPLY);
		expect_mode(fd);
		close(fd);
		close(ep);
	}
	CHECK(wait_child(p) == 0);

	/* a listener in the set before its listen() (both ends here, split
	 * or not: fork, not test_fork) */
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), ep = epoll_create1(0), c;
	struct sockaddr_storage la = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&la;
	socklen_t al = sizeof la;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = l };
	a4->sin_family = AF_INET;
	a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(l >= 0 && ep >= 0 && bind(l, (struct sockaddr *)&la, sizeof *a4) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
	CHECK(listen(l, 8) == 0 && getsockname(l, (struct sockaddr *)&la, &al) == 0);
	p = fork();
	CHECK(p >= 0);
	if (!p) {
		int fd = connect_to(&la, al);
		write_all(fd, "x", 1);
		close(fd);
		_exit(0);
	}
	phase = "a listener's connection";
	wait_for(ep, l, EPOLLIN);
	CHECK((c = accept(l, NULL, NULL)) >= 0);
	char b;
	read_all(c, &b, 1);
	CHECK(b == 'x');
	close(c);
	CHECK(waitpid(p, &e, 0) == p && WIFEXITED(e) && WEXITSTATUS(e) == 0);
	return 0;
}
