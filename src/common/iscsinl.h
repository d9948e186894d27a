/* SPDX-License-Identifier: MIT */
/*
 * iscsinl.h - the socket an iSCSI netlink message hands to the kernel's
 * iSCSI initiator.
 *
 * iscsid logs in to a target over its own TCP connection, then gives the
 * kernel that socket by number: ISCSI_UEVENT_BIND_CONN (netlink message
 * type 15) on a NETLINK_ISCSI socket, whose struct iscsi_uevent carries it
 * in u.b_conn.transport_eph (iscsi_tcp looks the number up in the sending
 * process).  From then on the kernel reads and writes the socket itself,
 * past shunt: an accelerated one must be plain TCP at the exact byte first
 * (src/shim/kernel_sock.c).  The layout is the kernel's user interface
 * (include/scsi/iscsi_if.h there, copied by open-iscsi): type u32 at 0,
 * iferror u32 at 4, transport_handle u64 at 8, then the union - b_conn's
 * sid u32 at 16, cid u32 at 20, transport_eph u64 at 24, is_leading u32 at
 * 32.  Offload transports (bnx2i, qedi, iSER) put an endpoint handle
 * there instead, not a descriptor: such a number that happens to be an
 * accelerated connection's moves it to TCP for nothing - never a loss.
 */
#ifndef SHUNT_ISCSINL_H
#define SHUNT_ISCSINL_H
#include <stddef.h>
#include <stdint.h>

#define SHUNT_NETLINK_ISCSI 8          /* <linux/netlink.h>'s NETLINK_ISCSI */
#define SHUNT_ISCSI_UEVENT_BIND_CONN 15

/* The socket descriptors that the BIND_CONN messages in buf (len bytes:
 * one send, one or more netlink messages) name.  Reads only inside the
 * bytes given; a message that does not fit ends the walk, one too short
 * for the field names nothing (the kernel refuses both).  At most max go
 * in fds; returns how many went. */
int shunt_iscsinl_socks(const void *buf, size_t len, int *fds, int max);

#endif
