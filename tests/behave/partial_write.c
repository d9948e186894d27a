/* Description: a non-blocking writer fills the socket until EAGAIN (a short
 * write first), then EPOLLOUT - level and edge triggered - fires once the
 * reader drains, and every byte arrives in order. */
#include "common.h"
#include <sys/epoll.h>

static void run(int et)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	struct chan sync;
	chan_open(&sync);
	pid_t p = test_fork();

	if (!p) {
		int c = accept(l, NULL, NULL);
		char go;
		static char buf[65536];
		uint64_t pos = 0, total;
		expect_mode(c);
		CHECK(chan_recv(&sync, &go)); /* the writer says when it saw EAGAIN */
		read_all(c, &total, sizeof total);
		while (pos < total) {
			ssize_t n = read(c, buf, sizeof buf);
			CHECK(n > 0);
			for (ssize_t i = 0; i < n; i++)
				CHECK((uint8_t)buf[i] == pattern(pos + (uint64_t)i, 7));
			pos += (uint64_t)n;
		}
		_exit(0);
	}
	close(l);
	int fd = connect_to(&ss, len), one = 1;
	expect_mode(fd);
	/* A small send buffer makes the kernel's TCP reach EAGAIN soon too. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){ 65536 }, sizeof(int));
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
	(void)one;
	uint64_t total = 64ull << 20, pos = 0;
	static char chunk[100000];
	int saw_eagain = 0, saw_short = 0;
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLOUT | (et ? EPOLLET : 0), .data.fd = fd }, out;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	/* control bytes go first, blocking */
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
	write_all(fd, &total, sizeof total);
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
	while (pos < total) {
		size_t want = sizeof chunk < total - pos ? sizeof chunk : (size_t)(total - pos);
		for (size_t i = 0; i < want; i++)
			chunk[i] = (char)pattern(pos + i, 7);
		ssize_t n = write(fd, chunk, want);
		if (n < 0) {
			CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
			if (!saw_eagain)
				chan_send(&sync, 'g'); /* now let the reader drain */
			saw_eagain = 1;
			int k = epoll_wait(ep, &out, 1, 5000);
			CHECK(k == 1 && (out.events & EPOLLOUT) && out.data.fd == fd);
			continue;
		}
		if ((size_t)n < want)
			saw_short = 1;
		pos += (uint64_t)n;
	}
	CHECK(saw_eagain && saw_short);
	close(fd);
	chan_close(&sync);
	CHECK(wait_child(p) == 0);
}

int main(void)
{
	deadline(60);
	run(0);
	if (split_role())
		return 0; /* split mode: one server process, one run */
	run(1);
	return 0;
}
