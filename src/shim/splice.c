/* SPDX-License-Identifier: MIT */
/*
 * splice.c - splice() with an accelerated socket at one end.
 *
 * The kernel requires a pipe at the other end.  Its own path would move
 * bytes to or from the TCP socket under the rings: the receiver would get
 * nothing, or bytes out of order (issue #13, item 2).  Here the bytes go
 * through user space instead - from the pipe into the ring, or from the
 * ring into the pipe - and never more is taken from one end than the other
 * end can take, so no byte is consumed that is not delivered.  As in the
 * kernel, the socket's O_NONBLOCK decides whether its side waits and
 * SPLICE_F_NONBLOCK (or the pipe's O_NONBLOCK) whether the pipe's does.
 * tee() and vmsplice() take only pipes and copy_file_range() only files: a
 * socket there fails in the kernel, as it does without shunt.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shim.h"
#include "../base/real.h"

#define CHUNK 65536

static int is_pipe(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

static int ready_now(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	struct timespec zero = { 0, 0 };

	return real.ppoll(&p, 1, &zero, NULL) > 0;
}

/* What was taken from the pipe goes into the connection whole: a second
 * writer on the same connection may make the first try short. */
static ssize_t send_all(struct sk *s, int fd, char *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		struct iovec iov = { buf + done, n - done };
		ssize_t w = conn_send(s, &iov, 1, MSG_NOSIGNAL);
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (w > 0) {
			done += (size_t)w;
		} else if (w == -EAGAIN || w == -EINTR) {
			shim_poll(&p, 1, -1, NULL);
		} else {
			if (w == -EPIPE && !done)
				raise(SIGPIPE); /* splice signals as write does */
			return done ? (ssize_t)done : w;
		}
	}
	return (ssize_t)done;
}

/* pipe -> accelerated socket */
static ssize_t to_conn(struct sk *s, int out, int in, size_t len, unsigned flags)
{
	char buf[CHUNK];
	size_t want = len < sizeof buf ? len : sizeof buf;
	ssize_t n;

	if (!is_pipe(in))
		return -EINVAL;
	if (conn_nonblock(s, 0)) {
		size_t room = conn_send_room(s->conn);
		if (!room)
			return -EAGAIN;
		if (want > room)
			want = room;
	}
	if ((flags & SPLICE_F_NONBLOCK) && !ready_now(in, POLLIN))
		return -EAGAIN; /* the pipe's side must not wait */
	n = real.read(in, buf, want);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	return send_all(s, out, buf, (size_t)n);
}

/* accelerated socket -> pipe: peek, put in the pipe what it takes, then
 * consume exactly that */
static ssize_t from_conn(struct sk *s, int in, int out, size_t len, unsigned flags)
{
	char buf[CHUNK];
	struct iovec iov = { buf, len < sizeof buf ? len : sizeof buf };
	int fl, nonblock = flags & SPLICE_F_NONBLOCK;
	ssize_t n, w;

	if (!is_pipe(out))
		return -EINVAL;
	fl = real.fcntl(out, F_GETFL);
	if (nonblock && !(fl & O_NONBLOCK)) {
		/* a blocking pipe, a call that must not block: what one
		 * atomic write into a pipe with room takes */
		if (!ready_now(out, POLLOUT))
			return -EAGAIN;
		if (iov.iov_len > PIPE_BUF)
			iov.iov_len = PIPE_BUF;
	}
	n = conn_recv(s, &iov, 1, MSG_PEEK); /* O_NONBLOCK of the socket decides */
	if (n <= 0)
		return n;
	w = real.write(out, buf, (size_t)n);
	if (w <= 0)
		return w < 0 ? -errno : 0;
	iov = (struct iovec){ NULL, (size_t)w };
	return conn_recv(s, &iov, 1, MSG_TRUNC | MSG_DONTWAIT);
}

ssize_t shim_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		    unsigned flags, int *handled)
{
	struct sk *s = fdtab_get(out);
	ssize_t r;
	int to = 1;

	if (s && s->kind != SK_CONN) {
		sk_put(s);
		s = NULL;
	}
	if (!s) {
		to = 0;
		s = fdtab_get(in);
		if (s && s->kind != SK_CONN) {
			sk_put(s);
			s = NULL;
		}
	}
	*handled = s != NULL;
	if (!s)
		return 0;
	if (to ? off_out != NULL : off_in != NULL)
		r = -ESPIPE;
	else if (!len)
		r = 0;
	else {
		cancel_hold(s);
		r = to ? to_conn(s, out, in, len, flags) : from_conn(s, in, out, len, flags);
		cancel_release();
	}
	sk_put(s);
	return r;
}
