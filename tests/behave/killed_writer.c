/* Description: a writer that ends right after its writes.  With _exit()
 * (no close) every byte write() accepted arrives, then EOF - as TCP's
 * buffer delivers them.  Killed with SIGKILL, or ending with _exit() in a
 * signal handler: the reader gets every byte then EOF, or ECONNRESET after
 * a prefix of them, never a clean EOF short of what write() accepted (a
 * silent truncation), and nothing hangs. */
#include "common.h"

#define CAP (1 << 20)

enum end { END_EXIT, END_KILL, END_HANDLER };
static const char *const end_name[] = { "_exit", "killed", "handler" };

static void on_term(int sig)
{
	(void)sig;
	_exit(0);
}

/* The writer (child): writes without blocking until the connection takes no
 * more (or CAP), tells the parent how much write() accepted, then ends. */
static void writer(int l, int tell, enum end how)
{
	static char buf[1 << 16];
	uint64_t n = 0;
	int c = accept(l, NULL, NULL);

	CHECK(c >= 0);
	expect_mode(c);
	if (how == END_HANDLER)
		CHECK(sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_term }, NULL) == 0);
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
	if (how != END_EXIT)
		for (;;)
			pause();
	_exit(0);
}

static void run(enum end how)
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
		writer(l, tell[1], how);
	}
	close(tell[1]);
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(read(tell[0], &accepted, sizeof accepted) == (ssize_t)sizeof accepted);
	close(tell[0]);
	if (how != END_EXIT)
		CHECK(kill(p, how == END_KILL ? SIGKILL : SIGTERM) == 0);
	int st;
	CHECK(waitpid(p, &st, 0) == p); /* gone before the first read */
	CHECK(how == END_KILL ? WIFSIGNALED(st) : WIFEXITED(st) && !WEXITSTATUS(st));
	while ((r = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			CHECK((uint8_t)buf[i] == pattern(got + (uint64_t)i, 7));
		got += (uint64_t)r;
		CHECK(got <= accepted);
	}
	if (r < 0) {
		CHECK(how != END_EXIT && errno == ECONNRESET);
		fprintf(stderr, "%s: %llu of %llu bytes, then ECONNRESET\n", end_name[how],
			(unsigned long long)got, (unsigned long long)accepted);
	} else {
		CHECK(got == accepted);
		fprintf(stderr, "%s: %llu of %llu bytes, then EOF\n", end_name[how],
			(unsigned long long)got, (unsigned long long)accepted);
	}
	close(fd);
}

int main(void)
{
	deadline(60);
	run(END_EXIT);
	run(END_KILL);
	run(END_HANDLER);
	return 0;
}
