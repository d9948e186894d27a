/* Description: writing to a connection whose peer closed ends in EPIPE (or
 * ECONNRESET) with MSG_NOSIGNAL, and raises SIGPIPE without it. */
#include "common.h"

static volatile sig_atomic_t got_pipe;
static void on_pipe(int s) { (void)s; got_pipe = 1; }

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[4096] = { 0 };

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		close(c);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(wait_child(p) == 0);
	CHECK(read(fd, buf, 1) == 0); /* FIN seen */
	int err = 0;
	for (int i = 0; i < 1000 && !err; i++) {
		if (send(fd, buf, sizeof buf, MSG_NOSIGNAL) < 0)
			err = errno;
		usleep(1000);
	}
	CHECK(err == EPIPE || err == ECONNRESET);
	signal(SIGPIPE, on_pipe);
	CHECK(write(fd, buf, 10) == -1 && errno == EPIPE);
	CHECK(got_pipe);
	return 0;
}
