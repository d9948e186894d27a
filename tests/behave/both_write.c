/* Description: both peers write 8 MiB with blocking writes before reading;
 * short writes keep them from deadlocking and all data arrives intact. */
#include "common.h"
#include <pthread.h>

#define TOTAL (8u << 20)

static void exchange(int fd, uint32_t seed_out, uint32_t seed_in)
{
	static char buf[1 << 20];
	uint64_t sent = 0, got = 0;

	/* Alternate: write as much as one call takes, then read what is there. */
	CHECK(fcntl(fd, F_SETFL, 0) == 0);
	while (sent < TOTAL || got < TOTAL) {
		if (sent < TOTAL) {
			size_t n = sizeof buf < TOTAL - sent ? sizeof buf : TOTAL - sent;
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)pattern(sent + i, seed_out);
			ssize_t w = write(fd, buf, n); /* may return short: that is the point */
			CHECK(w > 0);
			sent += (uint64_t)w;
		}
		if (got < TOTAL) {
			ssize_t r = recv(fd, buf, sizeof buf, sent < TOTAL ? MSG_DONTWAIT : 0);
			if (r < 0 && errno == EAGAIN)
				continue;
			CHECK(r > 0);
			for (ssize_t i = 0; i < r; i++)
				CHECK((uint8_t)buf[i] == pattern(got + (uint64_t)i, seed_in));
			got += (uint64_t)r;
		}
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(60);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		exchange(c, 2, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	exchange(fd, 1, 2);
	CHECK(wait_child(p) == 0);
	return 0;
}
