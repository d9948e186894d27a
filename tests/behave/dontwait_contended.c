/* Description: while one thread sleeps in a blocking recv(), another
 * thread's recv(MSG_DONTWAIT) returns at once with EAGAIN, as on TCP - it
 * used to wait for the sleeper's lock (here for ever: the data comes only
 * after it returns; issue #13, item 8).  Over RDMA too since a sleeping
 * reader or writer lets its ring lock go there as well. */
#include "common.h"
#include <pthread.h>

static int fd;

static void *reader(void *arg)
{
	char b;
	(void)arg;
	CHECK(recv(fd, &b, 1, 0) == 1 && b == 'x');
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pthread_t t;
	char b;

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		read_all(c, &b, 1); /* the client's checks are done */
		write_all(c, "x", 1);
		read_all(c, &b, 1);
		_exit(0);
	}
	fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	usleep(200 * 1000); /* the reader sleeps in recv */
	for (int i = 0; i < 5; i++) {
		double t0 = now_s();
		CHECK(recv(fd, &b, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
		CHECK(now_s() - t0 < 0.1);
	}
	write_all(fd, "d", 1);
	pthread_join(t, NULL);
	write_all(fd, "e", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
