/* Description: short connections (one byte each way) to a server that
 * forks a process for each connection all work; under shunt, once the
 * port's connections are known to be short and handed to forked children
 * (the accepting process closes its copy after its fork), new ones stay
 * plain with reason fork-short (33): their set-up costs a forked child
 * more than TCP's.  Each half of the rule is then undone by what the
 * port's connections do: ones that live longer than 10 ms are accelerated
 * again, and so are those of a server that serves them itself (the
 * accepting process closes them: the same listener, taken over by a
 * process that does not fork).  Load plays no part: busy-short's mark is
 * set out of reach (SHUNT_BUSY_RUNNABLE).  BUSY_SHORT_RULE: tests/run.sh
 * leaves the rules on for this test.  NOT_OVER_RDMA: the scores are in
 * the local port's registry; over RDMA connections are decided by the
 * in-band handshake. */
#include "common.h"

static struct sockaddr_storage ss;
static socklen_t len;
static int shunt_on;

static void echo_one(int c, int arg)
{
	char b;

	(void)arg;
	if (recv(c, &b, 1, MSG_WAITALL) == 1)
		CHECK(send(c, &b, 1, 0) == 1);
	close(c);
}

/* The listener's server: forks a process for each connection, or serves
 * each itself. */
static pid_t server(int l, int forks)
{
	pid_t p = fork();

	CHECK(p >= 0);
	if (p)
		return p;
	for (;;) {
		if (forks) {
			accept_fork(l, echo_one, 0);
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		} else {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			echo_one(c, 0);
		}
	}
}

static void server_end(pid_t p)
{
	kill(p, SIGKILL);
	CHECK(waitpid(p, NULL, 0) == p);
}

/* One connection: a byte each way, its mode looked at, the server's end
 * read, then closed - at once, or after linger_ms.  Under shunt: 1 if
 * accelerated, 0 if plain with reason fork-short, and anything else fails. */
static int one(char c, int linger_ms)
{
	int fd = connect_to(&ss, len), r = 0;
	char got;

	CHECK(send(fd, &c, 1, 0) == 1);
	CHECK(recv(fd, &got, 1, MSG_WAITALL) == 1 && got == c);
	if (shunt_on) {
		struct shunt_info in = sock_info(fd);
		if (in.mode != 1 && !(in.mode == 0 && in.reason == 33)) {
			fprintf(stderr, "fd %d: mode %u reason %u\n", fd, in.mode, in.reason);
			exit(1);
		}
		r = in.mode == 1;
	}
	CHECK(recv(fd, &got, 1, 0) == 0);
	if (linger_ms)
		usleep(linger_ms * 1000);
	close(fd);
	return r;
}

/* Connections until one is accelerated (want 1) or fork-short (want 0),
 * at most max; how many it took (max + 1: none was). */
static int until(int want, int max, int linger_ms)
{
	for (int i = 1; i <= max; i++)
		if (one((char)i, linger_ms) == want)
			return i;
	return max + 1;
}

int main(int argc, char **argv)
{
	int l, accel = 0, n;
	pid_t srv;

	(void)argc;
	if (getenv("SHUNT_EXPECT") && !getenv("SHUNT_BUSY_RUNNABLE")) {
		/* read when the shim starts: set for a new image of ourselves */
		setenv("SHUNT_BUSY_RUNNABLE", "100000", 1);
		execv("/proc/self/exe", argv);
		CHECK(!"re-exec");
	}
	shunt_on = getenv("SHUNT_EXPECT") != NULL;
	deadline(100);
	signal(SIGPIPE, SIG_IGN);
	l = listen_on("127.0.0.1", &ss, &len);

	/* 1. short connections, each served by a forked child */
	srv = server(l, 1);
	for (int i = 0; i < 60; i++)
		accel += one((char)i, 0);
	fprintf(stderr, "forking server, 60 short connections: %d accelerated\n", accel);
	if (shunt_on) {
		/* learned (8 hand-offs, 16 short lives), then skipped - each
		 * connection after that plain */
		CHECK(accel >= 8 && accel < 40);
		CHECK(until(1, 10, 0) == 11);
	}

	/* 2. the same server, connections that live 120 ms (10 ms is short;
	 * ten times that while the CPUs are crowded) */
	n = until(1, 12, 120);
	fprintf(stderr, "lingering: accelerated again after %d\n", n);
	if (shunt_on)
		CHECK(n <= 12 && until(0, 5, 0) > 1); /* and the next short one too */

	/* 3. short again until skipped, then the listener served in-process */
	n = until(0, 60, 0);
	if (shunt_on)
		CHECK(n <= 60);
	server_end(srv);
	srv = server(l, 0);
	n = until(1, 12, 0);
	fprintf(stderr, "served in-process: accelerated again after %d\n", n);
	if (shunt_on) {
		CHECK(n <= 12);
		for (int i = 0; i < 20; i++)
			CHECK(one((char)i, 0) == 1);
	}
	server_end(srv);
	close(l);
	return 0;
}
