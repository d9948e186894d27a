/* Description: SO_RCVLOWAT counts one stream across a move of the
 * connection to its TCP socket with bytes left unread: poll, epoll (a
 * sleeper woken by the bytes that make up the mark) and a blocking
 * recv(MSG_PEEK) wait until the bytes from before the move and those
 * after it make the mark together - no sooner, no later - a read then
 * takes them all, and getsockopt says the program's own mark throughout.
 * Under shunt receive timestamps move a connection to its socket: the
 * peer asks for them after its first bytes, which stay in our ring and
 * are read first; the rest come on the socket, whose kernel mark counted
 * its own bytes alone (poll and epoll stayed quiet, a peek waited on: a
 * hang when the peer waits for an answer). */
#include "common.h"
#include <sys/epoll.h>
#include <sys/ioctl.h>

#define MARK 1000
#define SEED 77

static uint64_t pos; /* bytes of the stream read so far */

static void expect_bytes(const uint8_t *b, ssize_t n)
{
	CHECK(n > 0);
	for (ssize_t i = 0; i < n; i++)
		CHECK(b[i] == pattern(pos + (uint64_t)i, SEED));
}

static void take(int fd, size_t n)
{
	uint8_t b[MARK];

	CHECK(n <= sizeof b);
	read_all(fd, b, n);
	expect_bytes(b, (ssize_t)n);
	pos += n;
}

static int nread(int fd)
{
	int n = -1;

	CHECK(!ioctl(fd, FIONREAD, &n));
	return n;
}

static void until_nread(int fd, int want)
{
	for (int i = 0; i < 10000 && nread(fd) < want; i++)
		usleep(1000);
	CHECK(nread(fd) == want);
}

static int readable(int fd, int ep)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	struct epoll_event ev;
	int p = poll(&pf, 1, 0), e = epoll_wait(ep, &ev, 1, 0);

	CHECK(p >= 0 && e >= 0 && p == e); /* poll and epoll agree */
	return p;
}

static int mark(int fd)
{
	int v = -1;
	socklen_t l = sizeof v;

	CHECK(!getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &l) && l == sizeof v);
	return v;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), on = 1, m = MARK, fd, ep;
	struct epoll_event ev = { .events = EPOLLIN };
	struct chan ch;
	uint8_t b[4096];
	char cmd;
	double t;
	ssize_t n;

	deadline(60);
	chan_open(&ch);
	pid_t p = test_fork();
	if (!p) {
		/* the peer: each command, one write (a pause first: a
		 * sleeper must be woken by it) */
		static const size_t sizes[] = { ['1'] = 300, ['2'] = 200, ['3'] = 500, ['4'] = 100, ['5'] = 150 };
		int c = accept(l, NULL, NULL);
		uint64_t wr = 0;

		CHECK(c >= 0);
		while (chan_recv(&ch, &cmd)) {
			uint8_t w[MARK];
			size_t k = sizes[(unsigned char)cmd];
			if (cmd >= '3')
				usleep(200000);
			for (size_t i = 0; i < k; i++)
				w[i] = pattern(wr + i, SEED);
			write_all(c, w, k);
			wr += k;
			if (cmd == '1') /* under shunt, a move: our bytes go on the socket from here */
				CHECK(!setsockopt(c, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on));
		}
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));

	/* 300 bytes unread (the peer moved after them), the mark set */
	chan_send(&ch, '1');
	until_nread(fd, 300);
	CHECK(!setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &m, sizeof m) && mark(fd) == MARK);
	CHECK(!readable(fd, ep));

	/* 500 in all: still under the mark */
	chan_send(&ch, '2');
	until_nread(fd, 500);
	CHECK(!readable(fd, ep) && mark(fd) == MARK);

	/* 500 more, a while later: a sleeper in epoll_wait wakes for them */
	chan_send(&ch, '3');
	t = now_s();
	CHECK(epoll_wait(ep, &ev, 1, 10000) == 1 && (ev.events & EPOLLIN));
	CHECK(now_s() - t > 0.15 && nread(fd) == MARK && readable(fd, ep));

	/* 100 read: 900 left, under the mark again; a blocking peek waits
	 * for the 100 that make it, and sees all 1,000 */
	take(fd, 100);
	CHECK(!readable(fd, ep) && mark(fd) == MARK);
	chan_send(&ch, '4');
	t = now_s();
	n = recv(fd, b, sizeof b, MSG_PEEK);
	CHECK(now_s() - t > 0.15 && n == MARK);
	expect_bytes(b, n);

	/* 150 read: 850 left; 150 more make the mark: readable, and one
	 * read takes all 1,000.  (Not a blocking read begun under the mark:
	 * TCP's copies what is there, then sleeps until the socket gets a
	 * whole mark more - its wake-up counts from the copied bytes on.) */
	take(fd, 150);
	CHECK(!readable(fd, ep));
	chan_send(&ch, '5');
	until_nread(fd, MARK);
	CHECK(readable(fd, ep));
	n = recv(fd, b, sizeof b, 0);
	CHECK(n == MARK);
	expect_bytes(b, n);
	pos += (uint64_t)n;

	CHECK(mark(fd) == MARK && nread(fd) == 0 && !readable(fd, ep));
	chan_close(&ch);
	CHECK(wait_child(p) == 0);
	close(ep);
	close(fd);
	return 0;
}
