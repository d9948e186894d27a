/* Description: a peer that attacks the shared ring, and its victim
 * (issue #12).  The attacker runs with libshunt-faults.so and
 * SHUNT_FAULT_RING=KIND (src/shim/fault.c); the victim with the real shim.
 *   hostile attacker PORT        accept two connections; on the first, read
 *                                one byte and send one (the fault fires
 *                                instead), then send 'z'; echo on the second
 *   hostile victim PORT KIND     connect twice; check that the attacked
 *                                connection ends in ECONNRESET within a
 *                                bounded time (or, for truncate, goes on;
 *                                for unsealed, is plain), that nothing was
 *                                read from outside its ring, and that the
 *                                other connection and the process carry on.
 * Prints "victim: KIND ok ..." on success. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

static int info(int fd, unsigned *mode, unsigned *reason)
{
	struct shunt_info in;
	socklen_t l = sizeof in;

	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
		return -1;
	*mode = in.mode;
	*reason = in.reason;
	return 0;
}

static int attacker(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0), c1, c2, one = 1;
	char b[64];
	ssize_t n;

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	CHECK(bind(l, (void *)&a, sizeof a) == 0 && listen(l, 8) == 0);
	printf("listening\n");
	fflush(stdout);
	c1 = accept(l, NULL, NULL);
	c2 = accept(l, NULL, NULL);
	CHECK(c1 >= 0 && c2 >= 0);
	signal(SIGPIPE, SIG_IGN);
	read_all(c1, b, 1);
	(void)!send(c1, "x", 1, MSG_NOSIGNAL); /* the fault fires here */
	(void)!send(c1, "z", 1, MSG_NOSIGNAL);
	while ((n = recv(c2, b, sizeof b, 0)) > 0) /* echo until the victim ends */
		write_all(c2, b, (size_t)n);
	return 0;
}

static char big[8 << 20];

static int victim(int port, const char *kind)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a = (void *)&ss;
	unsigned mode, reason, mode2, reason2;
	double t0, took = 0;
	ssize_t n = 0;
	char b[8];
	int c1, c2, err = 0;

	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	signal(SIGPIPE, SIG_IGN);
	c1 = connect_to(&ss, sizeof *a);
	c2 = connect_to(&ss, sizeof *a);
	CHECK(info(c1, &mode, &reason) == 0 && info(c2, &mode2, &reason2) == 0);
	if (!strcmp(kind, "unsealed") || !strcmp(kind, "pipebell")) {
		/* the attacker's arena could shrink under us, or its
		 * "doorbells" are pipes (our wake-ups would block or write
		 * into them): never mapped */
		CHECK(mode == 0 && reason == 4 && mode2 == 0);
		/* the second: refused too, or timed out while the server
		 * waited out the first's answer (it cannot reach our word) */
		CHECK(reason2 == 4 || reason2 == 5);
	} else {
		CHECK(mode == 1 && mode2 == 1); /* both on shared memory */
	}
	write_all(c1, "g", 1);
	t0 = now_s();
	if (!strcmp(kind, "prod")) {
		n = recv(c1, big, sizeof big, 0); /* the ring "holds 8 MiB" */
		err = errno;
		CHECK(n < 0 && err == ECONNRESET);
	} else if (!strcmp(kind, "cons")) {
		size_t total = 0;
		while (total < sizeof big && (n = send(c1, big, 1 << 20, MSG_NOSIGNAL)) > 0)
			total += (size_t)n;
		err = errno;
		CHECK(n < 0 && (err == ECONNRESET || err == EPIPE) && total < sizeof big);
	} else if (!strcmp(kind, "back")) {
		read_all(c1, b, 1); /* of the 16 it announced */
		do
			n = recv(c1, big, sizeof big, 0);
		while (n > 0 && now_s() - t0 < 10);
		err = errno;
		CHECK(n < 0 && err == ECONNRESET);
	} else if (!strcmp(kind, "lock")) {
		usleep(200 * 1000); /* the attack lands */
		t0 = now_s();
		n = recv(c1, b, 1, MSG_DONTWAIT); /* must not hang on the lock */
		err = errno;
		took = now_s() - t0;
		CHECK(n < 0 && err == ECONNRESET && took < 5);
		CHECK(send(c1, "q", 1, MSG_NOSIGNAL) < 0);
	} else if (!strcmp(kind, "truncate")) {
		read_all(c1, b, 1); /* the connection goes on: 'z' */
		CHECK(b[0] == 'z');
	} else if (!strcmp(kind, "unsealed") || !strcmp(kind, "pipebell")) {
		read_all(c1, b, 2); /* plain TCP: no fault fired, both bytes */
		CHECK(!memcmp(b, "xz", 2));
	} else {
		fprintf(stderr, "unknown kind %s\n", kind);
		return 2;
	}
	if (!took)
		took = now_s() - t0;
	/* the other connection (same peer, same arena) and the process go on */
	write_all(c2, "ping", 4);
	read_all(c2, b, 4);
	CHECK(!memcmp(b, "ping", 4));
	CHECK(info(c1, &mode, &reason) == 0 && info(c2, &mode2, &reason2) == 0);
	if (strcmp(kind, "truncate") && strcmp(kind, "unsealed") && strcmp(kind, "pipebell"))
		CHECK(mode == 0 && reason == 20); /* shunt ss: peer-broke-ring */
	printf("victim: %s ok: attacked connection %s in %.2f s (mode %u reason %u); other connection mode %u, intact\n",
	       kind, n < 0 ? strerror(err) : "intact", took, mode, reason, mode2);
	close(c1);
	close(c2);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "attacker"))
		return attacker(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "victim"))
		return victim(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: hostile attacker PORT | hostile victim PORT KIND\n");
	return 2;
}
