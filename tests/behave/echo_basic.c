/* Description: a client writes, the server echoes; data intact both ways,
 * for 127.0.0.1, another loopback address, ::1 and a 0.0.0.0 listener. */
#include "common.h"

static void run(const char *bind_addr, const char *dial_addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on(bind_addr, &ss, &len);
	char buf[4096];

	if (strcmp(bind_addr, dial_addr)) { /* dial a different address, same port */
		uint16_t port = ((struct sockaddr_in *)&ss)->sin_port;
		struct sockaddr_in *in = (void *)&ss;
		in->sin_family = AF_INET;
		in->sin_port = port;
		CHECK(inet_pton(AF_INET, dial_addr, &in->sin_addr) == 1);
		len = sizeof *in;
	}
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		ssize_t n;
		while ((n = read(c, buf, sizeof buf)) > 0)
			write_all(c, buf, (size_t)n);
		CHECK(n == 0);
		close(c);
		_exit(0);
	}
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	for (int i = 1; i <= 200; i++) {
		char out[4096], in[4096];
		size_t n = (size_t)(i * 37) % sizeof out + 1;
		for (size_t k = 0; k < n; k++)
			out[k] = (char)pattern(k + (size_t)i, (uint32_t)i);
		write_all(fd, out, n);
		read_all(fd, in, n);
		CHECK(!memcmp(in, out, n));
	}
	CHECK(shutdown(fd, SHUT_WR) == 0);
	CHECK(read(fd, buf, 1) == 0);
	close(fd);
	CHECK(wait_child(p) == 0);
}

int main(void)
{
	deadline(20);
	run("127.0.0.1", "127.0.0.1");
	if (split_role())
		return 0; /* split mode: one server process, one run */
	run("127.0.0.1", "127.0.0.1");
	if (getenv("SHUNT_TEST_ADDR"))
		return 0; /* the RDMA suite: loopback addresses have no device */
	run("0.0.0.0", "127.0.0.2");
	run("::1", "::1");
	return 0;
}
