/* Description: a writer closes right after writing; the reader still gets
 * every byte, then EOF. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char buf[200000];

	deadline(20);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (char)pattern(i, 9);
		write_all(c, buf, sizeof buf);
		close(c);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(wait_child(p) == 0); /* the writer is gone before we read */
	size_t got = 0;
	ssize_t n;
	while ((n = read(fd, buf, 7777)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			CHECK((uint8_t)buf[i] == pattern(got + (size_t)i, 9));
		got += (size_t)n;
	}
	CHECK(n == 0 && got == sizeof buf);
	return 0;
}
