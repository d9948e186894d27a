/* Description: shutdown(SHUT_RD) as Linux's TCP does it: what arrived
 * before it and what arrives after it can still be read; a read with
 * nothing there says 0 at once instead of waiting; a reader blocked in
 * another thread returns 0 at once, for SHUT_RD and for SHUT_RDWR; and a
 * send still works.  shunt returned 0 from every read after SHUT_RD (the
 * bytes in the ring were lost to the program), and a reader blocked when
 * another thread called shutdown(SHUT_RDWR) slept on. */
#include "common.h"
#include <pthread.h>

static int rfd;
static double woke;

static void *reader(void *arg)
{
	char b[4];

	(void)arg;
	CHECK(recv(rfd, b, sizeof b, 0) == 0);
	woke = now_s();
	return NULL;
}

/* A reader blocked on fd, then shutdown(how) from here: it returns 0 at
 * once (within 2 s: TCP's is immediate; shunt's sleeps are 100 ms slices). */
static void blocked_reader(int fd, int how)
{
	pthread_t t;
	double t0;

	rfd = fd;
	woke = 0;
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	usleep(200000);
	t0 = now_s();
	CHECK(shutdown(fd, how) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	if (woke - t0 > 2.0) {
		fprintf(stderr, "shutdown(%d): the blocked reader returned after %.3f s\n", how, woke - t0);
		exit(1);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, i;
	char b[16], c;
	pid_t p;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	p = test_fork();
	if (!p) {
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0);
		expect_mode_peer_forks(s);
		write_all(s, "before", 6);
		read_all(s, &c, 1);
		write_all(s, "after", 5);
		read_all(s, &c, 1); /* the client is done with it */
		close(s);
		for (i = 0; i < 2; i++) { /* two whose readers block */
			s = accept(l, NULL, NULL);
			CHECK(s >= 0);
			CHECK(read(s, &c, 1) >= 0); /* a byte, or the end (SHUT_RDWR) */
			close(s);
		}
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 10000) == 1);
	usleep(100000); /* all of "before" */
	CHECK(shutdown(fd, SHUT_RD) == 0);
	CHECK(recv(fd, b, 3, 0) == 3 && !memcmp(b, "bef", 3));
	write_all(fd, "x", 1); /* the server sends "after" */
	size_t got = 3;
	double t0 = now_s();
	while (got < 11 && now_s() - t0 < 10) {
		ssize_t n = recv(fd, b + got, sizeof b - got, 0); /* 0 when empty: no wait */
		CHECK(n >= 0);
		got += (size_t)n;
		if (!n)
			usleep(10000);
	}
	CHECK(got == 11 && !memcmp(b, "beforeafter", 11));
	CHECK(recv(fd, b, sizeof b, 0) == 0);
	CHECK(recv(fd, b, 0, 0) == 0);
	CHECK(send(fd, "d", 1, 0) == 1);
	close(fd);

	for (i = 0; i < 2; i++) {
		fd = connect_to(&ss, len);
		expect_mode_peer_forks(fd);
		blocked_reader(fd, i ? SHUT_RDWR : SHUT_RD);
		if (!i)
			CHECK(send(fd, "d", 1, 0) == 1);
		else
			CHECK(send(fd, "d", 1, 0) == -1 && errno == EPIPE);
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
