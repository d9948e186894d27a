/* Description: what a fork shares of a connection is shared as TCP's:
 * O_NONBLOCK, the open file description's, set or cleared through one
 * descriptor or process, holds for the others - a read on an empty
 * connection then fails with EAGAIN, a write into a full one takes what
 * fits or fails with EAGAIN, and cleared again, a read waits for its byte;
 * so do SO_RCVTIMEO and a shutdown(SHUT_WR), the socket's.  Under shunt a
 * forked child's fcntl(F_SETFL) or FIONBIO went unseen by its parent,
 * whose read waited for ever where TCP's says EAGAIN, and so did its
 * SO_RCVTIMEO; after its shutdown the parent's send was taken, a byte the
 * server never read (TCP: EPIPE). */
#include "common.h"

static struct chan ch;

/* The server: sends a byte 200 ms after the client's word, and reads
 * nothing (the client fills the connection) until the next word. */
static void serve(int l)
{
	int c = accept(l, NULL, NULL);
	static char buf[65536];
	ssize_t r;
	char w;

	CHECK(c >= 0);
	CHECK(chan_recv(&ch, &w) && w == 's');
	usleep(200000);
	write_all(c, "y", 1);
	CHECK(chan_recv(&ch, &w) && w == 'd');
	while ((r = read(c, buf, sizeof buf)) > 0)
		;
	CHECK(r == 0);
	_exit(0);
}

/* A child process that sets (or clears) O_NONBLOCK on fd, by fcntl or by
 * FIONBIO, and exits. */
static void child_sets(int fd, int on, int by_ioctl)
{
	pid_t q = fork();

	CHECK(q >= 0);
	if (!q) {
		if (by_ioctl) {
			CHECK(!ioctl(fd, FIONBIO, &on));
		} else {
			int fl = fcntl(fd, F_GETFL);
			CHECK(fl >= 0 && !fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK));
		}
		_exit(0);
	}
	CHECK(waitpid(q, NULL, 0) == q);
}

static void expect_again(int fd, const char *what)
{
	char b;
	ssize_t r = recv(fd, &b, 1, 0);

	if (r != -1 || errno != EAGAIN) {
		fprintf(stderr, "%s: recv on an empty connection said %zd (%s), wanted EAGAIN\n", what, r,
			strerror(errno));
		exit(1);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, d, fl;
	char b;

	deadline(60);
	chan_open(&ch);
	pid_t p = test_fork();
	if (!p)
		serve(l);
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK((fl = fcntl(fd, F_GETFL)) >= 0 && !(fl & O_NONBLOCK));

	/* a duplicate's flag is the original's */
	CHECK((d = dup(fd)) >= 0 && !fcntl(d, F_SETFL, fl | O_NONBLOCK));
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	expect_again(fd, "set through a dup");
	CHECK(!fcntl(d, F_SETFL, fl));
	close(d);

	/* a forked child's, by fcntl and by FIONBIO */
	child_sets(fd, 1, 0);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	expect_again(fd, "set by a child's fcntl");
	child_sets(fd, 0, 0);
	child_sets(fd, 1, 1);
	expect_again(fd, "set by a child's FIONBIO");

	/* set here, cleared by a child: the read waits for the byte */
	CHECK(!fcntl(fd, F_SETFL, fl | O_NONBLOCK));
	expect_again(fd, "set here");
	child_sets(fd, 0, 0);
	CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
	chan_send(&ch, 's');
	double t0 = now_s();
	CHECK(recv(fd, &b, 1, 0) == 1 && b == 'y'); /* TCP's waits: no EAGAIN */
	CHECK(now_s() - t0 > 0.1);

	/* set by a child: a write into a full connection does not wait */
	child_sets(fd, 1, 0);
	static char buf[65536];
	ssize_t w;
	size_t sent = 0;
	while ((w = send(fd, buf, sizeof buf, MSG_NOSIGNAL)) > 0)
		CHECK((sent += (size_t)w) < (1u << 30));
	CHECK(w == -1 && errno == EAGAIN && sent > 0);
	child_sets(fd, 0, 0);
	chan_send(&ch, 'd');
	write_all(fd, "d", 1); /* blocking again: it waits for room */

	/* a child's SO_RCVTIMEO bounds the parent's read (the socket's) */
	pid_t q = fork();
	CHECK(q >= 0);
	if (!q) {
		struct timeval tv = { 0, 200000 };
		CHECK(!setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
		_exit(0);
	}
	CHECK(waitpid(q, NULL, 0) == q);
	t0 = now_s();
	CHECK(recv(fd, &b, 1, 0) == -1 && errno == EAGAIN);
	CHECK(now_s() - t0 > 0.1);

	/* a child's shutdown(SHUT_WR) is the socket's: the parent's send
	 * is EPIPE (before, it was taken, after the end the server read) */
	q = fork();
	CHECK(q >= 0);
	if (!q) {
		CHECK(!shutdown(fd, SHUT_WR));
		_exit(0);
	}
	CHECK(waitpid(q, NULL, 0) == q);
	CHECK(send(fd, "z", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	chan_close(&ch);
	close(fd);
	CHECK(wait_child(p) == 0);
	printf("shared_state: ok (%zu bytes before the pipe was full)\n", sent);
	return 0;
}
