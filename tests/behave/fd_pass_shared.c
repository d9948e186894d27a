/* Description: a connection passed to another process (SCM_RIGHTS) while a
 * third process holds it too: the master accepts, forks a helper that
 * inherits the connection (as a fork for a logger or a timer does), reads
 * the first bytes of the request and passes the descriptor to a worker.
 * The worker reads the rest and answers 64 KiB; then the helper writes a
 * last line on its inherited copy and exits.  The client reads the answer,
 * the line and EOF, as over TCP.  Under shunt the pass moves the
 * connection to TCP (reason fd-passed) although the helper holds it; the
 * helper's copy follows at its write (move.c, move_follow).  Before, the
 * pass refused (EBUSY, a warning): the worker got the bare kernel socket,
 * whose request was in the rings, and waited for ever.
 * Over RDMA the helper's fork moves the connection to TCP first (reason
 * fork-exec), and the pass finds it there.  The fork comes once the
 * request's first bytes are in the master's ring, unread (peeked): a fork
 * that kept them in the region a fork shares left the pass nothing to
 * hand over (EBUSY, a warning; the worker waited for ever - one run in two
 * under load, when the client's bytes came before the fork). */
#include "common.h"

#define REQ 65536
#define ANS 65536
#define EARLY 4096 /* of the request: sent before the fork */

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), u[2], done[2], sent[2];
	static uint8_t buf[REQ > ANS ? REQ : ANS];

	deadline(30);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0 && pipe(done) == 0 && pipe(sent) == 0);
	pid_t worker = fork();
	CHECK(worker >= 0);
	if (!worker) {
		close(u[0]);
		close(l);
		close(done[0]);
		int fd = recv_fd(u[1]);
		read_all(fd, buf, REQ);
		for (size_t i = 0; i < REQ; i++)
			CHECK(buf[i] == pattern(i, 1));
		for (size_t i = 0; i < ANS; i++)
			buf[i] = pattern(i, 3);
		write_all(fd, buf, ANS);
		close(fd);
		CHECK(write(done[1], "d", 1) == 1); /* the helper's turn */
		_exit(0);
	}
	close(done[1]);
	pid_t master = fork();
	CHECK(master >= 0);
	if (!master) {
		int c = accept(l, NULL, NULL);
		char d;
		CHECK(c >= 0);
		expect_mode(c);
		/* "012" and the request's first bytes arrived, unread */
		CHECK(read(sent[0], &d, 1) == 1);
		CHECK(recv(c, buf, 3 + EARLY, MSG_PEEK | MSG_WAITALL) == 3 + EARLY);
		pid_t helper = fork();
		CHECK(helper >= 0);
		if (!helper) { /* holds the connection, unused, until the worker is done */
			close(u[0]);
			CHECK(read(done[0], &d, 1) == 1);
			write_all(c, "bye\n", 4);
			close(c);
			_exit(0);
		}
		read_all(c, buf, 3);
		CHECK(!memcmp(buf, "012", 3));
		send_fd(u[0], c);
		close(c);
		_exit(wait_child(helper));
	}
	close(u[0]);
	close(u[1]);
	close(done[0]);
	int fd = connect_to(&ss, len);
	expect_mode_peer_forks(fd);
	write_all(fd, "012", 3);
	for (size_t i = 0; i < REQ; i++)
		buf[i] = pattern(i, 1);
	write_all(fd, buf, EARLY);
	CHECK(write(sent[1], "s", 1) == 1);
	write_all(fd, buf + EARLY, REQ - EARLY);
	read_all(fd, buf, ANS);
	for (size_t i = 0; i < ANS; i++)
		CHECK(buf[i] == pattern(i, 3));
	expect_text_to_eof(fd, "bye\n", 0);
	close(fd);
	CHECK(wait_child(master) == 0);
	CHECK(wait_child(worker) == 0);
	return 0;
}
