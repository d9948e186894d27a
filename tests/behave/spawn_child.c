/* Description: a server hands accepted connections to children made with
 * posix_spawn (Rust's Command, glib, many C programs), which clones and
 * execs inside libc: a file action dup2()s the connection onto the
 * child's stdin and stdout; or the child inherits it at its own number
 * (no close-on-exec) and is told which; the child reads the request with
 * read() and answers with write(), then the server writes a last line on
 * its own copy.  A third connection, close-on-exec and named by no action,
 * stays the server's alone across a spawn.  Then system() and popen(),
 * which spawn inside libc, with the connection as the server's standard
 * output (an inetd-style service running a command).  The client gets every answer,
 * the last lines and EOF, as over TCP.  Under shunt the connections the
 * child gets move to TCP before it is spawned (reason fork-exec), the
 * third stays accelerated.  Before: the child read the bare kernel socket
 * while the request was in the rings, and waited for ever. */
#include "common.h"
#include <spawn.h>

extern char **environ;

static void child(int fd)
{
	char req[64], ans[96];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof req - 1 && (n = read(fd, req + got, 1)) == 1 && req[got] != '\n')
		got++;
	req[got] = 0;
	n = snprintf(ans, sizeof ans, "child got %s\n", req);
	write_all(fd == 0 ? 1 : fd, ans, (size_t)n);
}

int main(int argc, char **argv)
{
	deadline(30);
	if (argc == 3 && !strcmp(argv[1], "child")) {
		child(atoi(argv[2]));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "idle"))
		return 0;
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t srv = serve_forked(&l, &ss, &len);
	if (!srv) {
		for (int r = 0; r < 5; r++) {
			int c = r == 1 ? accept(l, NULL, NULL) : accept4(l, NULL, NULL, SOCK_CLOEXEC);
			char b, num[16], self[] = "/proc/self/exe";
			posix_spawn_file_actions_t fa;
			pid_t k;
			CHECK(c >= 0);
			expect_mode(c);
			CHECK(recv(c, &b, 1, MSG_PEEK) == 1); /* the request is there */
			if (r >= 3) { /* the connection as our stdout, for a command */
				char req[6];
				int out = dup(1);
				FILE *p;
				read_all(c, req, 5);
				CHECK(out >= 0 && dup2(c, 1) == 1);
				if (r == 3) {
					CHECK(system("echo command got req3") == 0);
				} else {
					CHECK((p = popen("cat", "w")) != NULL);
					CHECK(fputs("command got req4\n", p) >= 0 && pclose(p) == 0);
				}
				CHECK(dup2(out, 1) == 1 && close(out) == 0);
				write_all(c, "parent\n", 7);
				close(c);
				continue;
			}
			snprintf(num, sizeof num, "%d", r == 0 ? 0 : c);
			char *cargv[] = { self, r == 2 ? "idle" : "child", num, NULL };
			CHECK(posix_spawn_file_actions_init(&fa) == 0);
			if (r == 0)
				CHECK(posix_spawn_file_actions_adddup2(&fa, c, 0) == 0 &&
				      posix_spawn_file_actions_adddup2(&fa, c, 1) == 0);
			CHECK((r == 1 ? posix_spawnp(&k, self, &fa, NULL, cargv, environ)
				      : posix_spawn(&k, self, &fa, NULL, cargv, environ)) == 0);
			CHECK(posix_spawn_file_actions_destroy(&fa) == 0);
			CHECK(wait_child(k) == 0);
			if (r == 2) { /* the child had none of it: still ours, accelerated */
				char req[6];
				expect_mode(c);
				read_all(c, req, 5);
				write_all(c, "server got req2\n", 16);
			}
			write_all(c, "parent\n", 7);
			close(c);
		}
		_exit(0);
	}
	close(l);
	for (int r = 0; r < 5; r++) {
		int fd = connect_to(&ss, len);
		char req[8], want[64];
		expect_mode(fd);
		snprintf(req, sizeof req, "req%d\n", r);
		write_all(fd, req, 5);
		snprintf(want, sizeof want, "%s got req%d\nparent\n", r == 2 ? "server" : r >= 3 ? "command" : "child", r);
		expect_text_to_eof(fd, want, r);
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
