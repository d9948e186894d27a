/* Description: a reader blocked in recv() learns of its peer's close at
 * once: 40 times, the server answers one byte and closes, the client's
 * next recv() returns 0; the median wait is what TCP's is (well under
 * 25 ms).  Under shunt the closing side sends its FIN and then wakes a
 * sleeping reader - but only if the reader's flag was set when it looked:
 * a reader that set it just after went to sleep for its whole 100 ms slice
 * (43 ms a connection on average, one in three waits 100 ms; issue #13,
 * item 10).  The reader now
 * looks at the socket after setting its flag, before it sleeps. */
#include "common.h"

#define N 40

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	double waits[N];
	pid_t pid;

	deadline(60);
	pid = test_fork();
	if (pid == 0) {
		for (int i = 0; i < N; i++) {
			char c;
			int fd = accept(l, NULL, NULL);
			CHECK(fd >= 0);
			CHECK(recv(fd, &c, 1, MSG_WAITALL) == 1 && send(fd, &c, 1, 0) == 1);
			close(fd);
		}
		return 0;
	}
	for (int i = 0; i < N; i++) {
		char c = (char)i;
		int fd = connect_to(&ss, len);
		double t0;
		expect_mode_peer_forks(fd);
		CHECK(send(fd, &c, 1, 0) == 1 && recv(fd, &c, 1, MSG_WAITALL) == 1 && c == (char)i);
		t0 = now_s();
		CHECK(recv(fd, &c, 1, 0) == 0); /* blocks until the server's close */
		waits[i] = now_s() - t0;
		close(fd);
	}
	double median = sort_median(waits, N);
	int late = 0;
	for (int i = 0; i < N; i++)
		late += waits[i] > 0.05;
	fprintf(stderr, "EOF after the peer's close: median %.2f ms, max %.2f ms, %d of %d over 50 ms\n",
		median * 1e3, waits[N - 1] * 1e3, late, N);
	CHECK(late <= 2);
	CHECK(wait_child(pid) == 0);
	return 0;
}
