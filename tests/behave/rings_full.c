/* Description: a program that writes its whole request before it reads
 * the answer, to a peer that answers as it reads (cat behind xinetd, an
 * echo, a filter): 2 MiB written with blocking writes, then read back,
 * every byte intact - once with the client writing first, once with the
 * server.  TCP's buffers on loopback (megabytes) take it all.  Under shunt
 * both ends blocked writing into full rings (256 KiB a direction), neither
 * reading: the connection hung for good (xinetd's cat with 3 MB).  Now
 * once both rings stay full with nothing read for 50 ms, the connection
 * moves to TCP at the exact byte (reason rings-full, 30) and goes on there
 * as TCP would.  Over RDMA too: there the peer's resend of what our ring
 * holds is read off the socket while the writer waits (move.c
 * move_settling) - left in the socket buffers, those copies took the room
 * the stream needed, and 6 runs in 30 hung in the test guest. */
#include "common.h"

/* three times what the rings hold (512 KiB); TCP itself over the test
 * guest's veth (MTU 1500) fell short of 2 MiB one run in 60.
 * RINGS_FULL_KB: another size (bench/hang_rate.sh) */
static size_t size = 3u << 19;
#define CHUNK 65536

/* Read and write back as it comes, until the end; then end ours. */
static void echo_as_read(int fd)
{
	static char buf[CHUNK];
	ssize_t n;

	while ((n = read(fd, buf, sizeof buf)) > 0)
		write_all(fd, buf, (size_t)n);
	CHECK(n == 0);
	CHECK(shutdown(fd, SHUT_WR) == 0);
}

/* Write it all, end ours, then read it all back. */
static void write_then_read(int fd, uint32_t seed)
{
	char b;

	write_pattern(fd, size, seed);
	CHECK(shutdown(fd, SHUT_WR) == 0);
	expect_pattern(fd, size, seed);
	CHECK(read(fd, &b, 1) == 0);
}

static void server(int l)
{
	for (int round = 0; round < 2; round++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		if (round == 0)
			echo_as_read(c);
		else
			write_then_read(c, 2);
		close(c);
	}
	_exit(0);
}

static void expect_moved(int fd, const char *who)
{
	struct shunt_info si;
	const char *want = getenv("SHUNT_EXPECT");

	if (!want)
		return;
	si = sock_info(fd);
	fprintf(stderr, "%s: %s, reason %u\n", who, mode_name(si.mode), si.reason);
	CHECK(si.mode == 0 && si.reason == 30);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p;
	int fd;

	if (getenv("RINGS_FULL_KB"))
		size = (size_t)strtoul(getenv("RINGS_FULL_KB"), NULL, 10) << 10;
	CHECK(size);
	p = serve_in_child(server, &ss, &len);

	fd = connect_to(&ss, len);
	write_then_read(fd, 1);
	expect_moved(fd, "client writing first");
	close(fd);
	fd = connect_to(&ss, len);
	echo_as_read(fd);
	expect_moved(fd, "server writing first");
	close(fd);
	CHECK(wait_child(p) == 0);
	return 0;
}
