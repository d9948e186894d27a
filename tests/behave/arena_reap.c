/* Description: a server of many short-lived client processes does not
 * keep memory for clients that are gone: 20 clients, one after the other,
 * each a process that connects, is served, and exits after the server
 * closed, leave at most 2 shared-memory arenas mapped in the server
 * (issue #13, item 9: each left its arena mapped, +20 arenas, +330 MB). */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char b;

	deadline(60);
	for (int i = 0; i < 20; i++) {
		pid_t p = fork();
		if (!p) {
			int fd = connect_to(&ss, len);
			expect_mode(fd);
			write_all(fd, "x", 1);
			CHECK(read(fd, &b, 1) == 0); /* the server closes first */
			_exit(0);
		}
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, &b, 1);
		close(c);
		CHECK(wait_child(p) == 0);
	}
	int n = arena_maps(NULL, 0);
	if (n > 2) {
		fprintf(stderr, "%d arenas mapped after 20 clients came and went\n", n);
		return 1;
	}
	return 0;
}
