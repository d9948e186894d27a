/* Description: when the server cannot map shared memory (its address space
 * is capped), the connection falls back to plain TCP before any data flows:
 * both ends report the reason (server: resource-limit, client:
 * handshake-failed) and the data arrives intact. */
#include "common.h"
#include <sys/resource.h>

static unsigned reason_of(int fd, unsigned *mode)
{
	struct shunt_info in;
	socklen_t l = sizeof in;
	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
		return *mode = 99, 99; /* shunt not loaded: the TCP reference run */
	*mode = in.mode;
	return in.reason;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[100000];
	unsigned mode;

	if (getenv("ASAN_OPTIONS")) {
		printf("skip: an address-space cap and ASan's shadow memory do not mix\n");
		return 77;
	}
	deadline(30);
	pid_t p = fork();
	if (!p) {
		long pages = 0, rss;
		FILE *f = fopen("/proc/self/statm", "r");
		CHECK(f && fscanf(f, "%ld %ld", &pages, &rss) == 2);
		fclose(f);
		/* Room for small allocations, not for a 16 MiB arena. */
		struct rlimit rl = { (rlim_t)pages * 4096 + (4 << 20), (rlim_t)pages * 4096 + (4 << 20) };
		CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		unsigned r = reason_of(c, &mode);
		CHECK(mode == 99 || (mode == 0 && r == 3));
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (char)pattern(i, 11);
		write_all(c, buf, sizeof buf);
		read_all(c, buf, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	unsigned r = reason_of(fd, &mode);
	CHECK(mode == 99 || (mode == 0 && r == 4));
	read_all(fd, buf, sizeof buf);
	for (size_t i = 0; i < sizeof buf; i++)
		CHECK((uint8_t)buf[i] == pattern(i, 11));
	write_all(fd, "k", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
