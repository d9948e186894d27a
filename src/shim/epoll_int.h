/* SPDX-License-Identifier: MIT */
/* epoll_int.h - epoll virtualisation state (epoll.c). */
#ifndef SHUNT_EPOLL_INT_H
#define SHUNT_EPOLL_INT_H
#include <sys/epoll.h>
#include "shim.h"

struct epreg {
	uint32_t events;       /* what the application asked for */
	epoll_data_t data;     /* what the application gets back */
	int active;            /* 0 after an EPOLLONESHOT report */
	uint64_t round;        /* de-duplicates efd and TCP tokens in one wait */
	int tcp_on;            /* TCP socket still watched in the inner set */
	struct sk *s;
};

struct epset {
	pthread_mutex_t lock;
	int inner;             /* inner epoll fd holding our eventfds, or -1 */
	int epfd;
	struct epreg **regs;   /* indexed by application fd */
	int cap;
	uint64_t round;
	struct epset *next;    /* all sets of this process */
};
#endif
