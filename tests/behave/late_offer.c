/* Description: a server that accepts a connection before its client has
 * published its offer.  Two servers - one with a non-blocking listener
 * (poll, then accept: as event loops do), one blocking - each serve one
 * connection: its byte echoed, then the client's end awaited.  A
 * non-blocking accept() waits for the client 5 ms at most (TCP's returns
 * at once), then takes the connection plain; a blocking one waits for it,
 * at most 100 ms from the client's reservation (before its SYN).  A server
 * that gives up says so in the registry, and a client that publishes
 * later stays plain at once (reason server-first, 29) instead of waiting
 * 200 ms for a claim that never comes.  Run plainly the blocking server's
 * connection is accelerated, the non-blocking one's too unless its client
 * was slower to publish than the server's 5 ms
 * (then plain, reason 29 on the client, the server's record: on a loaded
 * host).  tests/integration/late_offer.sh runs it under the
 * fault-injection build with SHUNT_FAULT_PUBLISH_MS (the client pauses
 * between its connect and its publication): the non-blocking accept()
 * returns within 5 ms (+ 10 ms of slack) and its client is plain with
 * reason 29, its first
 * byte back within its pause + 90 ms (before: + 200 ms and more); at 60 ms
 * the blocking server waits and the connection is accelerated, at 150 ms
 * it gives up (100 ms) and its client is plain with reason 29 too.
 * tests/integration/agent.sh runs it through the in-band handshake too
 * (SHUNT_LOCAL=0, SHUNT_FAULT_PUBLISH_MS=60: the PROPOSAL comes late): a
 * non-blocking accept() waits a fortieth of SHUNT_ACCEPT_WAIT_MS for it
 * (5 ms; before, 20 ms like a blocking one), and the late PROPOSAL is
 * answered by the server's first read (plain, reason 13).
 * NOT_OVER_RDMA: the registry is the local rendezvous. */
#include "common.h"
#include <poll.h>
#include <sys/wait.h>

/* the client's pause between connect and publication, in ms (0: none) */
static int late(void)
{
	const char *v = getenv("SHUNT_FAULT_PUBLISH_MS");
	return v ? atoi(v) : 0;
}

/* how long a blocking server waits from the client's reservation (rdv.h) */
#define SERVER_WAIT_MS 100

/* One connection on listener l: accepted (timed), its byte echoed. */
static void serve(int l, int nonblock)
{
	struct pollfd p = { .fd = l, .events = POLLIN };
	double t;
	char b;
	int c;

	if (nonblock)
		CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
	CHECK(poll(&p, 1, 10000) == 1); /* (timed from the connection's arrival) */
	t = now_s();
	c = accept(l, NULL, NULL);
	t = now_s() - t;
	CHECK(c >= 0);
	fprintf(stderr, "%s accept: %.1f ms\n", nonblock ? "non-blocking" : "blocking", t * 1e3);
	if (nonblock && late())
		CHECK(t < 0.015); /* never the client's pause: its 5 ms at most */
	if (!nonblock && late())
		CHECK(t < (late() < SERVER_WAIT_MS ? late() : SERVER_WAIT_MS) / 1e3 + 0.050);
	if (!nonblock && late() < SERVER_WAIT_MS)
		expect_mode(c);
	CHECK(fcntl(c, F_SETFL, 0) == 0);
	read_all(c, &b, 1);
	write_all(c, &b, 1);
	CHECK(read(c, &b, 1) == 0);
	close(c);
	_exit(0);
}

static void client(const struct sockaddr_storage *ss, socklen_t len, const char *what, int nonblock)
{
	double t = now_s();
	int fd = connect_to(ss, len);
	char b = 'x';

	write_all(fd, &b, 1);
	read_all(fd, &b, 1);
	t = now_s() - t;
	CHECK(b == 'x');
	fprintf(stderr, "%s: first byte back in %.1f ms\n", what, t * 1e3);
	if (getenv("SHUNT_EXPECT") && late() && (nonblock || late() >= SERVER_WAIT_MS)) {
		struct shunt_info i = sock_info(fd);
		CHECK(i.mode == 0 && i.reason == 29);
		CHECK(t < late() / 1e3 + 0.090);
	} else if (getenv("SHUNT_EXPECT") && nonblock) {
		struct shunt_info i = sock_info(fd);
		CHECK(i.mode == 1 || (i.mode == 0 && i.reason == 29));
	} else {
		expect_mode(fd);
	}
	close(fd);
}

int main(void)
{
	struct sockaddr_storage s1, s2;
	socklen_t l1, l2;
	int a = listen_on("127.0.0.1", &s1, &l1), b = listen_on("127.0.0.1", &s2, &l2);
	pid_t p1, p2;

	deadline(30);
	if (!(p1 = fork()))
		serve(a, 1);
	if (!(p2 = fork()))
		serve(b, 0);
	CHECK(p1 > 0 && p2 > 0);
	close(a);
	close(b);
	client(&s1, l1, "to the non-blocking server", 1);
	client(&s2, l2, "to the blocking server", 0);
	CHECK(wait_child(p1) == 0);
	CHECK(wait_child(p2) == 0);
	return 0;
}
