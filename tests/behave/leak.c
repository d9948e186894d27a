/* Description: thousands of connections opened, used and closed leave the
 * process's descriptor count, its mappings and its memory flat (at once,
 * or within 8 s where a link made under load retires once idle). */
#include "common.h"
#include <dirent.h>

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
	/* what the connections held goes with them - or, for an RDMA link
	 * made while the first was full (closes still on their way hold its
	 * slots), once it has been idle a while (links.c: 2 s, then the
	 * peer's answer): measured until flat, 8 s at most */
	int fds1, maps1;
	long rss1;
	for (int t = 0;; t++) {
		fds1 = count_fds();
		maps1 = count_maps();
		rss1 = rss_kb();
		if ((fds1 == fds0 && maps1 <= maps0 + 2 && rss1 < rss0 + 4096) || t == 40)
			break;
		usleep(200000);
	}
	fprintf(stderr, "fds %d -> %d, maps %d -> %d, rss %ld -> %ld KiB\n", fds0, fds1, maps0,
		maps1, rss0, rss1);
	CHECK(fds1 == fds0);
	CHECK(maps1 <= maps0 + 2);
	CHECK(rss1 < rss0 + 4096);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return 0;
}
