/* Description: what only the kernel's handling of each packet gives a
 * TCP socket behaves as TCP's: the error queue (recvmsg MSG_ERRQUEUE) is
 * empty (EAGAIN) and never hands out stream bytes; a MSG_ZEROCOPY send
 * after SO_ZEROCOPY gets its completion there (poll's POLLERR, then a
 * SO_EE_ORIGIN_ZEROCOPY notice); SO_TIMESTAMPNS set on a connection and
 * SO_TIMESTAMP set on a listener (its accepted connections inherit it)
 * put a timestamp in recvmsg's control data.  The rings carry none of
 * these: the connection moves to TCP at the exact byte first.  Before, a
 * MSG_ERRQUEUE read returned stream bytes, a zerocopy sender waited for
 * ever for its completion, no timestamp came, and a send's control data
 * was dropped (the unknown type's send succeeded). */
#include "common.h"
#include <linux/errqueue.h>
#include <sys/ioctl.h>

#define BULK (64 * 1024)

/* The error queue is empty: EAGAIN, and the stream's bytes stay. */
static void errqueue_empty(int fd)
{
	char b[16], ctl[256];
	struct iovec iov = { b, sizeof b };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };

	errno = 0;
	CHECK(recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) == -1 && errno == EAGAIN);
}

/* The completion of zerocopy send number 0, from the error queue. */
static void zerocopy_done(int fd)
{
	char ctl[256];
	struct msghdr m = { .msg_control = ctl, .msg_controllen = sizeof ctl };
	struct pollfd p = { .fd = fd, .events = 0 };
	struct cmsghdr *h;
	struct sock_extended_err e;

	CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLERR));
	CHECK(recvmsg(fd, &m, MSG_ERRQUEUE) == 0);
	h = CMSG_FIRSTHDR(&m);
	CHECK(h && ((h->cmsg_level == SOL_IP && h->cmsg_type == IP_RECVERR) ||
		    (h->cmsg_level == SOL_IPV6 && h->cmsg_type == IPV6_RECVERR)));
	memcpy(&e, CMSG_DATA(h), sizeof e);
	CHECK(e.ee_origin == SO_EE_ORIGIN_ZEROCOPY && e.ee_errno == 0 && e.ee_info == 0 && e.ee_data == 0);
}

/* n bytes read with recvmsg; a timestamp must come with them. */
static void read_stamped(int fd, size_t n, int level_type)
{
	char b[64], ctl[256];
	size_t got = 0;
	int stamped = 0;

	while (got < n) {
		struct iovec iov = { b, n - got };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				    .msg_controllen = sizeof ctl };
		ssize_t r = recvmsg(fd, &m, 0);
		CHECK(r > 0);
		got += (size_t)r;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
			stamped |= h->cmsg_level == SOL_SOCKET && h->cmsg_type == level_type;
	}
	if (!stamped) {
		fprintf(stderr, "no timestamp (cmsg type %d) with the bytes\n", level_type);
		exit(1);
	}
}

/* One byte, 'z', with one socket-level control message of type t
 * carrying descriptor 0. */
static ssize_t send_ctl(int fd, int t)
{
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 }, z = 'z';
	struct iovec iov = { &z, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	int zero = 0;

	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = t;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &zero, sizeof zero);
	return sendmsg(fd, &m, 0);
}

int main(void)
{
	struct sockaddr_storage ss, ss2;
	socklen_t len, len2;
	int l, l2, fd, one = 1, n = 0;
	char b[8];
	pid_t p;

	deadline(60);
	/* a second listener, with timestamps from before any connection */
	l2 = listen_on("127.0.0.1", &ss2, &len2);
	CHECK(setsockopt(l2, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof one) == 0);
	p = serve_forked(&l, &ss, &len);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		write_all(c, "hello", 5);
		expect_pattern(c, BULK, 3);
		read_all(c, b, 1); /* the client's SO_TIMESTAMPNS is on */
		write_all(c, "ts", 2);
		read_all(c, b, 1);
		close(c);
		/* the listener with timestamps: its connection inherits them */
		c = accept(l2, NULL, NULL);
		CHECK(c >= 0);
		read_stamped(c, 3, SCM_TIMESTAMP);
		expect_plain_now(c, "a kernel feature");
		write_all(c, "k", 1);
		close(c);
		/* control data in a send: the kernel's to judge */
		c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, b, 2);
		CHECK(b[0] == 'z' && b[1] == 'q');
		CHECK(read(c, b, 1) == 0); /* the refused send carried nothing */
		close(c);
		_exit(0);
	}
	close(l);
	close(l2);

	fd = connect_to(&ss, len);
	expect_mode(fd);
	for (int i = 0; i < 5000 && n < 5; i++) { /* "hello" is in */
		CHECK(ioctl(fd, FIONREAD, &n) == 0);
		usleep(1000);
	}
	CHECK(n == 5);
	errqueue_empty(fd);
	read_all(fd, b, 5);
	CHECK(!memcmp(b, "hello", 5));
	/* zerocopy: the completion comes on the error queue */
	CHECK(setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0);
	{
		uint8_t *buf = malloc(BULK);
		CHECK(buf);
		for (size_t i = 0; i < BULK; i++)
			buf[i] = pattern(i, 3);
		size_t off = 0;
		while (off < BULK) {
			ssize_t w = send(fd, buf + off, BULK - off, MSG_ZEROCOPY);
			CHECK(w > 0);
			off += (size_t)w;
			CHECK(off == BULK); /* one send, one notice numbered 0 */
		}
		zerocopy_done(fd);
		free(buf);
	}
	expect_plain_now(fd, "a kernel feature");
	errqueue_empty(fd);
	/* receive timestamps on a connection made before */
	CHECK(setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) == 0);
	write_all(fd, "t", 1);
	read_stamped(fd, 2, SCM_TIMESTAMPNS);
	write_all(fd, "d", 1);
	close(fd);

	fd = connect_to(&ss2, len2);
	expect_mode_peer_forks(fd); /* the server's accept may have moved it already */
	write_all(fd, "abc", 3);
	read_all(fd, b, 1);
	CHECK(b[0] == 'k');
	close(fd);

	/* control data in a send: SCM_RIGHTS is ignored on TCP (the byte
	 * goes), a socket-level type TCP does not know is EINVAL (nothing goes) */
	fd = connect_to(&ss, len);
	expect_mode(fd);
	CHECK(send_ctl(fd, SCM_RIGHTS) == 1);
	expect_mode(fd);
	errno = 0;
	CHECK(send_ctl(fd, 0x7ff) == -1 && errno == EINVAL);
	write_all(fd, "q", 1);
	close(fd);
	CHECK(wait_child(p) == 0);
	return 0;
}
