/* Description: closing a connection with bytes still unread resets it, as
 * TCP does: the peer, which sees the reset in poll(), reads ECONNRESET and
 * then writes EPIPE.  Closing after reading everything is an ordinary end:
 * the peer reads EOF.  (Issue #13, item 4: shunt gave a clean EOF and
 * later writes succeeded.)  Over RDMA the closing cursor message says
 * "reset" (SHUNT_CDC_F_RESET): the peer's read need not wait for the
 * kernel's RST. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[100];

	signal(SIGPIPE, SIG_IGN);
	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int a = accept(l, NULL, NULL), b = accept(l, NULL, NULL);
		CHECK(a >= 0 && b >= 0);
		read_all(a, buf, 10); /* 90 bytes left unread */
		close(a);
		read_all(b, buf, 100); /* all read */
		close(b);
		_exit(0);
	}
	int fd = connect_to(&ss, len), fd2 = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	expect_mode_peer_forks(fd2);
	memset(buf, 'x', sizeof buf);
	write_all(fd, buf, sizeof buf);
	write_all(fd2, buf, sizeof buf);

	struct pollfd pf = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 10000) == 1);
	CHECK(read(fd, buf, sizeof buf) < 0 && errno == ECONNRESET);
	CHECK(write(fd, "y", 1) < 0 && errno == EPIPE);

	pf.fd = fd2;
	CHECK(poll(&pf, 1, 10000) == 1);
	CHECK(read(fd2, buf, sizeof buf) == 0); /* EOF, no reset */
	CHECK(wait_child(p) == 0);
	return 0;
}
