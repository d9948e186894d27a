/* SPDX-License-Identifier: MIT */
/* msg.h - validation of everything received from another process (fuzzed). */
#ifndef SHUNT_MSG_H
#define SHUNT_MSG_H
#include <stddef.h>
#include <stdint.h>
#include "shunt/wire.h"

/* Check a received accept message: len bytes, nfds descriptors attached,
 * ctrunc set if the kernel truncated control data.  Returns 0 or -EPROTO. */
int shunt_accept_msg_check(const void *buf, size_t len, int nfds, int ctrunc,
			   struct shunt_accept_msg *out);
/* Check a segment header against what the offer and its arena expect. */
int shunt_seg_hdr_check(const struct shunt_seg_hdr *h, uint64_t nonce, uint32_t ring_size);
/* Bytes of an arena with this ring size. */
size_t shunt_arena_size(uint32_t ring_size);
/* Check an arena header; file_size must be exactly the arena's size (a
 * shorter file would SIGBUS when touched). */
int shunt_arena_hdr_check(const struct shunt_arena_hdr *h, uint64_t id, size_t file_size);
/* Build a header for a fresh segment. */
void shunt_seg_hdr_init(struct shunt_seg_hdr *h, uint32_t ring_size, uint64_t nonce);
/* Check a registry file mapped from disk (any process may have written it). */
int shunt_registry_check(const struct shunt_registry *r, uint16_t port);
#endif
