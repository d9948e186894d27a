/* Description: close_range(), closefrom() and syscall(SYS_close_range)
 * close exactly the program's descriptors in the range: a connection below
 * the range goes on, one inside it ends (its peer reads EOF), and new
 * connections after it work as before (issue #13, item 1: the shim's own
 * descriptors - the rendezvous directory, rings, eventfds - used to be
 * closed under it, as sshd's closefrom() does at start-up). */
#include "common.h"
#include <sys/syscall.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(30);
	pid_t p = fork();
	if (!p) {
		/* a poll loop: accept three connections, echo every byte, and
		 * on each later connection's EOF report its number on the first */
		struct pollfd pf[4] = { { .fd = l, .events = POLLIN } };
		int n = 1, open_ = 0;
		char b;
		do {
			CHECK(poll(pf, (nfds_t)n, -1) > 0);
			if (n < 4 && (pf[0].revents & POLLIN)) {
				pf[n] = (struct pollfd){ .fd = accept(l, NULL, NULL), .events = POLLIN };
				CHECK(pf[n].fd >= 0);
				n++, open_++;
			}
			for (int i = 1; i < n; i++) {
				if (pf[i].fd < 0 || !pf[i].revents)
					continue;
				if (read(pf[i].fd, &b, 1) == 1) {
					write_all(pf[i].fd, &b, 1);
					continue;
				}
				if (i > 1)
					write_all(pf[1].fd, i == 3 ? "2" : "1", 1);
				close(pf[i].fd);
				pf[i].fd = -1;
				open_--;
			}
		} while (open_ || n < 4);
		_exit(0);
	}
	close(l);
	int a = connect_to(&ss, len);
	expect_mode(a);
	echo_once(a, 'x');
	CHECK(close_range((unsigned)a + 1, ~0u, 0) == 0);
	echo_once(a, 'a');

	int b = connect_to(&ss, len); /* a new connection still accelerates */
	expect_mode(b);
	int c = connect_to(&ss, len);
	expect_mode(c);
	echo_once(b, 'b');
	echo_once(c, 'c');
	CHECK(b < c);
	closefrom(c); /* c ends; a and b go on */
	CHECK(write(c, "z", 1) < 0 && errno == EBADF);
	char r;
	read_all(a, &r, 1);
	CHECK(r == '2');
	echo_once(b, 'd');
	CHECK(syscall(SYS_close_range, (unsigned)b, (unsigned)b, 0) == 0);
	read_all(a, &r, 1);
	CHECK(r == '1');
	echo_once(a, 'e');
	CHECK(close_range(~0u, 0, 0) < 0 && errno == EINVAL);
	CHECK(close_range(0, ~0u, 1u << 30) < 0 && errno == EINVAL); /* unknown flag: nothing closed */
	echo_once(a, 'f');
	close(a);
	CHECK(wait_child(p) == 0);
	return 0;
}
