/* SPDX-License-Identifier: MIT */
/*
 * kernel_sock.c - a socket handed to a kernel driver, which then reads and
 * writes it itself, past shunt: the NBD driver's.  nbd-client gives the
 * kernel its connected socket with ioctl(NBD_SET_SOCK) on the device, or
 * by number in a generic-netlink NBD_CMD_CONNECT / NBD_CMD_RECONFIGURE
 * (its default).  An accelerated connection's bytes are in the rings: the
 * driver would have written its requests onto a socket the server does
 * not read, and the process's exit (nbd-client's, once it handed the
 * socket over) ended the connection in the rings.  So before the kernel
 * takes it the connection moves to TCP at the exact byte, as before a
 * descriptor pass (move.c; reason kernel-socket on both ends); one that
 * cannot move (a peer that shut its side with bytes we have not read, a
 * sandbox) fails the call with EBUSY and a warning, instead of giving the
 * kernel a socket whose stream is elsewhere.  The kernel's iSCSI
 * initiator likewise: iscsid logs in over its own connection, then gives
 * the socket to iscsi_tcp by number in ISCSI_UEVENT_BIND_CONN on a
 * NETLINK_ISCSI socket (src/common/iscsinl.h).
 *
 * Netlink sockets are told by their making (socket(AF_NETLINK, ...,
 * NETLINK_GENERIC or NETLINK_ISCSI)); what a send on one carries is read through
 * process_vm_readv, so a bad address stays the kernel's EFAULT, and a
 * message naming accelerated descriptors is taken for NBD's only if its
 * type is the family the kernel calls "nbd" (asked at that moment).  In
 * a seccomp sandbox (no system call of shunt's own) sends are not looked
 * at; the ioctl still is, and fails there, as the move cannot be made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/nbd-netlink.h>
#include <linux/nbd.h>
#include <sys/ioctl.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "shim.h"
#include "interpose.h"
#include "../base/real.h"
#include "../common/nbdnl.h"
#include "../common/iscsinl.h"

/* The netlink sockets the program made, of the two protocols that can
 * carry a descriptor to a driver (descriptor + 1; 0: free).  One that is
 * closed past close() (a raw system call) stays listed: its number's next
 * sends are looked at for nothing. */
#define NL_MAX 16
struct nl_list {
	int fd[NL_MAX];
	int n; /* listed now */
};
static struct nl_list genl, iscsi;

static void list_add(struct nl_list *l, int fd)
{
	for (int i = 0; i < NL_MAX; i++) {
		int z = 0;
		if (__atomic_compare_exchange_n(&l->fd[i], &z, fd + 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
			__atomic_add_fetch(&l->n, 1, __ATOMIC_RELEASE);
			return;
		}
	}
	/* more than NL_MAX at once: the first ones are looked at, the rest
	 * not (no program of the kind makes more than one or two) */
}

static void list_closed(struct nl_list *l, unsigned first, unsigned last)
{
	if (!__atomic_load_n(&l->n, __ATOMIC_ACQUIRE))
		return;
	for (int i = 0; i < NL_MAX; i++) {
		int v = __atomic_load_n(&l->fd[i], __ATOMIC_RELAXED);
		if (v && (unsigned)(v - 1) >= first && (unsigned)(v - 1) <= last &&
		    __atomic_compare_exchange_n(&l->fd[i], &v, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			__atomic_sub_fetch(&l->n, 1, __ATOMIC_RELEASE);
	}
}

static int listed(struct nl_list *l, int fd)
{
	if (!__atomic_load_n(&l->n, __ATOMIC_ACQUIRE))
		return 0;
	for (int i = 0; i < NL_MAX; i++)
		if (__atomic_load_n(&l->fd[i], __ATOMIC_RELAXED) == fd + 1)
			return 1;
	return 0;
}

void ksock_socket(int fd, int domain, int protocol)
{
	if (domain != AF_NETLINK || fd < 0)
		return;
	if (protocol == NETLINK_GENERIC)
		list_add(&genl, fd);
	else if (protocol == SHUNT_NETLINK_ISCSI)
		list_add(&iscsi, fd);
}

void ksock_closed(unsigned first, unsigned last)
{
	list_closed(&genl, first, last);
	list_closed(&iscsi, first, last);
}

/* The kernel's number for the "nbd" family now, or -1 (no such family:
 * the module is not loaded, so no message of it can reach the driver). */
static int nbd_family(void)
{
	uint8_t req[64], ans[1024];
	uint32_t seq = (uint32_t)shunt_pid();
	int fd, len, id = -1, e = errno;
	ssize_t n;

	len = shunt_genl_getfamily(req, sizeof req, NBD_GENL_FAMILY_NAME, seq);
	fd = real.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd >= 0 && len > 0 && real.send(fd, req, (size_t)len, 0) == len) {
		/* the kernel answers in the send: the reply is queued by now */
		n = real.recv(fd, ans, sizeof ans, MSG_DONTWAIT);
		if (n > 0)
			id = shunt_genl_family_id(ans, (size_t)n, seq);
	}
	if (fd >= 0)
		real.close(fd);
	errno = e;
	return id;
}

/* fd, given to the kernel: plain TCP at the exact byte first if it is an
 * accelerated connection.  0, or -EBUSY if it could not move. */
static int hand_over(int fd, const char *how)
{
	static int warned;
	struct sk *s = get_kind(fd, SK_CONN); /* (a pending offer settles first) */
	int r;

	if (!s)
		return 0;
	r = move_pass_wait(s, SHUNT_R_KERNEL_SOCKET);
	sk_put(s);
	if (!r)
		return 0;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("fd %d, an accelerated connection, is handed to the kernel (%s) but could not "
			   "move to TCP first (%s): refused (EBUSY); keep this service plain (SHUNT_PORTS, "
			   "SHUNT_DISABLE: docs/architecture.md)", fd, how, strerror(-r));
	return -EBUSY;
}

int ksock_ioctl(unsigned long req, unsigned long arg)
{
	if (req != (unsigned long)NBD_SET_SOCK || arg > (unsigned long)INT32_MAX)
		return 0;
	return hand_over((int)arg, "ioctl NBD_SET_SOCK");
}

static size_t copy_iov(uint8_t *buf, size_t size, const struct iovec *iov, int cnt)
{
	size_t got = 0;

	for (int i = 0; i < cnt && got < size; i++) {
		size_t k = iov[i].iov_len < size - got ? iov[i].iov_len : size - got;
		if (k && !iov[i].iov_base)
			break;
		memcpy(buf + got, iov[i].iov_base, k);
		got += k;
	}
	return got;
}

/* What a send on a listed netlink socket carries, its first size bytes:
 * a copy that fails where the kernel's would (EFAULT: its answer); where a
 * container's filter refuses the call, a plain copy (the addresses are
 * the program's, given to the kernel in this call).  0: nothing to look at. */
static size_t send_bytes(uint8_t *buf, size_t size, const struct iovec *iov, int cnt)
{
	struct iovec local = { buf, size };
	int e = errno;
	ssize_t got;

	cnt = cnt > IOV_MAX ? IOV_MAX : cnt;
	got = process_vm_readv(shunt_pid(), &local, 1, iov, (unsigned long)cnt, 0);
	if (got < 0 && (errno == EPERM || errno == ENOSYS))
		got = (ssize_t)copy_iov(buf, size, iov, cnt);
	errno = e;
	return got > 0 ? (size_t)got : 0;
}

/* Whether any of the n descriptors is an accelerated connection (or one
 * whose offer is pending). */
static int any_accelerated(const int *fds, int n)
{
	int accel = 0;

	for (int i = 0; i < n && !accel; i++) {
		struct sk *s = fdtab_peek(fds[i]);
		accel = s && (s->kind == SK_CONN || __atomic_load_n(&s->offer, __ATOMIC_ACQUIRE));
		sk_put(s);
	}
	return accel;
}

/* The descriptors a send on a netlink socket hands to a driver - the NBD
 * driver's NBD_CMD_CONNECT (generic netlink, the family asked), the iSCSI
 * initiator's ISCSI_UEVENT_BIND_CONN (NETLINK_ISCSI) - moved first.  0,
 * or -errno for the send to fail with. */
int ksock_send(int fd, const struct iovec *iov, int cnt)
{
	uint8_t buf[8192];
	int fds[32], n, is_iscsi;
	uint16_t type = 0;
	size_t got;

	if (!iov || cnt <= 0 || shunt_sandboxed)
		return 0;
	is_iscsi = listed(&iscsi, fd);
	if (!is_iscsi && !listed(&genl, fd))
		return 0;
	if (!(got = send_bytes(buf, sizeof buf, iov, cnt)))
		return 0;
	n = is_iscsi ? shunt_iscsinl_socks(buf, got, fds, 32) : shunt_nbdnl_socks(buf, got, 0, fds, 32, &type);
	if (!any_accelerated(fds, n) || (!is_iscsi && nbd_family() != type))
		return 0;
	for (int i = 0; i < n; i++) {
		int r = hand_over(fds[i], is_iscsi ? "netlink ISCSI_UEVENT_BIND_CONN" : "netlink NBD_CMD_CONNECT");
		if (r)
			return r;
	}
	return 0;
}
