/* Description: a process that changes its user for a moment and back -
 * seteuid() to nobody and to root again, as a server reading a user's
 * file as that user does - keeps accelerating the connections it makes
 * after: only a change for good (its saved user id gone too) that leaves
 * the rendezvous directory out of its reach makes them plain (tests/behave/off_listener, "root dropped").  setuid()'s
 * wrappers look at the directory after each change; a look that went off
 * at the first seteuid() would leave every connection after it plain.
 * Over RDMA the kernel takes no verbs command from credentials other than
 * those that opened the device, so each change opens the devices again
 * (links.c rdma_creds_changed); before, each connection after a change
 * went on a link that could not post and ended plain (link-failed).  A
 * connection open across a change carries its bytes intact (over
 * Soft-RoCE it moves to TCP: its doorbell is a write()), and a process
 * that changes its user at every request (Samba's smbd) does not gather
 * descriptors: the old devices are closed once no link uses them.
 * Run as root: skipped otherwise.  NOT_SPLIT_OVER_RDMA: both ends are
 * this test's processes. */
#include "common.h"
#include <grp.h>

/* A connection open across a change: its bytes before and after, both
 * ways, intact. */
static void across_change(const struct sockaddr_storage *ss, socklen_t len, int l)
{
	static char big[1 << 20], back[1 << 20];
	pid_t p = test_fork();

	CHECK(p >= 0);
	if (!p) { /* an echo */
		int c = accept(l, NULL, NULL);
		ssize_t n;
		CHECK(c >= 0);
		while ((n = read(c, back, sizeof back)) > 0)
			write_all(c, back, (size_t)n);
		CHECK(n == 0);
		_exit(0);
	}
	int fd = connect_to(ss, len);
	expect_mode(fd);
	for (size_t k = 0; k < sizeof big; k++)
		big[k] = (char)pattern(k, 7);
	write_all(fd, big, 4096);
	read_all(fd, back, 4096);
	CHECK(!memcmp(back, big, 4096));
	CHECK(seteuid(65534) == 0 && seteuid(0) == 0);
	write_all(fd, "x", 1); /* the first write after it: what tries the link */
	read_all(fd, back, 1);
	CHECK(back[0] == 'x');
	for (int i = 0; i < 4; i++) { /* (the echo writes back as we write: a quarter at a time) */
		write_all(fd, big + i * (sizeof big / 4), sizeof big / 4);
		read_all(fd, back + i * (sizeof back / 4), sizeof back / 4);
	}
	CHECK(!memcmp(back, big, sizeof big));
	shutdown(fd, SHUT_WR);
	CHECK(read(fd, back, 1) == 0);
	close(fd);
	CHECK(wait_child(p) == 0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, fds;

	deadline(60);
	if (geteuid() != 0) {
		fprintf(stderr, "not root: skipped\n");
		return 77;
	}
	l = listen_on("127.0.0.1", &ss, &len);
	CHECK(setegid(65534) == 0 && seteuid(65534) == 0);
	CHECK(seteuid(0) == 0 && setegid(0) == 0);
	child_ping(&ss, len, l, 0); /* after the change and back */
	CHECK(setresgid(65534, 65534, 0) == 0 && setresuid(65534, 65534, 0) == 0);
	CHECK(setresuid(0, 0, 0) == 0 && setresgid(0, 0, 0) == 0);
	child_ping(&ss, len, l, 0); /* every id but the saved one given up, and taken back */
	CHECK(setgroups(0, NULL) == 0);
	child_ping(&ss, len, l, 0); /* root's groups dropped: root all the same */
	across_change(&ss, len, l);
	fds = count_fds();
	for (int i = 0; i < 20; i++) { /* smbd's way: a change at each request */
		if (!getenv("NOCHG")) CHECK(seteuid(65534) == 0 && seteuid(0) == 0);
		child_ping(&ss, len, l, 0);
	}
	/* over RDMA the old devices close once the links made on them are
	 * gone - a link to an ended child once a test of it fails (links.c:
	 * quiet 2 s, then the queue pair's retries): 15 s at most */
	for (int t = 0; t < 75 && count_fds() > fds + 8; t++)
		usleep(200000);
	if (count_fds() > fds + 8) {
		fprintf(stderr, "%d descriptors after 20 changes, %d before\n", count_fds(), fds);
		CHECK(0);
	}
	close(l);
	return 0;
}
