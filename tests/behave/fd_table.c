/* Description: under a large RLIMIT_NOFILE - containers get 1,048,576
 * (Docker's and Kubernetes' default), systemd services often as much - a
 * process with accelerated connections keeps the kernel's descriptor table
 * as small as its numbers need: no more than 1,024 slots here, where TCP's
 * table has 64 (FDSize in /proc/self/status).
 *
 * shunt's own descriptors (an arena's memory and doorbells, a thread's
 * doorbell set, the rendezvous directory) sat above half of the limit, and
 * the kernel sizes a table to its highest number rounded up to a power of
 * two: under 1,048,576 every such process held a table of 1,048,576 slots
 * (8 MiB of kernel memory, charged to its cgroup), which each fork copied -
 * 28-39 ms a fork in the test guest against 1.1-1.2 ms.  The program
 * re-executes itself with its soft limit raised to the hard one (shunt
 * reads it as it loads), makes 40 connections (two arenas), polls them from
 * a second thread, forks a child that uses them, and reads the table's size
 * in the client, its child and the server. */
#include "common.h"
#include <sys/resource.h>

#define CONNS 40
#define MAX_SLOTS 1024

static int fd_slots(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	int n = -1;

	CHECK(f != NULL);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "FDSize: %d", &n) == 1)
			break;
	fclose(f);
	CHECK(n > 0);
	return n;
}

static void expect_small_table(const char *who)
{
	int n = fd_slots();

	if (n > MAX_SLOTS)
		fprintf(stderr, "%s: the descriptor table has %d slots (at most %d expected)\n", who, n,
			MAX_SLOTS);
	CHECK(n <= MAX_SLOTS);
}

static void serve(int l)
{
	int c[CONNS];

	for (int i = 0; i < CONNS; i++) {
		CHECK((c[i] = accept(l, NULL, NULL)) >= 0);
		expect_mode(c[i]);
	}
	echo_each(c, CONNS); /* a byte back on each */
	expect_small_table("server");
	for (int i = 0; i < CONNS; i++) {
		char b;
		CHECK(read(c[i], &b, 1) == 0);
		close(c[i]);
	}
	_exit(0);
}

static int fds[CONNS];

/* a second thread waits in poll() on every connection (its doorbell set) */
static void *poller(void *arg)
{
	struct pollfd p[CONNS];
	int ready = 0;

	(void)arg;
	for (int i = 0; i < CONNS; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	while (ready < CONNS) {
		CHECK(poll(p, CONNS, 10000) > 0);
		for (int i = 0; i < CONNS; i++)
			if (p[i].revents & POLLIN) {
				ready++;
				p[i].fd = -1;
			}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct rlimit rl;
	pthread_t t;
	pid_t server, child;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (argc < 2) { /* the limit first, then shunt reads it as it loads */
		if (rl.rlim_max < 4 * MAX_SLOTS)
			return 77;
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		execl("/proc/self/exe", argv[0], "again", (char *)NULL);
		CHECK(!"exec");
	}
	fprintf(stderr, "RLIMIT_NOFILE %llu\n", (unsigned long long)rl.rlim_cur);
	server = serve_in_child(serve, &ss, &len);
	for (int i = 0; i < CONNS; i++) {
		fds[i] = connect_to(&ss, len);
		expect_mode(fds[i]);
	}
	CHECK(pthread_create(&t, NULL, poller, NULL) == 0);
	for (int i = 0; i < CONNS; i++) {
		char c = (char)('a' + i % 26);
		write_all(fds[i], &c, 1);
	}
	CHECK(pthread_join(t, NULL) == 0);
	for (int i = 0; i < CONNS; i++) {
		char c;
		read_all(fds[i], &c, 1);
		CHECK(c == (char)('a' + i % 26));
	}
	expect_small_table("client");
	CHECK((child = fork()) >= 0);
	if (!child) { /* a forked child holds the same table's copy */
		expect_small_table("child");
		_exit(0);
	}
	int st;
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < CONNS; i++)
		CHECK(shutdown(fds[i], SHUT_WR) == 0);
	CHECK(wait_child(server) == 0);
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
	return 0;
}
