/* Description: an event loop's new connection - a non-blocking connect()
 * in progress, then poll() for room, SO_ERROR, the request, poll() for the
 * reply - behaves as TCP's (under shunt the offer stays pending across
 * these calls: src/shim/poll.c poll_pending): POLLOUT at once, SO_ERROR 0,
 * the reply the server sends a few milliseconds later, a poll for bytes
 * whose time-out runs out before the reply (0, in time), EINTR for a
 * signal while it waits, select() in both directions, POLLIN|POLLRDHUP
 * at the server's close, a request bigger than the slot's early bytes
 * written in pieces with a poll for room before each, and epoll after the
 * request.  Each case on ROUNDS new connections. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/select.h>

enum { C_REPLY, C_TIMEOUT, C_EINTR, C_SELECT, C_CLOSE, C_BIG, C_EPOLL, NCASES };
#define ROUNDS 8
#define BIG 6000
#define PIECE 1000

static void serve(int s, int c, pid_t client)
{
	static char big[BIG];
	char b;

	switch (c) {
	case C_REPLY:
	case C_SELECT:
	case C_EPOLL:
		read_all(s, &b, 1);
		CHECK(b == 'q');
		usleep(3000); /* the client is asleep in its poll by now */
		write_all(s, "r", 1);
		break;
	case C_TIMEOUT:
		/* no reply until the client's poll ran out */
		read_all(s, &b, 1);
		read_all(s, &b, 1);
		CHECK(b == 'g');
		write_all(s, "r", 1);
		break;
	case C_EINTR:
		serve_interrupted(s, client);
		break;
	case C_CLOSE:
		read_all(s, &b, 1);
		usleep(3000);
		break;
	case C_BIG:
		read_all(s, big, BIG);
		for (int k = 0; k < BIG; k++)
			CHECK(big[k] == (char)('a' + k % 26));
		write_all(s, "r", 1);
		break;
	}
}

static short poll1(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r = poll(&p, 1, ms);

	CHECK(r >= 0 || errno == EINTR);
	return r < 0 ? -1 : r ? p.revents : 0;
}

/* A non-blocking connect, its poll for room and its SO_ERROR. */
static int open_conn(const struct sockaddr_storage *ss, socklen_t len, int use_select)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0), err = -1;
	socklen_t el = sizeof err;

	CHECK(fd >= 0);
	CHECK(connect(fd, (const struct sockaddr *)ss, len) == 0 || errno == EINPROGRESS);
	if (use_select) {
		fd_set w;
		struct timeval tv = { 5, 0 };
		FD_ZERO(&w);
		FD_SET(fd, &w);
		CHECK(select(fd + 1, NULL, &w, NULL, &tv) == 1 && FD_ISSET(fd, &w));
	} else {
		CHECK(poll1(fd, POLLOUT, 5000) == POLLOUT);
	}
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	return fd;
}

static void read_reply(int fd)
{
	char b;

	CHECK(read(fd, &b, 1) == 1 && b == 'r');
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p;
	static char big[BIG];

	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	catch_usr1(0); /* (poll never restarts anyway) */
	for (int k = 0; k < BIG; k++)
		big[k] = (char)('a' + k % 26);
	p = scripted_server(l, NCASES, ROUNDS, serve);
	for (int c = 0; c < NCASES; c++)
		for (int i = 0; i < ROUNDS; i++) {
			int fd = open_conn(&ss, len, c == C_SELECT);
			double t0;
			short re;

			switch (c) {
			case C_REPLY:
				write_all(fd, "q", 1);
				CHECK(poll1(fd, POLLIN, -1) == POLLIN);
				read_reply(fd);
				break;
			case C_TIMEOUT:
				write_all(fd, "q", 1);
				t0 = now_s();
				CHECK(poll1(fd, POLLIN, 5) == 0);
				CHECK(now_s() - t0 >= 0.005);
				/* nothing to read: EAGAIN, not a block */
				CHECK(read(fd, big, 1) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
				write_all(fd, "g", 1);
				CHECK(poll1(fd, POLLIN, 5000) == POLLIN);
				read_reply(fd);
				break;
			case C_EINTR:
				write_all(fd, "q", 1);
				CHECK(poll1(fd, POLLIN, -1) == -1 && errno == EINTR);
				write_all(fd, "e", 1);
				break;
			case C_SELECT: {
				fd_set r;
				struct timeval tv = { 5, 0 };
				write_all(fd, "q", 1);
				FD_ZERO(&r);
				FD_SET(fd, &r);
				CHECK(select(fd + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(fd, &r));
				read_reply(fd);
				break;
			}
			case C_CLOSE:
				write_all(fd, "q", 1);
				re = poll1(fd, POLLIN | POLLRDHUP, 5000);
				CHECK((re & POLLIN) && (re & POLLRDHUP));
				CHECK(read(fd, big, 1) == 0);
				break;
			case C_BIG:
				for (size_t off = 0; off < BIG;) {
					ssize_t n;
					CHECK(poll1(fd, POLLOUT, 5000) & POLLOUT);
					n = write(fd, big + off, BIG - off < PIECE ? BIG - off : PIECE);
					CHECK(n > 0); /* (a short write: the rest next turn) */
					off += (size_t)n;
				}
				CHECK(poll1(fd, POLLIN, 5000) == POLLIN);
				read_reply(fd);
				break;
			case C_EPOLL: {
				int ep = epoll_create1(0);
				struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 }, out;
				write_all(fd, "q", 1);
				CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
				CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && out.data.u32 == 7 && (out.events & EPOLLIN));
				read_reply(fd);
				close(ep);
				break;
			}
			}
			expect_mode(fd);
			close(fd);
		}
	CHECK(wait_child(p) == 0);
	return 0;
}
