/* Description: a 64-byte ping-pong whose two ends wait for each message
 * the way event loops do - poll(), epoll_wait() (level-triggered) or a
 * blocking recv() - for bench/wake.sh: what a wake-up costs through the
 * doorbells (issue #13, item 9).  Under shunt run it with SHUNT_SPIN_US=0
 * so every wait sleeps.
 *   wake poll|epoll|block ROUNDS   prints the mean round trip in us */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <sys/epoll.h>

enum { POLL, EPOLL, BLOCK };

static void wait_in(int fd, int how, int ep)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct epoll_event ev;

	if (how == POLL)
		CHECK(poll(&p, 1, 10000) == 1);
	else if (how == EPOLL)
		CHECK(epoll_wait(ep, &ev, 1, 10000) == 1);
}

static void xfer(int fd, int how, int ep, int first, long rounds)
{
	char buf[64] = { 0 };

	for (long i = 0; i < rounds; i++) {
		if (first)
			CHECK(send(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
		for (size_t got = 0; got < sizeof buf;) {
			ssize_t n = recv(fd, buf + got, sizeof buf - got, 0);
			if (n < 0 && errno == EAGAIN) {
				wait_in(fd, how, ep);
				continue;
			}
			CHECK(n > 0);
			got += (size_t)n;
		}
		if (!first)
			CHECK(send(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int how, l, fd, ep = -1;
	long rounds;
	pid_t pid;
	double t0;

	if (argc != 3)
		return 2;
	how = !strcmp(argv[1], "poll") ? POLL : !strcmp(argv[1], "epoll") ? EPOLL : BLOCK;
	rounds = atol(argv[2]);
	l = listen_on("127.0.0.1", &ss, &len);
	pid = fork();
	CHECK(pid >= 0);
	fd = pid ? connect_to(&ss, len) : accept(l, NULL, NULL);
	CHECK(fd >= 0);
	CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int)) == 0);
	if (how != BLOCK)
		CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	if (how == EPOLL) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
		CHECK((ep = epoll_create1(0)) >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	}
	xfer(fd, how, ep, pid != 0, 100); /* warm-up */
	t0 = now_s();
	xfer(fd, how, ep, pid != 0, rounds);
	if (pid) {
		printf("%.2f\n", (now_s() - t0) * 1e6 / (double)rounds);
		CHECK(waitpid(pid, NULL, 0) == pid);
	}
	return 0;
}
