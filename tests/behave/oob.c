/* Description: urgent data (MSG_OOB) behaves as TCP's.  telnet and FTP
 * send their interrupts with it, and Java's Socket.sendUrgentData is a
 * common "is the peer still there" probe; shunt used to fail such a send
 * with EOPNOTSUPP (the probe then declared a live connection dead).  Now
 * the sender's connection moves to TCP at the exact byte and the urgent
 * byte goes on the socket.  Checked both ways, against the kernel's own
 * answers: recv(MSG_OOB) with nothing urgent (EINVAL), poll's POLLPRI,
 * select's exceptfds, SIGURG to the F_SETOWN owner, SIOCATMARK before and
 * at the mark, the stream without the urgent byte, then with SO_OOBINLINE
 * (epoll's EPOLLPRI), bulk data both ways after it, and an urgent byte
 * sent first thing after connect(). */
#include "common.h"
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>

#define BULK (300 * 1024)

static volatile sig_atomic_t urgs;

static void on_urg(int sig)
{
	(void)sig;
	urgs++;
}

static int at_mark(int fd)
{
	int m = -1;

	CHECK(ioctl(fd, SIOCATMARK, &m) == 0);
	return m;
}

static void expect_text(int fd, const char *want)
{
	size_t n = strlen(want);
	char got[64] = { 0 };

	read_all(fd, got, n);
	if (memcmp(got, want, n)) {
		fprintf(stderr, "read '%.*s', wanted '%s'\n", (int)n, got, want);
		exit(1);
	}
}

/* Waits for urgent data on fd: poll's POLLPRI, then select's exceptfds. */
static void wait_urgent(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLPRI };
	struct timeval tv = { 0, 0 };
	fd_set ex;

	int r;

	/* SIGURG may come first: the kernel signals an urgent pointer as it
	 * arrives, possibly ahead of the byte (a segment queued before the
	 * send(MSG_OOB) carries the pointer), and a poll with nothing ready
	 * then says EINTR - on plain TCP too; a program polls again */
	while ((r = poll(&p, 1, 10000)) < 0 && errno == EINTR)
		;
	CHECK(r == 1 && (p.revents & POLLPRI));
	do {
		FD_ZERO(&ex);
		FD_SET(fd, &ex);
	} while ((r = select(fd + 1, NULL, NULL, &ex, &tv)) < 0 && errno == EINTR);
	CHECK(r == 1 && FD_ISSET(fd, &ex));
}

static void server(int l)
{
	int c = accept(l, NULL, NULL), one = 1, ep;
	char b;
	struct epoll_event ev = { .events = EPOLLPRI };

	CHECK(c >= 0);
	expect_mode_peer_forks(c);
	/* nothing urgent yet: the kernel's answers */
	errno = 0;
	CHECK(recv(c, &b, 1, MSG_OOB | MSG_DONTWAIT) == -1 && errno == EINVAL);
	struct pollfd p = { .fd = c, .events = POLLPRI };
	CHECK(poll(&p, 1, 0) == 0);
	CHECK(at_mark(c) == 0);
	CHECK(signal(SIGURG, on_urg) != SIG_ERR);
	CHECK(fcntl(c, F_SETOWN, getpid()) == 0);
	write_all(c, "g", 1);

	/* "abc", urgent "!", "def" */
	wait_urgent(c);
	CHECK(at_mark(c) == 0); /* "abc" comes first */
	CHECK(recv(c, &b, 1, MSG_OOB) == 1 && b == '!');
	expect_text(c, "abc");
	CHECK(at_mark(c) == 1);
	expect_text(c, "def");
	CHECK(at_mark(c) == 0);
	for (int i = 0; i < 1000 && !urgs; i++)
		usleep(1000);
	CHECK(urgs >= 1);
	expect_pattern(c, BULK, 7);
	write_pattern(c, BULK, 8);
	expect_plain_now(c, "urgent data");
	/* our own urgent byte, the other way */
	CHECK(send(c, "Z", 1, MSG_OOB) == 1);
	write_all(c, "tail", 4);
	expect_plain_now(c, "urgent data");
	read_all(c, &b, 1); /* the client is done with it */
	close(c);

	/* SO_OOBINLINE: the urgent byte stays in the stream, at its mark */
	c = accept(l, NULL, NULL);
	CHECK(c >= 0);
	expect_mode_peer_forks(c);
	CHECK(setsockopt(c, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one) == 0);
	CHECK((ep = epoll_create1(0)) >= 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
	write_all(c, "g", 1);
	CHECK(epoll_wait(ep, &ev, 1, 10000) == 1 && (ev.events & EPOLLPRI));
	CHECK(at_mark(c) == 0);
	expect_text(c, "abc");
	CHECK(at_mark(c) == 1);
	expect_text(c, "!def");
	expect_pattern(c, BULK, 9);
	write_all(c, "k", 1);
	close(ep);
	close(c);

	/* the urgent byte the client's first send, right after its connect(),
	 * while this server calls nothing on the connection for 6 s (over
	 * RDMA the sender's move waited for our answer, which a server whose
	 * accept() had not read the client's CONFIRM - two hosts - gives at
	 * its first call: EOPNOTSUPP after 5 s, forty-third session) */
	c = accept(l, NULL, NULL);
	CHECK(c >= 0);
	sleep(6);
	wait_urgent(c);
	CHECK(recv(c, &b, 1, MSG_OOB) == 1 && b == '?');
	expect_text(c, "xyz");
	write_all(c, "m", 1);
	close(c);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd;
	char b;
	pid_t p;

	deadline(90);
	p = test_fork();
	if (!p)
		server(l);
	close(l);

	fd = connect_to(&ss, len);
	expect_mode(fd);
	read_all(fd, &b, 1); /* the server looked: nothing urgent */
	write_all(fd, "abc", 3);
	CHECK(send(fd, "!", 1, MSG_OOB) == 1);
	expect_plain_now(fd, "urgent data");
	write_all(fd, "def", 3);
	write_pattern(fd, BULK, 7);
	expect_pattern(fd, BULK, 8);
	/* the server's urgent byte: POLLPRI, then the byte, the stream without it */
	wait_urgent(fd);
	CHECK(recv(fd, &b, 1, MSG_OOB) == 1 && b == 'Z');
	expect_text(fd, "tail");
	write_all(fd, "d", 1);
	close(fd);

	/* Java's sendUrgentData probe before a request, to an OOBINLINE reader */
	fd = connect_to(&ss, len);
	expect_mode(fd);
	read_all(fd, &b, 1);
	write_all(fd, "abc", 3);
	CHECK(send(fd, "!", 1, MSG_OOB) == 1);
	write_all(fd, "def", 3);
	write_pattern(fd, BULK, 9);
	read_all(fd, &b, 1);
	CHECK(b == 'k');
	close(fd);

	/* urgent data first thing, to a server that calls nothing yet: TCP's
	 * send does not wait for it */
	fd = connect_to(&ss, len);
	double t0 = now_s();
	CHECK(send(fd, "?", 1, MSG_OOB) == 1);
	write_all(fd, "xyz", 3);
	CHECK(now_s() - t0 < 3);
	read_all(fd, &b, 1);
	CHECK(b == 'm');
	close(fd);
	CHECK(wait_child(p) == 0);
	return 0;
}
