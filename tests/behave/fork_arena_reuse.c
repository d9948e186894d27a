/* Description: a server that forks a process for each connection it
 * accepts (PostgreSQL's postmaster, inetd) and a client that connects
 * again and again.  Twenty connections one after the other, each served
 * by a child that ends before the next: they all take segments of one
 * arena, mapped once on each side (before, each made an arena - a memfd,
 * two doorbells, a message, both sides' mappings and page faults: 0.53x
 * TCP's rate in bench/floor.sh CLIENT=fork).  Twelve connections at once,
 * each in its own child: twelve arenas (their processes must not wake at
 * each other's bytes: tests/behave/fork_herd).  Once they ended, the next
 * connection leaves at most 8 (SHUNT_ARENA_KEEP) mapped in the client and
 * in the server.  NOT_OVER_RDMA: arenas are shared memory's. */
#include "common.h"

#define SERIAL 20
#define BURST 12
#define KEEP 8

/* One connection's child: echo a byte; 'n' answers with the number of
 * arenas this process maps - its parent's as they were at the fork. */
static void serve(int c, int arg)
{
	char b;
	ssize_t r;

	(void)arg;
	while ((r = read(c, &b, 1)) == 1) {
		if (b == 'n') {
			int n = arena_maps(NULL, 0);
			write_all(c, &n, sizeof n);
		} else {
			write_all(c, &b, 1);
		}
	}
	CHECK(r == 0);
	_exit(0);
}

static void server(int l)
{
	pid_t kids[BURST];

	for (int i = 0; i < SERIAL; i++) /* each child ends before the next */
		CHECK(wait_child(accept_fork(l, serve, 0)) == 0);
	for (int i = 0; i < BURST; i++)
		kids[i] = accept_fork(l, serve, 0);
	for (int i = 0; i < BURST; i++)
		CHECK(wait_child(kids[i]) == 0);
	CHECK(wait_child(accept_fork(l, serve, 0)) == 0);
	_exit(0);
}

/* Is i among seen[0..n)?  If not, it is added. */
static int seen_before(unsigned long *seen, int *n, unsigned long i)
{
	for (int k = 0; k < *n; k++)
		if (seen[k] == i)
			return 1;
	seen[(*n)++] = i;
	return 0;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fds[BURST], shm = getenv("SHUNT_EXPECT") != NULL, n, m;
	unsigned long seen[SERIAL + BURST + 4], ino[64];
	int nseen = 0;
	pid_t p;

	deadline(60);
	p = test_fork();
	if (!p)
		server(l);
	close(l);
	for (int i = 0; i < SERIAL; i++) {
		int c = connect_to(&ss, len);
		echo_once(c, 'x');
		expect_mode_peer_forks(c);
		n = arena_maps(ino, 64);
		for (int k = 0; k < n && k < 64; k++)
			seen_before(seen, &nseen, ino[k]);
		close(c);
	}
	fprintf(stderr, "%d connections one after the other: %d arenas\n", SERIAL, nseen);
	if (shm)
		CHECK(nseen == 1);
	for (int i = 0; i < BURST; i++) {
		fds[i] = connect_to(&ss, len);
		echo_once(fds[i], 'y');
		expect_mode_peer_forks(fds[i]);
	}
	n = arena_maps(ino, 64);
	fprintf(stderr, "%d connections at once: %d arenas mapped\n", BURST, n);
	if (shm)
		CHECK(n == BURST);
	for (int i = 0; i < BURST; i++)
		close(fds[i]);
	usleep(100 * 1000); /* (the server waits for their children) */
	fds[0] = connect_to(&ss, len);
	echo_once(fds[0], 'z');
	write_all(fds[0], "n", 1);
	read_all(fds[0], &m, sizeof m);
	n = arena_maps(NULL, 0);
	fprintf(stderr, "after them: %d arenas mapped here, %d in the server\n", n, m);
	if (shm)
		CHECK(n <= KEEP && m <= KEEP);
	close(fds[0]);
	CHECK(wait_child(p) == 0);
	return 0;
}
