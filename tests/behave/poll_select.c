/* Description: poll and select over a pipe and an accelerated socket at
 * once: each reports exactly the fd that is ready, timeouts expire. */
#include "common.h"
#include <sys/select.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), pp[2];
	struct chan sync;
	char c;

	deadline(30);
	CHECK(pipe(pp) == 0);
	chan_open(&sync);
	pid_t p = test_fork();
	if (!p) {
		int s = accept(l, NULL, NULL);
		expect_mode(s);
		while (chan_recv(&sync, &c))
			write_all(s, &c, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	struct pollfd pf[2] = { { .fd = pp[0], .events = POLLIN }, { .fd = fd, .events = POLLIN } };
	double t = now_s();
	CHECK(poll(pf, 2, 100) == 0);
	CHECK(now_s() - t >= 0.09);
	write_all(pp[1], "x", 1);
	CHECK(poll(pf, 2, 5000) == 1 && pf[0].revents == POLLIN && pf[1].revents == 0);
	CHECK(read(pp[0], &c, 1) == 1);
	chan_send(&sync, 'y');
	CHECK(poll(pf, 2, 5000) == 1 && pf[0].revents == 0 && pf[1].revents == POLLIN);
	CHECK(read(fd, &c, 1) == 1 && c == 'y');
	pf[1].events = POLLOUT;
	CHECK(poll(pf, 2, 5000) == 1 && pf[1].revents == POLLOUT);

	fd_set r, w;
	struct timeval tv = { 0, 100000 };
	FD_ZERO(&r);
	FD_SET(pp[0], &r);
	FD_SET(fd, &r);
	int mx = (pp[0] > fd ? pp[0] : fd) + 1;
	CHECK(select(mx, &r, NULL, NULL, &tv) == 0);
	chan_send(&sync, 'z');
	FD_ZERO(&r);
	FD_SET(pp[0], &r);
	FD_SET(fd, &r);
	tv = (struct timeval){ 5, 0 };
	CHECK(select(mx, &r, NULL, NULL, &tv) == 1 && FD_ISSET(fd, &r) && !FD_ISSET(pp[0], &r));
	CHECK(read(fd, &c, 1) == 1 && c == 'z');
	FD_ZERO(&w);
	FD_SET(fd, &w);
	tv = (struct timeval){ 5, 0 };
	CHECK(select(fd + 1, NULL, &w, NULL, &tv) == 1 && FD_ISSET(fd, &w));
	chan_close(&sync);
	CHECK(wait_child(p) == 0);
	return 0;
}
