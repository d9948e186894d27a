/* Description: a server whose epoll set holds a connection forks a child
 * that closes its copy and ends (redis's BGSAVE child, a helper) - the
 * child's close takes nothing out of the parent's set: the set is one
 * kernel instance, and the kernel keeps a registration while any process
 * holds the file.  The parent then writes 4 MiB as its event loop reports
 * room (level-triggered, as redis's write handler), to a slow reader:
 * every byte arrives.  Before, the child's close took the connection's
 * doorbell and socket out of the shared set: the parent heard of room no
 * more once the ring was full (redis's replication stalled at 256 KiB of
 * its RDB file).  Both ways of ending: exit() (its handlers run) and
 * _exit() after a close. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/wait.h>

#define TOTAL (4u << 20)

static void serve(int c, int round)
{
	int ep = epoll_create1(0), st;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
	char buf[16384], k;
	size_t sent = 0;
	pid_t p;

	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	read_all(c, &k, 1);
	CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
	CHECK((p = fork()) >= 0);
	if (!p) {
		close(c);
		if (round)
			_exit(0);
		exit(0);
	}
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && !WEXITSTATUS(st));
	ev.events = EPOLLIN | EPOLLOUT;
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev) == 0);
	memset(buf, 'z', sizeof buf);
	while (sent < TOTAL) {
		struct epoll_event out[4];
		int n = epoll_wait(ep, out, 4, 5000);
		ssize_t w;
		if (n <= 0) {
			fprintf(stderr, "round %d: no room reported for 5 s after %zu bytes\n", round, sent);
			_exit(1);
		}
		w = write(c, buf, sizeof buf);
		if (w > 0)
			sent += (size_t)w;
		else
			CHECK(errno == EAGAIN);
	}
	close(ep);
	close(c);
}

static void server(int l)
{
	for (int round = 0; round < 2; round++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		serve(c, round);
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);
	static char b[65536];

	for (int round = 0; round < 2; round++) {
		int fd = connect_to(&ss, len);
		size_t got = 0;
		expect_mode(fd);
		write_all(fd, "k", 1);
		while (got < TOTAL) {
			ssize_t n = read(fd, b, sizeof b);
			CHECK(n > 0);
			for (ssize_t i = 0; i < n; i++)
				CHECK(b[i] == 'z');
			got += (size_t)n;
			usleep(100);
		}
		CHECK(read(fd, b, 1) == 0);
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
