/* Description: a server waiting in poll() (and select(), and epoll_wait,
 * level- and edge-triggered) for its client's
 * request wakes when the request is there, and not before: each report
 * of bytes is followed by a non-blocking read that gets them, and
 * FIONREAD counts exactly the client's bytes.  Run plainly the
 * connections are accelerated (the local rendezvous).
 * tests/integration/agent.sh runs it through the in-band handshake under
 * the fault-injection build with SHUNT_FAULT_PUBLISH_MS=50: each client's
 * PROPOSAL comes 50 ms after its connect, after the server's accept()
 * stopped waiting for it, and its request 300 ms later - the late
 * PROPOSAL is taken off the stream (and declined) by the server's poll,
 * which sleeps on (as does epoll_wait).  Before, the PROPOSAL alone ended the poll with
 * POLLIN, FIONREAD counted its 100 bytes and the read that followed said
 * EAGAIN (an event loop's spurious wake-up; a program that trusts
 * FIONREAD waits for bytes that never come; until the thirty-sixth
 * session epoll_wait still woke so). */
#include "common.h"
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/select.h>

#define CONNS 8
#define GAP_MS 300

/* The connection's one request, waited for by poll, select, or epoll_wait
 * (level-, then edge-triggered), by turns */
static void wait_request(int c, int i)
{
	char buf[64];
	int avail = -1, r;
	ssize_t n;

	if (i % 4 >= 2) {
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN | (i % 4 == 3 ? EPOLLET : 0), .data.u64 = 77 };
		CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
		r = epoll_wait(ep, &ev, 1, 5000);
		CHECK(r == 1 && (ev.events & EPOLLIN) && ev.data.u64 == 77);
		close(ep);
	} else if (i % 4 == 0) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		r = poll(&p, 1, 5000);
		CHECK(r == 1 && (p.revents & POLLIN));
	} else {
		fd_set rd;
		struct timeval tv = { 5, 0 };
		FD_ZERO(&rd);
		FD_SET(c, &rd);
		r = select(c + 1, &rd, NULL, NULL, &tv);
		CHECK(r == 1 && FD_ISSET(c, &rd));
	}
	CHECK(ioctl(c, FIONREAD, &avail) == 0);
	n = read(c, buf, sizeof buf);
	if (n != 7 || memcmp(buf, "request", 7) || avail != 7) {
		fprintf(stderr, "connection %d: woken with FIONREAD %d, the read gave %zd (%s)\n", i,
			avail, n, n < 0 ? strerror(errno) : "bytes");
		_exit(1);
	}
}

static void server(int l)
{
	for (int i = 0; i < CONNS; i++) {
		int c = accept(l, NULL, NULL);

		CHECK(c >= 0);
		CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
		wait_request(c, i);
		answer_ok_to_end(c);
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);

	deadline(60);
	for (int i = 0; i < CONNS; i++) {
		int fd = connect_to(&ss, len);
		usleep(GAP_MS * 1000);
		write_all(fd, "request", 7);
		client_ok_end(fd, i == 0);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
