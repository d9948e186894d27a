/* Description: a writer waiting on a full window, whose peer's end of the
 * link dies after the peer's FIN (so the peer cannot say so on the socket).
 *   zwin server ADDR PORT   writes 2 MiB without blocking, waiting in
 *                           edge-triggered epoll when the window is full
 *                           (a blocking writer probes by itself), then
 *                           closes
 *   zwin client ADDR PORT   shuts its sending half at once, sleeps 4 s
 *                           without reading, then reads the 2 MiB and EOF
 * Each checks its bytes and prints "role=... mode=... reason=... ok".  Run
 * the client with libshunt-faults.so SHUNT_FAULT_RDMA_DIE_MS (its links die
 * while it sleeps): the server's writer must learn it (tests/rdma/probe.sh). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <sys/epoll.h>

#define TOTAL (2u << 20)

static void report(const char *role, int fd)
{
	struct shunt_info in = sock_info(fd);

	printf("role=%s mode=%s reason=%u ok\n", role, mode_name(in.mode), in.reason);
}

int main(int argc, char **argv)
{
	static uint8_t buf[TOTAL + 1];
	int fd, l;
	struct sockaddr_in a = tool_role(argc, argv, "zwin", 1, &l);

	if (l >= 0) {
		CHECK((fd = accept(l, NULL, NULL)) >= 0);
		for (size_t i = 0; i < TOTAL; i++)
			buf[i] = pattern(i, 5);
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLOUT | EPOLLET };
		CHECK(ep >= 0 && !fcntl(fd, F_SETFL, O_NONBLOCK) && !epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
		for (size_t sent = 0; sent < TOTAL;) {
			ssize_t w = write(fd, buf + sent, TOTAL - sent);
			if (w > 0) {
				sent += (size_t)w;
				continue;
			}
			CHECK(w < 0 && errno == EAGAIN);
			if (epoll_wait(ep, &ev, 1, 30000) != 1) {
				fprintf(stderr, "zwin: no room for 30 s after %zu bytes\n", sent);
				return 1;
			}
		}
		CHECK(!fcntl(fd, F_SETFL, 0));
		CHECK(read(fd, buf, 1) == 0); /* the client's FIN */
		report("server", fd);
	} else {
		size_t got = 0;
		ssize_t r;
		CHECK((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
		CHECK(!connect(fd, (void *)&a, sizeof a));
		CHECK(!shutdown(fd, SHUT_WR));
		sleep(4);
		while ((r = read(fd, buf + got, TOTAL - got + 1)) > 0)
			got += (size_t)r;
		CHECK(r == 0 && got == TOTAL);
		for (size_t i = 0; i < TOTAL; i++)
			CHECK(buf[i] == pattern(i, 5));
		report("client", fd);
	}
	close(fd);
	return 0;
}
