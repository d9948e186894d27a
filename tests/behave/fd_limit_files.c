/* Description: a server holding 100 connections then fills the rest of
 * its RLIMIT_NOFILE (256) with pipes, a file and an eventfd, as far as TCP
 * would let it: every one opens, and every connection still carries its
 * bytes both ways.  Under shunt the 100 connections hold about 100
 * descriptors of shunt's when the program's pipe() meets EMFILE: idle ones
 * move to TCP and give theirs back (reason `descriptors`, 24), and pipe(),
 * open() and eventfd() are made again (issue #13, item 9).
 * NOT_OVER_RDMA: RDMA connections are not given back (docs/rdma.md). */
#include "common.h"
#include <sys/eventfd.h>
#include <sys/resource.h>

#define LIMIT 256
#define N 100
#define SLACK 12 /* descriptors left unused (stdio, the listener, shunt's few) */

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fds[N];
	pid_t pid;

	deadline(60);
	pid = test_fork();
	if (pid == 0) {
		struct rlimit rl;
		int pipes = 0, back = 0;
		CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		rl.rlim_cur = LIMIT;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		for (int i = 0; i < N; i++) {
			CHECK((fds[i] = accept(l, NULL, NULL)) >= 0);
			expect_mode(fds[i]);
		}
		/* what TCP leaves: LIMIT - N - SLACK, two per pipe, then a
		 * file and an eventfd */
		for (; pipes < (LIMIT - N - SLACK - 2) / 2; pipes++) {
			int p[2], r = pipe(p);
			if (r)
				fprintf(stderr, "pipe %d: %s\n", pipes + 1, strerror(errno));
			CHECK(r == 0);
		}
		CHECK(open("/dev/null", O_RDONLY) >= 0);
		CHECK(eventfd(0, 0) >= 0);
		for (int i = 0; i < N; i++) {
			char c;
			struct shunt_info info;
			socklen_t il = sizeof info;
			/* echoed: the accept order need not be the connect order */
			CHECK(recv(fds[i], &c, 1, MSG_WAITALL) == 1);
			CHECK(send(fds[i], &c, 1, 0) == 1);
			back += !getsockopt(fds[i], SOL_SHUNT, SHUNT_INFO, &info, &il) && info.mode == 0 &&
				info.reason == 24;
		}
		fprintf(stderr, "server: %d pipes opened, %d of %d connections given back\n", pipes, back, N);
		CHECK(!getenv("SHUNT_EXPECT") || back > 0);
		return 0;
	}
	close(l);
	for (int i = 0; i < N; i++)
		fds[i] = connect_to(&ss, len);
	usleep(200000); /* the server fills its table first */
	for (int i = 0; i < N; i++) {
		char c = (char)i;
		CHECK(send(fds[i], &c, 1, 0) == 1);
		CHECK(recv(fds[i], &c, 1, MSG_WAITALL) == 1 && c == (char)i);
	}
	CHECK(wait_child(pid) == 0);
	return 0;
}
