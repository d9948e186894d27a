/* Description: the iSCSI netlink parser (src/common/iscsinl.c): the
 * socket ISCSI_UEVENT_BIND_CONN names, in iscsid's layout (a netlink
 * header, then struct iscsi_uevent), alone or after other messages of the
 * same send; nothing for other types, for a message too short for the
 * field or one that does not fit the bytes sent, nor for a number past
 * INT_MAX (an offload transport's endpoint handle); never more than
 * asked. */
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/common/iscsinl.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

#define UEV_LEN 64 /* room for struct iscsi_uevent's fields (the kernel's is larger; any size above 36 will do) */

/* One message at buf: its aligned length. */
static size_t msg(uint8_t *buf, uint16_t type, uint64_t eph, uint32_t len)
{
	struct nlmsghdr h = { .nlmsg_len = len, .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST };
	uint32_t ev_type = type, sid = 1, cid = 0, leading = 1;

	memset(buf, 0, NLMSG_ALIGN(len));
	memcpy(buf, &h, sizeof h);
	memcpy(buf + NLMSG_HDRLEN, &ev_type, 4);
	memcpy(buf + NLMSG_HDRLEN + 16, &sid, 4);
	memcpy(buf + NLMSG_HDRLEN + 20, &cid, 4);
	if (len >= NLMSG_HDRLEN + 32)
		memcpy(buf + NLMSG_HDRLEN + 24, &eph, 8);
	if (len >= NLMSG_HDRLEN + 36)
		memcpy(buf + NLMSG_HDRLEN + 32, &leading, 4);
	return NLMSG_ALIGN(len);
}

int main(void)
{
	uint8_t b[1024];
	int fds[4];
	size_t off;

	/* iscsid's bind */
	off = msg(b, SHUNT_ISCSI_UEVENT_BIND_CONN, 7, NLMSG_HDRLEN + UEV_LEN);
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 1 && fds[0] == 7);
	/* cut anywhere: nothing */
	for (size_t k = 0; k < off; k++)
		CHECK(shunt_iscsinl_socks(b, k, fds, 4) == 0);
	/* other types name nothing (SET_PARAM, STOP_CONN; the kernel's events) */
	CHECK(msg(b, 16, 7, NLMSG_HDRLEN + UEV_LEN) && shunt_iscsinl_socks(b, off, fds, 4) == 0);
	CHECK(msg(b, 18, 7, NLMSG_HDRLEN + UEV_LEN) && shunt_iscsinl_socks(b, off, fds, 4) == 0);
	CHECK(msg(b, 101, 7, NLMSG_HDRLEN + UEV_LEN) && shunt_iscsinl_socks(b, off, fds, 4) == 0);
	/* too short for is_leading: the kernel refuses it, we name nothing */
	off = msg(b, SHUNT_ISCSI_UEVENT_BIND_CONN, 7, NLMSG_HDRLEN + 35);
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 0);
	/* an offload transport's handle: not a descriptor */
	off = msg(b, SHUNT_ISCSI_UEVENT_BIND_CONN, 0xffff888012345678ull, NLMSG_HDRLEN + UEV_LEN);
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 0);
	/* several in one send, the bind after others; at most max */
	off = msg(b, 16, 3, NLMSG_HDRLEN + UEV_LEN);
	off += msg(b + off, SHUNT_ISCSI_UEVENT_BIND_CONN, 9, NLMSG_HDRLEN + UEV_LEN);
	off += msg(b + off, SHUNT_ISCSI_UEVENT_BIND_CONN, 11, NLMSG_HDRLEN + UEV_LEN + 3);
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 2 && fds[0] == 9 && fds[1] == 11);
	CHECK(shunt_iscsinl_socks(b, off, fds, 1) == 1 && fds[0] == 9);
	/* a length past the bytes sent ends the walk; one below a header too */
	off = msg(b, SHUNT_ISCSI_UEVENT_BIND_CONN, 5, NLMSG_HDRLEN + UEV_LEN);
	((struct nlmsghdr *)b)->nlmsg_len = (uint32_t)off + 1;
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 0);
	((struct nlmsghdr *)b)->nlmsg_len = NLMSG_HDRLEN - 1;
	CHECK(shunt_iscsinl_socks(b, off, fds, 4) == 0);
	printf("iscsinl: ok\n");
	return 0;
}
