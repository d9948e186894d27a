/* Description: the end a kernel socket reads as is not always the peer's
 * FIN, and shunt must not take it for one.  After our own
 * shutdown(SHUT_RD) a socket's reads say 0 at once; after a reset, once
 * the reset was reported, they say 0 too.  TCP's answers:
 *  1. We shut our reading half with bytes of ours still unread by the
 *     peer; the peer reads them all and closes: a clean close - no
 *     POLLERR, SO_ERROR 0, a read says 0.  Then our shutdown(SHUT_WR) says
 *     0 and, once our FIN is acknowledged, another says ENOTCONN (both
 *     FINs went: the socket is closed).  shunt took its own SHUT_RD for
 *     the peer's FIN and sent the liveness probe it sends a writer's gone
 *     peer; the byte sat unread in the peer's socket, and the peer's clean
 *     close became a reset (POLLERR, ECONNRESET) - found by
 *     tests/behave/epoll_model (seed 70).  Over RDMA the same end read as
 *     a peer gone without its stream's end: a reset at once.
 *  2. The peer writes two bytes, then closes with bytes of ours unread (a
 *     reset, no FIN): our looks at the connection (an epoll set with it
 *     registered under two numbers, poll) come and go, a read takes the
 *     two bytes, then one says ECONNRESET, once, then 0.  shunt's second
 *     look at the socket (the dup's report of the same reset) took the end
 *     a socket reads as after a reset for a FIN, and the read said 0
 *     (epoll_model seed 44). */
#include "common.h"
#include <sys/epoll.h>

#define N 1000

static struct chan ch;

static void server(int l)
{
	char b[N], c;
	int c1 = accept(l, NULL, NULL), c2 = accept(l, NULL, NULL), c3 = accept(l, NULL, NULL);

	CHECK(c1 >= 0 && c2 >= 0 && c3 >= 0);
	expect_mode(c1);
	CHECK(chan_recv(&ch, &c) && c == 'r'); /* the client shut its reading half */
	read_all(c1, b, N);
	for (int i = 0; i < N; i++)
		CHECK(b[i] == (char)pattern((uint64_t)i, 1));
	CHECK(close(c1) == 0); /* a clean close: nothing left unread */
	read_all(c3, b, 1);    /* c3: closed with a byte unread, */
	write_all(c3, "cd", 2); /* after bytes of its own */
	CHECK(close(c3) == 0);
	write_all(c2, "x", 1); /* both done */
	CHECK(chan_recv(&ch, &c) == 0);
	close(c2);
	_exit(0);
}

static void expect_r(ssize_t r, ssize_t want, int err, const char *what)
{
	if (r != want || (want < 0 && errno != err)) {
		fprintf(stderr, "%s: %zd (errno %d %s), wanted %zd (errno %d)\n", what, r, r < 0 ? errno : 0,
			r < 0 ? strerror(errno) : "", want, err);
		exit(1);
	}
}

/* Looks at the connection as programs' event loops make them: poll, and
 * the waits of an epoll set that has it registered since before under two
 * numbers (a dup: two registrations, two reports of the socket's events -
 * each a look at it). */
static void looks(int fd, int ep)
{
	struct epoll_event ev[4];

	for (int i = 0; i < 5; i++) {
		struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
		CHECK(epoll_wait(ep, ev, 4, 5) >= 0);
		CHECK(poll(&p, 1, 0) >= 0);
	}
}

static int watch(int fd)
{
	int ep = epoll_create1(0), d = dup(fd);

	CHECK(ep >= 0 && d >= 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP }) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, d, &(struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP }) == 0);
	return ep;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), c1, c2, c3, e, ep1, ep3;
	socklen_t el = sizeof e;
	char b[N], x;
	pid_t p;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	chan_open(&ch);
	CHECK((p = test_fork()) >= 0);
	if (!p) {
		server(l);
		_exit(1);
	}
	close(l);
	c1 = connect_to(&ss, len);
	c2 = connect_to(&ss, len);
	c3 = connect_to(&ss, len);
	expect_mode(c1);
	ep1 = watch(c1);
	ep3 = watch(c3);
	for (int i = 0; i < N; i++)
		b[i] = (char)pattern((uint64_t)i, 1);
	write_all(c1, b, N);
	write_all(c3, "ab", 2); /* the server reads one */
	CHECK(shutdown(c1, SHUT_RD) == 0);
	looks(c1, ep1);
	expect_r(recv(c1, b, 1, MSG_DONTWAIT), 0, 0, "a read after our SHUT_RD");
	looks(c1, ep1);
	chan_send(&ch, 'r');
	read_all(c2, &x, 1); /* the server closed c1 and c3 */
	usleep(50000);       /* (their FIN and RST are here: the loopback) */

	/* 1: the clean close after our SHUT_RD */
	struct pollfd pf = { c1, POLLIN | POLLOUT | POLLRDHUP, 0 };
	CHECK(poll(&pf, 1, 0) == 1);
	if (pf.revents & (POLLERR | POLLHUP)) {
		fprintf(stderr, "c1: revents %#x after the peer's clean close (POLLERR or POLLHUP)\n", pf.revents);
		exit(1);
	}
	CHECK(getsockopt(c1, SOL_SOCKET, SO_ERROR, &e, &el) == 0);
	expect_r(e, 0, 0, "c1's SO_ERROR after the peer's clean close");
	expect_r(read(c1, b, 1), 0, 0, "c1's read after the peer's clean close");
	expect_r(shutdown(c1, SHUT_WR), 0, 0, "shutdown(SHUT_WR) after the peer's close");
	for (int i = 0; i < 200 && !shutdown(c1, SHUT_WR); i++)
		usleep(10000); /* until our FIN is acknowledged (two hosts: a while) */
	expect_r(shutdown(c1, SHUT_WR), -1, ENOTCONN, "shutdown once both FINs went");
	expect_r(send(c1, "y", 1, 0), -1, EPIPE, "a send after our SHUT_WR");

	/* 2: the peer's reset, no FIN: ECONNRESET once, after any looks */
	looks(c3, ep3);
	expect_r(read(c3, b, 2), 2, 0, "c3's read of the peer's bytes before its reset");
	looks(c3, ep3);
	expect_r(read(c3, b, 1), -1, ECONNRESET, "c3's read after the peer's reset");
	expect_r(read(c3, b, 1), 0, 0, "c3's read after the reset was told");

	chan_close(&ch);
	close(c1), close(c2), close(c3);
	return wait_child(p);
}
