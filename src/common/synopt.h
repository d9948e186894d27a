/* SPDX-License-Identifier: MIT */
/* synopt.h - find shunt's TCP option in a saved SYN (TCP_SAVED_SYN). */
#ifndef SHUNT_SYNOPT_H
#define SHUNT_SYNOPT_H
#include <stddef.h>
#include <stdint.h>

/* pkt: the network and TCP headers of a SYN as TCP_SAVED_SYN returns them.
 * 1 and *nonce set if it carries shunt's option, 0 if not, -EPROTO if the
 * headers are malformed.  Never reads outside pkt[0..len). */
int shunt_syn_nonce(const void *pkt, size_t len, uint64_t *nonce);
#endif
