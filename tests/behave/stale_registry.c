/* Description: a port's registry file left by a server of another shunt
 * version (killed before an upgrade: wire version 1 here) or truncated.
 * A new server listening on the port replaces it when nobody listens
 * through it, and its connections are accelerated; the previous library
 * ignored such a file for ever, so the port stayed plain TCP (about 1% of
 * this machine's ephemeral ports had one after a few months of benchmarks:
 * the "bimodal" round trips of earlier benchmark notes).  While a process
 * still holds the old file's listener lock (a live server of the other
 * version) it stays, and connections are plain - intact either way.
 * NOT_OVER_RDMA: the registry is the local rendezvous. */
#include "common.h"
#include <sys/file.h>
#include "shunt/wire.h"

/* A free port: bound, read, closed. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0 && bind(fd, (void *)&a, sizeof a) == 0 && getsockname(fd, (void *)&a, &l) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* The stale file: another version's header (or a short file), as its
 * server left it.  Its descriptor, for a lock. */
static int stale_file(int port, int truncated)
{
	struct shunt_registry r = { .magic = SHUNT_REG_MAGIC, .version = 1, .port = (uint32_t)port,
				    .nslots = SHUNT_REG_SLOTS };
	const char *dir = getenv("SHUNT_DIR");
	char path[512];
	int fd;

	if (!dir)
		return -1; /* plain TCP run without a directory: nothing to leave */
	snprintf(path, sizeof path, "%s/p%d", dir, port);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, &r, truncated ? 64 : sizeof r) == (ssize_t)(truncated ? 64 : sizeof r));
	return fd;
}

/* Serve one connection on port, echo 4 KiB, report the mode the server
 * saw (1 accelerated, 0 plain, -1 not under shunt). */
static int one_connection(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, c, s, st;
	struct shunt_info info;
	socklen_t il = sizeof info;
	char buf[4096], got[4096];
	pid_t pid;

	CHECK(l >= 0 && setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
	CHECK(bind(l, (void *)&a, sizeof a) == 0 && listen(l, 4) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK((s = accept(l, NULL, NULL)) >= 0);
		CHECK(recv(s, buf, sizeof buf, MSG_WAITALL) == (ssize_t)sizeof buf);
		CHECK(send(s, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
		_exit(getsockopt(s, SOL_SHUNT, SHUNT_INFO, &info, &il) ? 2 : info.mode == 1 ? 1 : 0);
	}
	close(l);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7 + port);
	c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c, (void *)&a, sizeof a) == 0);
	CHECK(send(c, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
	CHECK(recv(c, got, sizeof got, MSG_WAITALL) == (ssize_t)sizeof got && !memcmp(buf, got, sizeof buf));
	close(c);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	return WEXITSTATUS(st) == 2 ? -1 : WEXITSTATUS(st);
}

int main(void)
{
	int under = getenv("SHUNT_EXPECT") != NULL;

	deadline(30);
	for (int truncated = 0; truncated < 2; truncated++) {
		int port = free_port(), fd = stale_file(port, truncated), m;
		if (fd >= 0)
			close(fd);
		m = one_connection(port);
		fprintf(stderr, "%s file nobody holds: server mode %d\n", truncated ? "truncated" : "version-1", m);
		CHECK(!under || m == 1);
	}
	/* a live listener of the other version holds it: left alone, plain */
	int port = free_port(), fd = stale_file(port, 0), m;
	CHECK(fd < 0 || flock(fd, LOCK_SH) == 0);
	m = one_connection(port);
	fprintf(stderr, "version-1 file held: server mode %d\n", m);
	CHECK(!under || m == 0);
	if (fd >= 0)
		close(fd);
	return 0;
}
