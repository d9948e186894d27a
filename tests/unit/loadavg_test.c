/* Description: reading the runnable-thread count from /proc/loadavg's
 * text (core.c's "are the CPUs crowded?"): real lines, the running
 * machine's own, and malformed ones (fewer fields, no digits, no slash,
 * an absurd number, every truncation of a valid line) give -1, never a
 * read past the buffer. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../../src/common/loadavg.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static long run(const char *s)
{
	/* an exact-size heap copy: ASan catches any read past it */
	size_t n = strlen(s);
	char *b = malloc(n ? n : 1);
	long r;

	memcpy(b, s, n);
	r = shunt_loadavg_running(b, n);
	free(b);
	return r;
}

int main(void)
{
	const char *line = "0.52 0.58 0.59 3/456 12345\n";
	char buf[128];
	int fd;
	ssize_t n;

	CHECK(run(line) == 3);
	CHECK(run("12.00 11.50 9.25 17/1024 99\n") == 17);
	CHECK(run("0.00 0.00 0.00 0/1 1") == 0);
	CHECK(run("") == -1);
	CHECK(run("0.52 0.58 0.59") == -1);
	CHECK(run("0.52 0.58 0.59 ") == -1);
	CHECK(run("0.52 0.58 0.59 /456 1") == -1);
	CHECK(run("0.52 0.58 0.59 3") == -1);   /* no slash: cut */
	CHECK(run("0.52 0.58 0.59 x/456") == -1);
	CHECK(run("0.52 0.58 0.59 99999999999999999999/1") == -1);
	CHECK(run("0.52 0.58 0.59 1000000000/1") == 1000000000L); /* the bound itself */
	CHECK(run("0.52 0.58 0.59 1000000002/1") == -1); /* past it (the fuzzer's find: it passed) */
	for (size_t k = 0; k < strlen(line); k++) {
		char cut[64];
		memcpy(cut, line, k);
		cut[k] = 0;
		CHECK(run(cut) == (k >= 17 ? 3 : -1)); /* "...0.59 3/" is 17 bytes */
	}
	fd = open("/proc/loadavg", O_RDONLY);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf);
		close(fd);
		CHECK(n > 0 && shunt_loadavg_running(buf, (size_t)n) >= 1); /* this thread runs */
	}
	printf("loadavg: ok\n");
	return 0;
}
