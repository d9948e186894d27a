/* SPDX-License-Identifier: MIT */
/* loadavg.c - see loadavg.h. */
#include "loadavg.h"

long shunt_loadavg_running(const char *buf, size_t n)
{
	size_t i = 0;
	long v = 0;
	int spaces = 0, digits = 0;

	while (i < n && spaces < 3)
		spaces += buf[i++] == ' ';
	if (spaces < 3)
		return -1;
	for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++, digits++) {
		v = v * 10 + (buf[i] - '0');
		if (v > 1000000000L) /* (checked after the digit: 1000000009 passed) */
			return -1;
	}
	return digits && i < n && buf[i] == '/' ? v : -1;
}
