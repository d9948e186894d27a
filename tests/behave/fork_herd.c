/* Description: a server that accepts a connection and forks a process to
 * serve it, twice (PostgreSQL's postmaster and its backends); each child
 * waits in epoll_wait for its connection's next byte.  A thousand round
 * trips on the first connection must not wake the second connection's
 * process: it sleeps through them, as it does on TCP (a few context
 * switches).  Before, both connections took segments of one arena, whose
 * doorbell every waiter on any of its connections sleeps on: the idle
 * child woke at each of the thousand (pgbench -S with 8 clients ran at
 * 0.71x TCP's rate; src/transport/shm/arena.c).  The client pauses between
 * round trips, so the first child sleeps and each request rings (what
 * becomes of their arenas: tests/behave/fork_arena_reuse).
 * NOT_OVER_RDMA: arenas are shared memory's (an RDMA
 * connection has a doorbell of its own, and moves to TCP at the fork). */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

#define TRIPS 1000

static long switches(void)
{
	struct rusage u;

	CHECK(getrusage(RUSAGE_SELF, &u) == 0);
	return u.ru_nvcsw;
}

/* One connection, in epoll: each byte echoed; 'm' marks the context
 * switches so far, 'q' answers with those made since the mark. */
static void serve(int c, int arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
	long mark = 0;

	(void)arg;
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	expect_mode(c);
	for (;;) {
		int n = epoll_wait(ep, &ev, 1, -1);
		char b;
		ssize_t r;
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n == 1);
		r = read(c, &b, 1);
		if (r == 0)
			break;
		CHECK(r == 1);
		if (b == 'q') {
			long d = switches() - mark;
			write_all(c, &d, sizeof d);
			continue;
		}
		if (b == 'm')
			mark = switches();
		write_all(c, &b, 1);
	}
	_exit(0);
}

static void server(int l)
{
	pid_t kids[2];

	for (int i = 0; i < 2; i++)
		kids[i] = accept_fork(l, serve, 0);
	for (int i = 0; i < 2; i++)
		CHECK(wait_child(kids[i]) == 0);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), c1, c2;
	pid_t p;
	long d;

	deadline(60);
	p = test_fork();
	if (!p)
		server(l);
	close(l);
	c1 = connect_to(&ss, len);
	echo_once(c1, 'x'); /* its process serves it */
	c2 = connect_to(&ss, len);
	echo_once(c2, 'm'); /* ... and this one's: it sleeps in epoll_wait now */
	expect_mode(c1);
	expect_mode(c2);
	for (int i = 0; i < TRIPS; i++) {
		echo_once(c1, 'x');
		usleep(200); /* the first child sleeps again */
	}
	write_all(c2, "q", 1);
	read_all(c2, &d, sizeof d);
	fprintf(stderr, "the idle connection's process: %ld context switches in %d round trips of the other\n",
		d, TRIPS);
	CHECK(d < TRIPS / 10);
	close(c1);
	echo_once(c2, 'y');
	close(c2);
	CHECK(wait_child(p) == 0);
	return 0;
}
