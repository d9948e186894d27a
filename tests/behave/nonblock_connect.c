/* Description: non-blocking connect returns 0 or EINPROGRESS, poll reports
 * POLLOUT, SO_ERROR is 0, and data then flows through an epoll loop. */
#include "common.h"
#include <sys/epoll.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), err = -1;
	socklen_t el = sizeof err;
	char buf[64];

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, buf, 5);
		CHECK(!memcmp(buf, "hello", 5));
		write_all(c, "world", 5);
		_exit(0);
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int r = connect(fd, (void *)&ss, len);
	CHECK(r == 0 || errno == EINPROGRESS);
	struct pollfd pf = { .fd = fd, .events = POLLOUT };
	CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLOUT));
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	expect_mode(fd);
	/* Nothing to read yet: EAGAIN, not a block. */
	CHECK(read(fd, buf, sizeof buf) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
	CHECK(write(fd, "hello", 5) == 5);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0xfeedull }, out;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1);
	CHECK(out.data.u64 == 0xfeedull && (out.events & EPOLLIN));
	size_t got = 0;
	while (got < 5) {
		ssize_t n = read(fd, buf + got, 5 - got);
		if (n < 0 && errno == EAGAIN) {
			CHECK(epoll_wait(ep, &out, 1, 5000) == 1);
			continue;
		}
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK(!memcmp(buf, "world", 5));
	CHECK(wait_child(p) == 0);
	/* connect to a closed port: ECONNREFUSED through SO_ERROR or directly */
	close(l);
	int fd2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(fd2, (void *)&ss, len);
	if (r < 0 && errno == EINPROGRESS) {
		pf = (struct pollfd){ .fd = fd2, .events = POLLOUT };
		CHECK(poll(&pf, 1, 5000) == 1);
		el = sizeof err;
		CHECK(getsockopt(fd2, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ECONNREFUSED);
	} else {
		CHECK(r < 0 && errno == ECONNREFUSED);
	}
	return 0;
}
