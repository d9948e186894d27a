/* SPDX-License-Identifier: MIT */
/*
 * smc-config - the two settings SMC-R v2 needs, for the side-by-side bench
 * (Debian 12 has no smc-tools): over generic netlink,
 *   smc-config pnet PNETID NETDEV IBDEV PORT   a pnet table entry
 *   smc-config ueid UEID                       a user-defined EID (v2)
 * Exit 0 when the kernel acknowledged, else 1 with the kernel's error.
 */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct req {
	struct nlmsghdr nh;
	struct genlmsghdr gh;
	char attrs[512];
};

static void attr(struct req *r, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void start(struct req *r, uint16_t family, uint8_t cmd, uint8_t version)
{
	memset(r, 0, sizeof *r);
	r->nh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->nh.nlmsg_type = family;
	r->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	r->gh.cmd = cmd;
	r->gh.version = version;
}

/* Send r, read the answer into buf; the kernel's error (0: acknowledged). */
static int talk(int fd, struct req *r, char *buf, size_t cap)
{
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	ssize_t n;

	if (send(fd, r, r->nh.nlmsg_len, 0) < 0 || (n = recv(fd, buf, cap, 0)) < 0)
		return -errno;
	for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
		if (h->nlmsg_type == NLMSG_ERROR)
			return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return 0;
}

static int family_id(int fd, const char *name)
{
	char buf[4096];
	struct req r;
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	ssize_t n;

	start(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1);
	r.nh.nlmsg_flags = NLM_F_REQUEST;
	attr(&r, CTRL_ATTR_FAMILY_NAME, name, strlen(name) + 1);
	if (send(fd, &r, r.nh.nlmsg_len, 0) < 0 || (n = recv(fd, buf, sizeof buf, 0)) < 0)
		return -1;
	for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
		int left = (int)h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
		if (h->nlmsg_type != GENL_ID_CTRL)
			continue;
		for (; left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left;
		     left -= NLA_ALIGN(a->nla_len), a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
			if (a->nla_type == CTRL_ATTR_FAMILY_ID)
				return *(uint16_t *)((char *)a + NLA_HDRLEN);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC), fam, e;
	char buf[4096];
	struct req r;

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
		perror("smc-config: netlink");
		return 1;
	}
	if (argc == 6 && !strcmp(argv[1], "pnet")) {
		uint8_t port = (uint8_t)atoi(argv[5]);
		if ((fam = family_id(fd, SMCR_GENL_FAMILY_NAME)) < 0) {
			fprintf(stderr, "smc-config: no %s family (is smc loaded?)\n", SMCR_GENL_FAMILY_NAME);
			return 1;
		}
		start(&r, (uint16_t)fam, SMC_PNETID_ADD, SMCR_GENL_FAMILY_VERSION);
		attr(&r, SMC_PNETID_NAME, argv[2], strlen(argv[2]) + 1);
		attr(&r, SMC_PNETID_ETHNAME, argv[3], strlen(argv[3]) + 1);
		attr(&r, SMC_PNETID_IBNAME, argv[4], strlen(argv[4]) + 1);
		attr(&r, SMC_PNETID_IBPORT, &port, 1);
	} else if (argc == 3 && !strcmp(argv[1], "ueid")) {
		char eid[SMC_MAX_EID_LEN + 1];
		if ((fam = family_id(fd, SMC_GENL_FAMILY_NAME)) < 0) {
			fprintf(stderr, "smc-config: no %s family\n", SMC_GENL_FAMILY_NAME);
			return 1;
		}
		snprintf(eid, sizeof eid, "%-32.32s", argv[2]); /* blank-padded, as the kernel keeps it */
		start(&r, (uint16_t)fam, SMC_NETLINK_ADD_UEID, SMC_GENL_FAMILY_VERSION);
		attr(&r, SMC_NLA_EID_TABLE_ENTRY, eid, sizeof eid);
	} else {
		fprintf(stderr, "usage: smc-config pnet PNETID NETDEV IBDEV PORT | smc-config ueid UEID\n");
		return 2;
	}
	if ((e = talk(fd, &r, buf, sizeof buf))) {
		fprintf(stderr, "smc-config %s: %s\n", argv[1], strerror(-e));
		return 1;
	}
	return 0;
}
