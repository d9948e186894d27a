/* Description: a process that served a connection it inherited, waiting
 * for it in poll(), and then waits in poll() on another connection is
 * not woken by connections it no longer holds.  A server forks a child for
 * its first connection; the child reads its request in poll() (with a
 * second descriptor, as an event loop polls) and closes it, then waits in
 * poll() on a connection with its parent - one it makes, then (second
 * round) one it accepts - while the parent serves the first client's next
 * connection: 200 ping-pongs, one every millisecond, the parent waiting
 * in poll() for each.  The child must sleep through them: at most 30
 * voluntary context switches (it wakes for the byte its parent sends at
 * the end).  Under shunt the parent's new connection takes the first
 * one's arena again, and the child had waited on that arena's doorbell:
 * an epoll registration lives while any process holds the eventfd, so
 * before, each of the parent's waits rang the child awake too (about 200
 * switches) - whether the child still mapped the arena (first round) or
 * had let it go while it took a connection as a server (second round:
 * its doorbells closed, the registration out of reach).  Over RDMA every
 * connection has its own doorbell (passes either way). */
#include "common.h"
#include <sys/resource.h>

#define PINGS 200
#define MAX_SWITCHES 30

static long switches(void)
{
	struct rusage ru;

	CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
	return ru.ru_nvcsw;
}

/* poll() for bytes on fd and a pipe that never has any */
static void poll_two(int fd, int quiet, int ms)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = quiet, .events = POLLIN } };

	CHECK(poll(p, 2, ms) == 1 && (p[0].revents & POLLIN));
}

/* The child: its inherited connection's request, read in poll(); then a
 * connection with its parent (made, or accepted on l2), slept on. */
static void child(int c, const struct sockaddr_storage *ss, socklen_t len, int l2, int report)
{
	int quiet[2], own;
	long before, after;
	char b;

	CHECK(pipe(quiet) == 0);
	poll_two(c, quiet[0], 10000);
	CHECK(read(c, &b, 1) == 1 && b == 'a');
	close(c);
	own = l2 >= 0 ? accept(l2, NULL, NULL) : connect_to(ss, len);
	CHECK(own >= 0);
	write_all(own, "c", 1); /* in place */
	before = switches();
	poll_two(own, quiet[0], 30000);
	after = switches();
	CHECK(read(own, &b, 1) == 1 && b == 'z');
	write_all(report, &(long){ after - before }, sizeof(long));
	close(own);
	_exit(0);
}

static long round_trip(int accepts)
{
	struct sockaddr_storage ss, ss2;
	socklen_t len, len2;
	int l = listen_on("127.0.0.1", &ss, &len), l2 = listen_on("127.0.0.1", &ss2, &len2);
	int rep[2], go[2], quiet[2];
	char b;
	long sw;

	CHECK(pipe(rep) == 0 && pipe(go) == 0 && pipe(quiet) == 0);
	pid_t k = fork();
	CHECK(k >= 0);
	if (!k) { /* the client: a request, then on its word the pings */
		int c1 = connect_to(&ss, len);
		usleep(100000); /* the server's child is asleep in poll() by now */
		write_all(c1, "a", 1);
		CHECK(read(c1, &b, 1) == 0);
		close(c1);
		CHECK(read(go[0], &b, 1) == 1);
		int c3 = connect_to(&ss, len);
		for (int i = 0; i < PINGS; i++) {
			usleep(1000);
			write_all(c3, "p", 1);
			read_all(c3, &b, 1);
		}
		close(c3);
		_exit(0);
	}
	int c1 = accept(l, NULL, NULL);
	CHECK(c1 >= 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (!kid)
		child(c1, &ss, len, accepts ? l2 : -1, rep[1]);
	close(c1);
	int own = accepts ? connect_to(&ss2, len2) : accept(l, NULL, NULL); /* with the child */
	CHECK(own >= 0);
	read_all(own, &b, 1);
	usleep(20000); /* the child is asleep in its poll */
	CHECK(write(go[1], "g", 1) == 1);
	int c3 = accept(l, NULL, NULL);
	CHECK(c3 >= 0);
	expect_mode(c3);
	for (int i = 0; i < PINGS; i++) {
		poll_two(c3, quiet[0], 10000);
		read_all(c3, &b, 1);
		write_all(c3, &b, 1);
	}
	CHECK(read(c3, &b, 1) == 0);
	write_all(own, "z", 1);
	read_all(rep[0], &sw, sizeof sw);
	CHECK(wait_child(kid) == 0 && wait_child(k) == 0);
	int fds[] = { c3, own, l, l2, rep[0], rep[1], go[0], go[1], quiet[0], quiet[1] };
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
		close(fds[i]);
	return sw;
}

int main(void)
{
	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	for (int accepts = 0; accepts < 2; accepts++) {
		long sw = round_trip(accepts);
		fprintf(stderr, "child (its connection %s): %ld voluntary switches asleep in poll\n",
			accepts ? "accepted" : "made", sw);
		if (sw > MAX_SWITCHES) {
			fprintf(stderr, "the child woke %ld times for connections it no longer holds\n", sw);
			return 1;
		}
	}
	return 0;
}
