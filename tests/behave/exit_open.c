/* Description: a process that ends with its connections open - the
 * kernel closes them, as PostgreSQL's backends and many forked servers
 * leave it to - ends them as TCP does: read to the end, the peer reads
 * EOF; with bytes unread, a reset (ECONNRESET, then EPIPE); by exit() or
 * _exit(), alone or with another thread asleep in recv() on the
 * connection (which must not keep the end from the peer or hang the
 * exit), or at the moment the server's parent closes its copy (two
 * closes at once: the last decides).  Under shunt a process ending alone
 * closes its shared-memory connections as close() would, its share of
 * the rings let go (the segment is taken again:
 * tests/behave/fork_arena_reuse); with other threads alive they stay held
 * and the kernel's close of the socket tells the peer.  Of two holders
 * closing at once, the one that looks at the ring for bytes unread must be
 * the last: both saw the other still holding it and neither said the
 * reset - the peer read EOF, in about 1 run in 100 with a core busy.
 * tests/integration/close_race.sh runs this with every close held inside
 * that window (the fault build's SHUNT_FAULT_CLOSE_MS). */
#include <pthread.h>
#include "common.h"

enum how { EXIT_READ, EXIT_UNREAD, UNDERSCORE_UNREAD, THREAD_ASLEEP, RACE_READ, RACE_UNREAD, NCASES };
#define ROUNDS 4 /* of every case: the races' windows are narrow */

static void *sleeper(void *arg)
{
	char b;

	(void)recv(*(int *)arg, &b, 1, 0); /* nothing comes: the exit ends it */
	return NULL;
}

/* The server's child for one case: reads 10 of the client's 100 bytes
 * (or all of them), then ends without closing - a race's, as soon as it
 * said so on the pipe (`say`). */
static void serve(int c, int how, int say)
{
	static int fd;
	char buf[100];
	pthread_t t;

	read_all(c, buf, how == EXIT_READ || how == RACE_READ ? 100 : 10);
	if (how == THREAD_ASLEEP) {
		read_all(c, buf + 10, 90);
		fd = c;
		CHECK(pthread_create(&t, NULL, sleeper, &fd) == 0);
		usleep(50 * 1000); /* (asleep in recv by now) */
	}
	if (how == RACE_READ || how == RACE_UNREAD)
		CHECK(write(say, "r", 1) == 1);
	if (how == UNDERSCORE_UNREAD)
		_exit(0);
	exit(0);
}

/* Forks a child per connection; closes its copy at once (a race: just as
 * the child ends). */
static void server(int l)
{
	for (int r = 0; r < ROUNDS * NCASES; r++) {
		int c = accept(l, NULL, NULL), p[2], how = r % NCASES;
		char b;
		pid_t k;

		CHECK(c >= 0 && pipe(p) == 0);
		CHECK((k = fork()) >= 0);
		if (!k) {
			close(l);
			close(p[0]);
			serve(c, how, p[1]);
		}
		close(p[1]);
		if (how == RACE_READ || how == RACE_UNREAD)
			CHECK(read(p[0], &b, 1) == 1); /* the child is ending now */
		close(c);
		close(p[0]);
		CHECK(wait_child(k) == 0);
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char buf[100];
	pid_t p = serve_in_child(server, &ss, &len);

	memset(buf, 'x', sizeof buf);
	for (int r = 0; r < ROUNDS * NCASES; r++) {
		int fd = connect_to(&ss, len), i = r % NCASES;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int unread = i == EXIT_UNREAD || i == UNDERSCORE_UNREAD || i == RACE_UNREAD;
		expect_mode_peer_forks(fd);
		write_all(fd, buf, sizeof buf);
		CHECK(poll(&pf, 1, 10000) == 1);
		if (unread) {
			ssize_t n = read(fd, buf, sizeof buf);
			if (n >= 0)
				fprintf(stderr, "round %d, case %d: read returned %zd, not a reset\n", r, i, n);
			CHECK(n < 0 && errno == ECONNRESET);
			CHECK(write(fd, "y", 1) < 0 && errno == EPIPE);
		} else {
			CHECK(read(fd, buf, sizeof buf) == 0);
		}
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
