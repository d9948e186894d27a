/* Description: connections one after another between the same two
 * processes, a pause between them, for a link whose client end dies while
 * it carries nothing (tests/rdma/stale_link.sh).
 *   relink server ADDR PORT   accepts 4 connections in turn; on each reads
 *                             64 KiB, echoes them, and prints
 *                             "conn=N role=server mode=... reason=..."
 *   relink client ADDR PORT   makes them, 3 s apart: writes 64 KiB
 *                             (pattern), reads them back and checks them,
 *                             prints "conn=N role=client mode=... reason=..."
 * Every connection's bytes are checked whatever its transport. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

#define CONNS 4
#define N 65536

static void report(const char *role, int n, int fd)
{
	struct shunt_info in = sock_info(fd);

	printf("conn=%d role=%s mode=%s reason=%u\n", n, role, mode_name(in.mode), in.reason);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static uint8_t buf[N];
	int fd, l;
	struct sockaddr_in a = tool_role(argc, argv, "relink", 4, &l);

	for (int n = 1; n <= CONNS; n++) {
		if (l >= 0) {
			CHECK((fd = accept(l, NULL, NULL)) >= 0);
			read_all(fd, buf, N);
			write_all(fd, buf, N);
			report("server", n, fd);
			char b;
			CHECK(read(fd, &b, 1) == 0); /* the client closes first */
		} else {
			if (n > 1)
				sleep(3);
			fd = socket(AF_INET, SOCK_STREAM, 0);
			CHECK(fd >= 0 && !connect(fd, (void *)&a, sizeof a));
			for (size_t i = 0; i < N; i++)
				buf[i] = pattern(i, (uint32_t)n);
			write_all(fd, buf, N);
			memset(buf, 0, N);
			read_all(fd, buf, N);
			for (size_t i = 0; i < N; i++)
				CHECK(buf[i] == pattern(i, (uint32_t)n));
			report("client", n, fd);
		}
		close(fd);
	}
	return 0;
}
