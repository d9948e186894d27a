/* Description: many connections between one pair of processes, each waited
 * on by its own thread - poll, select, level- and edge-triggered epoll -
 * on both ends, half of the server's in a forked sibling: every echo
 * arrives (a wake-up meant for one connection never takes another's), and
 * each connection costs at most one descriptor more than TCP's one.
 *
 * Under shunt the connections of a pair of processes share an arena, and
 * its 32 segments share one doorbell (eventfd) per side (issue #13, item
 * 9: four descriptors a connection made servers hit EMFILE at half of
 * TCP's count).  A waiter that consumed the doorbell's count would leave
 * a waiter on another connection asleep on bytes that arrived: here a
 * 5 s wait fails the test. */
#include "common.h"
#include <dirent.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>

#define NCONN 40 /* more than an arena's 32 segments: two doorbells a side */
#define NWAIT 16 /* connections with a waiting thread on each end */
#define ROUNDS 300
#define WAIT_MS 5000

enum how { POLL, SELECT, EPOLL_LT, EPOLL_ET };

static int fds[NCONN];

/* Over RDMA each connection has a doorbell of its own (docs/rdma.md). */
static int counts_fds(void)
{
	const char *m = getenv("SHUNT_EXPECT");
	return !m || strcmp(m, "rdma");
}

/* Wait until fd is readable, the way `how` says; fail after WAIT_MS. */
static void wait_readable(int fd, enum how how, int ep)
{
	int r;

	switch (how) {
	case POLL: {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		r = poll(&p, 1, WAIT_MS);
		break;
	}
	case SELECT: {
		fd_set rd;
		struct timeval tv = { WAIT_MS / 1000, 0 };
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		r = select(fd + 1, &rd, NULL, NULL, &tv);
		break;
	}
	default: {
		struct epoll_event ev;
		r = epoll_wait(ep, &ev, 1, WAIT_MS);
		CHECK(r != 1 || ev.data.fd == fd);
	}
	}
	if (r != 1)
		fprintf(stderr, "fd %d: no wake-up in %d ms (wait kind %d)\n", fd, WAIT_MS, how);
	CHECK(r == 1);
}

struct job {
	int fd;
	int server;
	enum how how;
};

/* Client: send one byte, wait for its echo; server: the reverse. */
static void *run(void *arg)
{
	struct job *j = arg;
	int ep = -1;
	char c, got;

	if (j->how >= EPOLL_LT) {
		struct epoll_event ev = { .events = EPOLLIN | (j->how == EPOLL_ET ? EPOLLET : 0),
					  .data.fd = j->fd };
		CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, j->fd, &ev) == 0);
	}
	CHECK(fcntl(j->fd, F_SETFL, O_NONBLOCK) == 0);
	for (int i = 0; i < ROUNDS; i++) {
		c = (char)(i * 7 + j->fd);
		if (!j->server)
			CHECK(send(j->fd, &c, 1, 0) == 1);
		/* edge-triggered: read until EAGAIN before waiting again */
		while (recv(j->fd, &got, 1, 0) != 1) {
			CHECK(errno == EAGAIN);
			wait_readable(j->fd, j->how, ep);
		}
		if (j->server)
			CHECK(send(j->fd, &got, 1, 0) == 1);
		else
			CHECK(got == c);
	}
	if (ep >= 0)
		close(ep);
	return NULL;
}

/* One thread per connection of [from, to), each waiting its own way. */
static void serve(int from, int to, int server)
{
	pthread_t t[NWAIT];
	struct job j[NWAIT];

	for (int i = from; i < to; i++) {
		j[i - from] = (struct job){ .fd = fds[i], .server = server, .how = (enum how)(i % 4) };
		CHECK(pthread_create(&t[i - from], NULL, run, &j[i - from]) == 0);
	}
	for (int i = from; i < to; i++)
		pthread_join(t[i - from], NULL);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), before, after, status;
	pid_t pid, sib;

	deadline(120);
	pid = test_fork();
	if (pid == 0) {
		before = count_fds();
		for (int i = 0; i < NCONN; i++) {
			CHECK((fds[i] = accept(l, NULL, NULL)) >= 0);
			expect_mode(fds[i]);
		}
		after = count_fds();
		/* one descriptor of TCP's, at most one of shunt's, and a few
		 * for each arena (its memory and two doorbells) */
		if (after - before > 2 * NCONN + 8)
			fprintf(stderr, "server: %d descriptors for %d connections\n", after - before, NCONN);
		CHECK(!counts_fds() || after - before <= 2 * NCONN + 8);
		sib = fork();
		CHECK(sib >= 0);
		/* the parent serves the first half, its sibling the second;
		 * each closes its copies of the other half */
		for (int i = 0; i < NWAIT; i++)
			if ((i < NWAIT / 2) == (sib == 0))
				close(fds[i]);
		serve(sib ? 0 : NWAIT / 2, sib ? NWAIT / 2 : NWAIT, 1);
		if (sib == 0)
			_exit(0);
		CHECK(waitpid(sib, &status, 0) == sib && WIFEXITED(status) && WEXITSTATUS(status) == 0);
		return 0;
	}
	close(l);
	before = count_fds();
	for (int i = 0; i < NCONN; i++) {
		fds[i] = connect_to(&ss, len);
		expect_mode_peer_forks(fds[i]);
	}
	after = count_fds();
	if (after - before > 2 * NCONN + 8)
		fprintf(stderr, "client: %d descriptors for %d connections\n", after - before, NCONN);
	CHECK(!counts_fds() || after - before <= 2 * NCONN + 8);
	serve(0, NWAIT, 0);
	CHECK(wait_child(pid) == 0);
	return 0;
}
