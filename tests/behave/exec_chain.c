/* Description: a connection handed down a chain of programs, as git
 * daemon does: the server forks and execs a handler with the accepted
 * socket on its stdin and stdout (two descriptors, dup2); the handler
 * closes its stdout, reads the request, forks and execs the program that
 * answers with the socket as its stdin and stdout again, and closes its
 * own copy while that program talks.  The answering program speaks C
 * stdio, as git's upload-pack does: it writes an advertisement with
 * write(), reads a line with fgets(), writes the reply with fwrite() and
 * printf().  The client reads every byte, then EOF - as over TCP.
 * Before: git clone over git:// under shunt failed ("the peer broke its
 * shared ring": stdio's writes went to the kernel socket), and a handler
 * closing one of its two inherited descriptors with the request unread
 * reset the connection (each descriptor had been adopted as a connection
 * of its own, each dropping the process's one share at close). */
#include "common.h"

#define REPLY (1u << 20)

static int conn_fd, conn_dup;

/* fork and exec self with argument what, the child running pre first;
 * returns once the exec happened (as git's start_command: a close-on-exec
 * pipe), so that the caller's closes race the new image's start. */
static pid_t spawn(char *self, const char *what, void (*pre)(void))
{
	int n[2];
	char c;
	pid_t p;

	CHECK(!pipe2(n, O_CLOEXEC));
	CHECK((p = fork()) >= 0);
	if (!p) {
		close(n[0]);
		if (pre)
			pre();
		execl(self, self, what, (char *)NULL);
		_exit(99);
	}
	close(n[1]);
	CHECK(read(n[0], &c, 1) == 0);
	close(n[0]);
	return p;
}

static void on_stdio(void)
{
	CHECK(dup2(conn_fd, 0) == 0 && dup2(conn_dup, 1) == 1);
	close(conn_fd);
	close(conn_dup);
}

static void stdout_too(void)
{
	CHECK(dup2(0, 1) == 1);
}

static void pack(void)
{
	static uint8_t buf[REPLY];
	char line[16];

	write_all(1, "adv\n", 4);
	CHECK(fgets(line, sizeof line, stdin) && !strcmp(line, "more\n"));
	for (uint32_t i = 0; i < REPLY; i++)
		buf[i] = pattern(i, 7);
	CHECK(fwrite(buf, 1, REPLY - 5, stdout) == REPLY - 5);
	CHECK(printf("%c%c%c%c%c", buf[REPLY - 5], buf[REPLY - 4], buf[REPLY - 3], buf[REPLY - 2],
		     buf[REPLY - 1]) == 5);
	CHECK(!fflush(stdout));
}

int main(int argc, char **argv)
{
	char req[4];

	deadline(30);
	if (argc == 2 && !strcmp(argv[1], "pack")) {
		pack();
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "serve")) { /* the handler */
		close(1); /* one of two descriptors of the connection, unread bytes on it */
		read_all(0, req, 4);
		CHECK(!memcmp(req, "req\n", 4));
		pid_t p = spawn(argv[0], "pack", stdout_too);
		close(0);
		CHECK(wait_child(p) == 0);
		return 0;
	}
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t srv = serve_forked(&l, &ss, &len);
	if (!srv) {
		CHECK((conn_fd = accept(l, NULL, NULL)) >= 0);
		expect_mode(conn_fd);
		CHECK((conn_dup = dup(conn_fd)) >= 0);
		pid_t h = spawn("/proc/self/exe", "serve", on_stdio);
		close(conn_fd);
		close(conn_dup);
		_exit(wait_child(h));
	}
	close(l);
	int fd = connect_to(&ss, len);
	char adv[4];
	expect_mode_peer_forks(fd); /* (over RDMA the server's fork may have moved it already) */
	write_all(fd, "req\n", 4);
	read_all(fd, adv, 4);
	CHECK(!memcmp(adv, "adv\n", 4));
	write_all(fd, "more\n", 5);
	CHECK(read_pattern_to_eof(fd, 7) == REPLY);
	close(fd);
	CHECK(wait_child(srv) == 0);
	return 0;
}
