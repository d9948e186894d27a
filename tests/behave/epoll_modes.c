/* Description: epoll level-triggered reports readable data again until it
 * is read; edge-triggered reports once per arrival; EPOLLONESHOT reports
 * once until EPOLL_CTL_MOD re-arms; EPOLLRDHUP and EPOLLIN at peer's
 * shutdown; EPOLL_CTL_DEL stops reports; the user's data comes back. */
#include "common.h"
#include <sys/epoll.h>

static int wait1(int ep, struct epoll_event *out, int ms)
{
	return epoll_wait(ep, out, 1, ms);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	struct chan sync;
	char buf[64], c;
	struct epoll_event ev, out;

	deadline(30);
	chan_open(&sync);
	pid_t p = test_fork();
	if (!p) {
		int s = accept(l, NULL, NULL);
		expect_mode(s);
		for (int step = 0; chan_recv(&sync, &c); step++) {
			if (c == 'w')
				write_all(s, "0123456789", 10);
			if (c == 'h')
				shutdown(s, SHUT_WR);
		}
		_exit(0);
	}
	int fd = connect_to(&ss, len), ep = epoll_create1(EPOLL_CLOEXEC);
	expect_mode(fd);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);

	/* level-triggered */
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 111 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1 && errno == EEXIST);
	CHECK(wait1(ep, &out, 50) == 0);
	chan_send(&sync, 'w');
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 111 && (out.events & EPOLLIN));
	CHECK(read(fd, buf, 4) == 4);
	CHECK(wait1(ep, &out, 1000) == 1 && (out.events & EPOLLIN)); /* 6 bytes left */
	CHECK(read(fd, buf, sizeof buf) == 6);
	CHECK(wait1(ep, &out, 50) == 0);

	/* edge-triggered */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLET, .data.u64 = 222 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
	chan_send(&sync, 'w');
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 222);
	CHECK(read(fd, buf, 4) == 4);
	CHECK(wait1(ep, &out, 100) == 0); /* no new edge: data left is not reported */
	chan_send(&sync, 'w');
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 222); /* new arrival */
	CHECK(read(fd, buf, sizeof buf) == 16);
	CHECK(read(fd, buf, sizeof buf) == -1 && errno == EAGAIN);

	/* oneshot */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 333 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
	chan_send(&sync, 'w');
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 333);
	CHECK(wait1(ep, &out, 100) == 0); /* disarmed, data still there */
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 333);
	CHECK(read(fd, buf, sizeof buf) == 10);

	/* EPOLLOUT with level-triggering: writable right away */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u64 = 444 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 444 && out.events == EPOLLOUT);

	/* peer's shutdown: EPOLLIN | EPOLLRDHUP */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 555 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
	chan_send(&sync, 'h');
	CHECK(wait1(ep, &out, 5000) == 1 && out.data.u64 == 555);
	CHECK((out.events & EPOLLIN) && (out.events & EPOLLRDHUP));
	CHECK(read(fd, buf, sizeof buf) == 0);
	CHECK(wait1(ep, &out, 1000) == 1); /* EOF stays readable (level) */

	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
	CHECK(wait1(ep, &out, 50) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == -1 && errno == ENOENT);
	chan_close(&sync);
	CHECK(wait_child(p) == 0);
	return 0;
}
