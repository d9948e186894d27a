/* Description: under Debian's default RLIMIT_NOFILE (1024), a program that
 * puts its own files on numbers it never opened - a shell's `exec 7>file`,
 * a daemon's dup2() onto 3..63 - gets exactly those files, and its
 * connections go on untouched: every byte in order both ways, with the
 * writers waiting on full rings, and not one byte written into the
 * program's files.
 *
 * shunt's own descriptors (the rendezvous directory, an arena's memory and
 * doorbells, a thread's doorbell set) sat at the lowest free numbers under
 * a limit below 2,048, so such a dup2() took them: the arena's doorbell
 * rings went into the program's file, 8 bytes a wake-up.  The program
 * re-executes itself with the limit lowered first (shunt reads it as it
 * loads), dials, then covers 3..63 with files, then streams. */
#include "common.h"
#include <sys/resource.h>
#include <sys/stat.h>

#define LIMIT 1024
#define LOW 3
#define HIGH 63
#define BYTES (8u << 20)

static char dir[64];

static int is_mine(int n, const int *mine, int nmine)
{
	for (int i = 0; i < nmine; i++)
		if (mine[i] == n)
			return 1;
	return 0;
}

/* Every number in LOW..HIGH the program does not hold itself gets a file
 * of its own, as `exec N>file` makes one. */
static void cover(const char *who, const int *mine, int nmine)
{
	char path[128];

	for (int n = LOW; n <= HIGH; n++) {
		if (is_mine(n, mine, nmine))
			continue;
		snprintf(path, sizeof path, "%s/%s-%d", dir, who, n);
		int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		CHECK(f >= 0);
		if (f != n) {
			CHECK(dup2(f, n) == n);
			CHECK(close(f) == 0);
		}
	}
}

/* The files are the program's and hold what it wrote: its number. */
static void check_files(const char *who, const int *mine, int nmine)
{
	char path[128];
	struct stat st;

	for (int n = LOW; n <= HIGH; n++) {
		if (is_mine(n, mine, nmine))
			continue;
		CHECK(write(n, &n, sizeof n) == sizeof n); /* still the program's file */
		snprintf(path, sizeof path, "%s/%s-%d", dir, who, n);
		CHECK(stat(path, &st) == 0);
		if (st.st_size != (off_t)sizeof n)
			fprintf(stderr, "%s: file on %d holds %lld bytes, wrote %zu\n", who, n,
				(long long)st.st_size, sizeof n);
		CHECK(st.st_size == (off_t)sizeof n);
		CHECK(close(n) == 0);
		CHECK(unlink(path) == 0);
	}
}

static unsigned char next_byte(uint32_t *x)
{
	*x = *x * 1103515245u + 12345u;
	return (unsigned char)(*x >> 16);
}

/* BYTES one way then the other, in 64 KiB writes: the rings fill and the
 * writers wait for the reader's doorbell. */
static void stream(int fd, int sending, uint32_t seed)
{
	static unsigned char buf[65536];
	uint32_t x = seed;

	for (size_t done = 0; done < BYTES; done += sizeof buf) {
		if (sending) {
			for (size_t i = 0; i < sizeof buf; i++)
				buf[i] = next_byte(&x);
			write_all(fd, buf, sizeof buf);
		} else {
			read_all(fd, buf, sizeof buf);
			for (size_t i = 0; i < sizeof buf; i++)
				CHECK(buf[i] == next_byte(&x));
		}
	}
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	struct sockaddr_storage ss;
	socklen_t len;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (argc < 2) { /* the limit first, then shunt reads it as it loads */
		if (rl.rlim_max < LIMIT)
			return 77;
		rl.rlim_cur = LIMIT;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		execl("/proc/self/exe", argv[0], "again", (char *)NULL);
		CHECK(!"exec");
	}
	snprintf(dir, sizeof dir, "/tmp/dup2-numbers.%d", (int)getpid());
	CHECK(mkdir(dir, 0700) == 0);
	int l = listen_on("127.0.0.1", &ss, &len);
	deadline(60);
	pid_t pid = fork();
	if (pid == 0) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		int mine[] = { l, c };
		cover("server", mine, 2);
		stream(c, 0, 1);
		stream(c, 1, 2);
		char b;
		CHECK(read(c, &b, 1) == 0);
		check_files("server", mine, 2);
		CHECK(close(c) == 0);
		_exit(0);
	}
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	int mine[] = { fd };
	cover("client", mine, 1);
	stream(fd, 1, 1);
	stream(fd, 0, 2);
	CHECK(shutdown(fd, SHUT_WR) == 0);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	check_files("client", mine, 1);
	CHECK(close(fd) == 0);
	CHECK(rmdir(dir) == 0);
	return 0;
}
