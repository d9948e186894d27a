/* Description: a server that reads in a tight non-blocking loop (busy
 * polling, as latency-bound servers do: read until it stops saying
 * EAGAIN) reads exactly its client's bytes, connection after connection,
 * and a zero-length read() returns 0 at once, as the kernel's file layer
 * answers it.  Run plainly the connections are accelerated (the local
 * rendezvous).  tests/integration/agent.sh runs it through the in-band
 * handshake under the fault-injection build with SHUNT_FAULT_PUBLISH_MS=50:
 * each client's PROPOSAL comes 50 ms after its connect, after the
 * server's accept() stopped waiting for it (20 ms), so the server's
 * spinning reads meet it at the head of the stream and must remove it
 * (and answer it) without ever returning its bytes - before, a read that
 * found nothing queued went on to the kernel, and a message arriving in
 * between was read as the application's data (about one connection in
 * two). */
#include "common.h"

#define CONNS 10

static void server(int l)
{
	char want[32], buf[32];

	for (int i = 0; i < CONNS; i++) {
		int c = accept(l, NULL, NULL);
		size_t n = (size_t)snprintf(want, sizeof want, "request %d", i), got = 0;
		unsigned long spins = 0;

		CHECK(c >= 0);
		CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
		while (got < n) {
			ssize_t r = read(c, buf + got, n - got);
			if (r < 0 && errno == EAGAIN) {
				spins++;
				continue;
			}
			CHECK(r > 0);
			got += (size_t)r;
		}
		if (memcmp(buf, want, n)) {
			fprintf(stderr, "connection %d: read '%.*s' (%02x %02x %02x %02x...), wanted '%s'\n",
				i, (int)n, buf, (uint8_t)buf[0], (uint8_t)buf[1], (uint8_t)buf[2],
				(uint8_t)buf[3], want);
			_exit(1);
		}
		double t = now_s();
		CHECK(read(c, buf, 0) == 0); /* the kernel: 0, never a wait */
		CHECK(now_s() - t < 0.05);
		if (i == 0)
			fprintf(stderr, "server: first request after %lu empty reads\n", spins);
		answer_ok_to_end(c);
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);
	char req[32];

	for (int i = 0; i < CONNS; i++) {
		int fd = connect_to(&ss, len);
		size_t n = (size_t)snprintf(req, sizeof req, "request %d", i);
		write_all(fd, req, n);
		client_ok_end(fd, i == 0);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
