/* Description: a program that sets up an io_uring (liburing) and then
 * sends and receives on a TCP connection through it gets every byte, in
 * order.  Under shunt such a connection stays plain with reason io-uring:
 * io_uring's operations go to the kernel socket, where an accelerated
 * connection's bytes never are (issue #13, item 7: they hung). */
#include "common.h"
#include "uring.h"

#define N 100000

/* one operation through the ring: its result */

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static uint8_t buf[N];
	struct io_uring ring;

	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		for (size_t i = 0; i < N; i++)
			buf[i] = pattern(i, 2);
		write_all(c, buf, N);
		read_all(c, buf, 1);
		_exit(buf[0] == 'k' ? 0 : 1);
	}
	int r = io_uring_queue_init(8, &ring, 0);
	if (r == -ENOSYS || r == -EPERM) {
		printf("skip: no io_uring here (%s)\n", strerror(-r));
		return 77;
	}
	CHECK(r == 0);
	int fd = connect_to(&ss, len);
	expect_plain_reason(fd, 22); /* io-uring */
	size_t got = 0;
	while (got < N) {
		int n = uring_io(&ring, fd, buf + got, N - got, 0);
		CHECK(n > 0);
		got += (size_t)n;
	}
	for (size_t i = 0; i < N; i++)
		CHECK(buf[i] == pattern(i, 2));
	CHECK(uring_io(&ring, fd, "k", 1, 1) == 1);
	io_uring_queue_exit(&ring);
	CHECK(wait_child(p) == 0);
	return 0;
}
