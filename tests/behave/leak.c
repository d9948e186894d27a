/* Description: thousands of connections opened, used and closed leave the
 * process's descriptor count, its mappings and its memory flat. */
#include "common.h"
#include <dirent.h>

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, ch;
	while (f && (ch = fgetc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = 0;
	if (f)
		fclose(f);
	return rss * 4;
}

static void round_trip(struct sockaddr_storage *ss, socklen_t len, int n)
{
	for (int i = 0; i < n; i++) {
		int fd = connect_to(ss, len);
		char c = 'q';
		expect_mode(fd);
		write_all(fd, &c, 1);
		read_all(fd, &c, 1);
		close(fd);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(120);
	pid_t p = fork();
	if (!p) {
		for (;;) {
			int c = accept(l, NULL, NULL);
			char ch;
			if (c < 0)
				_exit(1);
			read_all(c, &ch, 1);
			write_all(c, &ch, 1);
			close(c);
		}
	}
	round_trip(&ss, len, 200); /* warm up: caches, registry */
	int fds0 = count_fds(), maps0 = count_maps();
	long rss0 = rss_kb();
	round_trip(&ss, len, 3000);
	int fds1 = count_fds(), maps1 = count_maps();
	long rss1 = rss_kb();
	fprintf(stderr, "fds %d -> %d, maps %d -> %d, rss %ld -> %ld KiB\n", fds0, fds1, maps0,
		maps1, rss0, rss1);
	CHECK(fds1 == fds0);
	CHECK(maps1 <= maps0 + 2);
	CHECK(rss1 < rss0 + 4096);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return 0;
}
