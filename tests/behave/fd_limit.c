/* Description: under Debian's default RLIMIT_NOFILE (1024), a server
 * holds as many connections as TCP lets it (1000, nearly all of the
 * limit): no EMFILE where TCP has none, every byte in order - also the
 * requests its clients wrote before it met the limit, read after.
 *
 * Under shunt an accelerated connection costs a descriptor of shunt's
 * besides the socket (an arena three more): the program's accept() meets
 * EMFILE first.  shunt then moves idle connections to TCP at the exact
 * byte and closes its descriptors (reason `descriptors`, 24), and the call
 * succeeds (issue #13, item 9).  The server's connections are in an epoll
 * set from their accept on: the registrations of those given back become
 * the kernel's own.  (Both ends at their limits, with idle connections:
 * tests/integration/idle.sh.)  Over RDMA a connection holds two of
 * shunt's (its doorbell and the socket's duplicate): given back the same
 * way, its move to TCP a round trip with the peer. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

#define LIMIT 1024       /* the server's */
#define CLIENT_LIMIT 4096 /* the client's: it is not the one tested */
#define N 1000

static int fds[N];
static char seen[N];

/* Mode and reason of each connection: under shunt each is accelerated
 * (shared memory, or RDMA when that is expected) or moved to TCP because
 * descriptors ran out. */
static void check_modes(const char *who) /* the server's */
{
	const char *want = getenv("SHUNT_EXPECT");
	unsigned accel = want && !strcmp(want, "rdma") ? 3 : 1;
	int shm = 0, back = 0;

	for (int i = 0; i < N; i++) {
		struct shunt_info info;
		socklen_t l = sizeof info;
		if (getsockopt(fds[i], SOL_SHUNT, SHUNT_INFO, &info, &l))
			continue; /* not under shunt */
		shm += info.mode == accel;
		back += info.mode == 0 && info.reason == 24;
		if (want && !(info.mode == accel || (info.mode == 0 && info.reason == 24)))
			fprintf(stderr, "%s: fd %d mode %u reason %u\n", who, fds[i], info.mode, info.reason);
		CHECK(!want || info.mode == accel || (info.mode == 0 && info.reason == 24));
	}
	fprintf(stderr, "%s: %d connections, %d accelerated, %d given back to TCP\n", who, N, shm, back);
	if (want) /* at this limit nearly all must have gone back: some did */
		CHECK(back > 0);
}

static void server(int l)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), echoed = 0;
	struct epoll_event evs[64];

	CHECK(ep >= 0);
	for (int i = 0; i < N; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		fds[i] = accept(l, NULL, NULL);
		if (fds[i] < 0)
			fprintf(stderr, "server: accept %d of %d: %s\n", i + 1, N, strerror(errno));
		CHECK(fds[i] >= 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0);
	}
	/* level-triggered: each connection's index (the client's: the
	 * accept order need not be the connect order once the backlog is
	 * full), echoed with a byte made of it; every index exactly once */
	while (echoed < N) {
		int k = epoll_wait(ep, evs, 64, 20000);
		CHECK(k > 0);
		for (int j = 0; j < k; j++) {
			int i = (int)evs[j].data.u32;
			unsigned char in[2], out[3];
			unsigned idx;
			CHECK(recv(fds[i], in, 2, MSG_WAITALL) == 2);
			idx = in[0] | (unsigned)in[1] << 8;
			CHECK(idx < N && !seen[idx]);
			seen[idx] = 1;
			memcpy(out, in, 2);
			out[2] = (unsigned char)(idx * 7);
			CHECK(send(fds[i], out, 3, 0) == 3);
			CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL) == 0);
			echoed++;
		}
	}
	check_modes("server");
}

int main(void)
{
	struct rlimit rl = { LIMIT, LIMIT };
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t pid;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max < CLIENT_LIMIT) {
		rl.rlim_max = CLIENT_LIMIT; /* root may raise it */
		if (setrlimit(RLIMIT_NOFILE, &rl))
			return 77;
	}
	rl.rlim_cur = CLIENT_LIMIT;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	l = listen_on("127.0.0.1", &ss, &len);
	deadline(120);
	pid = test_fork();
	if (pid == 0) {
		rl.rlim_cur = LIMIT;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		server(l);
		return 0;
	}
	close(l);
	/* the first half writes its byte at once: the server reads it only
	 * once all are open, after both sides met the limit */
	for (int i = 0; i < N; i++) {
		unsigned char b[2] = { (unsigned char)i, (unsigned char)(i >> 8) };
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0)
			fprintf(stderr, "client: socket %d of %d: %s\n", i + 1, N, strerror(errno));
		CHECK(fds[i] >= 0);
		CHECK(connect(fds[i], (void *)&ss, len) == 0);
		if (i < N / 2)
			CHECK(send(fds[i], b, 2, 0) == 2);
	}
	for (int i = N / 2; i < N; i++) {
		unsigned char b[2] = { (unsigned char)i, (unsigned char)(i >> 8) };
		CHECK(send(fds[i], b, 2, 0) == 2);
	}
	for (int i = 0; i < N; i++) {
		unsigned char got[3];
		CHECK(recv(fds[i], got, 3, MSG_WAITALL) == 3);
		CHECK((got[0] | (unsigned)got[1] << 8) == (unsigned)i && got[2] == (unsigned char)(i * 7));
	}
	CHECK(wait_child(pid) == 0);
	return 0;
}
