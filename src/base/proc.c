/* SPDX-License-Identifier: MIT */
/*
 * proc.c - the process: its pid without a system call, random numbers.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "base.h"

int shunt_sandboxed;

/* Written at every fork in the child: one line (shunt_forks). */
static struct {
	pid_t pid;
	_Atomic unsigned forks;
} self;
static __thread uint64_t rand_state;
static __thread unsigned rand_seen;

/* At start and in a forked child: the pid, and a new seed per thread. */
SHUNT_CHILD_PATH void base_atfork_child(void)
{
	self.pid = getpid();
	__atomic_add_fetch(&self.forks, 1, __ATOMIC_RELAXED);
}

unsigned shunt_forks(void)
{
	return __atomic_load_n(&self.forks, __ATOMIC_RELAXED);
}

SHUNT_CHILD_PATH void shunt_mutex_reset(pthread_mutex_t *m)
{
	static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	if (memcmp(m, &fresh, sizeof fresh))
		pthread_mutex_init(m, NULL);
}

/* getpid() without a system call; refreshed in the fork hook. */
pid_t shunt_pid(void)
{
	return self.pid;
}

/* A fast per-thread generator for nonces and probe orders (reseeded from
 * the kernel per thread and after fork, so no two processes share it). */
uint64_t shunt_fast_random(void)
{
	unsigned e = shunt_forks();

	if (rand_seen != e || !rand_state) {
		rand_state = shunt_random64() | 1;
		rand_seen = e;
	}
	rand_state ^= rand_state << 13;
	rand_state ^= rand_state >> 7;
	rand_state ^= rand_state << 17;
	return rand_state * 0x2545F4914F6CDD1Dull;
}

uint64_t shunt_random64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v)
		v = shunt_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)&v;
	return v;
}
