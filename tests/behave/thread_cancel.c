/* Description: a thread canceled (pthread_cancel) while it waits on a
 * connection - in read, recv, a send into a full connection, poll and
 * epoll_wait, all cancellation points - leaves the connection as TCP
 * does: closing it afterwards ends it (the peer reads everything, then
 * EOF), and the epoll set goes on working.  Under shunt the canceled
 * thread unwound through the wrapper with its reference on the
 * connection, so the close never released it: no FIN, and the peer
 * waited for ever. */
#include "common.h"
#include <pthread.h>
#include <sys/epoll.h>

enum { K_READ, K_RECV, K_POLL, K_EPOLL, K_SEND, K_N }; /* the sender last: its server naps */

static int fd, ep;

static void *blocker(void *arg)
{
	static char big[8 << 20];
	char b[16];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct epoll_event ev;

	switch ((long)arg) {
	case K_READ:
		(void)!read(fd, b, sizeof b);
		break;
	case K_RECV:
		(void)!recv(fd, b, sizeof b, 0);
		break;
	case K_SEND:
		for (;;)
			(void)!send(fd, big, sizeof big, 0);
	case K_POLL:
		(void)!poll(&p, 1, -1);
		break;
	case K_EPOLL:
		(void)!epoll_wait(ep, &ev, 1, -1);
		break;
	}
	return NULL; /* not reached: canceled */
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char buf[1 << 16];
	pid_t p;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	p = test_fork();
	if (!p) {
		/* each connection read to its end: one that never ends is
		 * this process's deadline */
		for (int k = 0; k < K_N; k++) {
			int c = accept(l, NULL, NULL);
			ssize_t n;
			CHECK(c >= 0);
			expect_mode_peer_forks(c);
			if (k == K_SEND)
				usleep(500000); /* the sender fills the connection */
			while ((n = read(c, buf, sizeof buf)) > 0)
				;
			CHECK(n == 0);
			close(c);
		}
		_exit(0);
	}
	close(l);
	for (long k = 0; k < K_N; k++) {
		pthread_t t;
		void *rv;
		struct epoll_event ev = { .events = EPOLLIN };
		fd = connect_to(&ss, len);
		expect_mode_peer_forks(fd);
		if (k == K_EPOLL) {
			CHECK((ep = epoll_create1(0)) >= 0);
			CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
		}
		CHECK(pthread_create(&t, NULL, blocker, (void *)k) == 0);
		usleep(200000);
		CHECK(pthread_cancel(t) == 0);
		CHECK(pthread_join(t, &rv) == 0 && rv == PTHREAD_CANCELED);
		if (k == K_EPOLL) { /* the set is not left locked */
			CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
			CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
			close(ep);
		}
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
