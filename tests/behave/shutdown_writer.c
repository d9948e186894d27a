/* Description: shutdown(SHUT_WR) from one thread while another is blocked
 * in send() on a full connection: shutdown returns at once, the blocked
 * send returns the bytes it had written (or EPIPE), later sends fail with
 * EPIPE, and the peer reads exactly the bytes the sends reported, then EOF.
 * (Over RDMA the blocked writer used to keep its ring lock while asleep:
 * shutdown waited for it, 8 of 8 runs in one guest.) */
#include "common.h"
#include <pthread.h>

#define TOTAL (8u << 20)
#define CHUNK (1u << 20)

static int fd;
static uint64_t sent;

static void *writer(void *arg)
{
	static char buf[CHUNK];
	(void)arg;
	for (uint64_t pos = 0; pos < TOTAL;) {
		for (size_t i = 0; i < CHUNK; i++)
			buf[i] = (char)pattern(pos + i, 9);
		ssize_t n = send(fd, buf, CHUNK, MSG_NOSIGNAL);
		if (n < 0) {
			CHECK(errno == EPIPE);
			break;
		}
		pos += (uint64_t)n;
		__atomic_store_n(&sent, pos, __ATOMIC_RELEASE);
		if ((size_t)n < CHUNK) /* the short write shutdown caused */
			break;
	}
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pthread_t t;

	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode_peer_forks(c);
		usleep(1000 * 1000); /* the client's writer fills the connection first */
		uint64_t got = read_pattern_to_eof(c, 9);
		write_all(c, &got, sizeof got);
		close(c);
		_exit(0);
	}
	fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
	usleep(300 * 1000);
	double t0 = now_s();
	CHECK(shutdown(fd, SHUT_WR) == 0);
	double took = now_s() - t0;
	pthread_join(t, NULL);
	CHECK(send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	uint64_t got = 0;
	read_all(fd, &got, sizeof got);
	if (got != __atomic_load_n(&sent, __ATOMIC_ACQUIRE))
		fprintf(stderr, "the peer read %llu bytes, the sends reported %llu (shutdown took %.3f s)\n",
			(unsigned long long)got, (unsigned long long)sent, took);
	CHECK(got == __atomic_load_n(&sent, __ATOMIC_ACQUIRE));
	CHECK(took < 0.5); /* shutdown does not wait for the reader */
	/* a 256 KiB ring took less than the first 1 MiB send: that send was
	 * blocked and returned short at the shutdown, as TCP's does */
	if (getenv("SHUNT_EXPECT") && !strcmp(getenv("SHUNT_EXPECT"), "shm"))
		CHECK(__atomic_load_n(&sent, __ATOMIC_ACQUIRE) < CHUNK);
	CHECK(wait_child(p) == 0);
	return 0;
}
