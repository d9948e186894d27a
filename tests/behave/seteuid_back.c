/* Description: a process that changes its user for a moment and back -
 * seteuid() to nobody and to root again, as a server reading a user's
 * file as that user does - keeps accelerating the connections it makes
 * after: only a change for good (its saved user id gone too) that leaves
 * the rendezvous directory out of its reach makes them plain (tests/behave/off_listener, "root dropped").  setuid()'s
 * wrappers look at the directory after each change; a look that went off
 * at the first seteuid() would leave every connection after it plain.
 * Run as root: skipped otherwise.  NOT_SPLIT_OVER_RDMA: both ends are
 * this test's processes.  NOT_OVER_RDMA: an open bug (docs/rdma.md, "Known
 * limits"): on Soft-RoCE a credential change leaves the process's verbs
 * contexts unwritable - its links fail (connections intact, on TCP,
 * link-failed) and each new connection pays a failed link first. */
#include "common.h"
#include <grp.h>

static void round_trip(const struct sockaddr_storage *ss, socklen_t len, int l)
{
	char b[5] = { 0 };
	pid_t p = test_fork();

	CHECK(p >= 0);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, b, 4);
		write_all(c, b, 4);
		CHECK(read(c, b, 1) == 0);
		_exit(0);
	}
	int fd = connect_to(ss, len);
	expect_mode(fd);
	write_all(fd, "ping", 4);
	read_all(fd, b, 4);
	CHECK(!memcmp(b, "ping", 4));
	close(fd);
	CHECK(wait_child(p) == 0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l;

	deadline(20);
	if (geteuid() != 0) {
		fprintf(stderr, "not root: skipped\n");
		return 77;
	}
	l = listen_on("127.0.0.1", &ss, &len);
	CHECK(setegid(65534) == 0 && seteuid(65534) == 0);
	CHECK(seteuid(0) == 0 && setegid(0) == 0);
	round_trip(&ss, len, l); /* after the change and back */
	CHECK(setresgid(65534, 65534, 0) == 0 && setresuid(65534, 65534, 0) == 0);
	CHECK(setresuid(0, 0, 0) == 0 && setresgid(0, 0, 0) == 0);
	round_trip(&ss, len, l); /* every id but the saved one given up, and taken back */
	CHECK(setgroups(0, NULL) == 0);
	round_trip(&ss, len, l); /* root's groups dropped: root all the same */
	close(l);
	return 0;
}
