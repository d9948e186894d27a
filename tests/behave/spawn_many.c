/* Description: a server holding 100 connections, each with a byte of its
 * client's request unread, spawns a child (posix_spawn) that inherits
 * them all, while the clients wait for their answers in turn - and every
 * connection then carries its bytes both ways, as over TCP.  The spawn
 * moves every inheritable accelerated connection to TCP first (over RDMA
 * each such move needs its peer's answer, which a client blocked on
 * another connection gives only through shunt's own progress).  Once
 * moved they are plain TCP: in a second round the server then fills its
 * RLIMIT_NOFILE as far as TCP would let it, and every descriptor opens -
 * moved RDMA connections kept shunt's two descriptors each, and a give-back
 * passed them by (found by CI: fd_limit_files over RDMA). */
#include "common.h"
#include <spawn.h>
#include <sys/resource.h>

#define N 100
#define LIMIT 256
#define SLACK 12      /* as fd_limit_files: stdio, the listener, shunt's few */
#define RDMA_SLACK 10 /* each RDMA device's context (two in the suite's guest) */

extern char **environ;

static int server(int l, int fill)
{
	int fds[N];
	pid_t child;
	char *argv[] = { "true", NULL };

	for (int i = 0; i < N; i++) {
		CHECK((fds[i] = accept(l, NULL, NULL)) >= 0);
		expect_mode_peer_forks(fds[i]);
	}
	for (int i = 0; i < N; i++) { /* every request is in */
		int n = 0;
		for (int t = 0; t < 5000 && n < 1; t++) {
			struct pollfd p = { .fd = fds[i], .events = POLLIN };
			n = poll(&p, 1, 1);
		}
		CHECK(n == 1);
	}
	CHECK(posix_spawnp(&child, "true", NULL, NULL, argv, environ) == 0);
	CHECK(waitpid(child, NULL, 0) == child);
	if (fill) { /* then every descriptor TCP would leave: each opens */
		const char *want = getenv("SHUNT_EXPECT");
		int slack = SLACK + (want && !strcmp(want, "rdma") ? RDMA_SLACK : 0);
		struct rlimit rl;
		CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		rl.rlim_cur = LIMIT;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		for (int made = 0; made < LIMIT - N - slack; made++)
			if (dup(0) < 0) {
				fprintf(stderr, "descriptor %d of %d: %s\n", made + 1, LIMIT - N - slack,
					strerror(errno));
				exit(1);
			}
	}
	echo_each(fds, N);
	return 0;
}

int main(void)
{
	deadline(120);
	index_echo_rounds(2, N, server);
	return 0;
}
