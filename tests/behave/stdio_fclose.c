/* Description: a server speaks C stdio on accepted connections through
 * fdopen(): it writes with fprintf and closes with fclose; closes with
 * fclose without a word; reads the request with fscanf (glibc's C99 one,
 * which its headers name, and the old one) and answers; writes with
 * printf on the connection as its stdout, then freopen()s stdout to
 * /dev/null and write()s to descriptor 1.  The client gets
 * each answer and then EOF, as over TCP.  Before: fclose closed the
 * descriptor past shunt, whose hidden descriptors kept the kernel socket
 * open - the client waited for an end that never came (freopen too, and
 * a write() to the number, a file's now, still went to the client) - and fscanf, not
 * wrapped, read the kernel socket while the request was in the rings and
 * waited for ever. */
#include "common.h"

/* glibc's pre-C99 scanf, which the headers no longer name */
extern int old_fscanf(FILE *f, const char *fmt, ...) __asm__("fscanf");

#define ROUNDS 5

int main(void)
{
	deadline(30);
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t srv = serve_forked(&l, &ss, &len);
	if (!srv) {
		for (int r = 0; r < ROUNDS; r++) {
			int c = accept(l, NULL, NULL), a = 0, b = 0;
			FILE *f;
			CHECK(c >= 0);
			expect_mode(c);
			if (r == 4) { /* the connection as stdout, then stdout to a file */
				CHECK(dup2(c, 1) == 1 && close(c) == 0);
				CHECK(printf("hello4\n") == 7);
				CHECK(freopen("/dev/null", "w", stdout) == stdout);
				write_all(1, "not for the client\n", 19); /* /dev/null's now */
				continue;
			}
			if (r < 2) {
				CHECK((f = fdopen(c, "r+")) != NULL);
				if (r == 0)
					CHECK(fprintf(f, "hello\n") == 6);
				CHECK(fclose(f) == 0);
				continue;
			}
			/* a socket's FILE cannot seek between a read and a
			 * write: one to read, one on a dup to write, as
			 * inetd-style programs do */
			FILE *w;
			CHECK((f = fdopen(c, "r")) != NULL && (w = fdopen(dup(c), "w")) != NULL);
			CHECK((r == 2 ? fscanf(f, "%d %d", &a, &b) : old_fscanf(f, "%d %d", &a, &b)) == 2);
			CHECK(fprintf(w, "%d\n", a + b) > 0);
			CHECK(fclose(w) == 0 && fclose(f) == 0);
		}
		_exit(0);
	}
	close(l);
	for (int r = 0; r < ROUNDS; r++) {
		int fd = connect_to(&ss, len);
		expect_mode_peer_forks(fd);
		if (r == 2 || r == 3)
			write_all(fd, "30 12\n", 6);
		expect_text_to_eof(fd, r == 0 ? "hello\n" : r == 1 ? "" : r == 4 ? "hello4\n" : "42\n", r);
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
