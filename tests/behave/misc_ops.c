/* Description: sendfile into a socket, SO_RCVTIMEO timing out with EAGAIN,
 * a dup'd descriptor working after the original is closed, dup2 and
 * fcntl(F_DUPFD), FIONBIO, SO_ERROR, getsockname/getpeername agreeing. */
#include "common.h"
#include <sys/ioctl.h>
#include <sys/sendfile.h>

int main(void)
{
	struct sockaddr_storage ss, a, b;
	socklen_t len, la = sizeof a, lb = sizeof b;
	int l = listen_on("127.0.0.1", &ss, &len);
	char path[] = "/tmp/shunt-sendfile-XXXXXX", buf[100000];

	deadline(30);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		size_t got = 0;
		expect_mode(c);
		CHECK(getsockname(c, (void *)&a, &la) == 0);
		while (got < 100000) {
			ssize_t n = read(c, buf + got, sizeof buf - got);
			CHECK(n > 0);
			got += (size_t)n;
		}
		for (size_t i = 0; i < got; i++)
			CHECK((uint8_t)buf[i] == pattern(i, 5));
		write_all(c, "k", 1);
		read_all(c, buf, 3);
		CHECK(!memcmp(buf, "dup", 3));
		write_all(c, "z", 1);
		read_all(c, buf, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len), err = -1;
	socklen_t el = sizeof err;
	expect_mode(fd);
	CHECK(getpeername(fd, (void *)&b, &lb) == 0);
	CHECK(((struct sockaddr_in *)&b)->sin_port == ((struct sockaddr_in *)&ss)->sin_port);
	int tf = mkstemp(path);
	CHECK(tf >= 0);
	unlink(path);
	for (size_t i = 0; i < 100000; i++)
		buf[i] = (char)pattern(i, 5);
	write_all(tf, buf, 100000);
	off_t off = 0;
	size_t sent = 0;
	while (sent < 100000) {
		ssize_t n = sendfile(fd, tf, &off, 100000 - sent);
		CHECK(n > 0);
		sent += (size_t)n;
	}
	CHECK(off == 100000);
	read_all(fd, buf, 1);
	CHECK(buf[0] == 'k');

	struct timeval tv = { 0, 150000 };
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	double t = now_s();
	CHECK(read(fd, buf, 1) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
	CHECK(now_s() - t >= 0.12 && now_s() - t < 2);
	tv = (struct timeval){ 0, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

	int one = 1;
	CHECK(ioctl(fd, FIONBIO, &one) == 0);
	CHECK(read(fd, buf, 1) == -1 && errno == EAGAIN);
	one = 0;
	CHECK(ioctl(fd, FIONBIO, &one) == 0);

	int d = dup(fd);
	CHECK(d >= 0);
	close(fd);
	expect_mode(d);
	write_all(d, "dup", 3);
	int d2 = fcntl(d, F_DUPFD, 50);
	CHECK(d2 >= 50);
	CHECK(dup2(d2, 40) == 40);
	close(d);
	close(d2);
	read_all(40, buf, 1);
	CHECK(buf[0] == 'z');
	CHECK(getsockopt(40, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	write_all(40, "e", 1);
	close(40);
	CHECK(wait_child(p) == 0);
	return 0;
}
