/* SPDX-License-Identifier: MIT */
/*
 * log.c - shunt's lines on standard error: SHUNT_LOG=1's, and warnings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "base.h"
#include "real.h"

int shunt_log_on;

static void vlog(const char *fmt, va_list ap)
{
	char buf[512];
	int n, e = errno;

	n = snprintf(buf, sizeof buf, "shunt[%d]: ", (int)getpid());
	n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	(void)!real.write(2, buf, (size_t)n);
	errno = e;
}

void shunt_log(const char *fmt, ...)
{
	va_list ap;

	if (!shunt_log_on)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}

/* What the user must see even without SHUNT_LOG: a refused setting. */
void shunt_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap);
	va_end(ap);
}
