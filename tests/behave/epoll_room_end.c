/* Description: an edge-triggered epoll set whose one wake-up brings two
 * things at once - room (the server read the request that filled the
 * client's buffer) and the end (it closed right after) - both arrived
 * while the client was away from epoll_wait.  TCP reports in, out and the
 * hang-up, at once or in the next call.  Under shunt the doorbell's report
 * (room) came first in the kernel's batch and the end, read off the socket
 * later in the same call, was dropped as already reported: a loop waiting
 * for bytes or the end waited for ever (found as a rare hang of
 * epoll_before_connect with both CPUs busy).  NOT_SPLIT_OVER_RDMA: the
 * server says it closed through a pipe. */
#include "common.h"
#include <sys/epoll.h>

static struct chan ch;
static int done[2]; /* the server says it closed */

static void server(int l)
{
	char num[32] = { 0 }, b;
	size_t k = 0;
	int c = accept(l, NULL, NULL);

	CHECK(c >= 0);
	close(done[0]);
	while (chan_recv(&ch, &b) && b != '\n' && k < sizeof num - 1)
		num[k++] = b;
	expect_pattern(c, strtoull(num, NULL, 10), 5); /* all of it: a FIN, not a reset */
	close(c);
	CHECK(write(done[1], "x", 1) == 1);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET }, out[4];
	static uint8_t buf[65536];
	uint32_t got = 0;
	size_t total = 0;
	char num[32], b;
	pid_t p;
	int fd, ep, n;

	if (split_role())
		return 77; /* the server's word comes by a pipe */
	chan_open(&ch);
	CHECK(pipe(done) == 0);
	p = serve_in_child(server, &ss, &len);
	close(done[1]);
	CHECK((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	CHECK((ep = epoll_create1(0)) >= 0);
	ev.data.fd = fd;
	CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	while (!(got & EPOLLOUT)) { /* connected */
		CHECK((n = epoll_wait(ep, out, 4, 10000)) > 0);
		for (int i = 0; i < n; i++)
			got |= out[i].events;
	}
	expect_mode(fd);
	for (;;) { /* until the buffer (the ring) is full */
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = pattern(total + i, 5);
		ssize_t w = write(fd, buf, sizeof buf);
		if (w < 0) {
			CHECK(errno == EAGAIN);
			break;
		}
		total += (size_t)w;
	}
	CHECK(total > 0);
	/* one look (none is new: the set asks the peer to ring for room) */
	n = epoll_wait(ep, out, 4, 0);
	CHECK(n >= 0);
	/* the server reads it all and closes while we are away */
	snprintf(num, sizeof num, "%zu\n", total);
	for (char *c = num; *c; c++)
		chan_send(&ch, *c);
	CHECK(read(done[0], &b, 1) == 1);
	usleep(50000); /* (the FIN through the loopback) */
	got = 0;
	while (!(got & EPOLLIN)) {
		n = epoll_wait(ep, out, 4, 3000);
		CHECK(n > 0); /* (0: the end never reported) */
		for (int i = 0; i < n; i++) {
			CHECK(out[i].data.fd == fd);
			got |= out[i].events;
		}
	}
	CHECK(got & EPOLLRDHUP);
	CHECK(read(fd, buf, sizeof buf) == 0); /* the end, nothing before it */
	close(fd);
	close(ep);
	chan_close(&ch);
	CHECK(wait_child(p) == 0);
	return 0;
}
