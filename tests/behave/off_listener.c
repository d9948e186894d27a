/* Description: a server that, after it began to listen, set up io_uring,
 * chrooted (dovecot's login processes chroot; OpenSSH's privilege
 * separation too) or dropped root for good with a private rendezvous
 * directory (postfix's smtpd: registered as root from its master's
 * listener, serving as postfix) serves its connections as TCP does: a client that
 * writes first and reads the answer gets it at once.  Under shunt such a
 * process makes every new connection plain (reasons io-uring, 22, and
 * unsafe-dir, 19: from its chroot, or as a user the directory is not
 * for, no message reaches a client); before,
 * its listener's record in the registry still drew offers, which it never
 * claimed - each client waited 200 ms for a claim (accept-timeout) - or
 * claimed and could not answer, and the client slept 20 ms on.  Now the
 * record of a listener the process registered itself (here: an exec'd
 * server, which registers its inherited listener as it starts) says the
 * process is off and clients do not offer (peer-not-shunt); and an offer
 * made all the same - a forked server, whose parent's record stays, or
 * one whose listener another process took on again since, by exec - is
 * refused at once, waking its client (handshake-failed), and the records
 * say off from then on, whoever made them: the other clients make no
 * offer (a forked worker that dropped root - nginx's, Apache's, whose
 * master registered the listener in a private directory - refused every
 * client's offer before: 0.75x TCP's rate for nginx's short connections).
 * NOT_SPLIT_OVER_RDMA: the server says over a pipe when it has gone off,
 * and the exec'd holder too - one host (the single-guest RDMA suite runs
 * it).  Four servers,
 * each ten connections, each round trip well under 100 ms (200 ms
 * before); the last one speaks first, 5 ms after its client began to
 * read: the greeting comes in under 15 ms (the median; 20 ms before: the
 * refused client slept on).  The user's drop made a 16 MB segment a
 * connection, failed to send it and fell back as handshake-failed.  The
 * chroot and the drop need root: skipped without it. */
#include "common.h"
#include <grp.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>

#define CONNS 10

enum { IO_URING, CHROOT, DROP_ROOT, REREGISTER, SERVER_FIRST, FORK_DROP };
static const char *names[] = { "io_uring", "chroot", "root dropped", "re-registered",
			       "re-registered, server first", "forked worker dropped root" };

/* 100 ms, or four times a fortieth of a raised SHUNT_ACCEPT_WAIT_MS (the
 * RDMA suite's emulated devices) */
static double limit_s(void)
{
	const char *w = getenv("SHUNT_ACCEPT_WAIT_MS");
	double slow = w ? atof(w) / 40 / 1000 * 4 : 0;

	return slow > 0.1 ? slow : 0.1;
}

/* The process goes off as the mode says: 0, or -1 if it cannot here. */
static int go_off(int mode)
{
	struct io_uring_params p;
	char dir[] = "/tmp/off_listener.XXXXXX";
	int fd;

	if (mode == DROP_ROOT || mode == FORK_DROP) { /* (the test's SHUNT_DIR: root's, 0700) */
		if (geteuid() != 0)
			return -1;
		CHECK(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0);
		return 0;
	}
	if (mode != CHROOT) {
		memset(&p, 0, sizeof p);
		fd = (int)syscall(SYS_io_uring_setup, 4, &p);
		return fd >= 0 ? 0 : -1; /* (no io_uring here: skipped) */
	}
	if (geteuid() != 0 || !mkdtemp(dir))
		return -1;
	if (chroot(dir)) {
		rmdir(dir);
		return -1;
	}
	CHECK(chdir("/") == 0);
	return 0;
}

/* The accepting server: off, then CONNS echoes of four bytes. */
static void server(int l, int mode, int ready)
{
	char b[4], ok = go_off(mode) ? 'n' : 'y';

	CHECK(write(ready, &ok, 1) == 1);
	if (ok != 'y')
		_exit(0);
	for (int i = 0; i < CONNS; i++) {
		int c;
		if (mode == SERVER_FIRST) /* its client reads first: asleep by now */
			usleep(5000);
		CHECK((c = accept(l, NULL, NULL)) >= 0);
		if (mode == SERVER_FIRST)
			write_all(c, "helo", 4);
		read_all(c, b, 4);
		if (mode != SERVER_FIRST)
			write_all(c, b, 4);
		CHECK(read(c, b, 1) == 0);
		if (i == 0 && getenv("SHUNT_EXPECT")) {
			struct shunt_info si = sock_info(c);
			unsigned want = mode == CHROOT || mode == DROP_ROOT || mode == FORK_DROP ? 19 : 22;
			if (si.mode != 0 || si.reason != want) {
				fprintf(stderr, "%s server: mode %u reason %u, wanted plain, reason %u\n",
					names[mode], si.mode, si.reason, want);
				_exit(1);
			}
		}
		close(c);
	}
	_exit(0);
}

/* A process that takes the listener on again (an exec: the new image
 * registers it at its start) and never accepts: its clients offer, and
 * the off server takes their connections. */
static pid_t reregister(int l)
{
	int pfd[2];
	char fdarg[16], pipearg[16], c;
	pid_t p;

	CHECK(pipe(pfd) == 0);
	CHECK((p = test_fork()) >= 0);
	if (!p) {
		close(pfd[0]);
		snprintf(fdarg, sizeof fdarg, "%d", l);
		snprintf(pipearg, sizeof pipearg, "%d", pfd[1]);
		execl("/proc/self/exe", "off_listener", "hold", fdarg, pipearg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &c, 1) == 1);
	close(pfd[0]);
	return p;
}

/* The new image of reregister(): says it holds the listener, then waits. */
static int hold(int l, int say)
{
	int on = 0;
	socklen_t len = sizeof on;

	CHECK(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on);
	CHECK(write(say, "h", 1) == 1);
	pause();
	return 0;
}

static int run(int mode)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), pfd[2];
	pid_t srv, holder = 0;
	double worst = 0, took[CONNS];
	unsigned last = 0;
	char ok;

	CHECK(pipe(pfd) == 0);
	CHECK((srv = test_fork()) >= 0);
	if (!srv) {
		char m[8], lfd[16], rfd[16];
		close(pfd[0]);
		if (mode >= REREGISTER) /* forked: its parent's record stays */
			server(l, mode, pfd[1]);
		snprintf(m, sizeof m, "%d", mode);
		snprintf(lfd, sizeof lfd, "%d", l);
		snprintf(rfd, sizeof rfd, "%d", pfd[1]);
		execl("/proc/self/exe", "off_listener", "serve", m, lfd, rfd, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &ok, 1) == 1);
	close(pfd[0]);
	if (ok != 'y') {
		fprintf(stderr, "%s: cannot go off here (no io_uring, or not root): skipped\n", names[mode]);
		close(l);
		return wait_child(srv);
	}
	if (mode == REREGISTER || mode == SERVER_FIRST)
		holder = reregister(l);
	close(l);
	for (int i = 0; i < CONNS; i++) {
		int fd = socket(ss.ss_family, SOCK_STREAM, 0);
		double t = now_s();
		char b[4];

		CHECK(fd >= 0);
		CHECK(connect(fd, (void *)&ss, len) == 0);
		if (mode == SERVER_FIRST) {
			read_all(fd, b, 4);
			CHECK(!memcmp(b, "helo", 4));
		}
		write_all(fd, "ping", 4);
		if (mode != SERVER_FIRST) {
			read_all(fd, b, 4);
			CHECK(!memcmp(b, "ping", 4));
		}
		t = now_s() - t;
		worst = t > worst ? t : worst;
		took[i] = t;
		if (i == 0) {
			struct shunt_info si = sock_info(fd);
			const char *want = getenv("SHUNT_EXPECT");
			fprintf(stderr, "%s: client %s, reason %u, %.1f ms\n", names[mode], mode_name(si.mode),
				si.reason, t * 1e3);
			if (want)
				CHECK(si.mode == 0);
			/* no offer (the record says off), or one refused */
			if (want && !strcmp(want, "shm"))
				CHECK(si.reason == (mode < REREGISTER ? 1u : 4u));
		}
		if (i == CONNS - 1)
			last = sock_info(fd).reason;
		close(fd);
	}
	fprintf(stderr, "%s: slowest round trip %.1f ms\n", names[mode], worst * 1e3);
	if (holder) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
	}
	CHECK(wait_child(srv) == 0);
	/* once refused, the records say off whoever made them: the other
	 * clients make no offer (before, each was refused) */
	if (getenv("SHUNT_EXPECT") && !strcmp(getenv("SHUNT_EXPECT"), "shm") && last != 1) {
		fprintf(stderr, "%s: the last client: reason %u, wanted 1 (no offer)\n", names[mode], last);
		return 1;
	}
	if (worst >= limit_s()) {
		fprintf(stderr, "%s: a round trip took %.0f ms\n", names[mode], worst * 1e3);
		return 1;
	}
	/* the server refuses 5 ms into its client's read, then writes: a
	 * client left asleep woke at its 20 ms (the median: noise aside) */
	double median = sort_median(took, CONNS);
	if (mode == SERVER_FIRST && median >= 0.015 && limit_s() <= 0.1) {
		fprintf(stderr, "%s: the greeting came %.1f ms after connect (median)\n", names[mode],
			median * 1e3);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "serve"))
		server(atoi(argv[3]), atoi(argv[2]), atoi(argv[4]));
	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	for (int mode = IO_URING; mode <= FORK_DROP; mode++)
		rc |= run(mode);
	return rc;
}
