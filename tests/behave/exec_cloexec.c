/* Description: a server whose child execs another program while it holds
 * an accelerated connection marked close-on-exec (socat's `fork EXEC:`,
 * a CGI, any accept4(SOCK_CLOEXEC) server that fork()s and exec()s a
 * helper) lets go of that connection at the exec, as the kernel closes
 * the socket there: 100 connections from one client, each answered after
 * its child exec'd, cost the server one arena (the segments come back),
 * and the client reads its reply then EOF.  A child that is the
 * connection's last holder ends it at its exec: the client's EOF comes
 * then, not when the exec'd program exits.
 *
 * Before, the forked child's share of the rings went into the exec'd image
 * with nobody to drop it: every such connection kept its segment for good
 * (socat fork EXEC:cat: 100 connections, 9 arenas, 160 MB of address
 * space, and `shunt ss` listed all of them, long gone). */
#include "common.h"

#define ROUNDS 100
#define LINGER_MS 1500

/* Arenas this process maps: distinct shunt-arena memfds in its maps. */
static int arenas_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long inos[64];
	int n = 0;

	CHECK(f != NULL);
	while (fgets(line, sizeof line, f)) {
		unsigned long ino;
		int seen = 0;
		if (!strstr(line, "memfd:shunt-arena") || sscanf(line, "%*s %*s %*s %*s %lu", &ino) != 1)
			continue;
		for (int i = 0; i < n; i++)
			seen |= inos[i] == ino;
		if (!seen && n < 64)
			inos[n++] = ino;
	}
	fclose(f);
	return n;
}

static void exec_self(char **argv, const char *what)
{
	execl("/proc/self/exe", argv[0], what, (char *)NULL);
	_exit(99);
}

static void server(int l, char **argv)
{
	char b;
	int st;

	for (int i = 0; i < ROUNDS; i++) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		CHECK(c >= 0);
		expect_mode(c);
		CHECK(read(c, &b, 1) == 1);
		pid_t p = fork();
		if (!p)
			exec_self(argv, "quiet");
		CHECK(p > 0 && waitpid(p, &st, 0) == p);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		write_all(c, "ok", 2);
		CHECK(close(c) == 0);
	}
	if (getenv("SHUNT_EXPECT")) {
		int n = arenas_mapped();
		if (n > 1)
			fprintf(stderr, "server: %d arenas for one client's %d connections\n", n, ROUNDS);
		CHECK(n <= 1);
	}
	/* the last holder execs: its exec ends the connection */
	int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	CHECK(c >= 0);
	CHECK(read(c, &b, 1) == 1);
	write_all(c, "ok", 2);
	pid_t p = fork();
	if (!p) {
		usleep(100000);
		exec_self(argv, "linger");
	}
	CHECK(close(c) == 0);
	CHECK(p > 0 && waitpid(p, &st, 0) == p);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char buf[4];
	int st;

	if (argc == 2 && !strcmp(argv[1], "quiet"))
		return 0;
	if (argc == 2 && !strcmp(argv[1], "linger")) {
		usleep(LINGER_MS * 1000);
		return 0;
	}
	int l = listen_on("127.0.0.1", &ss, &len);
	deadline(60);
	pid_t pid = fork();
	if (!pid) {
		server(l, argv);
		_exit(0);
	}
	close(l);
	for (int i = 0; i < ROUNDS + 1; i++) {
		int fd = connect_to(&ss, len);
		expect_mode(fd);
		write_all(fd, "q", 1);
		double t0 = now_s();
		read_all(fd, buf, 2);
		CHECK(!memcmp(buf, "ok", 2));
		CHECK(read(fd, buf, 1) == 0);
		if (i == ROUNDS) { /* before the exec'd program ended */
			double t = now_s() - t0;
			if (t > LINGER_MS / 1000.0 * 0.8)
				fprintf(stderr, "client: EOF after %.3f s\n", t);
			CHECK(t < LINGER_MS / 1000.0 * 0.8);
		}
		CHECK(close(fd) == 0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}
