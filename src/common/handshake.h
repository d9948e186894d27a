/* SPDX-License-Identifier: MIT */
/*
 * handshake.h - encode and parse the in-band handshake (wire.h, section 5).
 * Pure functions on byte buffers: the socket code (issue #3) peeks, checks
 * with shunt_hs_peek(), then reads exactly the length it returned.
 */
#ifndef SHUNT_HANDSHAKE_H
#define SHUNT_HANDSHAKE_H
#include <stddef.h>
#include <stdint.h>
#include "shunt/wire.h"

struct shunt_hs_msg {
	uint8_t type;     /* enum shunt_hs_type */
	uint8_t version;
	struct shunt_hs_offer offer;    /* PROPOSAL, ACCEPT, CONFIRM (host order) */
	uint32_t reason;                /* DECLINE */
};

/* The length of the whole message whose first bytes are buf[0..len), or
 * -EAGAIN if fewer than 8 bytes are there, or -EPROTO if the header cannot
 * start a valid message (wrong eyecatcher, type, or length). */
int shunt_hs_peek(const void *buf, size_t len);
/* Parse one whole message; 0 or -EPROTO.  Every field is checked. */
int shunt_hs_parse(const void *buf, size_t len, struct shunt_hs_msg *out);
/* Encode; returns the length written (<= cap) or -ENOSPC/-EINVAL. */
int shunt_hs_encode(const struct shunt_hs_msg *m, void *buf, size_t cap);
#endif
