/* Description: a client sends its request, shuts its sending half and then
 * makes no call on the connection for 3 s; the server, with the request
 * and its end there, reads it to the end in a way that moves the
 * connection to TCP within its process - C stdio (fread to EOF), or a
 * kernel feature (SO_TIMESTAMP, then read() to EOF) - and must reach the
 * end at once, as over TCP, then answers.  Under shunt the client's FIN
 * may still be owed (shared memory sends it after a move's resend: a pass
 * of the connection needs the request resent, tests/behave/fd_pass_halfclosed)
 * and the client makes no call that would send it: the move ends the
 * socket's reads itself once the rings hold the whole stream (before: each
 * read to the end waited for the client's next call, 3 s). */
#include "common.h"

#define REQ 5000

/* the request to its end, in mode m; ms: how long the end took */
static void read_request(int c, int stdio, long *ms)
{
	static uint8_t buf[REQ + 1];
	double t0;
	size_t got = 0;

	if (stdio) {
		FILE *f = fdopen(dup(c), "r");
		CHECK(f != NULL);
		t0 = now_s();
		got = fread(buf, 1, sizeof buf, f);
		CHECK(feof(f) && !ferror(f));
		fclose(f);
	} else {
		int on = 1;
		ssize_t n;
		CHECK(setsockopt(c, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on) == 0);
		t0 = now_s();
		while ((n = read(c, buf + got, sizeof buf - got)) > 0)
			got += (size_t)n;
		CHECK(n == 0);
	}
	*ms = (long)((now_s() - t0) * 1000);
	CHECK(got == REQ);
	for (size_t i = 0; i < REQ; i++)
		CHECK(buf[i] == pattern(i, 5));
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(60);
	for (int stdio = 1; stdio >= 0; stdio--) {
		pid_t srv = fork();
		if (!srv) {
			int c = accept(l, NULL, NULL);
			long ms;
			CHECK(c >= 0);
			expect_mode(c);
			await_unread_end(c, REQ);
			read_request(c, stdio, &ms);
			if (ms > 1500) {
				fprintf(stderr, "%s: the request's end took %ld ms (the client is quiet 3 s)\n",
					stdio ? "stdio" : "feature", ms);
				_exit(1);
			}
			write_all(c, "done", 4);
			close(c);
			_exit(0);
		}
		int fd = connect_to(&ss, len);
		char buf[8];
		expect_mode(fd);
		write_pattern(fd, REQ, 5);
		CHECK(shutdown(fd, SHUT_WR) == 0);
		sleep(3); /* no call on the connection */
		read_all(fd, buf, 4);
		CHECK(!memcmp(buf, "done", 4));
		CHECK(read(fd, buf, 1) == 0);
		close(fd);
		CHECK(wait_child(srv) == 0);
	}
	return 0;
}
