/* Description: a non-blocking writer whose peer is killed while its
 * buffers are full learns it from poll() and from epoll_wait() at once, as
 * TCP reports the peer's reset: POLLOUT with POLLERR, then ECONNRESET or
 * EPIPE from send().  (Issue #13, item 8: with a full ring the writer was
 * never told, 37 of 37 times; over RDMA the send said EAGAIN until the
 * link's failure moved the connection, 3 of 3 times.) */
#include "common.h"
#include <sys/epoll.h>

/* Writes until the connection takes no more. */
static void fill(int fd)
{
	static char buf[65536];
	int idle = 0;

	while (idle < 20) { /* the kernel's buffers grow a while: be sure */
		if (send(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
			idle = 0;
			continue;
		}
		CHECK(errno == EAGAIN);
		idle++;
		usleep(5000);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char b;

	signal(SIGPIPE, SIG_IGN);
	deadline(30);
	pid_t p = fork();
	if (!p) {
		int a = accept(l, NULL, NULL), c = accept(l, NULL, NULL);
		CHECK(a >= 0 && c >= 0);
		pause(); /* reads nothing; killed */
		_exit(0);
	}
	int fd1 = connect_to(&ss, len), fd2 = connect_to(&ss, len);
	expect_mode(fd1);
	expect_mode(fd2);
	fill(fd1);
	fill(fd2);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLET, .data.fd = fd2 };
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd2, &ev) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 200) == 0); /* full: nothing yet */

	double t = now_s();
	kill(p, SIGKILL);
	CHECK(waitpid(p, NULL, 0) == p);

	struct pollfd pf = { .fd = fd1, .events = POLLOUT };
	CHECK(poll(&pf, 1, 5000) == 1);
	CHECK(pf.revents & (POLLERR | POLLHUP));
	CHECK(send(fd1, &b, 1, MSG_DONTWAIT) < 0 && (errno == ECONNRESET || errno == EPIPE));

	CHECK(epoll_wait(ep, &ev, 1, 5000) == 1);
	CHECK(ev.events & (EPOLLERR | EPOLLHUP));
	CHECK(send(fd2, &b, 1, MSG_DONTWAIT) < 0 && (errno == ECONNRESET || errno == EPIPE));
	CHECK(now_s() - t < 2.0); /* at once, not after a time-out */
	return 0;
}
