/* SPDX-License-Identifier: MIT */
/* epoll_int.h - epoll virtualisation state (epoll.c). */
#ifndef SHUNT_EPOLL_INT_H
#define SHUNT_EPOLL_INT_H
#include <sys/epoll.h>
#include "shim.h"

struct epreg {
	int fd;
	pid_t pid;             /* the process that made it: a forked child's set
				* is its parent's kernel instance (ep_mine) */
	int present;           /* the application's registration exists; after
				* EPOLL_CTL_DEL our kernel registrations stay
				* (event loops delete and re-add per request) */
	uint32_t events;       /* what the application asked for */
	epoll_data_t data;     /* what the application gets back */
	int active;            /* 0 after an EPOLLONESHOT report */
	int queued;            /* on the set's check list */
	uint64_t round;        /* reported once per epoll_wait */
	int tcp_on;            /* TCP socket still registered (for FIN/RST) */
	int pend;              /* a pending offer's socket, held by the kernel
				* as it is, with the program's events and data
				* (early.c; ep_pend_settled) */
	int pend_many;         /* ... waited for bytes in a set of many: on
				* the set's pend_list, woken by our socket */
	struct epreg *next_pend;
	int hs_tok;            /* a socket in a handshake state (inband.c): the
				* kernel holds it under our token (hs_ctl) */
	int hs_held;           /* ... asked for the client's word instead of
				* room (HS_CONFIRM: a write would wait for it) */
	struct epreg *next_hs; /* on the set's hs_list */
	/* Edge-triggered: what the last report saw, so a late wake-up for
	 * bytes already reported is not reported twice. */
	uint64_t seen_prod, seen_cons;
	unsigned seen_ev;
	uint32_t seen_gen;        /* conn's fo_gen at the last report */
	uint32_t seen_full;       /* conn's tx_full at the last report */
	unsigned seen_state;      /* its halves' state then (is_new_edge) */
	struct sk *s;
	struct epreg *next_check;
	struct epbell *bell;      /* the doorbell group it is in */
	struct epreg *next_in_bell;
};

/* One doorbell in the set, for every registration whose connection it
 * wakes (an arena's: up to its 32 segments).  The kernel holds the
 * doorbell once, under a token naming the group's slot; a ring evaluates
 * every member (a member with nothing new reports nothing). */
struct epbell {
	int efd;
	pid_t pid;                /* as epreg's */
	uint64_t id;              /* conn's bell_id */
	unsigned slot;
	struct epreg *members;
};

struct epset {
	pthread_mutex_t lock;
	int epfd;
	struct epreg **regs;   /* indexed by application fd */
	int cap;
	uint64_t round;
	struct epreg *check;   /* to evaluate before sleeping: level-triggered
				* reports still ready, fresh ADD/MOD */
	struct epbell **bells; /* indexed by slot (the token); NULL: free */
	unsigned nbells;
	struct epoll_event *kev; /* the kernel's events (KEV_MAX), translated from here */
	int nregs;             /* registrations of ours (regs[]) */
	int nplain;            /* plain descriptors added (never fewer: a plain
				* one closed leaves the kernel's set unseen) */
	_Atomic int sleepers;  /* threads in ep_wait: added under the lock
				* (pend_ctl's look), taken off without it */
	struct epreg *pend_in; /* the pending offer waited for bytes alone, if any */
	struct epreg *pend_list; /* pending offers waited for among others */
	struct epreg *hs_list; /* sockets in a handshake state (hs_tok) */
	pid_t msg_pid;         /* the process whose answer socket (rdv_msg_fd)
				* the set holds, if any (a child has its own) */
	int msg_seen;          /* that socket reported since the last look */
	_Atomic int many_seen; /* pend_list ever held one: sleeps are bounded */
	struct epset *next;    /* all sets of this process */
};
#endif
