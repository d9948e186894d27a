/* SPDX-License-Identifier: MIT */
/* config.h - shunt's knobs, read once from the environment. */
#ifndef SHUNT_CONFIG_H
#define SHUNT_CONFIG_H
#include <stdint.h>
#include <limits.h>

struct shunt_config {
	char dir[80];              /* SHUNT_DIR: rendezvous directory (unix socket paths are short) */
	int dir_explicit;          /* SHUNT_DIR was set: an operator's (maybe shared) directory */
	uint32_t ring_size;        /* SHUNT_RING_KB, rounded to a power of two */
	int64_t spin_ns;           /* SHUNT_SPIN_US: max adaptive spin; <0 = busy-poll */
	int accept_wait_ms;        /* SHUNT_ACCEPT_WAIT_MS: client waits this long for accept */
	int disabled;              /* SHUNT_DISABLE=1|yes|true|on: everything plain (reason policy) */
	int local;                 /* SHUNT_LOCAL=0: no same-host rendezvous (as if between hosts) */
	int log;                   /* SHUNT_LOG=1: one line per decision on stderr */
	int busy_short;            /* SHUNT_BUSY_SHORT=0: short-lived ports' connections are
				      offered even under load (no reason busy-short); default 1 */
	int busy_runnable;         /* SHUNT_BUSY_RUNNABLE=N: ... while the host has N or more
				      runnable threads a CPU (src/setup/client.c); default 40 */
	int transport;             /* SHUNT_TRANSPORT: 0 auto, 1 shm (never RDMA), 2 rdma (RDMA
				      even on one host: the registry is skipped, shm not offered) */
	int rdma_fork_keep;        /* SHUNT_RDMA_FORK=keep: RDMA connections stay the parent's at
				      fork (a child using one gets EIO); default move (src/transport/rdma/share.c) */
	int rdma_ack_timeout;      /* SHUNT_RDMA_ACK_TIMEOUT=N: a queue pair's ACK timeout per try,
				      4.096 us * 2^N (6 tries), 1..31; default 14 (67 ms) */
	uint16_t ports[16];        /* SHUNT_PORTS=a,b,c: only these ports (empty = all) */
	int nports;
};

/* SHUNT_ACCEPT_WAIT_MS in nanoseconds: how long a client waits for its
 * server's answer (early.c, epoll.c, inband.c) */
static inline uint64_t shunt_accept_wait_ns(const struct shunt_config *c)
{
	return (uint64_t)c->accept_wait_ms * 1000000ull;
}

/* ... and in a call TCP never blocks in (a non-blocking socket's, a
 * poll's, epoll's; a non-blocking connect): a fortieth of it, about what a
 * non-blocking accept() waits for its client (5 ms; emulated RDMA's tests
 * wait 30 s, so 750 ms) */
#define SHUNT_NONBLOCK_WAIT_PART 40
static inline uint64_t shunt_nonblock_wait_ns(const struct shunt_config *c)
{
	return shunt_accept_wait_ns(c) / SHUNT_NONBLOCK_WAIT_PART;
}

/* Parse one environment into cfg; returns 0 or -EINVAL with *bad naming the
 * offending variable.  Invalid values never abort the program: the caller
 * logs and keeps the default. */
int shunt_config_parse(struct shunt_config *cfg, char *const *envp, const char **bad);
/* A boolean knob: 1/yes/true/on, 0/no/false/off (any case); -1 otherwise. */
int shunt_config_bool(const char *v);
int shunt_config_port_allowed(const struct shunt_config *cfg, uint16_t port);
#endif
