/* SPDX-License-Identifier: MIT */
/*
 * failover.h - the message that moves an RDMA connection's sending half to
 * its TCP socket (wire.h, section 5c).  Pure functions on byte buffers.
 */
#ifndef SHUNT_FAILOVER_H
#define SHUNT_FAILOVER_H
#include <stddef.h>
#include <stdint.h>
#include "shunt/wire.h"

/* Encode into buf (sizeof(struct shunt_fo) bytes); returns that length. */
int shunt_fo_encode(void *buf, uint64_t start, uint64_t end, uint32_t reason);
/* Parse; 0, -EAGAIN (fewer bytes than a message) or -EPROTO. */
int shunt_fo_parse(const void *buf, size_t len, struct shunt_fo *out);
/* The receiver's side: with its frozen producer `prod`, how many of the
 * bytes that follow it already has (*skip); -EPROTO when the message cannot
 * be true of this stream (start > prod, prod > end, more than a ring). */
int shunt_fo_skip(const struct shunt_fo *m, uint64_t prod, uint32_t ring_size, uint64_t *skip);
/* How many bytes at the head of buf[0..len) - a socket's bytes, peeked -
 * are shunt's own leftovers before a FAILOVER message: zero-byte probes
 * and whole in-band handshake messages.  *partial: a handshake message is
 * cut at len (the rest may come). */
size_t shunt_fo_leftovers(const void *buf, size_t len, int *partial);
#endif
