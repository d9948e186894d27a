/* SPDX-License-Identifier: MIT */
/*
 * smc-preload.so - what smc-tools' smc_run does, for the side-by-side
 * bench: every TCP socket an unmodified program creates is an AF_SMC
 * socket instead, so the kernel's SMC-R carries it (or falls back to TCP
 * by itself).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC 0  /* SMC over IPv4 */
#define SMCPROTO_SMC6 1 /* SMC over IPv6 */

int socket(int domain, int type, int protocol)
{
	static int (*real_socket)(int, int, int);

	if (!real_socket)
		*(void **)&real_socket = dlsym(RTLD_NEXT, "socket");
	if ((domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP))
		return real_socket(AF_SMC, type, domain == AF_INET ? SMCPROTO_SMC : SMCPROTO_SMC6);
	return real_socket(domain, type, protocol);
}
