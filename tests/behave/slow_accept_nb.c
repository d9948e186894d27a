/* Description: a non-blocking connect() to a server that is slow to
 * accept returns at once, as TCP's does (the kernel finished the handshake;
 * accept() only takes it off the queue): an event loop's connect is never
 * held until the server gets round to it.  The server here accepts only
 * once the client says its connect returned.  Then the request and the
 * reply flow (poll for room, SO_ERROR 0, write, poll for the reply).
 * Under shunt a local server's connection is accelerated (its offer
 * stays pending until the server claims it); one through the in-band
 * handshake (between hosts, DNAT: the RDMA suite) is plain, reason
 * hs-timeout (13; connect-slow, 9, if the TCP handshake itself was slow):
 * a non-blocking connect waits for the server's answer, which comes once
 * the server accepted, what a call TCP
 * never blocks in waits for a claim, a fortieth of SHUNT_ACCEPT_WAIT_MS -
 * before, it waited the whole SHUNT_ACCEPT_WAIT_MS (30 s in the RDMA
 * suite).  Either way every byte arrives. */
#include "common.h"

/* 100 ms, or four times a fortieth of a raised SHUNT_ACCEPT_WAIT_MS (the
 * RDMA suite's emulated devices: 30 s, then 3 s) */
static double limit_s(void)
{
	const char *w = getenv("SHUNT_ACCEPT_WAIT_MS");
	double slow = w ? atof(w) / 40 / 1000 * 4 : 0;

	return slow > 0.1 ? slow : 0.1;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct chan ch;
	int l = listen_on("127.0.0.1", &ss, &len), err = -1;
	socklen_t el = sizeof err;
	char buf[8], c;

	deadline(120);
	chan_open(&ch);
	pid_t p = test_fork();
	if (!p) {
		CHECK(chan_recv(&ch, &c) == 1); /* the client's connect returned */
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0);
		read_all(s, buf, 5);
		CHECK(!memcmp(buf, "hello", 5));
		write_all(s, "world", 5);
		CHECK(chan_recv(&ch, &c) == 0); /* the client read the reply */
		close(s);
		_exit(0);
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(fd >= 0);
	double t0 = now_s();
	int r = connect(fd, (void *)&ss, len);
	double dt = now_s() - t0;
	CHECK(r == 0 || errno == EINPROGRESS);
	if (dt >= limit_s()) {
		fprintf(stderr, "non-blocking connect took %.0f ms before the server's accept\n", dt * 1000);
		exit(1);
	}
	chan_send(&ch, 'a');
	struct pollfd pf = { .fd = fd, .events = POLLOUT };
	CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLOUT));
	CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	CHECK(write(fd, "hello", 5) == 5);
	size_t got = 0;
	while (got < 5) {
		pf = (struct pollfd){ .fd = fd, .events = POLLIN };
		CHECK(poll(&pf, 1, 60000) == 1);
		ssize_t n = read(fd, buf + got, 5 - got);
		if (n < 0 && errno == EAGAIN)
			continue;
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK(!memcmp(buf, "world", 5));
	const char *want = getenv("SHUNT_EXPECT");
	if (want) {
		/* shared memory through the registry: the offer waited, pending,
		 * for the server's claim; the in-band handshake (the RDMA
		 * suite's two addresses): plain, the handshake timed out */
		struct shunt_info i = sock_info(fd);
		printf("slow_accept_nb: %s, reason %u, connect %.1f ms\n", mode_name(i.mode), i.reason,
		       dt * 1000);
		if (!strcmp(want, "shm"))
			CHECK(i.mode == 1);
		else if (!strcmp(want, "rdma"))
			CHECK(i.mode == 0 && (i.reason == 13 || i.reason == 9));
	}
	chan_close(&ch);
	CHECK(wait_child(p) == 0);
	close(fd);
	close(l);
	return 0;
}
