/* SPDX-License-Identifier: MIT */
/*
 * wait.c - the clock, and waiting for one descriptor until a deadline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <time.h>
#include "base.h"
#include "real.h"

uint64_t shunt_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Wait until fd has one of events, up to deadline (shunt_now_ns();
 * UINT64_MAX: for ever, 0: look only), in slices of at most slice_ms (0:
 * none): its revents (> 0), 0 when the deadline or the slice passed, or
 * -errno (-EINTR: a signal). */
int fd_wait(int fd, short events, uint64_t deadline, int slice_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now = deadline && deadline != UINT64_MAX ? shunt_now_ns() : 0;
	int ms, r;

	if (deadline == UINT64_MAX)
		ms = -1;
	else if (!deadline || now >= deadline)
		ms = 0;
	else if ((deadline - now) / 1000000 >= 0x7ffffffe)
		ms = 0x7ffffffe;
	else
		ms = (int)((deadline - now) / 1000000) + 1;
	if (slice_ms > 0 && (ms < 0 || ms > slice_ms))
		ms = slice_ms;
	r = real.poll(&p, 1, ms);
	if (r < 0)
		return -errno;
	return r ? p.revents : 0;
}
