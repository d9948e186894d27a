/* Description: TCP_INQ (gRPC's reads use it) behaves as TCP's: once on,
 * each recvmsg that returns bytes or the end carries a TCP_CM_INQ control
 * message with the bytes still to read - 1 once the stream ended with
 * none left (the kernel's hint to read the end); a control buffer too
 * small for it says MSG_CTRUNC; off (the default), no message.  Set on the
 * listener, the accepted connection has it.  Under shunt the count is the
 * ring's (before, no message came: the rings' reads put none). */
#include "common.h"

static void server(int l)
{
	int on = 1, c;
	char b;

	CHECK(setsockopt(l, IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0);
	CHECK((c = accept(l, NULL, NULL)) >= 0);
	read_all(c, &b, 1); /* on for the accepted connection too */
	write_all(c, "0123456789", 10);
	read_all(c, &b, 1);
	close(c);
	_exit(0);
}

/* recvmsg of n bytes (MSG_WAITALL) with a control buffer of cap bytes:
 * the TCP_CM_INQ value, -1 if none came */
static int recv_inq(int fd, size_t n, size_t cap, int *flags)
{
	char b[64], ctl[CMSG_SPACE(sizeof(int)) + 16];
	struct iovec iov = { b, n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = cap };
	int v = -1;

	CHECK(recvmsg(fd, &m, n ? MSG_WAITALL : 0) == (ssize_t)n);
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
		if (h->cmsg_level == IPPROTO_TCP && h->cmsg_type == TCP_CM_INQ)
			memcpy(&v, CMSG_DATA(h), sizeof v);
	*flags = m.msg_flags;
	return v;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);
	int fd = connect_to(&ss, len), on = 1, fl, v;
	socklen_t l = sizeof v;
	char b[16];

	expect_mode(fd);
	write_all(fd, "x", 1);
	/* off: no message */
	CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INQ, &v, &l) == 0 && v == 0);
	while (recv(fd, b, sizeof b, MSG_PEEK) != 10) /* all ten here */
		usleep(1000);
	CHECK(recv_inq(fd, 1, CMSG_SPACE(sizeof(int)), &fl) == -1);
	CHECK(setsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0);
	CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INQ, &v, &l) == 0 && v == 1);
	CHECK((v = recv_inq(fd, 4, CMSG_SPACE(sizeof(int)), &fl)) == 5);
	CHECK(recv_inq(fd, 1, sizeof(struct cmsghdr) - 1, &fl) == -1 && (fl & MSG_CTRUNC));
	CHECK((v = recv_inq(fd, 4, CMSG_SPACE(sizeof(int)) + 16, &fl)) == 0 && !(fl & MSG_CTRUNC));
	write_all(fd, "y", 1); /* the server closes */
	CHECK(poll(&(struct pollfd){ .fd = fd, .events = POLLRDHUP }, 1, 10000) == 1);
	CHECK((v = recv_inq(fd, 0, CMSG_SPACE(sizeof(int)), &fl)) == 1);
	CHECK(wait_child(p) == 0);
	close(fd);
	return 0;
}
