/* Description: write(), shutdown() and close() towards a stopped peer do
 * not wait for it.
 *   stopped server ADDR PORT   accepts one connection, says "accepted",
 *                              reads every byte to EOF, reports its mode
 *   stopped client ADDR PORT GO   connects; once the file GO exists (its
 *                              script stopped the server with SIGSTOP by
 *                              then) writes 600 one-byte messages without
 *                              blocking - over RDMA each one a cursor
 *                              message, more than the stopped peer has
 *                              receives posted, so its device answers RNR
 *                              and our send queue fills - then shuts its
 *                              sending half, prints how long the writes
 *                              and shutdown() took, waits for the
 *                              server's close and reports its mode
 *   stopped client ADDR PORT GO close   the same writes, then close()
 *                              instead of shutdown(), timed, and the
 *                              process ends at once (its end waits for
 *                              the closing word as close() no longer does)
 *   ... closefork              the same, then a child is forked that
 *                              lives 8 s: the server's EOF must not wait
 *                              for it
 * The script resumes the server (SIGCONT) a second after the shutdown.
 * TCP's calls never wait for the peer while its buffer has room; shunt's
 * progress thread posts what a full send queue could not take, and sends
 * the kernel's FIN once the closing word completed (tests/rdma/stopped.sh). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

#define N 600

static void report(const char *role, int fd)
{
	struct shunt_info in = sock_info(fd);

	printf("role=%s mode=%s reason=%u\n", role, mode_name(in.mode), in.reason);
	fflush(stdout);
}

static long ms_between(const struct timespec *a, const struct timespec *b)
{
	return (long)((b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000);
}

int main(int argc, char **argv)
{
	int fd, l;
	struct sockaddr_in a = tool_role(argc > 4 ? 4 : argc, argv, "stopped", 1, &l);

	if (l >= 0) {
		CHECK((fd = accept(l, NULL, NULL)) >= 0);
		printf("accepted\n");
		fflush(stdout);
		CHECK(read_pattern_to_eof(fd, 7) == N);
		report("server", fd);
	} else {
		struct timespec t0, t1;
		char b;
		CHECK(argc == 5 || argc == 6);
		CHECK((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
		CHECK(!connect(fd, (void *)&a, sizeof a));
		while (access(argv[4], F_OK))
			usleep(10000);
		CHECK(!fcntl(fd, F_SETFL, O_NONBLOCK));
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < N; i++) {
			b = (char)pattern((uint64_t)i, 7);
			CHECK(write(fd, &b, 1) == 1); /* the buffer has room */
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("writes_ms=%ld\n", ms_between(&t0, &t1));
		if (argc > 5 && (!strcmp(argv[5], "close") || !strcmp(argv[5], "closefork"))) {
			/* close() instead, and the process ends at once after it */
			report("client", fd);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			CHECK(!close(fd));
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("close_ms=%ld\n", ms_between(&t0, &t1));
			fflush(stdout);
			if (!strcmp(argv[5], "closefork")) {
				/* a child made after the close: the socket is not
				 * its to keep open (its peer's EOF must not wait
				 * for this child's end) */
				pid_t p = fork();
				CHECK(p >= 0);
				if (!p) {
					sleep(8);
					_exit(0);
				}
				CHECK(wait_child(p) == 0);
			}
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(!shutdown(fd, SHUT_WR));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("shutdown_ms=%ld\n", ms_between(&t0, &t1));
		CHECK(!fcntl(fd, F_SETFL, 0));
		fflush(stdout);
		CHECK(read(fd, &b, 1) == 0); /* the server's close */
		report("client", fd);
	}
	close(fd);
	return 0;
}
