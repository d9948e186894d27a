/* Description: many threads connecting at once to a port whose registry
 * is new (each connect + one byte each way + close) take offer slots side
 * by side; no two connections may ever share one.  Before the fix a
 * client that had just taken a slot - its reservation time not written
 * yet, so it read as the new file's 0, or as a use 30 s ago - was judged
 * stale by another client scanning past it (the previous owner, none or a
 * process long gone, is not alive) and reaped: a third client took the
 * slot too, the two offers' answers crossed, and connections were cut at
 * their first read ("the server's answer names a segment we cannot
 * map").  Every byte must come back, no connection may end early, and
 * under shunt nearly all are accelerated (a few may stay plain: a client
 * preempted past the server's 20 ms wait for its offer, on a loaded
 * host).  tests/integration/reserve_race.sh runs it under the
 * fault-injection build, a pause after each reservation
 * (SHUNT_FAULT_RESERVE_US), where the old code failed at once.
 * NOT_OVER_RDMA: the registry is the local rendezvous. */
#include "common.h"

#define PER_THREAD 100
#define MAX_THREADS 32

static struct sockaddr_storage ss;
static socklen_t len;
static _Atomic int accel, plain;

static void tally(int fd)
{
	struct shunt_info info;
	socklen_t l = sizeof info;

	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l))
		return; /* not under shunt */
	if (info.mode == 1) {
		accel++;
	} else {
		fprintf(stderr, "fd %d: mode %u reason %u\n", fd, info.mode, info.reason);
		plain++;
	}
}

static void *client(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < PER_THREAD; i++)
		echo_byte_connection(&ss, len, (char)(id * 31 + i), tally);
	return NULL;
}

int main(void)
{
	int l = listen_on("127.0.0.1", &ss, &len), n = 4 * (int)sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t t[MAX_THREADS];
	pid_t pid;

	deadline(120);
	n = n < 8 ? 8 : n > MAX_THREADS ? MAX_THREADS : n;
	pid = echo_server_fork(&l, n);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&t[i], NULL, client, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "%d threads x %d connections: %d accelerated, %d plain\n", n, PER_THREAD, accel,
		plain);
	if (getenv("SHUNT_EXPECT"))
		CHECK(accel + plain == n * PER_THREAD && plain * 20 <= n * PER_THREAD);
	echo_server_end(pid);
	return 0;
}
