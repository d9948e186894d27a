/* SPDX-License-Identifier: MIT */
/*
 * shunt.h - the one public header: how a program (or a test) asks shunt about
 * one of its sockets.  Under shunt, getsockopt(fd, SOL_SHUNT, SHUNT_INFO, ...)
 * returns a struct shunt_info; without shunt it fails with ENOPROTOOPT, so a
 * program can tell the two apart without linking against anything.
 */
#ifndef SHUNT_H
#define SHUNT_H
#include <stdint.h>

#define SOL_SHUNT 0x5348 /* 'SH': no kernel level uses it */
#define SHUNT_INFO 1

struct shunt_info {
	uint32_t mode;   /* enum shunt_mode in wire.h: 0 tcp, 1 shm, 2 listen, 3 rdma */
	uint32_t reason; /* enum shunt_reason in wire.h: 0 when accelerated */
	uint64_t tx;     /* bytes sent by the application */
	uint64_t rx;     /* bytes received by the application */
};
#endif
