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
 * kernel a socket whose stream is elsewhere.
 *
 * Netlink sockets are told by their making (socket(AF_NETLINK, ...,
 * NETLINK_GENERIC)); what a send on one carries is read through
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

/* The generic-netlink sockets the program made (descriptor + 1; 0: free).
 * One that is closed past close() (a raw system call) stays listed: its
 * number's next sends are looked at for nothing. */
#define GENL_MAX 16
static int genl_fd[GENL_MAX];
static int genl_n; /* listed now */

void ksock_socket(int fd, int domain, int protocol)
{
	if (domain != AF_NETLINK || protocol != NETLINK_GENERIC || fd < 0)
		return;
	for (int i = 0; i < GENL_MAX; i++) {
		int z = 0;
		if (__atomic_compare_exchange_n(&genl_fd[i], &z, fd + 1, 0, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED)) {
			__atomic_add_fetch(&genl_n, 1, __ATOMIC_RELEASE);
			return;
		}
	}
	/* more than GENL_MAX at once: the first ones are looked at, the rest
	 * not (no program of the kind makes more than one or two) */
}

void ksock_closed(unsigned first, unsigned last)
{
	if (!__atomic_load_n(&genl_n, __ATOMIC_ACQUIRE))
		return;
	for (int i = 0; i < GENL_MAX; i++) {
		int v = __atomic_load_n(&genl_fd[i], __ATOMIC_RELAXED);
		if (v && (unsigned)(v - 1) >= first && (unsigned)(v - 1) <= last &&
		    __atomic_compare_exchange_n(&genl_fd[i], &v, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			__atomic_sub_fetch(&genl_n, 1, __ATOMIC_RELEASE);
	}
}

static int genl_listed(int fd)
{
	if (!__atomic_load_n(&genl_n, __ATOMIC_ACQUIRE))
		return 0;
	for (int i = 0; i < GENL_MAX; i++)
		if (__atomic_load_n(&genl_fd[i], __ATOMIC_RELAXED) == fd + 1)
			return 1;
	return 0;
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

/* The descriptors a send on a generic-netlink socket hands to the NBD
 * driver, moved first.  0, or -errno for the send to fail with. */
int ksock_send(int fd, const struct iovec *iov, int cnt)
{
	uint8_t buf[8192];
	int fds[32], n, accel = 0, e = errno;
	uint16_t type = 0;
	struct iovec local = { buf, sizeof buf };
	ssize_t got;

	if (!genl_listed(fd) || !iov || cnt <= 0 || shunt_sandboxed)
		return 0;
	/* a copy that fails where the kernel's would (EFAULT: its answer);
	 * where a container's filter refuses the call, a plain copy (the
	 * addresses are the program's, given to the kernel in this call) */
	got = process_vm_readv(shunt_pid(), &local, 1, iov, (unsigned long)(cnt > IOV_MAX ? IOV_MAX : cnt), 0);
	if (got < 0 && (errno == EPERM || errno == ENOSYS))
		got = (ssize_t)copy_iov(buf, sizeof buf, iov, cnt > IOV_MAX ? IOV_MAX : cnt);
	errno = e;
	if (got <= 0)
		return 0;
	n = shunt_nbdnl_socks(buf, (size_t)got, 0, fds, 32, &type);
	for (int i = 0; i < n && !accel; i++) {
		struct sk *s = fdtab_peek(fds[i]);
		accel = s && (s->kind == SK_CONN || __atomic_load_n(&s->offer, __ATOMIC_ACQUIRE));
		sk_put(s);
	}
	if (!accel || nbd_family() != type)
		return 0;
	for (int i = 0; i < n; i++) {
		int r = hand_over(fds[i], "netlink NBD_CMD_CONNECT");
		if (r)
			return r;
	}
	return 0;
}
