/* Description: an event loop's new connection in epoll - a non-blocking
 * connect() in progress, the socket added for room, SO_ERROR, the request,
 * the registration modified for bytes, the reply - behaves as TCP's
 * (under shunt the offer stays pending in the set: src/shim/epoll.c
 * pend_ctl): EPOLLOUT at once with the program's data, the reply the
 * server sends a few milliseconds later (level- and edge-triggered), an
 * epoll_wait whose time-out runs out before the reply (0, in time),
 * EINTR for a signal while it waits, a set that also holds a pipe (whose
 * byte is reported while the connection waits), EPOLLIN|EPOLLRDHUP at the
 * server's close, room and bytes asked at once (nginx's add), a DEL and
 * a new ADD while pending, and a registered connection closed while
 * pending (the next one on its number is added anew).  Each case on
 * ROUNDS new connections, one set each. */
#include "common.h"
#include <sys/epoll.h>

enum { C_REPLY, C_ET, C_TIMEOUT, C_EINTR, C_PIPE, C_CLOSE, C_BOTH, C_DELADD, C_CLOSEREG, NCASES };
#define ROUNDS 8

static void serve(int s, int c, pid_t client)
{
	char b;

	switch (c) {
	case C_TIMEOUT:
		/* no reply until the client's wait ran out */
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
	default:
		/* C_CLOSEREG's (and the extra case's: its rounds are two
		 * connections each) first connection of a pair is closed by
		 * the client after its byte: the byte, then EOF */
		if (c >= C_CLOSEREG && recv(s, &b, 1, MSG_PEEK) == 1 && b == 'x') {
			read_all(s, &b, 1);
			CHECK(recv(s, &b, 1, 0) == 0);
			break;
		}
		read_all(s, &b, 1);
		CHECK(b == 'q');
		usleep(3000); /* the client is asleep in epoll_wait by now */
		write_all(s, "r", 1);
		break;
	}
}

static int conn_start(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

	CHECK(fd >= 0);
	CHECK(connect(fd, (const struct sockaddr *)ss, len) == 0 || errno == EINPROGRESS);
	return fd;
}

static void ctl(int ep, int op, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = 0xc0ffee00u + (uint64_t)fd };

	CHECK(epoll_ctl(ep, op, fd, &ev) == 0);
}

/* One epoll_wait: -1 (EINTR), 0, or the one event's mask (for fd's data). */
static int wait1(int ep, int fd, int ms)
{
	struct epoll_event out[4];
	int n = epoll_wait(ep, out, 4, ms);

	if (n < 0) {
		CHECK(errno == EINTR);
		return -1;
	}
	CHECK(n <= 1);
	if (n)
		CHECK(out[0].data.u64 == 0xc0ffee00u + (uint64_t)fd);
	return n ? (int)out[0].events : 0;
}

/* Added for room: reported at once; SO_ERROR 0. */
static void room(int ep, int fd, uint32_t flags)
{
	int err = -1;
	socklen_t el = sizeof err;

	ctl(ep, EPOLL_CTL_ADD, fd, EPOLLOUT | flags);
	CHECK(wait1(ep, fd, 5000) & EPOLLOUT);
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
}

/* The request once there is room, then a wait for bytes (in). */
static void request(int ep, int fd, uint32_t in)
{
	room(ep, fd, in & EPOLLET);
	write_all(fd, "q", 1);
	ctl(ep, EPOLL_CTL_MOD, fd, in);
}

static void read_reply(int fd)
{
	char b;

	CHECK(read(fd, &b, 1) == 1 && b == 'r');
}

static void one(int c, const struct sockaddr_storage *ss, socklen_t len)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), fd = conn_start(ss, len), p[2], ev;
	double t0;
	char b;

	CHECK(ep >= 0);
	switch (c) {
	case C_REPLY:
	case C_ET: {
		uint32_t et = c == C_ET ? EPOLLET : 0;
		request(ep, fd, EPOLLIN | et);
		CHECK(wait1(ep, fd, -1) == EPOLLIN);
		read_reply(fd);
		break;
	}
	case C_TIMEOUT:
		request(ep, fd, EPOLLIN);
		t0 = now_s();
		CHECK(wait1(ep, fd, 5) == 0);
		CHECK(now_s() - t0 >= 0.005);
		CHECK(read(fd, &b, 1) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
		write_all(fd, "g", 1);
		CHECK(wait1(ep, fd, 5000) == EPOLLIN);
		read_reply(fd);
		break;
	case C_EINTR:
		request(ep, fd, EPOLLIN);
		CHECK(wait1(ep, fd, -1) == -1);
		write_all(fd, "e", 1);
		break;
	case C_PIPE: {
		struct epoll_event pe = { .events = EPOLLIN, .data.u64 = 7 }, out[4];
		int n, got_pipe = 0, got_reply = 0;
		CHECK(pipe(p) == 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &pe) == 0);
		request(ep, fd, EPOLLIN);
		write_all(p[1], "p", 1); /* ready before the reply */
		while (!got_reply) {
			n = epoll_wait(ep, out, 4, 5000);
			CHECK(n >= 1);
			for (int i = 0; i < n; i++) {
				if (out[i].data.u64 == 7) {
					CHECK(!got_pipe); /* level: read at once below */
					CHECK(read(p[0], &b, 1) == 1);
					got_pipe = 1;
				} else {
					CHECK(out[i].data.u64 == 0xc0ffee00u + (uint64_t)fd && (out[i].events & EPOLLIN));
					got_reply = 1;
				}
			}
		}
		CHECK(got_pipe);
		read_reply(fd);
		close(p[0]);
		close(p[1]);
		break;
	}
	case C_CLOSE:
		request(ep, fd, EPOLLIN | EPOLLRDHUP);
		ev = wait1(ep, fd, 5000);
		CHECK((ev & EPOLLIN) && (ev & EPOLLRDHUP));
		CHECK(read(fd, &b, 1) == 0);
		break;
	case C_BOTH: {
		int wrote = 0;
		ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET);
		for (;;) {
			ev = wait1(ep, fd, 5000);
			CHECK(ev > 0);
			if ((ev & EPOLLOUT) && !wrote) {
				write_all(fd, "q", 1);
				wrote = 1;
			}
			if (ev & EPOLLIN)
				break;
		}
		CHECK(wrote);
		read_reply(fd);
		break;
	}
	case C_DELADD:
		room(ep, fd, 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == -1 && errno == ENOENT);
		request(ep, fd, EPOLLIN);
		CHECK(wait1(ep, fd, 5000) == EPOLLIN);
		read_reply(fd);
		break;
	case C_CLOSEREG: {
		int fd2;
		room(ep, fd, 0);
		write_all(fd, "x", 1);
		CHECK(close(fd) == 0); /* still registered: the kernel drops it */
		fd2 = conn_start(ss, len); /* most often the same number */
		request(ep, fd2, EPOLLIN);
		CHECK(wait1(ep, fd2, 5000) == EPOLLIN);
		read_reply(fd2);
		fd = fd2;
		break;
	}
	}
	expect_mode(fd);
	close(fd);
	close(ep);
}

int main(void)
{
	catch_usr1(0); /* (epoll_wait never restarts anyway) */
	/* C_CLOSEREG: two connections a round */
	return scripted_run(NCASES, ROUNDS, NCASES + 1, ROUNDS, serve, one);
}
