/* Description: sendmmsg() and recvmmsg() on a TCP socket carry the same
 * stream as write() and read(): bytes sent with sendmmsg arrive, in order,
 * at a read() (each message's length reported), and bytes written with
 * write() fill recvmmsg's messages in order (MSG_WAITFORONE: the first
 * waits, the rest take what is there).  (Issue #13, item 2: both went to
 * the kernel socket under the rings and the bytes were lost.)  A NULL
 * vector on a socket shunt does not accelerate is the kernel's EFAULT
 * (before, the wrapper read it and crashed the program). */
#include "common.h"

#define MSGS 8
#define PART 1000
#define TOTAL (MSGS * PART)

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static uint8_t buf[TOTAL];
	struct mmsghdr v[MSGS];
	struct iovec iov[MSGS];

	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, buf, TOTAL);
		for (size_t i = 0; i < TOTAL; i++)
			CHECK(buf[i] == pattern(i, 6));
		for (size_t i = 0; i < TOTAL; i++)
			buf[i] = pattern(i, 7);
		write_all(c, buf, TOTAL);
		read_all(c, buf, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len), sp[2];
	expect_mode_peer_forks(fd);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	errno = 0;
	CHECK(sendmmsg(sp[0], NULL, 1, 0) == -1 && errno == EFAULT);
	close(sp[0]);
	close(sp[1]);
	for (size_t i = 0; i < TOTAL; i++)
		buf[i] = pattern(i, 6);
	for (int i = 0; i < MSGS; i++) {
		iov[i] = (struct iovec){ buf + i * PART, PART };
		v[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	CHECK(sendmmsg(fd, v, MSGS, 0) == MSGS);
	for (int i = 0; i < MSGS; i++)
		CHECK(v[i].msg_len == PART);

	memset(buf, 0, sizeof buf);
	size_t got = 0;
	while (got < TOTAL) {
		int k = 0;
		for (size_t at = got; k < MSGS && at < TOTAL; k++) {
			iov[k] = (struct iovec){ buf + at, TOTAL - at < PART ? TOTAL - at : PART };
			v[k] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[k], .msg_iovlen = 1 } };
			at += iov[k].iov_len;
		}
		int n = recvmmsg(fd, v, (unsigned)k, MSG_WAITFORONE, NULL);
		CHECK(n >= 1);
		for (int i = 0; i < n; i++) {
			got += v[i].msg_len;
			/* the stream fills message after message */
			if (v[i].msg_len < iov[i].iov_len)
				CHECK(i == n - 1 || v[i + 1].msg_len == 0);
		}
	}
	for (size_t i = 0; i < TOTAL; i++)
		CHECK(buf[i] == pattern(i, 7));
	write_all(fd, "k", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
