/* Description: shutdown(SHUT_WR) delivers EOF after all data; the other
 * direction keeps working; poll reports POLLIN|POLLRDHUP at EOF; a write
 * after our own SHUT_WR fails with EPIPE. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char buf[1 << 20];

	deadline(20);
	signal(SIGPIPE, SIG_IGN);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		uint64_t got = read_pattern_to_eof(c, 3);
		CHECK(got == 3000000);
		struct pollfd pf = { .fd = c, .events = POLLIN | POLLRDHUP };
		CHECK(poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN) && (pf.revents & POLLRDHUP));
		CHECK(read(c, buf, 1) == 0); /* EOF is sticky */
		write_all(c, &got, sizeof got); /* the reverse direction still works */
		close(c);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	for (uint64_t pos = 0; pos < 3000000;) {
		size_t n = sizeof buf < 3000000 - pos ? sizeof buf : (size_t)(3000000 - pos);
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)pattern(pos + i, 3);
		write_all(fd, buf, n);
		pos += n;
	}
	CHECK(shutdown(fd, SHUT_WR) == 0);
	CHECK(write(fd, "x", 1) == -1 && errno == EPIPE);
	uint64_t echo = 0;
	read_all(fd, &echo, sizeof echo);
	CHECK(echo == 3000000);
	CHECK(read(fd, buf, 1) == 0);
	CHECK(wait_child(p) == 0);
	return 0;
}
