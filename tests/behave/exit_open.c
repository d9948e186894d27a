/* Description: a process that ends with its connections open - the
 * kernel closes them, as PostgreSQL's backends and many forked servers
 * leave it to - ends them as TCP does: read to the end, the peer reads
 * EOF; with bytes unread, a reset (ECONNRESET, then EPIPE); by exit() or
 * _exit(), alone or with another thread asleep in recv() on the
 * connection (which must not keep the end from the peer or hang the
 * exit).  Under shunt a process ending alone closes its shared-memory
 * connections as close() would, its share of the rings let go (the
 * segment is taken again: tests/behave/fork_arena_reuse); with other
 * threads alive they stay held and the kernel's close of the socket tells
 * the peer. */
#include <pthread.h>
#include "common.h"

enum how { EXIT_READ, EXIT_UNREAD, UNDERSCORE_UNREAD, THREAD_ASLEEP, NCASES };

static void *sleeper(void *arg)
{
	char b;

	(void)recv(*(int *)arg, &b, 1, 0); /* nothing comes: the exit ends it */
	return NULL;
}

/* The server's child for one case: reads 10 of the client's 100 bytes
 * (or all of them), then ends without closing. */
static void serve(int c, int how)
{
	static int fd;
	char buf[100];
	pthread_t t;

	read_all(c, buf, how == EXIT_READ ? 100 : 10);
	if (how == THREAD_ASLEEP) {
		read_all(c, buf + 10, 90);
		fd = c;
		CHECK(pthread_create(&t, NULL, sleeper, &fd) == 0);
		usleep(50 * 1000); /* (asleep in recv by now) */
	}
	if (how == UNDERSCORE_UNREAD)
		_exit(0);
	exit(0);
}

static void server(int l)
{
	for (int i = 0; i < NCASES; i++)
		CHECK(wait_child(accept_fork(l, serve, i)) == 0);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[100];
	pid_t p;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	p = test_fork();
	if (!p)
		server(l);
	close(l);
	memset(buf, 'x', sizeof buf);
	for (int i = 0; i < NCASES; i++) {
		int fd = connect_to(&ss, len);
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int unread = i == EXIT_UNREAD || i == UNDERSCORE_UNREAD;
		expect_mode_peer_forks(fd);
		write_all(fd, buf, sizeof buf);
		CHECK(poll(&pf, 1, 10000) == 1);
		if (unread) {
			CHECK(read(fd, buf, sizeof buf) < 0 && errno == ECONNRESET);
			CHECK(write(fd, "y", 1) < 0 && errno == EPIPE);
		} else {
			CHECK(read(fd, buf, sizeof buf) == 0);
		}
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
