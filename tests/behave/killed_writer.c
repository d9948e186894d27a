/* Description: a writer that ends right after its writes.  With _exit()
 * (no close) every byte write() accepted arrives, then EOF - as TCP's
 * buffer delivers them.  Killed with SIGKILL: the reader gets every byte
 * then EOF, or ECONNRESET after a prefix of them, never a clean EOF short
 * of what write() accepted (a silent truncation). */
#include "common.h"

#define CAP (1 << 20)

/* The writer (child): writes without blocking until the connection takes no
 * more (or CAP), tells the parent how much write() accepted, then ends. */
static void writer(int l, int tell, int kill_me)
{
	static char buf[1 << 16];
	uint64_t n = 0;
	int c = accept(l, NULL, NULL);

	CHECK(c >= 0);
	expect_mode(c);
	CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
	while (n < CAP) {
		size_t want = sizeof buf;
		if (want > CAP - n)
			want = (size_t)(CAP - n);
		for (size_t i = 0; i < want; i++)
			buf[i] = (char)pattern(n + i, 7);
		ssize_t w = write(c, buf, want);
		if (w < 0 && errno == EAGAIN)
			break;
		CHECK(w > 0);
		n += (uint64_t)w;
	}
	CHECK(write(tell, &n, sizeof n) == (ssize_t)sizeof n);
	if (kill_me)
		for (;;)
			pause();
	_exit(0);
}

static void run(int kill_it)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), tell[2];
	static char buf[1 << 16];
	uint64_t accepted, got = 0;
	ssize_t r;

	CHECK(pipe(tell) == 0);
	pid_t p = fork();
	if (!p) {
		close(tell[0]);
		writer(l, tell[1], kill_it);
	}
	close(tell[1]);
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(read(tell[0], &accepted, sizeof accepted) == (ssize_t)sizeof accepted);
	close(tell[0]);
	if (kill_it)
		CHECK(kill(p, SIGKILL) == 0);
	int st;
	CHECK(waitpid(p, &st, 0) == p); /* gone before the first read */
	CHECK(kill_it ? WIFSIGNALED(st) : WIFEXITED(st) && !WEXITSTATUS(st));
	while ((r = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			CHECK((uint8_t)buf[i] == pattern(got + (uint64_t)i, 7));
		got += (uint64_t)r;
		CHECK(got <= accepted);
	}
	if (r < 0) {
		CHECK(kill_it && errno == ECONNRESET);
		fprintf(stderr, "killed: %llu of %llu bytes, then ECONNRESET\n", (unsigned long long)got,
			(unsigned long long)accepted);
	} else {
		CHECK(got == accepted);
		fprintf(stderr, "%s: %llu of %llu bytes, then EOF\n", kill_it ? "killed" : "_exit",
			(unsigned long long)got, (unsigned long long)accepted);
	}
	close(fd);
}

int main(void)
{
	deadline(60);
	run(0);
	run(1);
	return 0;
}
