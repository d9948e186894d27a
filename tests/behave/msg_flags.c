/* Description: MSG_PEEK does not consume, MSG_WAITALL waits for the whole
 * length, MSG_DONTWAIT gives EAGAIN on a blocking socket, FIONREAD counts
 * queued bytes, readv/writev/sendmsg/recvmsg scatter and gather. */
#include "common.h"
#include <sys/ioctl.h>
#include <sys/uio.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[256];

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		write_all(c, "abcdef", 6);
		read_all(c, buf, 1); /* sync */
		/* WAITALL: deliver 100 bytes in pieces with gaps */
		for (int i = 0; i < 10; i++) {
			memset(buf, 'a' + i, 10);
			write_all(c, buf, 10);
			usleep(2000);
		}
		struct iovec iov[3] = { { "one", 3 }, { "-two", 4 }, { "-three", 6 } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
		CHECK(sendmsg(c, &mh, MSG_NOSIGNAL) == 13);
		CHECK(writev(c, iov, 3) == 13);
		read_all(c, buf, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len), n = 0;
	expect_mode(fd);
	CHECK(recv(fd, buf, 3, MSG_PEEK | MSG_WAITALL) >= 1);
	/* wait for all six, then check peek and FIONREAD */
	while (ioctl(fd, FIONREAD, &n) == 0 && n < 6)
		usleep(1000);
	CHECK(n == 6);
	CHECK(recv(fd, buf, 4, MSG_PEEK) == 4 && !memcmp(buf, "abcd", 4));
	CHECK(recv(fd, buf, 2, 0) == 2 && !memcmp(buf, "ab", 2));
	CHECK(ioctl(fd, FIONREAD, &n) == 0 && n == 4);
	CHECK(recv(fd, buf, sizeof buf, 0) == 4 && !memcmp(buf, "cdef", 4));
	CHECK(recv(fd, buf, sizeof buf, MSG_DONTWAIT) == -1 && errno == EAGAIN);
	write_all(fd, "s", 1);
	CHECK(recv(fd, buf, 100, MSG_WAITALL) == 100);
	for (int i = 0; i < 100; i++)
		CHECK(buf[i] == 'a' + i / 10);
	char a[5], b[20];
	struct iovec iov[2] = { { a, 5 }, { b, 8 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == 13);
	CHECK(!memcmp(a, "one-t", 5) && !memcmp(b, "wo-three", 8));
	CHECK(readv(fd, iov, 2) >= 1);
	write_all(fd, "e", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
