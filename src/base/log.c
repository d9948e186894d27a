/* SPDX-License-Identifier: MIT */
/*
 * log.c - shunt's lines on standard error: SHUNT_LOG=1's, and warnings -
 * or in SHUNT_LOG_FILE, opened at start (a process that chroots or lowers
 * its descriptor limit still writes there).  Never onto a socket: a server
 * run inetd-style has its connection on descriptors 0-2 (vsftpd, xinetd's
 * services, sshd -i), and a line there would be bytes in its client's
 * stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base.h"
#include "real.h"

int shunt_log_on;
static int log_fd = 2;
static int stderr_socket; /* as last seen (a sandbox: no fstat of ours) */

void shunt_log_file(const char *path)
{
	int fd;

	if (!path || !*path)
		return;
	fd = real.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		shunt_warn("SHUNT_LOG_FILE %s: %m: standard error instead", path);
		return;
	}
	log_fd = fd_hide(fd);
}

/* Standard error, unless it is a socket now (in a sandbox: as it was
 * when the filter went in, shunt_log_check). */
static int log_target(void)
{
	if (log_fd != 2)
		return log_fd;
	if (!shunt_sandboxed)
		shunt_log_check();
	return stderr_socket ? -1 : 2;
}

/* Lines go to SHUNT_LOG_FILE, or standard error is a terminal: a line for
 * a person, not into a pipe that may be a program's data (an sshd login
 * session's standard error is its client's). */
int shunt_log_seen(void)
{
	int e = errno, seen = shunt_log_on && (log_fd != 2 || isatty(2));

	errno = e; /* (isatty's ENOTTY is not the caller's) */
	return seen;
}

void shunt_log_check(void)
{
	struct stat st;

	stderr_socket = !fstat(2, &st) && S_ISSOCK(st.st_mode);
}

static void vlog(const char *fmt, va_list ap)
{
	char buf[512];
	int n, fd, e = errno;

	n = snprintf(buf, sizeof buf, "shunt[%d]: ", (int)getpid());
	n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	if ((fd = log_target()) >= 0)
		(void)!real.write(fd, buf, (size_t)n);
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
