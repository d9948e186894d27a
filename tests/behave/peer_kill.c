/* Description: the peer is killed with SIGKILL mid-stream: a blocked reader
 * sees EOF or ECONNRESET, a blocked writer EPIPE or ECONNRESET, each within
 * one second, and nothing hangs. */
#include "common.h"

static void run(int survivor_reads)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char buf[1 << 16];

	pid_t p = fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		expect_mode(c);
		write_all(c, "r", 1);
		for (;;)
			pause(); /* neither reads nor writes */
	}
	close(l);
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	read_all(fd, buf, 1);
	signal(SIGPIPE, SIG_IGN);
	pid_t killer = fork();
	if (!killer) {
		usleep(300000);
		kill(p, SIGKILL);
		_exit(0);
	}
	double t0 = now_s(), t_kill = t0 + 0.3;
	ssize_t r;
	if (survivor_reads) {
		r = read(fd, buf, sizeof buf);
		CHECK(r == 0 || (r < 0 && errno == ECONNRESET));
	} else {
		do
			r = write(fd, buf, sizeof buf);
		while (r > 0);
		CHECK(r < 0 && (errno == EPIPE || errno == ECONNRESET));
	}
	double took = now_s() - t_kill;
	fprintf(stderr, "survivor (%s) saw the death after %.3f s\n", survivor_reads ? "reader" : "writer", took);
	CHECK(took < 1.0);
	wait_child(killer);
	waitpid(p, NULL, 0);
	close(fd);
}

int main(void)
{
	deadline(30);
	run(1);
	run(0);
	return 0;
}
