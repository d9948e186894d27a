/* Description: a process execs a new program that inherits an accelerated
 * connection (no close-on-exec): the new image keeps talking on it, data
 * intact, both before and after the exec. */
#include "common.h"

int main(int argc, char **argv)
{
	char buf[64];

	deadline(30);
	if (argc == 3 && !strcmp(argv[1], "child")) {
		int fd = atoi(argv[2]);
		expect_mode(fd);
		read_all(fd, buf, 6);
		CHECK(!memcmp(buf, "after!", 6));
		write_all(fd, "reply", 5);
		return 0;
	}
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p = fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		write_all(c, "before", 6);
		read_all(c, buf, 3);
		CHECK(!memcmp(buf, "ack", 3));
		write_all(c, "after!", 6); /* may land before or after the exec */
		read_all(c, buf, 5);
		CHECK(!memcmp(buf, "reply", 5));
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	read_all(fd, buf, 6);
	CHECK(!memcmp(buf, "before", 6));
	write_all(fd, "ack", 3);
	pid_t q = fork();
	if (!q) {
		char num[16];
		snprintf(num, sizeof num, "%d", fd);
		execl("/proc/self/exe", argv[0], "child", num, (char *)NULL);
		_exit(99);
	}
	close(fd);
	CHECK(wait_child(q) == 0);
	CHECK(wait_child(p) == 0);
	return 0;
}
