/* Description: the other ways a program reads and writes a socket behave
 * as on TCP: pwritev2/preadv2 at offset -1 (the stream's position;
 * RWF_NOWAIT does not wait: EAGAIN), at another offset ESPIPE, with an
 * unknown flag EOPNOTSUPP, each leaving the stream as it was; vectors
 * the kernel refuses - more than IOV_MAX entries, an element longer than
 * SSIZE_MAX - EINVAL, and a write's or read's count past SSIZE_MAX
 * EFAULT, nothing sent or taken (before the thirty-sixth session such an
 * element was written as 0 bytes - a writer's loop never ended - and
 * such a write crashed in the copy); and POSIX
 * AIO (aio_write, aio_read, aio_suspend, aio_return; lio_listio, on a
 * connection of its own), whose glibc threads use libc's internal read
 * and write.  With the previous library the preadv2 waited for ever on
 * the kernel socket while the bytes were in the rings; before the
 * thirty-fifth session, lio_listio's bytes went to the kernel socket while
 * the peer read its ring. */
#include "common.h"
#include <aio.h>
#include <limits.h>
#include <sys/uio.h>

static void aio_do(int fd, int wr, char *buf, size_t n)
{
	struct aiocb cb = { .aio_fildes = fd, .aio_buf = buf, .aio_nbytes = n };
	const struct aiocb *list[1] = { &cb };

	CHECK((wr ? aio_write(&cb) : aio_read(&cb)) == 0);
	while (aio_error(&cb) == EINPROGRESS)
		CHECK(aio_suspend(list, 1, NULL) == 0 || errno == EINTR);
	CHECK(aio_error(&cb) == 0 && aio_return(&cb) == (ssize_t)n);
}

/* One operation in a list: LIO_WAIT returns when it is done. */
static void lio_do(int fd, int wr, char *buf, size_t n)
{
	struct aiocb nop = { .aio_lio_opcode = LIO_NOP };
	struct aiocb cb = { .aio_fildes = fd, .aio_buf = buf, .aio_nbytes = n,
			    .aio_lio_opcode = wr ? LIO_WRITE : LIO_READ };
	struct aiocb *list[3] = { &nop, NULL, &cb };

	CHECK(lio_listio(LIO_WAIT, list, 3, NULL) == 0);
	CHECK(aio_error(&cb) == 0 && aio_return(&cb) == (ssize_t)n);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, fd;
	char a[3], b[4], got[16];
	pid_t p;

	deadline(30);
	p = serve_forked(&l, &ss, &len);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, got, 7);
		CHECK(!memcmp(got, "abcdefg", 7));
		write_all(c, "0123456", 7);
		read_all(c, got, 5); /* the client's aio_write */
		CHECK(!memcmp(got, "async", 5));
		write_all(c, "reply", 5);
		CHECK(read(c, got, 1) == 0);
		close(c);
		c = accept(l, NULL, NULL); /* lio_listio's */
		CHECK(c >= 0);
		/* The client moves this one to TCP for its AIO at once: over
		 * RDMA its word may be in before this look (peer-failover). */
		expect_mode_ex(c, 1);
		read_all(c, got, 4);
		CHECK(!memcmp(got, "list", 4));
		write_all(c, "LIST", 4);
		CHECK(read(c, got, 1) == 0);
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	{
		static struct iovec many[IOV_MAX + 1];
		struct iovec huge[2] = { { "abc", 3 }, { a, (size_t)SSIZE_MAX + 1 } };
		for (int i = 0; i <= IOV_MAX; i++)
			many[i] = (struct iovec){ "x", 1 };
		errno = 0;
		CHECK(writev(fd, many, IOV_MAX + 1) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(writev(fd, huge, 2) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(readv(fd, huge, 2) == -1 && errno == EINVAL);
		errno = 0;
		CHECK(readv(fd, many, IOV_MAX + 1) == -1 && errno == EINVAL);
		errno = 0;
		volatile size_t past = (size_t)SSIZE_MAX + 1; /* (the compiler would refuse it) */
		CHECK(write(fd, "abc", past) == -1 && errno == EFAULT);
		errno = 0;
		CHECK(read(fd, a, past) == -1 && errno == EFAULT);
	}
	{
		struct iovec w[2] = { { "abc", 3 }, { "defg", 4 } }, r[2] = { { a, 3 }, { b, 4 } };
		errno = 0;
		CHECK(pwritev2(fd, w, 2, 0, 0) == -1 && errno == ESPIPE);
		errno = 0;
		CHECK(pwritev2(fd, w, 2, -1, 0x40000000) == -1 && errno == EOPNOTSUPP);
		CHECK(pwritev2(fd, w, 2, -1, 0) == 7);
		errno = 0;
		CHECK(preadv2(fd, r, 2, 5, 0) == -1 && errno == ESPIPE);
		size_t have = 0;
		while (have < 7) { /* the answer, maybe in pieces */
			struct iovec rest[2];
			int k = 0;
			if (have < 3)
				rest[k++] = (struct iovec){ a + have, 3 - have };
			rest[k++] = (struct iovec){ b + (have > 3 ? have - 3 : 0), 4 - (have > 3 ? have - 3 : 0) };
			ssize_t n = preadv2(fd, rest, k, -1, 0);
			CHECK(n > 0);
			have += (size_t)n;
		}
		CHECK(!memcmp(a, "012", 3) && !memcmp(b, "3456", 4));
		errno = 0;
		CHECK(preadv2(fd, r, 1, -1, RWF_NOWAIT) == -1 && errno == EAGAIN);
	}
	aio_do(fd, 1, "async", 5);
	aio_do(fd, 0, got, 5);
	CHECK(!memcmp(got, "reply", 5));
	close(fd);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	lio_do(fd, 1, "list", 4);
	lio_do(fd, 0, got, 4);
	CHECK(!memcmp(got, "LIST", 4));
	close(fd);
	CHECK(wait_child(p) == 0);
	return 0;
}
