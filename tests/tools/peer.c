/* Description: a tiny TCP peer for the integration matrix.
 *   peer server ADDR PORT MODE   MODE: cfirst (client speaks first) | sfirst
 *   peer client ADDR PORT MODE [FILE]
 * Exchanges 64 KiB of checksummed data each way, in the order MODE says
 * (with FILE, the client then waits for FILE to exist and both exchange
 * 64 KiB more: a connection kept open across an event), then prints one line: "role=... mode=... reason=... first_byte_us=..."
 * (mode/reason from getsockopt(SOL_SHUNT), "none" without shunt).  The
 * server then exits without close(); the client reads its end as EOF - an
 * ordinary end, not a reset (nothing may be left unread on the server's
 * kernel socket, issue #13 item 4). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <netdb.h>

#define N 65536

static void die(const char *m)
{
	fprintf(stderr, "peer: %s: %s\n", m, strerror(errno));
	exit(1);
}

static void report(const char *role, int fd, double first)
{
	struct shunt_info in;
	socklen_t l = sizeof in;
	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
		printf("role=%s mode=none reason=none first_byte_us=%.0f\n", role, first * 1e6);
	else
		printf("role=%s mode=%s reason=%u first_byte_us=%.0f\n", role, in.mode == 1 ? "shm" : in.mode == 3 ? "rdma" : "tcp",
		       in.reason, first * 1e6);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	int cfirst, fd, one = 1;
	double t0, first;

	if (argc < 5 || argc > 6 || getaddrinfo(argv[2], argv[3], &hints, &ai))
		return 2;
	cfirst = !strcmp(argv[4], "cfirst");
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (!strcmp(argv[1], "server")) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 8))
			die("listen");
		printf("listening\n");
		fflush(stdout);
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			die("accept");
		t0 = now_s();
		if (cfirst) {
			expect_pattern(c, N, 1);
			first = now_s() - t0;
			write_pattern(c, N, 2);
		} else {
			write_pattern(c, N, 2);
			expect_pattern(c, N, 1);
			first = now_s() - t0;
		}
		if (argc == 6) {
			expect_pattern(c, N, 3);
			write_pattern(c, N, 4);
		}
		report("server", c, first);
		return 0;
	}
	t0 = now_s();
	if (connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	if (cfirst) {
		write_pattern(fd, N, 1);
		expect_pattern(fd, N, 2);
	} else {
		expect_pattern(fd, N, 2);
		write_pattern(fd, N, 1);
	}
	first = now_s() - t0;
	if (argc == 6) {
		while (access(argv[5], F_OK))
			usleep(10000);
		write_pattern(fd, N, 3);
		expect_pattern(fd, N, 4);
	}
	char b;
	ssize_t r = read(fd, &b, 1);
	if (r != 0)
		die(r < 0 ? "the server's exit: not EOF" : "the server's exit: a byte too many");
	report("client", fd, first);
	return 0;
}
