/* Description: shunt's own lines (SHUNT_LOG=1's, and warnings) never go
 * into a connection.  A server run inetd-style has its connection on its
 * standard descriptors (vsftpd, xinetd's services, sshd -i): here the
 * first connection is dup'd onto descriptor 2, then a second connection
 * is accepted - whose "accept fd ..." line went to standard error - and
 * the first client must read exactly the server's reply, nothing else.
 * With the previous library it read "shunt[pid]: accept fd ..." first.
 * (Run with SHUNT_LOG=1: the program sets it and runs itself again.) */
#include "common.h"

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, a, b, ca, cb, err;
	pid_t p;
	char buf[256];
	size_t got = 0;
	ssize_t r;

	(void)argc;
	if (getenv("LD_PRELOAD") && !getenv("SHUNT_LOG")) {
		setenv("SHUNT_LOG", "1", 1);
		execv("/proc/self/exe", argv);
		CHECK(0);
	}
	deadline(30);
	l = listen_on("127.0.0.1", &ss, &len);
	CHECK((p = fork()) >= 0); /* the clients (over RDMA a connect waits for its accept) */
	if (!p) {
		CHECK((ca = connect_to(&ss, len)) >= 0);
		expect_mode(ca);
		CHECK((cb = connect_to(&ss, len)) >= 0);
		while ((r = read(ca, buf + got, sizeof buf - got)) > 0)
			got += (size_t)r;
		CHECK(r == 0);
		if (got != 5 || memcmp(buf, "reply", 5)) {
			fprintf(stderr, "the client read %zu bytes: %.*s\n", got, (int)got, buf);
			_exit(1);
		}
		_exit(0);
	}
	CHECK((a = accept(l, NULL, NULL)) >= 0);
	CHECK((err = dup(2)) > 2);
	CHECK(dup2(a, 2) == 2); /* inetd-style: the connection is standard error */
	CHECK((b = accept(l, NULL, NULL)) >= 0); /* SHUNT_LOG's line for it */
	write_all(2, "reply", 5);
	CHECK(dup2(err, 2) == 2); /* (this test's own messages: standard error again) */
	close(a);
	CHECK(wait_child(p) == 0);
	close(b);
	return 0;
}
