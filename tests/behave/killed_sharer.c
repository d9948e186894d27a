/* Description: a forked sharer killed while it writes (SIGKILL, most
 * likely inside a copy, holding the connection's writer lock) does not
 * stall or break the connection for the process that shares it: the
 * parent's next non-blocking writes go on at once (well under a second),
 * and the reader sees the child's bytes, then every byte of the parent's,
 * then EOF - as with a TCP socket shared by two processes.  Ten rounds.
 * (Before: the lock was waited out for 2 s, then the connection reset;
 * issue #13, item 8.) */
#include "common.h"

#define ROUNDS 10
#define TAIL 100000

static void server(int l)
{
	static char buf[65536];

	for (int i = 0; i < ROUNDS; i++) {
		int c = accept(l, NULL, NULL);
		uint64_t cs = 0, ps = 0;
		ssize_t n;
		CHECK(c >= 0);
		while ((n = read(c, buf, sizeof buf)) > 0)
			for (ssize_t k = 0; k < n; k++) {
				if (buf[k] == 'c') {
					CHECK(ps == 0); /* no child byte after the parent's */
					cs++;
				} else {
					CHECK(buf[k] == 'p');
					ps++;
				}
			}
		CHECK(n == 0);
		CHECK(ps == TAIL);
		close(c);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char cbuf[65536], pbuf[TAIL];

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	pid_t srv = test_fork();
	if (!srv) {
		server(l);
		_exit(0);
	}
	memset(cbuf, 'c', sizeof cbuf);
	memset(pbuf, 'p', sizeof pbuf);
	for (int i = 0; i < ROUNDS; i++) {
		int fd = connect_to(&ss, len);
		size_t off = 0;
		expect_mode(fd);
		pid_t w = fork();
		if (!w) {
			for (;;)
				if (write(fd, cbuf, sizeof cbuf) < 0)
					_exit(1);
		}
		CHECK(w > 0);
		usleep(20000 + 3000 * (unsigned)i);
		CHECK(kill(w, SIGKILL) == 0);
		CHECK(waitpid(w, NULL, 0) == w);
		double t0 = now_s();
		CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
		while (off < sizeof pbuf) {
			ssize_t n = send(fd, pbuf + off, sizeof pbuf - off, MSG_DONTWAIT);
			if (n < 0) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				CHECK(errno == EAGAIN);
				CHECK(poll(&p, 1, 5000) == 1);
				continue;
			}
			off += (size_t)n;
		}
		CHECK(now_s() - t0 < 1.0);
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
