/* Description: a server whose accept()s may come past shunt gets its
 * client's bytes and nothing else: one that goes into a seccomp sandbox
 * after listen(), one that sets up io_uring and accepts through it
 * (IORING_OP_ACCEPT), one that sets up io_uring, accepts with accept() and
 * speaks first, and a statically linked image (it cannot load shunt) exec'd
 * with the listener as its stdin, as inetd's wait-mode services are, or at
 * descriptor 3 named by LISTEN_FDS, as systemd's socket activation.  Each
 * reads its client's message to the end and hands it back over a pipe.
 * With the agent (tests/integration/agent.sh runs this in its cgroup with
 * SHUNT_LOCAL=0; the RDMA suite's guest has it everywhere) the kernel went
 * on answering shunt's option in such a listener's SYN-ACKs, each client
 * sent its in-band PROPOSAL, and the program read those 100 bytes
 * ("SHNT...") as the start of its data.  Now a process that goes off that
 * way, or that execs an image which will not load shunt, has the agent stop
 * answering for the listener (src/agent/sockops.bpf.c, shunt_off), and an
 * accept() through shunt waits for no PROPOSAL then (the greeting of the
 * server that speaks first: median under 15 ms; the wait was 20 ms).
 * NOT_SPLIT_OVER_RDMA: the servers hand what they read to the test over
 * pipes. */
#include "common.h"
#include <libgen.h>
#include "uring.h"
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#define MSG 3000
#define GREETINGS 5

enum { SECCOMP, URING_ACCEPT, URING_THEN_ACCEPT, EXEC_STATIC, EXEC_LISTEN_FDS, MODES };
static const char *const names[MODES] = { "seccomp sandbox", "io_uring accept", "io_uring, then accept()",
					  "static image exec'd", "static image, LISTEN_FDS" };
static char static_accept[4096];

/* A filter that allows every call: what matters is that one went in. */
static void sandbox(void)
{
	struct sock_filter f[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog p = { 1, f };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p) == 0);
}

static int ring_accept(struct io_uring *r, int l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);

	CHECK(sqe);
	io_uring_prep_accept(sqe, l, NULL, NULL, 0);
	return uring_one(r);
}

/* What the connection carried, to its end, into the pipe. */
static void to_pipe(int c, int out)
{
	char b[4096];
	ssize_t n;

	while ((n = read(c, b, sizeof b)) > 0)
		write_all(out, b, (size_t)n);
	CHECK(n == 0);
}

/* The server, in a child: set up as `mode` says after listen(), then
 * serve `conns` connections.  ready (close-on-exec) closes once it is set
 * up: a connection made before would have been answered while the
 * listener was still only ours. */
static void server(int mode, int l, int out, int ready, int conns)
{
	struct io_uring r;

	if (mode == EXEC_STATIC) {
		CHECK(dup2(l, 0) == 0 && dup2(out, 1) == 1);
		execl(static_accept, "static_accept", (char *)NULL);
		_exit(127);
	}
	if (mode == EXEC_LISTEN_FDS) { /* systemd's socket activation: from 3 on */
		if (ready == 3) /* (it must close only at the exec) */
			CHECK((ready = fcntl(3, F_DUPFD_CLOEXEC, 4)) > 3 && close(3) == 0);
		CHECK(dup2(out, 1) == 1);
		CHECK(l == 3 || dup2(l, 3) == 3);
		CHECK(setenv("LISTEN_FDS", "1", 1) == 0);
		execl(static_accept, "static_accept", "3", (char *)NULL);
		_exit(127);
	}
	if (mode == SECCOMP)
		sandbox();
	else
		CHECK(io_uring_queue_init(4, &r, 0) == 0);
	close(ready);
	for (int i = 0; i < conns; i++) {
		int c = mode == URING_ACCEPT ? ring_accept(&r, l) : accept(l, NULL, NULL);
		CHECK(c >= 0);
		if (mode == URING_THEN_ACCEPT)
			write_all(c, "hi\n", 3);
		to_pipe(c, out);
		close(c);
	}
	_exit(0);
}

/* The message's length of what the server read, as the client wrote it
 * (the bytes past it: expect_nothing_more). */
static void expect_message(int in, uint32_t seed, const char *what)
{
	uint8_t b[MSG];

	read_all(in, b, MSG);
	for (size_t i = 0; i < MSG; i++)
		if (b[i] != pattern(i, seed)) {
			fprintf(stderr, "%s: byte %zu differs; the server read \"%.4s...\"\n", what, i, (char *)b);
			exit(1);
		}
}

static void expect_nothing_more(int in, const char *what)
{
	char b[256];
	ssize_t n = read(in, b, sizeof b);

	if (n != 0) {
		fprintf(stderr, "%s: the server read %zd bytes more than its clients wrote\n", what, n);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	char self[4096];

	(void)argc;
	snprintf(self, sizeof self, "%s", argv[0]);
	snprintf(static_accept, sizeof static_accept, "%s/../tools/static_accept", dirname(self));
	for (int mode = 0; mode < MODES; mode++) {
		int conns = mode == URING_THEN_ACCEPT ? GREETINGS : 1, pp[2], rp[2], l;
		double took[GREETINGS];
		struct sockaddr_storage ss;
		socklen_t len;
		char c;
		pid_t p;

		CHECK(pipe(pp) == 0 && pipe2(rp, O_CLOEXEC) == 0);
		l = listen_on("127.0.0.1", &ss, &len);
		CHECK((p = fork()) >= 0);
		if (!p) {
			close(pp[0]);
			close(rp[0]);
			server(mode, l, pp[1], rp[1], conns);
		}
		close(l);
		close(pp[1]);
		close(rp[1]);
		CHECK(read(rp[0], &c, 1) == 0); /* set up (or exec'd) */
		close(rp[0]);
		for (int i = 0; i < conns; i++) {
			int fd = connect_to(&ss, len);
			char hi[3], end;
			double t0 = now_s();
			if (mode == URING_THEN_ACCEPT) {
				read_all(fd, hi, 3);
				took[i] = now_s() - t0;
				CHECK(!memcmp(hi, "hi\n", 3));
			}
			write_pattern(fd, MSG, (uint32_t)(mode * 16 + i));
			CHECK(shutdown(fd, SHUT_WR) == 0);
			CHECK(read(fd, &end, 1) == 0);
			close(fd);
			expect_message(pp[0], (uint32_t)(mode * 16 + i), names[mode]);
		}
		expect_nothing_more(pp[0], names[mode]);
		close(pp[0]);
		CHECK(wait_child(p) == 0);
		if (mode == URING_THEN_ACCEPT) {
			double median = sort_median(took, GREETINGS);
			printf("%s: greeting after %.1f ms (median)\n", names[mode], median * 1e3);
			CHECK(median < 0.015);
		}
		printf("%s: the client's %d bytes, nothing else\n", names[mode], MSG);
	}
	return 0;
}
