/* Description: reading which sockets a generic-netlink message hands to
 * the kernel's NBD driver (kernel_sock.c): NBD_CMD_CONNECT and
 * NBD_CMD_RECONFIGURE laid out as libnl lays them out, with one or more
 * sockets, several messages in one send, other commands, attributes and
 * families naming nothing, every truncation of a valid message naming no
 * socket it does not hold whole, never a read past the buffer; and the
 * family number in the kernel's answer to CTRL_CMD_GETFAMILY, from crafted
 * answers and from this machine's kernel ("nlctrl" is always there). */
#define _GNU_SOURCE
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../src/common/nbdnl.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static size_t put_attr(uint8_t *b, size_t off, uint16_t type, const void *v, size_t n)
{
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + n), .nla_type = type };
	memcpy(b + off, &a, sizeof a);
	if (n)
		memcpy(b + off + NLA_HDRLEN, v, n);
	memset(b + off + NLA_HDRLEN + n, 0, NLA_ALIGN(n) - n);
	return off + NLA_HDRLEN + NLA_ALIGN(n);
}

/* a message of type `type`, command cmd, naming nfd sockets (fd0, fd0+1...);
 * other attributes before and between, as nbd-client sends them */
static size_t msg(uint8_t *b, uint16_t type, uint8_t cmd, int fd0, int nfd)
{
	struct nlmsghdr h = { .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST };
	struct genlmsghdr g = { .cmd = cmd, .version = 1 };
	uint64_t size = 1 << 20;
	size_t off = NLMSG_HDRLEN, socks, item;
	uint32_t v;

	memcpy(b + off, &g, sizeof g);
	off += GENL_HDRLEN;
	off = put_attr(b, off, NBD_ATTR_SIZE_BYTES, &size, sizeof size);
	socks = off;
	off += NLA_HDRLEN;
	for (int i = 0; i < nfd; i++) {
		item = off;
		off += NLA_HDRLEN;
		v = (uint32_t)(fd0 + i);
		off = put_attr(b, off, NBD_SOCK_FD, &v, sizeof v);
		put_attr(b, item, NLA_F_NESTED | NBD_SOCK_ITEM, NULL, 0);
		((struct nlattr *)(b + item))->nla_len = (uint16_t)(off - item);
	}
	put_attr(b, socks, NLA_F_NESTED | NBD_ATTR_SOCKETS, NULL, 0);
	((struct nlattr *)(b + socks))->nla_len = (uint16_t)(off - socks);
	v = 30;
	off = put_attr(b, off, NBD_ATTR_TIMEOUT, &v, sizeof v);
	h.nlmsg_len = (uint32_t)off;
	memcpy(b, &h, sizeof h);
	return off;
}

/* an exact-size heap copy: ASan sees any read past it */
static int socks(const uint8_t *b, size_t n, uint16_t fam, int *fds, int max, uint16_t *type)
{
	uint8_t *c = malloc(n ? n : 1);
	int r;
	memcpy(c, b, n);
	r = shunt_nbdnl_socks(c, n, fam, fds, max, type);
	free(c);
	return r;
}

int main(void)
{
	uint8_t b[1024], ans[256];
	int fds[8], n;
	uint16_t type = 0;
	size_t len, len2;

	len = msg(b, 0x23, NBD_CMD_CONNECT, 7, 1);
	CHECK(socks(b, len, 0, fds, 8, &type) == 1 && fds[0] == 7 && type == 0x23);
	CHECK(socks(b, len, 0x23, fds, 8, NULL) == 1);
	CHECK(socks(b, len, 0x24, fds, 8, NULL) == 0); /* another family's */
	len = msg(b, 0x23, NBD_CMD_RECONFIGURE, 10, 4);
	CHECK(socks(b, len, 0x23, fds, 8, NULL) == 4 && fds[0] == 10 && fds[3] == 13);
	CHECK(socks(b, len, 0x23, fds, 2, NULL) == 2); /* no more than asked */
	len = msg(b, 0x23, NBD_CMD_DISCONNECT, 7, 1);
	CHECK(socks(b, len, 0, fds, 8, NULL) == 0); /* other commands name none */
	len = msg(b, 0x23, NBD_CMD_STATUS, 7, 1);
	CHECK(socks(b, len, 0, fds, 8, NULL) == 0);
	/* two messages in one send: both read */
	len = msg(b, 0x23, NBD_CMD_CONNECT, 5, 1);
	len2 = msg(b + len, 0x23, NBD_CMD_CONNECT, 6, 2);
	n = socks(b, len + len2, 0, fds, 8, NULL);
	CHECK(n == 3 && fds[0] == 5 && fds[1] == 6 && fds[2] == 7);
	/* every cut: no socket it does not hold whole */
	len = msg(b, 0x23, NBD_CMD_CONNECT, 9, 3);
	for (size_t k = 0; k < len; k++) {
		n = socks(b, k, 0, fds, 8, NULL);
		CHECK(n == 0); /* the message's length says more than there is */
	}
	/* lengths that lie: an attribute longer than its message, shorter than
	 * its header, a socket number of the wrong size */
	len = msg(b, 0x23, NBD_CMD_CONNECT, 9, 1);
	((struct nlattr *)(b + NLMSG_HDRLEN + GENL_HDRLEN + 12))->nla_len = 2000;
	CHECK(socks(b, len, 0, fds, 8, NULL) == 0);
	((struct nlattr *)(b + NLMSG_HDRLEN + GENL_HDRLEN + 12))->nla_len = 2;
	CHECK(socks(b, len, 0, fds, 8, NULL) == 0);
	len = msg(b, 0x23, NBD_CMD_CONNECT, 9, 1);
	((struct nlattr *)(b + len - 8 - 8))->nla_len = 6; /* NBD_SOCK_FD of 2 bytes */
	CHECK(socks(b, len, 0, fds, 8, NULL) == 0);
	CHECK(socks(b, 0, 0, fds, 8, NULL) == 0);
	/* every byte flipped: never a crash, never more sockets than written */
	len = msg(b, 0x23, NBD_CMD_CONNECT, 9, 2);
	for (size_t k = 0; k < len; k++)
		for (int bit = 0; bit < 8; bit++) {
			b[k] ^= (uint8_t)(1 << bit);
			CHECK(socks(b, len, 0, fds, 8, NULL) <= 2);
			b[k] ^= (uint8_t)(1 << bit);
		}

	/* the family request and answers */
	CHECK(shunt_genl_getfamily(b, sizeof b, "nbd", 9) == NLMSG_HDRLEN + GENL_HDRLEN + NLA_HDRLEN + 4);
	CHECK(shunt_genl_getfamily(b, 20, "nbd", 9) == -1);
	{
		struct nlmsghdr h = { .nlmsg_type = GENL_ID_CTRL, .nlmsg_seq = 9 };
		struct genlmsghdr g = { .cmd = CTRL_CMD_NEWFAMILY, .version = 2 };
		uint16_t id = 0x2a;
		size_t off = NLMSG_HDRLEN + GENL_HDRLEN;
		memcpy(ans + NLMSG_HDRLEN, &g, sizeof g);
		off = put_attr(ans, off, CTRL_ATTR_FAMILY_NAME, "nbd", 4);
		off = put_attr(ans, off, CTRL_ATTR_FAMILY_ID, &id, sizeof id);
		h.nlmsg_len = (uint32_t)off;
		memcpy(ans, &h, sizeof h);
		CHECK(shunt_genl_family_id(ans, off, 9) == 0x2a);
		CHECK(shunt_genl_family_id(ans, off, 10) == -1); /* another request's */
		for (size_t k = 0; k < off; k++)
			CHECK(shunt_genl_family_id(ans, k, 9) == -1);
		h.nlmsg_type = NLMSG_ERROR;
		memcpy(ans, &h, sizeof h);
		CHECK(shunt_genl_family_id(ans, off, 9) == -1);
	}
	/* this kernel's controller */
	{
		int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC);
		int l = shunt_genl_getfamily(b, sizeof b, "nlctrl", 77);
		ssize_t got;
		if (fd >= 0) {
			CHECK(l > 0 && send(fd, b, (size_t)l, 0) == l);
			got = recv(fd, ans, sizeof ans, 0);
			CHECK(got > 0 && shunt_genl_family_id(ans, (size_t)got, 77) == GENL_ID_CTRL);
			l = shunt_genl_getfamily(b, sizeof b, "no-such-family", 78);
			CHECK(l > 0 && send(fd, b, (size_t)l, 0) == l);
			got = recv(fd, ans, sizeof ans, 0);
			CHECK(got > 0 && shunt_genl_family_id(ans, (size_t)got, 78) == -1);
			close(fd);
		}
	}
	printf("nbdnl: ok\n");
	return 0;
}
