/* Description: shutdown() towards a stopped peer does not wait for it.
 *   stopped server ADDR PORT   accepts one connection, says "accepted",
 *                              reads every byte to EOF, reports its mode
 *   stopped client ADDR PORT GO   connects; once the file GO exists (its
 *                              script stopped the server with SIGSTOP by
 *                              then) writes 400 one-byte messages - over
 *                              RDMA each one a cursor message, more than
 *                              the stopped peer has receives posted, so
 *                              its device answers RNR and our send queue
 *                              waits - then shuts its sending half, prints
 *                              how long shutdown() took, waits for the
 *                              server's close and reports its mode
 * The script resumes the server (SIGCONT) a second after the shutdown.
 * TCP's shutdown() never waits for the peer; shunt's sends the kernel's
 * FIN from its progress thread once the closing word completed
 * (tests/rdma/stopped.sh). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

#define N 400

static void report(const char *role, int fd)
{
	struct shunt_info in = sock_info(fd);

	printf("role=%s mode=%s reason=%u\n", role, mode_name(in.mode), in.reason);
	fflush(stdout);
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
		CHECK(argc == 5);
		CHECK((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
		CHECK(!connect(fd, (void *)&a, sizeof a));
		while (access(argv[4], F_OK))
			usleep(10000);
		for (int i = 0; i < N; i++) {
			b = (char)pattern((uint64_t)i, 7);
			write_all(fd, &b, 1);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(!shutdown(fd, SHUT_WR));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("shutdown_ms=%ld\n", (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
		fflush(stdout);
		CHECK(read(fd, &b, 1) == 0); /* the server's close */
		report("client", fd);
	}
	close(fd);
	return 0;
}
