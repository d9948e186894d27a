/* Description: a program that sets up an io_uring while a TCP connection
 * is open - bytes of its peer's waiting unread, bytes of its own not yet
 * read by the peer - then receives and sends on that connection through
 * the ring gets every byte, in order, and its peer too.  Under shunt the
 * connection was accelerated: it moves to TCP at the exact byte as the
 * ring is set up (reason io-uring, 22), the peer resending onto the socket
 * what the ring held unread; before, the ring's receive found none of the
 * bytes in the rings (it waited for ever) and its sends went to a socket
 * the peer did not read (issue #13, item 7).  A connection made after the
 * ring stays plain (tests/behave/io_uring). */
#include "common.h"
#include "uring.h"
#include <sys/ioctl.h>

#define IN 100000  /* the peer's, in our ring when the ring is set up */
#define OUT1 50000 /* ours before the ring, unread by the peer then */
#define OUT2 100000 /* ours through the ring */

static void server(int l)
{
	/* asleep in its read when the client's ring goes in */
	serve_in_flight(l, IN, OUT1 + OUT2);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, r;
	pid_t p;
	static uint8_t buf[OUT1 + OUT2];
	struct io_uring ring;

	deadline(30);
	fd = connect_in_flight(server, &p, &ss, &len, buf, OUT1 + OUT2, OUT1, IN);
	r = io_uring_queue_init(8, &ring, 0);
	if (r == -ENOSYS || r == -EPERM) {
		printf("skip: no io_uring here (%s)\n", strerror(-r));
		kill(p, SIGKILL);
		return 77;
	}
	CHECK(r == 0);
	expect_plain_reason(fd, 22); /* io-uring */
	for (size_t off = OUT1; off < OUT1 + OUT2;) {
		int n = uring_io(&ring, fd, buf + off, OUT1 + OUT2 - off, 1);
		CHECK(n > 0);
		off += (size_t)n;
	}
	memset(buf, 0, sizeof buf);
	for (size_t got = 0; got < IN;) {
		int n = uring_io(&ring, fd, buf + got, IN - got, 0);
		CHECK(n > 0);
		got += (size_t)n;
	}
	for (size_t i = 0; i < IN; i++)
		if (buf[i] != pattern(i, 1)) {
			fprintf(stderr, "client: byte %zu of what came before the ring differs\n", i);
			return 1;
		}
	CHECK(uring_io(&ring, fd, buf, 1, 0) == 1 && buf[0] == 'k');
	shutdown(fd, SHUT_WR);
	io_uring_queue_exit(&ring);
	CHECK(wait_child(p) == 0);
	return 0;
}
