/* Description: a server hands an accepted connection to a child program as
 * its stdin and stdout while it keeps its own descriptor open (Python's
 * subprocess.run(stdin=conn, stdout=conn), inetd-style servers): the child
 * reads the request with fread() and answers with printf() - C stdio,
 * whose buffers reach the descriptor past shunt - and after it exits the
 * server writes a last line with write() on its own descriptor (a second
 * connection: closes it without a word).  The client gets the answer, the
 * last line and EOF, as over TCP.  Under
 * shunt the child's first stdio call moves the connection to TCP (reason
 * stdio) although its parent holds it too, and the parent's copy follows
 * at its next call.  Before, the move waited for the parent (which waited
 * for the child) and gave up: the child read the kernel socket, which
 * carried nothing, and hung.
 * Over RDMA the fork moves the connection to TCP (reason fork-exec) with
 * the bytes that had arrived held in the moved rings; the child's first
 * stdio call takes them off for its FILE (before: its fread read the
 * socket past them). */
#include "common.h"

#define LEN (2u << 20)

int main(int argc, char **argv)
{
	deadline(30);
	if (argc == 2 && !strcmp(argv[1], "sum")) { /* the child: stdio only */
		static uint8_t buf[65536];
		uint64_t got = 0, bad = 0;
		size_t n;
		while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
			for (size_t i = 0; i < n; i++)
				bad += buf[i] != pattern(got + i, 3);
			got += n;
		}
		CHECK(!ferror(stdin));
		CHECK(printf("got %llu bad %llu\n", (unsigned long long)got, (unsigned long long)bad) > 0);
		return fflush(stdout) ? 1 : 0;
	}
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t srv = serve_forked(&l, &ss, &len);
	if (!srv) {
		for (int round = 0; round < 2; round++) {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			expect_mode(c);
			usleep(200000); /* the request fills the rings before the child runs */
			pid_t k = fork();
			CHECK(k >= 0);
			if (!k) {
				CHECK(dup2(c, 0) == 0 && dup2(c, 1) == 1);
				close(c);
				execl("/proc/self/exe", "stdio_shared", "sum", (char *)NULL);
				_exit(99);
			}
			CHECK(wait_child(k) == 0);
			if (!round) /* its copy of the connection, after the child's move */
				write_all(c, "parent\n", 7);
			close(c);
		}
		_exit(0);
	}
	close(l);
	static uint8_t out[LEN];
	for (uint32_t i = 0; i < LEN; i++)
		out[i] = pattern(i, 3);
	for (int round = 0; round < 2; round++) {
		int fd = connect_to(&ss, len);
		char want[128];
		expect_mode(fd);
		write_all(fd, out, LEN);
		CHECK(!shutdown(fd, SHUT_WR));
		snprintf(want, sizeof want, "got %u bad 0\n%s", LEN, round ? "" : "parent\n");
		expect_text_to_eof(fd, want, round);
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
