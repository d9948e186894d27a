/* Description: kernel features asked for on a connection whose peer
 * moved it to TCP work as on TCP while bytes from before the move are
 * still unread: receive timestamps (SO_TIMESTAMP) are on at once and come
 * with the bytes sent after, urgent data (MSG_OOB) goes out and arrives,
 * and the unread bytes, then the rest of the stream (or its end), read
 * intact.  Twice: the peer writing on after its move, and the peer
 * having shut its sending half before it moved.  Under shunt the peer's
 * own SO_TIMESTAMP is its move; ours used to wait out a second and warn
 * that it went without - our ring held bytes (the socket was not "all of
 * the connection"), or, after the peer's FIN, its move sent no word to
 * wait for.  NOT_SPLIT_OVER_RDMA: two connections in turn, a server
 * process each (the single-guest RDMA suite runs it). */
#include "common.h"
#include <sys/ioctl.h>

#define SEED 31

static void urgent_arrives(int c)
{
	struct pollfd pf = { .fd = c, .events = POLLPRI };
	char u = 0;

	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLPRI));
	CHECK(recv(c, &u, 1, MSG_OOB) == 1 && u == 'U');
}

/* n bytes of the pattern, each recvmsg's with its timestamp */
static void stamped_pattern(int fd, size_t n, uint32_t seed)
{
	uint8_t b[4096], ctl[256];
	size_t got = 0;

	while (got < n) {
		struct iovec iov = { b, n - got < sizeof b ? n - got : sizeof b };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				    .msg_controllen = sizeof ctl };
		struct cmsghdr *h;
		ssize_t k = recvmsg(fd, &m, 0);
		CHECK(k > 0);
		h = CMSG_FIRSTHDR(&m);
		CHECK(h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMP);
		for (ssize_t i = 0; i < k; i++)
			CHECK(b[i] == pattern(got + (size_t)i, seed));
		got += (size_t)k;
	}
}

static void one(int shut_first)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), on = 1, fd;
	struct chan ch;
	char cmd;
	double t;

	chan_open(&ch);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		write_pattern(c, 3000, SEED);
		if (shut_first)
			CHECK(!shutdown(c, SHUT_WR));
		CHECK(!setsockopt(c, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on));
		CHECK(chan_recv(&ch, &cmd) && cmd == 'u');
		urgent_arrives(c);
		if (!shut_first)
			write_pattern(c, 5000, SEED + 1);
		CHECK(chan_recv(&ch, &cmd) == 0);
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	/* over RDMA the server's move (its SO_TIMESTAMP) may reach us
	 * before we look: reason 17 then */
	expect_mode_peer_forks(fd);
	/* the peer's 3,000 bytes are here (and its move, or its end) */
	for (int n = 0, i = 0; i < 10000 && n < 3000; i++)
		if (ioctl(fd, FIONREAD, &n) || n < 3000)
			usleep(1000);
	usleep(100000);
	t = now_s();
	CHECK(!setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on));
	CHECK(now_s() - t < 0.5); /* TCP's answer is at once: no second's wait */
	CHECK(send(fd, "U", 1, MSG_OOB) == 1);
	chan_send(&ch, 'u');
	expect_pattern(fd, 3000, SEED);
	if (shut_first) {
		char b;
		CHECK(recv(fd, &b, 1, 0) == 0);
	} else {
		stamped_pattern(fd, 5000, SEED + 1);
	}
	chan_close(&ch);
	CHECK(wait_child(p) == 0);
	close(fd);
}

int main(void)
{
	deadline(60);
	one(0);
	one(1);
	return 0;
}
