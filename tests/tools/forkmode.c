/* Description: what a forked child can do with its parent's RDMA
 * connection (SHUNT_RDMA_FORK).
 *   forkmode ADDR
 * One process holds both ends a and b (a thread accepts) and writes 1000
 * bytes a -> b, then forks.  The child reads them on b and answers 1000
 * bytes on b (exit 0), or finds b unusable: EIO (exit 3).  The parent then
 * reads the answer on a (child 0), or reads the 1000 bytes itself and
 * answers itself (child 3): either way every byte is checked, and it prints
 * "child=C mode=M reason=R ok" with a's mode and reason after the fork. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <pthread.h>

#define N 1000

static int lfd;

static void *acceptor(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)accept(lfd, NULL, NULL);
}

static void put(int fd, uint32_t seed)
{
	uint8_t b[N];
	for (int i = 0; i < N; i++)
		b[i] = pattern((uint64_t)i, seed);
	write_all(fd, b, N);
}

static void get(int fd, uint32_t seed)
{
	uint8_t b[N];
	read_all(fd, b, N);
	for (int i = 0; i < N; i++)
		CHECK(b[i] == pattern((uint64_t)i, seed));
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct shunt_info in;
	socklen_t il = sizeof in;
	pthread_t t;
	void *r;
	int a, b, st;
	pid_t p;

	CHECK(argc == 2);
	setenv("SHUNT_TEST_ADDR", argv[1], 1);
	deadline(60);
	lfd = listen_on("127.0.0.1", &ss, &len);
	CHECK(!pthread_create(&t, NULL, acceptor, NULL));
	a = connect_to(&ss, len);
	CHECK(!pthread_join(t, &r));
	b = (int)(intptr_t)r;
	CHECK(b >= 0);
	put(a, 1);
	p = fork();
	CHECK(p >= 0);
	if (!p) {
		uint8_t c;
		ssize_t n = recv(b, &c, 1, MSG_PEEK);
		if (n < 0 && errno == EIO)
			_exit(3);
		get(b, 1);
		put(b, 2);
		_exit(0);
	}
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st));
	st = WEXITSTATUS(st);
	CHECK(st == 0 || st == 3);
	if (st == 3) { /* the bytes are still ours */
		get(b, 1);
		put(b, 2);
	}
	get(a, 2);
	CHECK(!getsockopt(a, SOL_SHUNT, SHUNT_INFO, &in, &il));
	printf("child=%d mode=%u reason=%u ok\n", st, in.mode, in.reason);
	return 0;
}
