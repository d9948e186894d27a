/* Description: recv with MSG_TRUNC on a TCP socket discards: it returns
 * the count and consumes the bytes without copying them (the buffer may be
 * NULL), with MSG_PEEK it neither copies nor consumes, with MSG_WAITALL it
 * waits for the whole count - as the kernel does (issue #13, item 3: the
 * shim used to copy, and crashed on a NULL buffer).  Without MSG_TRUNC a
 * NULL buffer (or message) is EFAULT once there are bytes, as the
 * kernel's, and consumes none (the shim crashed there too); more than
 * IOV_MAX pieces are the kernel's EINVAL (writev, readv) or EMSGSIZE
 * (sendmsg, recvmsg: shunt said EINVAL). */
#include "common.h"
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#define N 10000

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), n = 0;
	static uint8_t buf[N];
	char *volatile nul = NULL; /* past the compiler's nonnull checks */

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode_peer_forks(c);
		for (size_t i = 0; i < N; i++)
			buf[i] = pattern(i, 5);
		write_all(c, buf, N);
		read_all(c, buf, 1); /* the client is done */
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	/* a NULL buffer without MSG_TRUNC: EFAULT, and nothing consumed
	 * (nor with a NULL message) */
	while (ioctl(fd, FIONREAD, &n) == 0 && n < 1)
		usleep(1000);
	errno = 0;
	CHECK(read(fd, nul, 10) == -1 && errno == EFAULT);
	errno = 0;
	CHECK(recvmsg(fd, (struct msghdr *)nul, 0) == -1 && errno == EFAULT);
	errno = 0;
	CHECK(sendmsg(fd, (struct msghdr *)nul, 0) == -1 && errno == EFAULT);
	errno = 0;
	CHECK(write(fd, nul, 10) == -1 && errno == EFAULT);
	/* more than IOV_MAX pieces: writev/readv EINVAL, sendmsg/recvmsg
	 * EMSGSIZE - the kernel's, before any byte */
	static struct iovec many[IOV_MAX + 1];
	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ buf, 1 };
	struct msghdr mh = { .msg_iov = many, .msg_iovlen = IOV_MAX + 1 };
	errno = 0;
	CHECK(writev(fd, many, IOV_MAX + 1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(readv(fd, many, IOV_MAX + 1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(sendmsg(fd, &mh, 0) == -1 && errno == EMSGSIZE);
	errno = 0;
	CHECK(recvmsg(fd, &mh, 0) == -1 && errno == EMSGSIZE);
	CHECK(recv(fd, NULL, 1000, MSG_TRUNC | MSG_WAITALL) == 1000);
	while (ioctl(fd, FIONREAD, &n) == 0 && n < N - 1000)
		usleep(1000);
	CHECK(n == N - 1000);
	memset(buf, 0xaa, sizeof buf);
	CHECK(recv(fd, buf, 500, MSG_TRUNC | MSG_PEEK) == 500);
	for (size_t i = 0; i < 500; i++)
		CHECK(buf[i] == 0xaa); /* nothing copied */
	CHECK(recv(fd, buf, 500, MSG_PEEK) == 500); /* nothing consumed */
	for (size_t i = 0; i < 500; i++)
		CHECK(buf[i] == pattern(1000 + i, 5));
	CHECK(recv(fd, NULL, 8000, MSG_TRUNC) == 8000);
	read_all(fd, buf, 1000);
	for (size_t i = 0; i < 1000; i++)
		CHECK(buf[i] == pattern(9000 + i, 5));
	CHECK(ioctl(fd, FIONREAD, &n) == 0 && n == 0);
	errno = 0; /* nothing there: a NULL buffer waits as any read (here: EAGAIN) */
	CHECK(recv(fd, nul, 10, MSG_DONTWAIT) == -1 && errno == EAGAIN);
	write_all(fd, "e", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
