/* Description: a program that hands its connected TCP socket to the
 * kernel's iSCSI initiator as iscsid does after its login - by number, in
 * ISCSI_UEVENT_BIND_CONN on a NETLINK_ISCSI socket (sendmsg: the netlink
 * header and struct iscsi_uevent in two pieces) - while bytes of its peer
 * wait unread and bytes of its own are not yet read by the peer: from then
 * on iscsi_tcp reads and writes the socket itself, past libc, and must
 * find the whole stream there, in order.  Under shunt the connection was
 * accelerated: it moves to TCP at the exact byte before the message goes
 * to the kernel (reason kernel-socket, 31).  Before the forty-sixth
 * session the message went through untouched: the initiator would have
 * written its commands onto a socket the target never read.
 *
 * The initiator is stood in for by system calls made past the wrappers;
 * the message names no session the kernel has (its answer: an error
 * reply), as the kernel would answer it without shunt.  Then a message of
 * another type (STOP_CONN) carrying a second accelerated connection's
 * number where BIND_CONN has the socket: that connection stays
 * accelerated.  Needs the kernel's iSCSI transport class
 * (scsi_transport_iscsi: the Soft-RoCE guest loads it); without it the
 * socket cannot be made and the test is skipped. */
#include "common.h"
#include <linux/netlink.h>

#ifndef NETLINK_ISCSI
#define NETLINK_ISCSI 8
#endif
#define BIND_CONN 15 /* ISCSI_UEVENT_BIND_CONN */
#define STOP_CONN 18 /* ISCSI_UEVENT_STOP_CONN */

#define IN 100000   /* the peer's, in our ring when the socket is handed over */
#define OUT1 50000  /* ours before, unread by the peer then */
#define OUT2 100000 /* ours by the "initiator" */

static void server(int l)
{
	serve_in_flight(l, IN, OUT1 + OUT2); /* asleep in its read at the bind */
	echo_byte_to_end(l); /* the second connection */
	_exit(0);
}

/* iscsid's shape: struct iscsi_uevent with the socket at u.b_conn's
 * transport_eph (offset 24), sid 1, cid 0, is_leading 1. */
static void uevent_send(int nl, uint16_t type, int fd)
{
	uint8_t ev[64] = { 0 }; /* (the kernel's struct is larger; it refuses none of it here) */
	struct nlmsghdr h = { .nlmsg_len = NLMSG_HDRLEN + sizeof ev, .nlmsg_type = type };
	uint32_t t = type, sid = 1, leading = 1;
	uint64_t eph = (uint64_t)fd;
	struct iovec v[2] = { { &h, sizeof h }, { ev, sizeof ev } };
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	struct msghdr m = { .msg_name = &to, .msg_namelen = sizeof to, .msg_iov = v, .msg_iovlen = 2 };

	memcpy(ev, &t, 4);
	memcpy(ev + 16, &sid, 4);
	memcpy(ev + 24, &eph, 8);
	memcpy(ev + 32, &leading, 4);
	CHECK(sendmsg(nl, &m, 0) == (ssize_t)h.nlmsg_len);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, fd2, nl, st;
	pid_t p;
	static uint8_t buf[OUT1 + OUT2];

	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ISCSI);
	if (nl < 0) {
		printf("skip: no NETLINK_ISCSI here (%s: the kernel's scsi_transport_iscsi is not loaded)\n",
		       strerror(errno));
		return 77;
	}
	deadline(30);
	fd = connect_in_flight(server, &p, &ss, &len, buf, OUT1 + OUT2, OUT1, IN);
	uevent_send(nl, BIND_CONN, fd);
	expect_plain_reason(fd, 31); /* kernel-socket */

	driver_stream(fd, buf, OUT1, OUT1 + OUT2, IN); /* the "initiator" */
	close(fd);

	/* another type's message moves nothing */
	fd2 = connect_to(&ss, len);
	expect_mode(fd2);
	uevent_send(nl, STOP_CONN, fd2);
	expect_mode(fd2);
	echo_once(fd2, 'e');
	close(fd2);
	close(nl);
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("kernel_socket_iscsi: ok\n");
	return 0;
}
