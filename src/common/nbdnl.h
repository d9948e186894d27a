/* SPDX-License-Identifier: MIT */
/*
 * nbdnl.h - the sockets a generic-netlink message hands to the kernel's
 * NBD driver, and the family number in the kernel's answer to a
 * CTRL_CMD_GETFAMILY.
 *
 * nbd-client (and anything using the kernel's NBD over netlink) gives the
 * kernel its connected TCP sockets by number in NBD_CMD_CONNECT and
 * NBD_CMD_RECONFIGURE: [NBD_ATTR_SOCKETS [NBD_SOCK_ITEM [NBD_SOCK_FD u32]]...].
 * From then on the kernel reads and writes those sockets itself, past
 * shunt: an accelerated one must be plain TCP at the exact byte first
 * (src/shim/kernel_sock.c).  Both parsers read only inside the bytes given
 * and take anything malformed as naming nothing.
 */
#ifndef SHUNT_NBDNL_H
#define SHUNT_NBDNL_H
#include <stddef.h>
#include <stdint.h>

/* The socket descriptors named by the NBD connect/reconfigure messages in
 * buf (len bytes: one send, one or more netlink messages) whose type is
 * family; with family 0, of any type (a candidate: its type then goes in
 * *type_seen, the last such message's).  At most max go in fds; returns
 * how many went. */
int shunt_nbdnl_socks(const void *buf, size_t len, uint16_t family, int *fds, int max,
		      uint16_t *type_seen);

/* The request for the family named name (at most 15 bytes): its length in
 * buf (size bytes), or -1 if it does not fit. */
int shunt_genl_getfamily(void *buf, size_t size, const char *name, uint32_t seq);

/* The family number in the kernel's answer (buf, len bytes) to request
 * seq: GENL_ID_CTRL (16, the controller's own) or above, or -1 if the
 * answer is an error, another request's, or malformed. */
int shunt_genl_family_id(const void *buf, size_t len, uint32_t seq);

#endif
