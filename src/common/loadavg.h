/* SPDX-License-Identifier: MIT */
/*
 * loadavg.h - the number of runnable threads in /proc/loadavg's text
 * ("0.52 0.58 0.59 3/456 12345": 3), for spin.c's "are the CPUs
 * crowded?".  A pure function on a byte buffer (it may run inside a
 * signal handler's recv: no stdio, no locale).
 */
#ifndef SHUNT_LOADAVG_H
#define SHUNT_LOADAVG_H
#include <stddef.h>

/* The runnable count, or -1 if buf[0..n) is not such a line. */
long shunt_loadavg_running(const char *buf, size_t n);
#endif
