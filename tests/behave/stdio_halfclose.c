/* Description: a client sends a small request and shuts its sending side
 * before the server's child program starts; the child has the connection
 * as its stdin and stdout (Python's subprocess.run(stdin=conn,
 * stdout=conn), inetd) and the server keeps its copy.  The child reads the
 * request through C stdio - fread, getc (the macro), or after a first
 * printf (the move made by a write), or with read() or recv() (MSG_PEEK,
 * MSG_WAITALL) after that printf - and answers with printf.  The client gets the answer and EOF, as over
 * TCP.  Under shunt the request is in the rings when the child's first
 * stdio call moves the connection to TCP: the move holds those bytes and
 * the child's reads get them first (ungetc into the FILE, or shunt's
 * read()); the client's FIN, owed since its shutdown while the request
 * was unread, follows when the move wakes its read.  Before, the move failed: the child read an empty request, wrote to the
 * kernel socket past the rings, and the client's read failed with
 * ECONNRESET. */
#include "common.h"

#define MODES 5
static const char *const mode[MODES] = { "fread", "getc", "banner-fread", "banner-read", "banner-recv" };
static const size_t size[] = { 1000, 100000 };

static int child(const char *m)
{
	static uint8_t buf[65536];
	uint64_t got = 0, bad = 0;
	int banner = !strncmp(m, "banner", 6);

	if (banner) { /* a write first: the move is made by printf */
		CHECK(printf("hello\n") > 0);
		CHECK(!fflush(stdout));
	}
	for (;;) {
		ssize_t n;
		int ch;
		if (!strcmp(m, "getc")) {
			if ((ch = getc(stdin)) == EOF)
				break;
			buf[0] = (uint8_t)ch;
			n = 1;
		} else if (!strcmp(m, "banner-read")) {
			n = read(0, buf, sizeof buf);
			CHECK(n >= 0);
		} else if (!strcmp(m, "banner-recv")) { /* a peek, then whole buffers */
			uint8_t p[16];
			if (!got) {
				CHECK(recv(0, p, sizeof p, MSG_PEEK) == (ssize_t)sizeof p);
				for (size_t i = 0; i < sizeof p; i++)
					CHECK(p[i] == pattern(i, 5));
			}
			n = recv(0, buf, sizeof buf, MSG_WAITALL);
			CHECK(n >= 0);
		} else {
			n = (ssize_t)fread(buf, 1, sizeof buf, stdin);
		}
		if (!n)
			break;
		for (ssize_t i = 0; i < n; i++)
			bad += buf[i] != pattern(got + (uint64_t)i, 5);
		got += (uint64_t)n;
	}
	CHECK(!ferror(stdin));
	CHECK(printf("got %llu bad %llu\n", (unsigned long long)got, (unsigned long long)bad) > 0);
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	deadline(60);
	if (argc == 2)
		return child(argv[1]);
	struct sockaddr_storage ss;
	socklen_t len;
	struct chan ch;
	int l = listen_on("127.0.0.1", &ss, &len);
	int rounds = MODES * (int)(sizeof size / sizeof size[0]);
	chan_open(&ch);
	pid_t srv = fork();
	CHECK(srv >= 0);
	if (!srv) {
		for (int r = 0; r < rounds; r++) {
			int c = accept(l, NULL, NULL);
			char go;
			CHECK(c >= 0);
			expect_mode(c);
			CHECK(chan_recv(&ch, &go) == 1); /* the client has shut its side */
			pid_t k = fork();
			CHECK(k >= 0);
			if (!k) {
				CHECK(dup2(c, 0) == 0 && dup2(c, 1) == 1);
				close(c);
				execl("/proc/self/exe", "stdio_halfclose", mode[r % MODES], (char *)NULL);
				_exit(99);
			}
			CHECK(wait_child(k) == 0);
			close(c); /* the server's copy, after the child */
		}
		_exit(0);
	}
	close(l);
	for (int r = 0; r < rounds; r++) {
		size_t n = size[r / MODES];
		uint8_t *out = malloc(n);
		char want[128];
		int fd = connect_to(&ss, len);
		CHECK(out != NULL);
		expect_mode(fd);
		for (size_t i = 0; i < n; i++)
			out[i] = pattern(i, 5);
		write_all(fd, out, n);
		CHECK(!shutdown(fd, SHUT_WR));
		usleep(20000);
		chan_send(&ch, 'g');
		snprintf(want, sizeof want, "%sgot %zu bad 0\n", strncmp(mode[r % MODES], "banner", 6) ? "" : "hello\n", n);
		expect_text_to_eof(fd, want, r); /* (round r: mode r % MODES, size r / MODES) */
		free(out);
		close(fd);
	}
	chan_close(&ch);
	CHECK(wait_child(srv) == 0);
	return 0;
}
