/* Description: daemon() in a handler whose standard descriptors are the
 * connection (inetd-style: accept, dup2 onto 0 and 1) behaves as on TCP:
 * its /dev/null replaces the connection on 0-2, so a later write(1, ...)
 * goes to /dev/null and read(0) finds an end, while the copy the handler
 * kept elsewhere still carries the answer, and the peer reads an end once
 * the daemon closes it.  glibc's daemon() forks, exits and dup2s inside
 * libc, past shunt's wrappers: with the previous library the write meant
 * for /dev/null reached the client. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p;

	deadline(30);
	p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL), keep;
		char b;

		CHECK(c >= 0);
		expect_mode_peer_forks(c);
		CHECK(dup2(c, 0) == 0 && dup2(c, 1) == 1);
		keep = dup(c);
		CHECK(keep > 2);
		close(c);
		read_all(0, &b, 1); /* the request */
		write_all(1, "before ", 7);
		if (daemon(1, 0)) /* the parent leaves here: _exit(0) */
			_exit(3);
		/* the daemon: 0-2 are /dev/null now */
		CHECK(read(0, &b, 1) == 0);
		write_all(1, "for /dev/null ", 14);
		write_all(keep, "answer", 6);
		CHECK(getsid(0) == getpid());
		close(keep);
		_exit(0);
	}
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	write_all(fd, "q", 1);
	CHECK(wait_child(p) == 0); /* daemon()'s parent */
	expect_text_to_eof(fd, "before answer", 1);
	close(fd);
	return 0;
}
