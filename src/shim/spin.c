/* SPDX-License-Identifier: MIT */
/*
 * spin.c - who may spin instead of sleeping, and how busy the CPUs are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"
#include "../common/loadavg.h"

/* Spinning instead of sleeping pays only while the thread that will end
 * the wait has a CPU of its own.  With more threads waiting than CPUs, a
 * spinner takes the CPU that thread needs: 8 threads a side setting up
 * connections on 2 CPUs spent a third of their CPU time spinning (issue
 * #13, item 10).  So nobody spins while threads wait for a CPU, and at
 * most half the CPUs (at least one) spin for a process at once; its other
 * waiters sleep at once.  A turn is a deadline, not a count: a thread
 * that never gives its turn back (a signal handler that jumped out of a
 * wait, a fork) loses it when its budget is over. */
#define SPIN_TURNS 64
static _Atomic uint64_t spin_turn[SPIN_TURNS];

/* How many threads are runnable now, host-wide: /proc/loadavg's fourth
 * field (the kernel's nr_running, spinners included).  Looked at by one
 * thread at most every CROWD_CHECK_NS; 0 until known. */
#define CROWD_CHECK_NS 10000000ull
static _Atomic uint64_t crowd_checked;
static _Atomic long running_now;

static long cpus_running(uint64_t now)
{
	uint64_t last = __atomic_load_n(&crowd_checked, __ATOMIC_RELAXED);
	char buf[128];
	long running;
	ssize_t n;
	int fd, e;

	if (now - last < CROWD_CHECK_NS || shunt_sandboxed ||
	    !__atomic_compare_exchange_n(&crowd_checked, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return __atomic_load_n(&running_now, __ATOMIC_RELAXED);
	e = errno;
	fd = real.open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : real.read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		real.close(fd);
	errno = e;
	running = n > 0 ? shunt_loadavg_running(buf, (size_t)n) : -1;
	if (running >= 0)
		__atomic_store_n(&running_now, running, __ATOMIC_RELAXED);
	return __atomic_load_n(&running_now, __ATOMIC_RELAXED);
}

int shunt_cpus_crowded(uint64_t now)
{
	return cpus_running(now) > shunt_ncpus;
}

long shunt_cpus_runnable(uint64_t now)
{
	return cpus_running(now);
}

int shunt_spin_begin(uint64_t budget_ns, uint64_t now)
{
	int cap = shunt_ncpus / 2 > 1 ? shunt_ncpus / 2 : 1;

	if (shunt_cfg.spin_ns < 0) /* SHUNT_SPIN_US=-1: the user chose to busy-poll */
		return SPIN_TURNS + 1;
	if (shunt_cpus_crowded(now))
		return 0;
	if (cap > SPIN_TURNS)
		cap = SPIN_TURNS;
	for (int i = 0; i < cap; i++) {
		uint64_t d = __atomic_load_n(&spin_turn[i], __ATOMIC_RELAXED);
		if (d <= now && __atomic_compare_exchange_n(&spin_turn[i], &d, now + budget_ns, 0,
							    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return i + 1;
	}
	return 0;
}

void shunt_spin_end(int turn)
{
	if (turn > 0 && turn <= SPIN_TURNS)
		__atomic_store_n(&spin_turn[turn - 1], 0, __ATOMIC_RELEASE);
}
