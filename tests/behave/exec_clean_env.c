/* Description: a server that starts its workers with an environment of its
 * own making - dovecot's and postfix's masters pass on only what their
 * configuration imports, xinetd only a service's passenv - hands them its
 * listener, and they serve it.  Under shunt such a worker lost LD_PRELOAD
 * and SHUNT_* with the rest of the environment: it ran without shunt and
 * its clients stayed plain (peer-not-shunt), or - had it kept LD_PRELOAD
 * alone - with the default SHUNT_DIR instead of its master's.  Now an image
 * that inherits a listener (or a connection) of ours gets shunt again, and
 * the settings its parent started with that its environment lacks; a
 * listener is also registered from the new image's start, so even the
 * first client finds it.  Checked: an execve() with an empty environment
 * and a posix_spawn() with one (the worker is under shunt, each of its
 * connections accelerated from the first, bytes echoed intact); an empty
 * environment with SHUNT_DISABLE=1, the way to keep one child plain (under
 * shunt switched off: its connections plain and intact - over RDMA the
 * agent still answers the client's option on the listener's behalf, and
 * the worker must decline the PROPOSAL that follows, not read it as
 * data); and an exec that inherits nothing of ours (the listener
 * close-on-exec: an sshd's login session) keeps the environment it was
 * given.  NOT_SPLIT_OVER_RDMA: the worker tells the test over a socket
 * pair whether shunt is loaded - one host (the single-guest RDMA suite
 * runs it). */
#include "common.h"
#include <spawn.h>

#define CONNS 5
#define SIZE 100000

enum { EXECVE, SPAWN, DISABLED, NOTHING };
static const char *names[] = { "execve, empty environment", "posix_spawn, empty environment",
			       "execve, SHUNT_DISABLE=1 alone", "execve, nothing inherited" };

/* The worker (the new image): says whether shunt is loaded, then echoes
 * CONNS connections of SIZE bytes each (none if it inherited nothing). */
static int worker(int l, int say, int serve)
{
	struct shunt_info si;
	socklen_t len = sizeof si;
	int t = socket(AF_INET, SOCK_STREAM, 0); /* shunt answers SHUNT_INFO on it */
	char loaded = getsockopt(t, SOL_SHUNT, SHUNT_INFO, &si, &len) == 0 ? 'y' : 'n';
	static char buf[SIZE];

	close(t);
	CHECK(write(say, &loaded, 1) == 1);
	for (int i = 0; serve && i < CONNS; i++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, buf, SIZE);
		write_all(c, buf, SIZE);
		close(c);
	}
	return 0;
}

static pid_t start(int mode, int l, int say)
{
	char lfd[16], sfd[16], serve[2] = { mode == NOTHING ? '0' : '1', 0 };
	char *argv[] = { "exec_clean_env", "worker", lfd, sfd, serve, NULL };
	char *empty[] = { NULL }, *disabled[] = { "SHUNT_DISABLE=1", NULL };
	pid_t p;

	snprintf(lfd, sizeof lfd, "%d", l);
	snprintf(sfd, sizeof sfd, "%d", say);
	if (mode == SPAWN) {
		CHECK(posix_spawn(&p, "/proc/self/exe", NULL, NULL, argv, empty) == 0);
		return p;
	}
	CHECK((p = test_fork()) >= 0);
	if (!p) {
		if (mode == NOTHING)
			CHECK(fcntl(l, F_SETFD, FD_CLOEXEC) == 0);
		execve("/proc/self/exe", argv, mode == DISABLED ? disabled : empty);
		_exit(127);
	}
	return p;
}

static void run(int mode)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), sp[2];
	const char *want = getenv("SHUNT_EXPECT");
	char loaded;
	pid_t p;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	p = start(mode, l, sp[1]);
	close(sp[1]);
	close(l);
	CHECK(read(sp[0], &loaded, 1) == 1);
	close(sp[0]);
	fprintf(stderr, "%s: worker %s shunt\n", names[mode], loaded == 'y' ? "under" : "without");
	if (want) /* under shunt: the worker follows exactly when it should */
		CHECK((loaded == 'y') == (mode != NOTHING));
	else
		CHECK(loaded == 'n');
	for (int i = 0; mode != NOTHING && i < CONNS; i++) {
		int fd = connect_to(&ss, len);
		struct shunt_info si;

		write_pattern(fd, SIZE, (uint32_t)i);
		expect_pattern(fd, SIZE, (uint32_t)i);
		if (want && mode == DISABLED) {
			si = sock_info(fd);
			CHECK(si.mode == 0);
		} else {
			expect_mode(fd); /* from the first connection on */
		}
		close(fd);
	}
	CHECK(wait_child(p) == 0);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "worker"))
		return worker(atoi(argv[2]), atoi(argv[3]), argv[4][0] == '1');
	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	for (int mode = EXECVE; mode <= NOTHING; mode++)
		run(mode);
	return 0;
}
