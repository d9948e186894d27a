/* Description: a connection passed to another process (SCM_RIGHTS), as
 * node's cluster module and pre-fork servers pass accepted connections,
 * goes on there at the exact byte in both directions: the master reads 3
 * bytes of the request, writes a greeting and 64 KiB the client has not
 * read yet, and passes the descriptor while the client's bytes sit unread
 * in it (as many as the kernel's or shunt's buffer takes) and the client's
 * writer is blocked; the worker reads
 * the rest of the request and 2 MiB, answers 2 MiB, and the client reads
 * every byte in order and a clean EOF.  Under shunt the connection is
 * accelerated before the pass and plain TCP after it on both ends (reason
 * 23, fd-passed), as the receiving process holds a kernel socket.
 * Over RDMA likewise (the RDMA failover's resend carries what the master
 * had not read).  (The old library: the worker read nothing, the client
 * got EOF.) */
#include "common.h"
#include <pthread.h>
#include <sys/ioctl.h>

#define BIG (2u << 20)

static _Atomic size_t written;
static int cfd;

static void *writer(void *arg)
{
	static char buf[16384];
	uint64_t pos = 0;

	(void)arg;
	write_all(cfd, "0123456789", 10);
	while (pos < BIG) {
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (char)pattern(pos + i, 1);
		write_all(cfd, buf, sizeof buf);
		pos += sizeof buf;
		written = pos;
	}
	CHECK(shutdown(cfd, SHUT_WR) == 0);
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), u[2];
	static char buf[1 << 16];
	pthread_t t;

	deadline(60);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0);
	pid_t worker = fork();
	if (!worker) {
		close(u[0]);
		close(l);
		int fd = recv_fd(u[1]), n;
		read_all(fd, buf, 7);
		CHECK(!memcmp(buf, "3456789", 7));
		CHECK(read_pattern_to_eof(fd, 1) == BIG);
		for (uint64_t pos = 0; pos < BIG; pos += sizeof buf) {
			for (size_t i = 0; i < sizeof buf; i++)
				buf[i] = (char)pattern(pos + i, 3);
			write_all(fd, buf, sizeof buf);
		}
		CHECK(ioctl(fd, FIONREAD, &n) == 0 && n == 0);
		close(fd);
		_exit(0);
	}
	pid_t master = fork();
	if (!master) {
		int c = accept(l, NULL, NULL), n = 0;
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, buf, 3);
		CHECK(!memcmp(buf, "012", 3));
		write_all(c, "hello", 5);
		for (size_t i = 0; i < 65536; i++)
			buf[i] = (char)pattern(i, 2);
		write_all(c, buf, 65536);
		/* the client's bytes pile up, unread, until its writer blocks */
		for (int last = -1; ioctl(c, FIONREAD, &n) == 0 && (n < 30000 || n != last); last = n)
			usleep(50000);
		send_fd(u[0], c);
		expect_passed(c);
		close(c);
		_exit(0);
	}
	close(u[0]);
	close(u[1]);
	cfd = connect_to(&ss, len);
	expect_mode(cfd);
	CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
	while (written < 300000)
		usleep(1000); /* past what the ring holds: the worker reads now */
	read_all(cfd, buf, 5);
	CHECK(!memcmp(buf, "hello", 5));
	read_all(cfd, buf, 65536);
	for (size_t i = 0; i < 65536; i++)
		CHECK((uint8_t)buf[i] == pattern(i, 2));
	CHECK(read_pattern_to_eof(cfd, 3) == BIG);
	CHECK(pthread_join(t, NULL) == 0);
	expect_passed(cfd);
	close(cfd);
	CHECK(wait_child(master) == 0);
	CHECK(wait_child(worker) == 0);
	return 0;
}
