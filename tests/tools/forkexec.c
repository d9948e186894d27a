/* forkexec N ROUNDS - what a fork and exec costs a server that holds N
 * connections (accepted with SOCK_CLOEXEC, as most servers do): a child
 * that runs /bin/true and is waited for, ROUNDS times; prints the median
 * in milliseconds ("forkexec N ms").  The connections come from a forked
 * client that holds them open.  bench/forkexec.sh runs it plain and under
 * shunt. */
#include "../behave/common.h"
#include <sys/resource.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100, rounds = argc > 2 ? atoi(argv[2]) : 9;
	struct sockaddr_storage ss;
	socklen_t len;
	double t[256];
	char b = 'x';

	if (n < 1 || rounds < 1 || rounds > 256)
		return 2;
	int l = listen_on("127.0.0.1", &ss, &len);
	int cl[2];
	CHECK(pipe(cl) == 0);
	pid_t client = fork();
	if (!client) { /* holds its n connections until the server is done */
		close(l);
		for (int i = 0; i < n; i++)
			write_all(connect_to(&ss, len), &b, 1);
		close(cl[1]);
		(void)!read(cl[0], &b, 1);
		_exit(0);
	}
	close(cl[0]);
	for (int i = 0; i < n; i++) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		CHECK(c >= 0);
		read_all(c, &b, 1);
	}
	for (int k = 0; k < rounds; k++) {
		double t0 = now_s();
		pid_t p = fork();
		if (!p) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(99);
		}
		int st;
		CHECK(p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && !WEXITSTATUS(st));
		t[k] = (now_s() - t0) * 1e3;
	}
	printf("forkexec %d %.2f\n", n, sort_median(t, (size_t)rounds));
	close(cl[1]);
	waitpid(client, NULL, 0);
	return 0;
}
