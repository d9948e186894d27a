/* Description: a server speaks C stdio's other calls on accepted
 * connections - the wide-character ones (fgetws and fwscanf to read a
 * request, fwprintf and fputwc to answer), getw/putw, and fcloseall(),
 * which flushes every stream (closing none) - and the client gets each
 * answer as over TCP (fcloseall's: output stdout held from before the
 * connection became its descriptor).  These reach the descriptor through libc's internal
 * read and write like the rest of stdio: with the previous library a
 * wide read waited for ever on the kernel socket while the request was in
 * the rings, and the bytes fcloseall flushed went past the rings. */
#include "common.h"
#include <wchar.h>

#define ROUNDS 4

static void server_round(int c, int r)
{
	FILE *f, *w;
	wchar_t line[64];
	int a = 0, b = 0;
	char ch;

	if (r == 3) {
		/* fcloseall flushes what a stream holds: stdout's output, put
		 * there before the connection became descriptor 1 */
		read_all(c, &ch, 1);
		CHECK(setvbuf(stdout, NULL, _IOFBF, 4096) == 0);
		CHECK(printf("flushed by fcloseall\n") > 0);
		CHECK(dup2(c, 1) == 1 && close(c) == 0);
		CHECK(fcloseall() == 0); /* glibc's closes none */
		return;
	}
	CHECK((f = fdopen(c, "r")) != NULL && (w = fdopen(dup(c), "w")) != NULL);
	switch (r) {
	case 0: /* a wide line in, a wide answer out */
		CHECK(fgetws(line, 64, f) == line && !wcscmp(line, L"ping\n"));
		CHECK(fwprintf(w, L"pong %d\n", 0) == 7);
		CHECK(fputwc(L'!', w) == L'!');
		break;
	case 1: /* fwscanf */
		CHECK(fwscanf(f, L"%d %d", &a, &b) == 2);
		CHECK(fwprintf(w, L"%d\n", a + b) > 0);
		break;
	case 2: /* a word at a time */
		CHECK((a = getw(f)) == 0x01020304);
		CHECK(putw(a + 1, w) == 0);
		break;
	}
	CHECK(fclose(w) == 0 && fclose(f) == 0);
}

int main(void)
{
	deadline(30);
	struct sockaddr_storage ss;
	socklen_t len;
	int l;
	pid_t srv = serve_forked(&l, &ss, &len);
	if (!srv) {
		for (int r = 0; r < ROUNDS; r++) {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			expect_mode(c);
			server_round(c, r);
		}
		_exit(0); /* round 3's descriptor closes here */
	}
	close(l);
	for (int r = 0; r < ROUNDS; r++) {
		int fd = connect_to(&ss, len), w = 0x01020304;
		unsigned char got[4];
		expect_mode_peer_forks(fd);
		switch (r) {
		case 0:
			write_all(fd, "ping\n", 5);
			expect_text_to_eof(fd, "pong 0\n!", r);
			break;
		case 1:
			write_all(fd, "30 12\n", 6);
			expect_text_to_eof(fd, "42\n", r);
			break;
		case 2:
			write_all(fd, &w, sizeof w);
			read_all(fd, got, 4);
			w++;
			CHECK(!memcmp(got, &w, 4));
			expect_text_to_eof(fd, "", r);
			break;
		case 3:
			write_all(fd, "x", 1);
			expect_text_to_eof(fd, "flushed by fcloseall\n", r);
			break;
		}
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
