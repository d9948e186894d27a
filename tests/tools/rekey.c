/* Description: connections one after another between the same two
 * processes, so that they reuse one link and its slots:
 *   rekey server ADDR PORT N
 *   rekey client ADDR PORT N
 * Each connection carries 1 MiB of checksummed data from the client and a
 * one-byte answer back, then both close; the client pauses before the next
 * so that the slot is free again.  Each end prints one line per connection:
 * "role=... conn=I mode=... reason=... ok". */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <netdb.h>

#define LEN (1 << 20)

static void report(const char *role, int i, int fd)
{
	struct shunt_info in;
	socklen_t l = sizeof in;

	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
		in = (struct shunt_info){ .mode = 99 };
	printf("role=%s conn=%d mode=%s reason=%u ok\n", role, i,
	       in.mode == 1 ? "shm" : in.mode == 3 ? "rdma" : in.mode == 0 ? "tcp" : "none", in.reason);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	static uint8_t buf[LEN];
	int n = argc > 4 ? atoi(argv[4]) : 0, one = 1, lfd = -1;

	if (n < 1 || getaddrinfo(argv[2], argv[3], &hints, &ai))
		return 2;
	deadline(300);
	if (!strcmp(argv[1], "server")) {
		lfd = socket(ai->ai_family, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(!bind(lfd, ai->ai_addr, ai->ai_addrlen) && !listen(lfd, 8));
		printf("listening\n");
		fflush(stdout);
	}
	for (int i = 0; i < n; i++) {
		int fd;
		if (lfd >= 0) {
			CHECK((fd = accept(lfd, NULL, NULL)) >= 0);
			read_all(fd, buf, LEN);
			for (size_t k = 0; k < LEN; k++)
				if (buf[k] != pattern(k, (uint32_t)i)) {
					fprintf(stderr, "rekey: connection %d: byte %zu differs\n", i, k);
					return 1;
				}
			report("server", i, fd);
			write_all(fd, "k", 1);
			CHECK(read(fd, buf, 1) == 0);
		} else {
			CHECK((fd = socket(ai->ai_family, SOCK_STREAM, 0)) >= 0);
			CHECK(!connect(fd, ai->ai_addr, ai->ai_addrlen));
			for (size_t k = 0; k < LEN; k++)
				buf[k] = pattern(k, (uint32_t)i);
			write_all(fd, buf, LEN);
			read_all(fd, buf, 1);
			CHECK(buf[0] == 'k');
			report("client", i, fd);
		}
		close(fd);
		if (lfd < 0)
			usleep(300000);
	}
	return 0;
}
