/* Description: a program that hands its connected TCP socket to a kernel
 * driver - nbd-client's ioctl(NBD_SET_SOCK) on an NBD device - while
 * bytes of its peer wait unread and bytes of its own are not yet read by
 * the peer: from then on the kernel reads and writes the socket itself,
 * past libc, and must find the whole stream there, in order.  Under shunt
 * the connection was accelerated: it moves to TCP at the exact byte
 * before the ioctl goes to the kernel (reason kernel-socket, 31), the peer
 * resending onto the socket what our ring held unread.  Before, the
 * driver's requests went onto a socket the server never read, and its
 * reads found none of the server's bytes, which were in the rings.
 *
 * The driver is stood in for by system calls made past the wrappers
 * (what the kernel does is read and write the socket); the ioctl goes to
 * /dev/null, whose answer (ENOTTY) is the kernel's as it would be without
 * shunt.  Then a generic-netlink message shaped as NBD_CMD_CONNECT naming
 * a second accelerated connection, but of another family (the
 * controller's, which refuses it): that connection stays accelerated.
 * The real driver, over netlink and by ioctl, over shared memory and
 * RDMA: tests/rdma/nbd.sh. */
#include "common.h"
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <sys/ioctl.h>
#include <linux/nbd.h>

#define IN 100000  /* the peer's, in our ring when the socket is handed over */
#define OUT1 50000 /* ours before, unread by the peer then */
#define OUT2 100000 /* ours by the "driver" */

static void server(int l)
{
	/* asleep in its read when the socket is handed over */
	serve_in_flight(l, IN, OUT1 + OUT2);
	echo_byte_to_end(l); /* the second connection */
	_exit(0);
}

/* NBD_CMD_CONNECT's shape - [NBD_ATTR_SOCKETS [NBD_SOCK_ITEM [NBD_SOCK_FD fd]]] -
 * as libnl lays it out, in a message of the given type. */
static size_t nbd_connect_msg(uint8_t *buf, uint16_t type, int fd)
{
	struct nlmsghdr h = { .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 7 };
	struct genlmsghdr g = { .cmd = NBD_CMD_CONNECT, .version = NBD_GENL_VERSION };
	struct nlattr socks = { .nla_len = 16, .nla_type = NLA_F_NESTED | NBD_ATTR_SOCKETS };
	struct nlattr item = { .nla_len = 12, .nla_type = NLA_F_NESTED | NBD_SOCK_ITEM };
	struct nlattr fda = { .nla_len = 8, .nla_type = NBD_SOCK_FD };
	uint32_t v = (uint32_t)fd;
	size_t off = NLMSG_HDRLEN;

	memcpy(buf + off, &g, sizeof g), off += GENL_HDRLEN;
	memcpy(buf + off, &socks, sizeof socks), off += NLA_HDRLEN;
	memcpy(buf + off, &item, sizeof item), off += NLA_HDRLEN;
	memcpy(buf + off, &fda, sizeof fda), off += NLA_HDRLEN;
	memcpy(buf + off, &v, sizeof v), off += sizeof v;
	h.nlmsg_len = (uint32_t)off;
	memcpy(buf, &h, sizeof h);
	return off;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, fd2, dev, nl, st;
	pid_t p;
	static uint8_t buf[OUT1 + OUT2];
	uint8_t msg[64];

	deadline(30);
	fd = connect_in_flight(server, &p, &ss, &len, buf, OUT1 + OUT2, OUT1, IN);

	/* handed over: the kernel's answer for /dev/null */
	dev = open("/dev/null", O_RDWR);
	CHECK(dev >= 0);
	errno = 0;
	CHECK(ioctl(dev, NBD_SET_SOCK, (unsigned long)fd) == -1 && errno == ENOTTY);
	close(dev);
	expect_plain_reason(fd, 31); /* kernel-socket */

	driver_stream(fd, buf, OUT1, OUT1 + OUT2, IN); /* the "driver" */
	close(fd);

	/* another family's message of the same shape moves nothing */
	fd2 = connect_to(&ss, len);
	expect_mode(fd2);
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl >= 0) {
		size_t n = nbd_connect_msg(msg, GENL_ID_CTRL, fd2);
		CHECK(send(nl, msg, n, 0) == (ssize_t)n); /* (the controller answers with an error) */
		close(nl);
	}
	expect_mode(fd2);
	echo_once(fd2, 'e');
	close(fd2);
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("kernel_socket: ok\n");
	return 0;
}
