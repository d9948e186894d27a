/* Description: N idle connections held open, for bench/idle.sh (issue
 * #13, item 9: what each connection costs a process in descriptors and
 * memory, and how many a descriptor limit lets shunt accelerate).
 *   idle server PORT N    accept N connections (PORT 0: any; it prints
 *                         "listening PORT"), then report and wait
 *   idle client PORT N    make N connections to 127.0.0.1:PORT, report, wait
 * Each side prints one line once its N are open, or at its first error:
 *   "role=R conns=N fds=F rss_kb=K accel=A plain=P error=E"
 * (N: connections open, E: the errno that stopped it, 0 if none;
 * F: descriptors open in the process, K: VmRSS, A/P: connections in mode
 * shm/rdma or tcp by getsockopt(SOL_SHUNT); without shunt all are plain)
 * and then waits until its standard input closes. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <dirent.h>

/* Both opened before the connections: at the limit nothing opens. */
static DIR *fd_dir;
static int status_fd = -1;

static long fds_open(void)
{
	long n = 0;

	rewinddir(fd_dir);
	while (readdir(fd_dir))
		n++;
	return n - 2; /* "." and ".." */
}

static long rss_kb(void)
{
	char buf[4096], *p;
	ssize_t r = pread(status_fd, buf, sizeof buf - 1, 0);
	long kb = -1;

	if (r <= 0)
		return -1;
	buf[r] = 0;
	if ((p = strstr(buf, "VmRSS:")))
		sscanf(p, "VmRSS: %ld", &kb);
	return kb;
}

int main(int argc, char **argv)
{
	int server = argc == 4 && !strcmp(argv[1], "server"), n = argc == 4 ? atoi(argv[3]) : 0;
	int *fd = calloc((size_t)(n > 0 ? n : 1), sizeof *fd), l = -1, accel = 0;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char b;

	if (n <= 0 || (!server && strcmp(argv[1], "client")) || !fd) {
		fprintf(stderr, "usage: idle server|client PORT N\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[2]));
	fd_dir = opendir("/proc/self/fd");
	status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	CHECK(fd_dir && status_fd >= 0);
	if (server) {
		l = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(l >= 0 && setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int)) == 0);
		socklen_t al = sizeof a;
		CHECK(bind(l, (void *)&a, sizeof a) == 0 && listen(l, 4096) == 0);
		CHECK(getsockname(l, (void *)&a, &al) == 0);
		printf("listening %d\n", ntohs(a.sin_port));
		fflush(stdout);
	}
	int got = 0, err = 0;
	for (; got < n; got++) {
		if (server) {
			fd[got] = accept(l, NULL, NULL);
		} else if ((fd[got] = socket(AF_INET, SOCK_STREAM, 0)) >= 0 &&
			   connect(fd[got], (void *)&a, sizeof a)) {
			err = errno;
			close(fd[got]);
			break;
		}
		if (fd[got] < 0) {
			err = errno;
			break;
		}
	}
	for (int i = 0; i < got; i++) {
		struct shunt_info info;
		socklen_t sl = sizeof info;
		accel += !getsockopt(fd[i], SOL_SHUNT, SHUNT_INFO, &info, &sl) && info.mode != 0;
	}
	printf("role=%s conns=%d fds=%ld rss_kb=%ld accel=%d plain=%d error=%d\n", argv[1], got, fds_open(),
	       rss_kb(), accel, got - accel, err);
	fflush(stdout);
	while (read(0, &b, 1) > 0)
		;
	return 0;
}
