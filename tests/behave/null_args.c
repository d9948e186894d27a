/* Description: the calls that wait for or read a connection, given a NULL
 * array where the kernel copies one - epoll_wait's events, poll's and
 * ppoll's descriptors, readv's vector, recvmsg's message - with a byte
 * waiting: the kernel's EFAULT, as TCP's, and the byte still there after.
 * Under shunt epoll_wait, poll and ppoll crashed the program (they wrote
 * the rings' events into the NULL array) and readv said 0, an end of
 * stream that was not there; sendmmsg's NULL vector: tests/behave/mmsg. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/uio.h>

/* NULL, out of the compiler's sight (it refuses a literal NULL here) */
static void *volatile nothing;

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, c, ep, r;
	struct epoll_event ev = { .events = EPOLLIN };
	char b;

	deadline(60);
	pid_t p = test_fork();
	if (!p) { /* (a process of its own: over RDMA connect() waits for the accept) */
		CHECK((c = accept(l, NULL, NULL)) >= 0);
		write_all(c, "x", 1);
		CHECK(read(c, &b, 1) == 0);
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(readable_within(fd, 30000));
	CHECK((ep = epoll_create1(0)) >= 0);
	ev.data.fd = fd;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
#define EFAULT_OF(call)                                                                  \
	do {                                                                             \
		errno = 0;                                                               \
		r = (int)(call);                                                         \
		if (r != -1 || errno != EFAULT) {                                        \
			fprintf(stderr, "%s: %d (%s), wanted EFAULT\n", #call, r, strerror(errno)); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)
	EFAULT_OF(epoll_wait(ep, nothing, 4, 1000));
	EFAULT_OF(poll(nothing, 1, 0));
	EFAULT_OF(ppoll(nothing, 1, NULL, NULL));
	EFAULT_OF(readv(fd, nothing, 1));
	EFAULT_OF(recvmsg(fd, nothing, 0));
	CHECK(read(fd, &b, 1) == 1 && b == 'x'); /* none of them took it */
	close(ep);
	close(fd);
	CHECK(wait_child(p) == 0);
	printf("null_args: ok\n");
	return 0;
}
