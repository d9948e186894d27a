/* Description: a peer's reset and a peer's close, reported as TCP reports
 * them.  The kernel reports a reset once - to whichever call asks first: a
 * recv, a send, a recv of no bytes, getsockopt(SO_ERROR) - and then a read
 * says EOF, a send EPIPE, and poll no longer says POLLERR.  After a
 * peer's ordinary close the first send is taken (the peer's kernel
 * answers it with a reset), those after the reset fail (EPIPE, with
 * SIGPIPE unless MSG_NOSIGNAL).  shunt reported a
 * reset on every read, took a send after the reset (and a ring's worth
 * after a close) for nobody, and answered SO_ERROR with 0.  Also recv()
 * of no bytes: TCP's waits for something to read and says 0 (EAGAIN when
 * non-blocking), where read() of none says 0 at once; shunt said 0 at
 * once - a program's "the peer closed". */
#include "common.h"
#include <sys/uio.h>

#define RESETS 4 /* connections the server resets, one per way of asking */

/* Until the socket shows the peer's reset (or close: POLLIN). */
static short wait_for(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (int i = 0; i < 1000; i++) {
		CHECK(poll(&p, 1, 10000) == 1);
		if (p.revents & ev)
			return p.revents;
		usleep(10000);
	}
	fprintf(stderr, "fd %d: no event %#x (revents %#x)\n", fd, ev, p.revents);
	exit(1);
}

static volatile sig_atomic_t sigpipes;
static void count_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void no_pollerr(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	CHECK(poll(&p, 1, 0) == 1 && !(p.revents & POLLERR) && (p.revents & POLLHUP));
}

static void expect_err(ssize_t r, int e)
{
	if (r != -1 || errno != e) {
		fprintf(stderr, "got %zd (errno %d %s), wanted errno %d\n", r, errno, strerror(errno), e);
		exit(1);
	}
}

static void server(int l)
{
	char b;

	for (int i = 0; i < RESETS + 2; i++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode_peer_forks(c);
		read_all(c, &b, 1);
		if (i < RESETS) { /* an abortive close: RST */
			struct linger lg = { 1, 0 };
			CHECK(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
		} else if (i == RESETS + 1) { /* the reads of no bytes */
			usleep(300000);
			write_all(c, "a", 1);
			read_all(c, &b, 1);
		}
		close(c);
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int e;
	socklen_t el = sizeof e;
	char b[8];
	pid_t p = serve_in_child(server, &ss, &len);

	for (int i = 0; i < RESETS; i++) {
		int fd = connect_to(&ss, len);
		expect_mode_peer_forks(fd);
		write_all(fd, "x", 1);
		wait_for(fd, POLLERR);
		switch (i) {
		case 0: /* a read is told */
			expect_err(recv(fd, b, 1, 0), ECONNRESET);
			CHECK(recv(fd, b, 1, 0) == 0);
			break;
		case 1: /* a send is told */
			expect_err(send(fd, "y", 1, 0), ECONNRESET);
			CHECK(read(fd, b, 1) == 0);
			break;
		case 2: /* a read of no bytes is told */
			CHECK(read(fd, b, 0) == 0); /* the file layer: not the socket */
			expect_err(recv(fd, b, 0, 0), ECONNRESET);
			CHECK(recv(fd, b, 0, 0) == 0);
			CHECK(recv(fd, b, 1, 0) == 0);
			break;
		case 3: /* SO_ERROR is told */
			CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == ECONNRESET);
			CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0);
			CHECK(recv(fd, b, 1, MSG_DONTWAIT) == 0);
			break;
		}
		no_pollerr(fd);
		expect_err(send(fd, "y", 1, 0), EPIPE);
		close(fd);
	}

	/* the peer's ordinary close: EOF; the first send is taken, the reset
	 * it brings back fails a later one (after the FIN the kernel's
	 * error is EPIPE), and every one after it */
	int fd = connect_to(&ss, len), i;
	ssize_t r;
	expect_mode_peer_forks(fd);
	write_all(fd, "x", 1);
	wait_for(fd, POLLIN);
	CHECK(read(fd, b, 1) == 0);
	signal(SIGPIPE, count_sigpipe); /* each EPIPE raises SIGPIPE, the first too */
	CHECK(send(fd, "y", 1, 0) == 1);
	for (i = 0; i < 500 && (r = send(fd, "y", 1, 0)) == 1; i++)
		usleep(10000); /* until the reset is back */
	expect_err(r, EPIPE);
	expect_err(send(fd, "y", 1, 0), EPIPE);
	expect_err(send(fd, "y", 1, MSG_NOSIGNAL), EPIPE);
	if (sigpipes != 2) {
		fprintf(stderr, "%d SIGPIPE for two sends that said EPIPE\n", (int)sigpipes);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	close(fd);

	/* reads of no bytes */
	fd = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	expect_err(recv(fd, b, 0, MSG_DONTWAIT), EAGAIN);
	struct iovec none = { b, 0 };
	struct msghdr mh = { .msg_iov = &none, .msg_iovlen = 1 };
	expect_err(recvmsg(fd, &mh, MSG_DONTWAIT), EAGAIN);
	CHECK(read(fd, b, 0) == 0 && readv(fd, &none, 1) == 0);
	write_all(fd, "x", 1); /* the server writes 0.3 s after it */
	double t0 = now_s();
	CHECK(recv(fd, b, 0, 0) == 0); /* waits for the byte, takes none */
	if (now_s() - t0 < 0.2) {
		fprintf(stderr, "recv of no bytes returned after %.3f s, before the byte\n", now_s() - t0);
		return 1;
	}
	CHECK(recv(fd, b, 1, MSG_DONTWAIT) == 1 && b[0] == 'a');
	write_all(fd, "x", 1); /* the server closes */
	CHECK(recv(fd, b, 0, 0) == 0); /* the end */
	CHECK(recv(fd, b, 1, 0) == 0);
	close(fd);
	CHECK(wait_child(p) == 0);
	return 0;
}
