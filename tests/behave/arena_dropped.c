/* Description: a client that ran out of descriptors once and had shunt
 * give back what it held - an idle connection's shared memory included -
 * gets accelerated connections again from the same server once the 10 s
 * after the give-back are over, with its bytes intact.  Before, the server
 * kept naming the dropped memory in its answers, and every later
 * connection fell back to TCP (reason handshake) after 100 ms; now the
 * client asks again and the server sends it (issue #13, item 9; wire
 * version 4).  On TCP: the same calls, every one succeeds.
 * NOT_OVER_RDMA: it is about shared memory's arenas (over RDMA a closed
 * connection holds no descriptor: nothing is given back). */
#include "common.h"
#include <sys/resource.h>

#define LIMIT 64

/* connect, one byte each way, close; the mode (1 accelerated) and reason */
static void one(const struct sockaddr_storage *ss, socklen_t len, char c, unsigned *mode,
		unsigned *reason)
{
	struct shunt_info info;
	socklen_t l = sizeof info;
	int fd = connect_to(ss, len);
	char got;

	CHECK(send(fd, &c, 1, 0) == 1);
	CHECK(recv(fd, &got, 1, MSG_WAITALL) == 1 && got == c);
	*mode = *reason = 0;
	if (!getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l)) {
		*mode = info.mode;
		*reason = info.reason;
	}
	close(fd);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), pipes[LIMIT][2], n = 0, st;
	unsigned mode, reason, tries = 0;
	struct rlimit rl;
	pid_t pid;

	deadline(60);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		echo_one_byte(&l);
		_exit(0);
	}
	close(l);
	/* a low limit from the start: shunt keeps its own above half of it */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = LIMIT;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	one(&ss, len, 'a', &mode, &reason);
	if (getenv("SHUNT_EXPECT"))
		CHECK(mode == 1);
	/* the connection is closed, its shared memory idle: fill the limit
	 * with pipes, as far as TCP would let us - shunt gives that memory's
	 * descriptors back on the way */
	while (n < LIMIT && pipe(pipes[n]) == 0)
		n++;
	CHECK(errno == EMFILE && n >= (LIMIT - 8) / 2);
	for (int i = 0; i < n; i++)
		close(pipes[i][0]), close(pipes[i][1]);
	/* for 10 s new connections stay plain (reason descriptors, 24);
	 * then the first one is accelerated again */
	for (;;) {
		one(&ss, len, (char)('b' + tries % 20), &mode, &reason);
		if (!getenv("SHUNT_EXPECT") || reason != 24)
			break;
		CHECK(++tries < 100);
		usleep(200000);
	}
	if (getenv("SHUNT_EXPECT")) {
		fprintf(stderr, "after %u plain connections (descriptors): mode %u reason %u\n", tries,
			mode, reason);
		CHECK(tries > 0); /* the give-back happened */
		CHECK(mode == 1);
		for (int i = 0; i < 5; i++) { /* and stays so */
			one(&ss, len, (char)('x' + i), &mode, &reason);
			CHECK(mode == 1);
		}
	}
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	return 0;
}
