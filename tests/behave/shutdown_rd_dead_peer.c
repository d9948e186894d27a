/* Description: a writer that shut its own reading half fills the
 * connection, its peer is killed, and the writer waits in poll() - with
 * another descriptor beside the socket, as an event loop's poll - for
 * room.  TCP's peer dies with the bytes unread in its kernel, which
 * answers with a reset: poll says POLLERR at once, the next send fails.
 * Under shunt the bytes are in the ring and the dead peer's kernel sends
 * only its FIN, which after our SHUT_RD no poll shows (the reading half
 * reads as ended already): poll must look at the socket's state by
 * itself, then probe (a gone peer's kernel resets).  Before, the poll
 * waited for ever.  The send after it fails with EPIPE under shunt (the
 * FIN came before the reset) where TCP's says ECONNRESET: either says the
 * peer is gone. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, pfd[2], st;
	static char buf[65536];
	pid_t p;
	char b;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	CHECK(pipe(pfd) == 0);
	CHECK((p = fork()) >= 0);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		write_all(c, "r", 1);
		for (;;)
			pause(); /* never reads */
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	read_all(fd, &b, 1);
	CHECK(shutdown(fd, SHUT_RD) == 0);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	for (;;) {
		ssize_t n = send(fd, buf, sizeof buf, 0);
		if (n < 0) {
			CHECK(errno == EAGAIN);
			break;
		}
	}
	CHECK(kill(p, SIGKILL) == 0 && waitpid(p, &st, 0) == p);

	struct pollfd pf[2] = { { fd, POLLOUT, 0 }, { pfd[0], POLLIN, 0 } };
	double t0 = now_s();
	int r = poll(pf, 2, 10000);
	if (r != 1 || !(pf[0].revents & POLLERR)) {
		fprintf(stderr, "poll after the peer's death: %d, revents %#x after %.1f s (wanted POLLERR)\n", r,
			pf[0].revents, now_s() - t0);
		return 1;
	}
	ssize_t n = send(fd, "x", 1, 0);
	if (n != -1 || (errno != ECONNRESET && errno != EPIPE)) {
		fprintf(stderr, "send after the peer's death: %zd (errno %d)\n", n, n < 0 ? errno : 0);
		return 1;
	}
	printf("# the peer's death seen in %.0f ms\n", (now_s() - t0) * 1000);
	close(fd);
	return 0;
}
