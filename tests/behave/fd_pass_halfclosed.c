/* Description: a connection whose client sent its whole request and shut
 * its sending half (shutdown(SHUT_WR): `nc -N`, an HTTP/1.0 client, a
 * pipe into a socket) before the server read it, passed to a worker
 * (SCM_RIGHTS, as node's cluster module and pre-fork masters do as soon as
 * they accept): the worker reads every byte of the request and its end,
 * answers, and the client reads the answer and a clean EOF - on TCP the
 * request simply waits in the socket for whoever holds it.  The master
 * reads 3 bytes first (the pass is at an exact byte) and passes once the
 * request and its end are all there.  And the other way round: on a
 * second connection the master says "bye" and shuts its own sending half,
 * then passes it to a second worker; the client reads "bye" and the end,
 * then sends its last words and shuts down: the second worker reads them
 * and their end, and finds the socket's sending half shut (EPIPE) - the
 * client closes once the pass is made (below).
 * Under shunt the connection is accelerated before the pass and
 * plain TCP after it, reason 23 (fd-passed).  (Before: the client's
 * shutdown sent the kernel's FIN at once, so its unread bytes could not
 * follow onto the socket; the pass went ahead with a warning and the
 * worker read an empty request.)  Over RDMA likewise: the peer's FIN waits
 * after its closing word while we have not read all it sent. */
#include "common.h"

#define REQ 40000u /* within the kernel's first receive window */
#define ANS (1u << 20)

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), u[2], v[2];
	static char buf[1 << 16];

	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, v) == 0);
	pid_t second = fork();
	if (!second) { /* the second connection: the client's last words */
		close(l);
		int fd = recv_fd(v[1]);
		expect_pattern(fd, 4096, 7);
		CHECK(read(fd, buf, 1) == 0);
		CHECK(write(fd, "x", 1) == -1 && errno == EPIPE);
		close(fd);
		_exit(0);
	}
	pid_t worker = fork();
	if (!worker) {
		close(u[0]);
		close(v[0]);
		close(l);
		int fd = recv_fd(u[1]);
		/* the rest of the request, and the client's end */
		CHECK(read_pattern_from_to_eof(fd, 3, 1) == REQ - 3);
		write_pattern(fd, ANS, 3);
		close(fd);
		_exit(0);
	}
	pid_t master = fork();
	if (!master) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, buf, 3);
		CHECK(pattern(0, 1) == (uint8_t)buf[0] && pattern(2, 1) == (uint8_t)buf[2]);
		await_unread_end(c, (int)REQ - 3);
		send_fd(u[0], c);
		expect_passed(c);
		close(c);
		c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		/* not before the client looked at its mode: the pass moves it */
		read_all(c, buf, 1);
		CHECK(buf[0] == 'g');
		write_all(c, "bye", 3);
		CHECK(shutdown(c, SHUT_WR) == 0);
		send_fd(v[0], c);
		expect_passed(c);
		close(c);
		_exit(0);
	}
	close(u[0]);
	close(u[1]);
	close(v[0]);
	close(v[1]);
	int cfd = connect_to(&ss, len);
	expect_mode(cfd);
	write_pattern(cfd, REQ, 1);
	CHECK(shutdown(cfd, SHUT_WR) == 0);
	expect_pattern(cfd, ANS, 3);
	CHECK(read(cfd, buf, 1) == 0);
	CHECK(write(cfd, "y", 1) == -1 && errno == EPIPE); /* shut: as TCP's */
	expect_passed(cfd);
	close(cfd);
	cfd = connect_to(&ss, len);
	expect_mode(cfd);
	write_all(cfd, "g", 1);
	read_all(cfd, buf, 3);
	CHECK(!memcmp(buf, "bye", 3));
	CHECK(read(cfd, buf, 1) == 0);
	write_pattern(cfd, 4096, 7); /* the last words, after the server's end */
	CHECK(shutdown(cfd, SHUT_WR) == 0);
	CHECK(read(cfd, buf, 1) == 0);
	/* Under shunt the client stays until the master passed it: a peer
	 * that closes first, its last words unread, leaves nobody to resend
	 * them on the socket (docs/architecture.md, "Known limits": the
	 * master warns; the worker read its end alone in 4-17% of runs on a
	 * loaded host).  Its reads go on saying the end meanwhile. */
	for (int i = 0; getenv("SHUNT_EXPECT") && sock_info(cfd).mode != 0; i++) { /* until moved */
		CHECK(i < 10000);
		usleep(1000);
		CHECK(read(cfd, buf, 1) == 0);
	}
	close(cfd);
	CHECK(wait_child(master) == 0);
	CHECK(wait_child(worker) == 0);
	CHECK(wait_child(second) == 0);
	return 0;
}
