/* Description: poll() and ppoll() on a connection work under an
 * RLIMIT_NOFILE as low as the number of fds polled: data arriving later
 * wakes the poll, so does the peer's close, and a timeout times out.  (The
 * kernel refuses more entries than the limit with EINVAL; OpenSSH's
 * pre-authentication child polls its one socket under a limit of 1 - issue
 * #13, item 1: shunt added its own entries and the poll failed.)
 * The soft limit only (the kernel's poll checks it): it is restored before
 * the end, where split mode opens the server's status file. */
#include "common.h"
#include <sys/resource.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	struct rlimit old, one;
	struct pollfd pf;
	char buf[64];
	double t;

	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, buf, 1);
		usleep(200000);
		write_all(c, "late", 4);
		read_all(c, buf, 1);
		usleep(200000);
		_exit(0); /* its close: the client's poll wakes */
	}
	int fd = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
	one = (struct rlimit){ 1, old.rlim_max };
	CHECK(setrlimit(RLIMIT_NOFILE, &one) == 0);

	pf = (struct pollfd){ .fd = fd, .events = POLLIN };
	t = now_s();
	CHECK(poll(&pf, 1, 100) == 0); /* nothing yet: a timeout */
	CHECK(now_s() - t >= 0.09);
	write_all(fd, "g", 1);
	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
	read_all(fd, buf, 4);
	CHECK(!memcmp(buf, "late", 4));
	write_all(fd, "g", 1);
	struct timespec ts = { 10, 0 };
	CHECK(ppoll(&pf, 1, &ts, NULL) == 1 && (pf.revents & POLLIN));
	CHECK(read(fd, buf, sizeof buf) == 0);
	CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
	CHECK(wait_child(p) == 0);
	return 0;
}
