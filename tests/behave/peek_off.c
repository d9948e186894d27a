/* Description: a peek offset (SO_PEEK_OFF on TCP, Linux 6.10 on: passt
 * uses it) behaves as TCP's: each MSG_PEEK goes on where the last ended,
 * a read takes the stream's head and moves the offset back by what it
 * took, and bytes that arrived before the option was set count.  Under
 * shunt the rings' peeks always start at the head (the same bytes again:
 * a forwarder would send them twice), so the connection moves to TCP at
 * the exact byte first and the kernel keeps the offset.  Turning it off
 * (-1) changes nothing.  A kernel without it for TCP (EOPNOTSUPP, before
 * 6.10: the test guest's) skips the test, and under shunt the connection
 * stays accelerated then.  NOT_SPLIT_OVER_RDMA: the guests' kernel has no
 * peek offset for TCP - the client would only skip, its server cut. */
#include "common.h"

static void server(int l)
{
	int c = accept(l, NULL, NULL);
	char b;

	CHECK(c >= 0);
	write_all(c, "abcdefghij", 10);
	read_all(c, &b, 1); /* the client is done peeking */
	write_all(c, "KLMNO", 5);
	close(c);
	_exit(0);
}

/* n bytes peeked (MSG_PEEK) or read, which must be want */
static void take(int fd, int flags, const char *want)
{
	char b[32];
	size_t n = strlen(want);

	CHECK(recv(fd, b, n, flags | MSG_WAITALL * !(flags & MSG_PEEK)) == (ssize_t)n);
	if (memcmp(b, want, n)) {
		fprintf(stderr, "%s: got '%.*s', wanted '%s'\n", flags & MSG_PEEK ? "peek" : "read", (int)n, b, want);
		exit(1);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);
	int fd = connect_to(&ss, len), off = -1;
	socklen_t ol = sizeof off;

	expect_mode(fd);
	CHECK(setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) == 0 || errno == EOPNOTSUPP);
	expect_mode(fd); /* off: nothing moves */
	/* all ten bytes here, unread, before the option */
	while (1) {
		char b[16];
		if (recv(fd, b, sizeof b, MSG_PEEK) == 10)
			break;
		usleep(1000);
	}
	off = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) && errno == EOPNOTSUPP) {
		expect_mode(fd); /* as the kernel said: nothing changed */
		printf("skip: this kernel has no peek offset for TCP\n");
		exit(77);
	}
	CHECK(getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, &ol) == 0 && off == 0);
	take(fd, MSG_PEEK, "abc");
	take(fd, MSG_PEEK, "def");
	take(fd, 0, "ab");          /* the offset moves back by two: 4 */
	take(fd, MSG_PEEK, "gh");
	CHECK(getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, &ol) == 0 && off == 6);
	take(fd, 0, "cdefgh");      /* to 0 */
	take(fd, MSG_PEEK, "ij");
	write_all(fd, "x", 1);
	take(fd, MSG_PEEK, "KLM");  /* later bytes: on from the offset */
	take(fd, 0, "ijKLMNO");
	CHECK(recv(fd, &off, 1, 0) == 0);
	CHECK(wait_child(p) == 0);
	close(fd);
	return 0;
}
