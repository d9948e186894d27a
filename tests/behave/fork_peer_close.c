/* Description: a client forks between its server's last read and the
 * server's close (over RDMA each fork moves the process's connections to
 * TCP first: its failover message, and the bytes the server may lack, go
 * on the socket): the client reads the server's answer and then a clean
 * EOF, as over TCP - on a connection whose answer it read before the fork
 * and on one whose answer waited unread in its ring (the server resends
 * it).  Before the forty-sixth session the server's close found the
 * client's failover message (and the resent byte it had read already)
 * unread on its socket, and the kernel reset the connection: the client
 * read ECONNRESET instead of the end - about one run in ten of
 * fork_threads in the Soft-RoCE guest, every time here. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, go[2];
	pid_t p;

	deadline(60);
	CHECK(pipe(go) == 0);
	p = serve_forked(&l, &ss, &len);
	if (!p) {
		close(go[1]);
		for (int i = 0; i < 2; i++) {
			int c = accept(l, NULL, NULL);
			char b;
			CHECK(c >= 0);
			expect_mode(c);
			CHECK(read(c, &b, 1) == 1 && b == 'x');
			write_all(c, "y", 1);
			CHECK(read(go[0], &b, 1) == 1); /* the client forked */
			close(c);
		}
		_exit(0);
	}
	close(l);
	close(go[0]);
	for (int i = 0; i < 2; i++) {
		int fd = connect_to(&ss, len), st;
		char b;
		ssize_t n;
		expect_mode(fd);
		write_all(fd, "x", 1);
		if (!i) { /* the answer read before the fork */
			CHECK(read(fd, &b, 1) == 1 && b == 'y');
		} else { /* there, unread */
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
		}
		pid_t k = fork();
		CHECK(k >= 0);
		if (!k)
			_exit(0);
		CHECK(waitpid(k, &st, 0) == k && WIFEXITED(st) && !WEXITSTATUS(st));
		write_all(go[1], "g", 1);
		if (i)
			CHECK(read(fd, &b, 1) == 1 && b == 'y');
		errno = 0;
		n = read(fd, &b, 1);
		if (n) {
			fprintf(stderr, "connection %d: after the server's close read %zd (%s), wanted the end\n", i,
				n, n < 0 ? strerror(errno) : "a byte");
			return 1;
		}
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
