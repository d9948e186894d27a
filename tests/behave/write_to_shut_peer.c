/* Description: bytes sent to a peer that shut down both halves of its
 * connection (shutdown(SHUT_RDWR), or SHUT_RD then SHUT_WR).  TCP's peer
 * can read them no more and its kernel answers them with a reset (RFC
 * 1122): the send that carried them says it sent them, the next one EPIPE
 * with SIGPIPE (the reset comes after the peer's FIN), the peer's next
 * read ECONNRESET once and then its end; poll says so at both ends (an
 * error, hung up) before any call reports it.  Whether the sender read the
 * peer's FIN first or not.  shunt's ring took the bytes, unread, and
 * nothing was said until the peer closed (then a reset, as for any
 * bytes left unread: issue #13, the epoll differences of the forty-eighth
 * session, (2)).  NOT_OVER_RDMA: RDMA's cursor messages do not carry the
 * reader's shutdown(SHUT_RD) (the ring word rd_shut): there the bytes go
 * to the peer's ring, and its close resets (docs/architecture.md, "Known
 * limits"). */
#include "common.h"

static volatile sig_atomic_t sigpipes;
static void count_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* What poll says of a connection reset after both halves shut (TCP's):
 * readable (the error), writable, an error, hung up, read half shut. */
#define RESET (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP)
static int revents(int fd)
{
	struct pollfd pf = { fd, POLLIN | POLLOUT | POLLRDHUP, 0 };

	CHECK(poll(&pf, 1, 0) == 1);
	return pf.revents;
}

/* One connection: the peer (a child) shuts down both halves - at once, or
 * its reading half first - then says so and waits for our bytes; we read
 * its FIN first or not, send 100 bytes, and look. */
static void one(const struct sockaddr_storage *ss, socklen_t len, int l, int split, int read_fin)
{
	int ready[2], sent[2], fd, st, e;
	char buf[100] = { 0 }, b;
	pid_t p;

	CHECK(pipe(ready) == 0 && pipe(sent) == 0);
	CHECK((p = fork()) >= 0);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		if (split) {
			CHECK(shutdown(c, SHUT_RD) == 0);
			CHECK(shutdown(c, SHUT_WR) == 0);
		} else {
			CHECK(shutdown(c, SHUT_RDWR) == 0);
		}
		CHECK(write(ready[1], "r", 1) == 1);
		CHECK(read(sent[0], &b, 1) == 1);
		usleep(100000); /* (TCP's reset is at once on the loopback) */
		if (revents(c) != RESET) {
			fprintf(stderr, "peer's poll: %#x, wanted %#x\n", revents(c), RESET);
			_exit(3);
		}
		errno = 0;
		if (recv(c, &b, 1, MSG_DONTWAIT) != -1 || errno != ECONNRESET) {
			fprintf(stderr, "peer's read: errno %d, wanted ECONNRESET\n", errno);
			_exit(2);
		}
		CHECK(recv(c, &b, 1, MSG_DONTWAIT) == 0);
		close(c);
		_exit(0);
	}
	fd = connect_to(ss, len);
	expect_mode(fd);
	CHECK(read(ready[0], &b, 1) == 1);
	if (read_fin) {
		struct pollfd pf = { fd, POLLIN, 0 };
		CHECK(poll(&pf, 1, 5000) == 1 && recv(fd, &b, 1, 0) == 0);
	}
	sigpipes = 0;
	CHECK(send(fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
	CHECK(write(sent[1], "s", 1) == 1);
	usleep(50000);
	if (revents(fd) != RESET) {
		fprintf(stderr, "split %d read_fin %d: poll %#x after the send, wanted %#x\n", split, read_fin,
			revents(fd), RESET);
		exit(1);
	}
	errno = 0;
	e = send(fd, buf, sizeof buf, 0) == -1 ? errno : 0;
	if (e != EPIPE || sigpipes != 1) {
		fprintf(stderr, "split %d read_fin %d: second send errno %d, %d SIGPIPE; wanted EPIPE, 1\n",
			split, read_fin, e, (int)sigpipes);
		exit(1);
	}
	CHECK(send(fd, buf, sizeof buf, 0) == -1 && errno == EPIPE && sigpipes == 2);
	CHECK(recv(fd, &b, 1, 0) == 0);
	CHECK(waitpid(p, &st, 0) == p);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "split %d read_fin %d: the peer's checks failed (status %d)\n", split,
			read_fin, st);
		exit(1);
	}
	close(fd);
	close(ready[0]), close(ready[1]), close(sent[0]), close(sent[1]);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(60);
	signal(SIGPIPE, count_sigpipe);
	for (int split = 0; split < 2; split++)
		for (int read_fin = 0; read_fin < 2; read_fin++)
			one(&ss, len, l, split, read_fin);
	close(l);
	return 0;
}
