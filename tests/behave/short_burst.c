/* Description: a burst of short connections from many threads (four per
 * CPU, each connect + one byte each way + close, as a connect-per-request
 * client under load does) all work; under shunt, once the port's
 * connections are known to be short, those made while the host's run
 * queues are long stay plain (reason busy-short, 25: TCP's set-up is
 * cheaper than shunt's then, for what they carry), every other one is
 * accelerated, and a connection made alone afterwards, the CPUs free
 * again, is accelerated again (issue #13, item 10).  The rule's threshold
 * is set to 2 runnable threads a CPU (SHUNT_BUSY_RUNNABLE; the default,
 * 16, would take more threads than this test starts on a large host):
 * the burst crosses it, a lone connection does not.  BUSY_SHORT_RULE:
 * tests/run.sh leaves the rule on for this test alone.
 * NOT_OVER_RDMA: the registry's record is local; over RDMA connections
 * are decided by the in-band handshake. */
#include "common.h"

#define PER_THREAD 150
#define MAX_THREADS 64

static struct sockaddr_storage ss;
static socklen_t len;
static _Atomic int accel, busy, other;

static void tally(int fd)
{
	struct shunt_info info;
	socklen_t l = sizeof info;

	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l))
		return; /* not under shunt */
	if (info.mode == 1)
		accel++;
	else if (info.mode == 0 && info.reason == 25)
		busy++;
	else {
		fprintf(stderr, "fd %d: mode %u reason %u\n", fd, info.mode, info.reason);
		other++;
	}
}

static void *client(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++)
		echo_byte_connection(&ss, len, (char)i, tally);
	return NULL;
}

int main(int argc, char **argv)
{
	int l, n = 4 * (int)sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t t[MAX_THREADS];
	pid_t pid;

	(void)argc;
	if (getenv("SHUNT_EXPECT") && !getenv("SHUNT_BUSY_RUNNABLE")) {
		/* read when the shim starts: set for a new image of ourselves */
		setenv("SHUNT_BUSY_RUNNABLE", "2", 1);
		execv("/proc/self/exe", argv);
		CHECK(!"re-exec");
	}
	l = listen_on("127.0.0.1", &ss, &len);

	deadline(120);
	n = n < 4 ? 4 : n > MAX_THREADS ? MAX_THREADS : n;
	pid = echo_server_fork(&l, n);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, client, NULL) == 0);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "%d threads x %d connections: %d accelerated, %d busy-short, %d else\n", n,
		PER_THREAD, accel, busy, other);
	if (getenv("SHUNT_EXPECT")) {
		CHECK(other == 0 && accel + busy == n * PER_THREAD);
		CHECK(accel >= 16 && busy > 0); /* learned, then skipped */
		/* alone, afterwards: accelerated again once the CPUs are free
		 * (shunt looks at that every 10 ms; another job on this host
		 * may keep them busy a while: up to 2 s) */
		int fd = -1;
		for (int i = 0; i < 40; i++) {
			struct shunt_info info;
			socklen_t il = sizeof info;
			char c = 'x';
			usleep(50000);
			fd = connect_to(&ss, len);
			CHECK(send(fd, &c, 1, 0) == 1 && recv(fd, &c, 1, MSG_WAITALL) == 1);
			CHECK(getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &il) == 0);
			if (info.mode == 1 || i == 39)
				break;
			close(fd);
		}
		expect_mode(fd);
		close(fd);
	}
	echo_server_end(pid);
	return 0;
}
