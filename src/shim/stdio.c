/* SPDX-License-Identifier: MIT */
/*
 * stdio.c - C stdio on an accelerated socket moves it to TCP first.
 *
 * A FILE's buffers reach the descriptor through libc's internal read and
 * write, which no preloaded library sees: stdout of a program exec'd with
 * the connection as its standard I/O (git daemon's upload-pack writes
 * its answers with fwrite), or a FILE made by fdopen(), would read and
 * write the kernel socket while the bytes are in the rings - the peer
 * broke its ring, or a reader waited for ever.  So the first stdio call on
 * a stream whose descriptor is an accelerated connection moves that
 * connection to its TCP socket at the exact byte (move.c, reason stdio),
 * and stdio goes on with a plain socket.  Other processes holding it too
 * (a parent that keeps its copy while the child talks: Python's
 * subprocess.run(stdin=conn, stdout=conn)) follow at their next call on
 * it (move.c, move_follow).  A move the peer is making at that moment is
 * waited for, up to a second.
 *
 * The calls: those a program makes (the _chk forms of fortified builds,
 * the unlocked ones, and __overflow/__uflow/__underflow, which the
 * getc/putc macros call when a buffer is empty or full), and the scanf
 * family (both of glibc's).  libc's own calls
 * between them (printf calling vfprintf) are not seen and need not be.
 * fclose and freopen let go of the connection as close() does; the
 * wide-character calls, getw/putw and fcloseall (which flushes) move it
 * as the rest do.
 */
#define _GNU_SOURCE
#define __NO_INLINE__ 1 /* no extern-inline getc, putc...: defined here */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>
#include "shim.h"
#include "../base/real.h"
#include "../transport/ring.h"

#undef fread_unlocked /* (macros under -O2) */
#undef fwrite_unlocked
#undef getc
#undef putc
#undef getwc
#undef putwc

/* libc's, declared by no header (fortified builds and macros call them) */
int __overflow(FILE *f, int c);
int __uflow(FILE *f);
int __underflow(FILE *f);
int __vfprintf_chk(FILE *f, int fl, const char *fmt, va_list ap);
int __vprintf_chk(int fl, const char *fmt, va_list ap);
int __printf_chk(int fl, const char *fmt, ...);
int __fprintf_chk(FILE *f, int fl, const char *fmt, ...);
int __dprintf_chk(int fd, int fl, const char *fmt, ...);
int __vdprintf_chk(int fd, int fl, const char *fmt, va_list ap);
size_t __fread_chk(void *p, size_t l, size_t z, size_t n, FILE *f);
char *__fgets_chk(char *p, size_t l, int n, FILE *f);
ssize_t __getdelim(char **p, size_t *n, int d, FILE *f);
wint_t __woverflow(FILE *f, wint_t c);
wint_t __wuflow(FILE *f);
wint_t __wunderflow(FILE *f);
int __fwprintf_chk(FILE *f, int fl, const wchar_t *fmt, ...);
int __wprintf_chk(int fl, const wchar_t *fmt, ...);
int __vfwprintf_chk(FILE *f, int fl, const wchar_t *fmt, va_list ap);
int __vwprintf_chk(int fl, const wchar_t *fmt, va_list ap);
wchar_t *__fgetws_chk(wchar_t *p, size_t l, int n, FILE *f);
wchar_t *__fgetws_unlocked_chk(wchar_t *p, size_t l, int n, FILE *f);

/* A move under way (the peer's, or an RDMA one's settling): waited for this long. */
#define STDIO_MOVE_WAIT_MS 1000

static void stdio_move(struct sk *s, int fd)
{
	static int warned;
	int r = move_pass_wait(s, SHUNT_R_STDIO);

	if (!r)
		shunt_log("fd %d: C stdio on an accelerated connection: it is plain TCP now (reason stdio)", fd);
	else if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("fd %d, an accelerated connection, is used through C stdio but could not "
			   "move to TCP first (%s): its stdio bytes bypass the rings; keep this service "
			   "plain (SHUNT_PORTS, SHUNT_DISABLE: docs/architecture.md)", fd, strerror(-r));
}

/* A connection already on its way to the socket (an RDMA one moved at a
 * fork or exec): stdio may use the socket once the peer's FAILOVER
 * message is taken off it and our resend is out; bytes that arrived in
 * the ring before the move are held for the reads to come (move.c), as
 * are those of a peer that had shut its side before our move (shm_move.c).
 * 0, or -errno. */
static int stdio_settle(struct conn *c)
{
	struct shunt_ring_ctl *l;
	int r;

	for (int ms = 0;; ms++) {
		conn_refresh(c);
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2 && !move_pending(c))
			break;
		if (ms >= STDIO_MOVE_WAIT_MS)
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	if (!ring_used(&c->rx))
		return 0;
	if (!(l = conn_lock(c, 1)))
		return -c->broken;
	r = move_hold_ring(c);
	shunt_unlock(&l->rlock);
	return r;
}

/* A stdio read: what the move held goes to the FILE's buffer (ungetc:
 * glibc takes any number back, in a buffer it grows), last byte first,
 * to come before what its next read takes from the socket.  Taken under
 * the reader's lock, given without it (ungetc takes the FILE's lock, which
 * a thread that called us with it held - flockfile - has). */
static void stdio_give(struct conn *c, FILE *f, int fd)
{
	struct shunt_ring_ctl *l = conn_lock(c, 1);
	uint8_t *b;
	size_t n;

	if (!l)
		return;
	b = c->mv.held;
	n = move_held(c);
	if (n && c->mv.held_off)
		memmove(b, b + c->mv.held_off, n);
	c->mv.held = NULL;
	c->mv.held_off = c->mv.held_len = 0;
	shunt_unlock(&l->rlock);
	while (n && ungetc(b[n - 1], f) != EOF)
		n--;
	if (n) /* no memory for glibc's buffer */
		shunt_warn("fd %d: %zu bytes held for C stdio were lost (out of memory)", fd, n);
	free(b);
}

/* A wide-character read (fgetwc, fgetws, fwscanf...) cannot be given held
 * bytes: glibc's wide streams convert from a buffer that ungetc's pushback
 * area is not (measured: fgetwc after ungetc crashes inside glibc).  They
 * stay held for read()/recv(); the stream reads the socket's bytes after
 * them - said once. */
#define RD_WIDE 2
/* A call that writes only what the FILE holds (fflush, and libc's flush
 * in fclose and freopen): with nothing buffered no byte passes libc, and
 * the connection need not move - every coreutils program's exit flushes
 * its stdout (close_stdout), and xinetd's cat moved each connection at
 * its end. */
#define WR_PENDING (-1)

static void wide_cannot_take(struct conn *c, int fd)
{
	static int warned;

	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		shunt_warn("fd %d: %zu bytes that came before the connection moved to TCP cannot be "
			   "given to wide-character stdio (read() and recv() still get them): keep "
			   "this service plain (docs/architecture.md, known limits)", fd, move_held(c));
}

/* Before every wrapped call (rd: a reading one, RD_WIDE a wide one;
 * WR_PENDING a flush): kept short, as putc's own cost is a few
 * nanoseconds (bench/stdio.sh).  The descriptor is read
 * from the FILE itself (glibc's public field: fileno_unlocked is a call),
 * and errno is saved only on the way to a move. */
static void touch(FILE *f, int rd)
{
	static int warned;
	struct sk *s;
	struct conn *c;
	int fd, e, r;

	if (!f || !shunt_active || (rd == WR_PENDING && f->_IO_write_ptr <= f->_IO_write_base) ||
	    (fd = f->_fileno) < 0 || !(s = fdtab_get(fd)))
		return;
	/* libc reads and writes the socket itself: the client's word first */
	if (__builtin_expect(__atomic_load_n(&s->hs, __ATOMIC_RELAXED) == HS_CONFIRM, 0))
		inband_confirm(s, fd, 1, 0);
	c = s->conn;
	if (s->kind == SK_CONN && !c->passed && !c->broken) {
		e = errno;
		if (!conn_moving(c) && !c->mv.rx)
			stdio_move(s, fd);
		else if ((r = stdio_settle(c)) && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			shunt_warn("fd %d, a connection moving to TCP, is used through C stdio before "
				   "its move is done (%s): keep this service plain (docs/architecture.md, "
				   "known limits)", fd, strerror(-r));
		errno = e;
	}
	if (rd > 0 && s->kind == SK_CONN && move_held(c)) {
		e = errno;
		if (rd == RD_WIDE)
			wide_cannot_take(c, fd);
		else
			stdio_give(c, f, fd);
		errno = e;
	}
	sk_put(s);
}

/* The next definition of symbol sym (libc's), of name's type: resolved
 * once. */
#define NEXT_AS(name, sym)                                                                  \
	({                                                                                  \
		static __typeof__(&name) p_;                                                \
		__typeof__(&name) q_ = __atomic_load_n(&p_, __ATOMIC_ACQUIRE);              \
		if (!q_) {                                                                  \
			q_ = (__typeof__(&name))dlsym(RTLD_NEXT, sym);                      \
			__atomic_store_n(&p_, q_, __ATOMIC_RELEASE);                        \
		}                                                                           \
		q_;                                                                         \
	})

/* A wrapper: f is the stream, the call is name(args) - libc's symbol sym;
 * rd: a reading call; fail is what a missing libc symbol returns (never,
 * with glibc). */
#define WRAP(ret, name, params, f, args, fail) WRAP_AS(ret, name, #name, params, f, 0, args, fail)
#define RWRAP(ret, name, params, f, args, fail) WRAP_AS(ret, name, #name, params, f, 1, args, fail)
#define WRAP_AS(ret, name, sym, params, f, rd, args, fail)                                  \
	EXPORT ret name params                                                              \
	{                                                                                   \
		__typeof__(&name) n_ = NEXT_AS(name, sym);                                  \
		touch(f, rd);                                                               \
		if (!n_) {                                                                  \
			errno = ENOSYS;                                                     \
			return fail;                                                        \
		}                                                                           \
		return n_ args;                                                             \
	}

/* the writing side */
WRAP(size_t, fwrite, (const void *p, size_t z, size_t n, FILE *f), f, (p, z, n, f), 0)
WRAP(size_t, fwrite_unlocked, (const void *p, size_t z, size_t n, FILE *f), f, (p, z, n, f), 0)
WRAP(int, fputs, (const char *p, FILE *f), f, (p, f), EOF)
WRAP(int, fputs_unlocked, (const char *p, FILE *f), f, (p, f), EOF)
WRAP(int, fputc, (int c, FILE *f), f, (c, f), EOF)
WRAP(int, fputc_unlocked, (int c, FILE *f), f, (c, f), EOF)
WRAP(int, putc, (int c, FILE *f), f, (c, f), EOF)
WRAP(int, putc_unlocked, (int c, FILE *f), f, (c, f), EOF)
WRAP(int, putchar, (int c), stdout, (c), EOF)
WRAP(int, putchar_unlocked, (int c), stdout, (c), EOF)
WRAP(int, puts, (const char *p), stdout, (p), EOF)
/* (fflush(NULL): libc's every stream, as before) */
WRAP_AS(int, fflush, "fflush", (FILE *f), f, WR_PENDING, (f), EOF)
WRAP_AS(int, fflush_unlocked, "fflush_unlocked", (FILE *f), f, WR_PENDING, (f), EOF)
WRAP(int, __overflow, (FILE *f, int c), f, (f, c), EOF)
WRAP(int, vfprintf, (FILE *f, const char *fmt, va_list ap), f, (f, fmt, ap), -1)
WRAP(int, vprintf, (const char *fmt, va_list ap), stdout, (fmt, ap), -1)
WRAP(int, __vfprintf_chk, (FILE *f, int fl, const char *fmt, va_list ap), f, (f, fl, fmt, ap), -1)
WRAP(int, __vprintf_chk, (int fl, const char *fmt, va_list ap), stdout, (fl, fmt, ap), -1)

/* the reading side */
RWRAP(size_t, fread, (void *p, size_t z, size_t n, FILE *f), f, (p, z, n, f), 0)
RWRAP(size_t, fread_unlocked, (void *p, size_t z, size_t n, FILE *f), f, (p, z, n, f), 0)
RWRAP(size_t, __fread_chk, (void *p, size_t l, size_t z, size_t n, FILE *f), f, (p, l, z, n, f), 0)
RWRAP(char *, fgets, (char *p, int n, FILE *f), f, (p, n, f), NULL)
RWRAP(char *, fgets_unlocked, (char *p, int n, FILE *f), f, (p, n, f), NULL)
RWRAP(char *, __fgets_chk, (char *p, size_t l, int n, FILE *f), f, (p, l, n, f), NULL)
RWRAP(int, fgetc, (FILE *f), f, (f), EOF)
RWRAP(int, fgetc_unlocked, (FILE *f), f, (f), EOF)
RWRAP(int, getc, (FILE *f), f, (f), EOF)
RWRAP(int, getc_unlocked, (FILE *f), f, (f), EOF)
RWRAP(int, getchar, (void), stdin, (), EOF)
RWRAP(int, getchar_unlocked, (void), stdin, (), EOF)
RWRAP(ssize_t, getline, (char **p, size_t *n, FILE *f), f, (p, n, f), -1)
RWRAP(ssize_t, getdelim, (char **p, size_t *n, int d, FILE *f), f, (p, n, d, f), -1)
RWRAP(ssize_t, __getdelim, (char **p, size_t *n, int d, FILE *f), f, (p, n, d, f), -1)
RWRAP(int, __uflow, (FILE *f), f, (f), EOF)
RWRAP(int, __underflow, (FILE *f), f, (f), EOF)

/* scanf: glibc has two, the C99 one (__isoc99_*, which its headers name
 * for fscanf and the rest) and the old one (the plain names, GNU's %a);
 * each wrapper is named by its symbol, as C cannot name both. */
EXPORT int old_vfscanf(FILE *f, const char *fmt, va_list ap) __asm__("vfscanf");
EXPORT int old_vscanf(const char *fmt, va_list ap) __asm__("vscanf");
EXPORT int c99_vfscanf(FILE *f, const char *fmt, va_list ap) __asm__("__isoc99_vfscanf");
EXPORT int c99_vscanf(const char *fmt, va_list ap) __asm__("__isoc99_vscanf");
WRAP_AS(int, old_vfscanf, "vfscanf", (FILE *f, const char *fmt, va_list ap), f, 1, (f, fmt, ap), EOF)
WRAP_AS(int, old_vscanf, "vscanf", (const char *fmt, va_list ap), stdin, 1, (fmt, ap), EOF)
WRAP_AS(int, c99_vfscanf, "__isoc99_vfscanf", (FILE *f, const char *fmt, va_list ap), f, 1, (f, fmt, ap), EOF)
WRAP_AS(int, c99_vscanf, "__isoc99_vscanf", (const char *fmt, va_list ap), stdin, 1, (fmt, ap), EOF)

/* getw and putw, a word at a time */
RWRAP(int, getw, (FILE *f), f, (f), EOF)
WRAP(int, putw, (int w, FILE *f), f, (w, f), EOF)

/* the wide-character calls: each a byte stream underneath */
#define WWRAP(ret, name, params, f, args, fail) WRAP_AS(ret, name, #name, params, f, RD_WIDE, args, fail)
WRAP(wint_t, fputwc, (wchar_t c, FILE *f), f, (c, f), WEOF)
WRAP(wint_t, fputwc_unlocked, (wchar_t c, FILE *f), f, (c, f), WEOF)
WRAP(wint_t, putwc, (wchar_t c, FILE *f), f, (c, f), WEOF)
WRAP(wint_t, putwc_unlocked, (wchar_t c, FILE *f), f, (c, f), WEOF)
WRAP(wint_t, putwchar, (wchar_t c), stdout, (c), WEOF)
WRAP(wint_t, putwchar_unlocked, (wchar_t c), stdout, (c), WEOF)
WRAP(int, fputws, (const wchar_t *p, FILE *f), f, (p, f), -1)
WRAP(int, fputws_unlocked, (const wchar_t *p, FILE *f), f, (p, f), -1)
WRAP(wint_t, __woverflow, (FILE *f, wint_t c), f, (f, c), WEOF)
WRAP(int, vfwprintf, (FILE *f, const wchar_t *fmt, va_list ap), f, (f, fmt, ap), -1)
WRAP(int, vwprintf, (const wchar_t *fmt, va_list ap), stdout, (fmt, ap), -1)
WRAP(int, __vfwprintf_chk, (FILE *f, int fl, const wchar_t *fmt, va_list ap), f, (f, fl, fmt, ap), -1)
WRAP(int, __vwprintf_chk, (int fl, const wchar_t *fmt, va_list ap), stdout, (fl, fmt, ap), -1)
WWRAP(wint_t, fgetwc, (FILE *f), f, (f), WEOF)
WWRAP(wint_t, fgetwc_unlocked, (FILE *f), f, (f), WEOF)
WWRAP(wint_t, getwc, (FILE *f), f, (f), WEOF)
WWRAP(wint_t, getwc_unlocked, (FILE *f), f, (f), WEOF)
WWRAP(wint_t, getwchar, (void), stdin, (), WEOF)
WWRAP(wint_t, getwchar_unlocked, (void), stdin, (), WEOF)
WWRAP(wchar_t *, fgetws, (wchar_t *p, int n, FILE *f), f, (p, n, f), NULL)
WWRAP(wchar_t *, fgetws_unlocked, (wchar_t *p, int n, FILE *f), f, (p, n, f), NULL)
WWRAP(wchar_t *, __fgetws_chk, (wchar_t *p, size_t l, int n, FILE *f), f, (p, l, n, f), NULL)
WWRAP(wchar_t *, __fgetws_unlocked_chk, (wchar_t *p, size_t l, int n, FILE *f), f, (p, l, n, f), NULL)
WWRAP(wint_t, __wuflow, (FILE *f), f, (f), WEOF)
WWRAP(wint_t, __wunderflow, (FILE *f), f, (f), WEOF)
EXPORT int old_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap) __asm__("vfwscanf");
EXPORT int old_vwscanf(const wchar_t *fmt, va_list ap) __asm__("vwscanf");
EXPORT int c99_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap) __asm__("__isoc99_vfwscanf");
EXPORT int c99_vwscanf(const wchar_t *fmt, va_list ap) __asm__("__isoc99_vwscanf");
WRAP_AS(int, old_vfwscanf, "vfwscanf", (FILE *f, const wchar_t *fmt, va_list ap), f, RD_WIDE, (f, fmt, ap), -1)
WRAP_AS(int, old_vwscanf, "vwscanf", (const wchar_t *fmt, va_list ap), stdin, RD_WIDE, (fmt, ap), -1)
WRAP_AS(int, c99_vfwscanf, "__isoc99_vfwscanf", (FILE *f, const wchar_t *fmt, va_list ap), f, RD_WIDE,
	(f, fmt, ap), -1)
WRAP_AS(int, c99_vwscanf, "__isoc99_vwscanf", (const wchar_t *fmt, va_list ap), stdin, RD_WIDE, (fmt, ap), -1)

/* fcloseall: glibc's flushes every stream (and closes none), through
 * libc's internal write: a stream with output pending on an accelerated
 * connection moves it first.  Its list of streams is glibc's public one
 * (_IO_list_all, under _IO_list_lock), walked under that lock. */
extern FILE *_IO_list_all;
void _IO_list_lock(void);
void _IO_list_unlock(void);

EXPORT int fcloseall(void)
{
	int (*next)(void) = NEXT_AS(fcloseall, "fcloseall");

	_IO_list_lock();
	for (FILE *f = _IO_list_all; f; f = f->_chain)
		if (f->_IO_write_ptr > f->_IO_write_base)
			touch(f, 0);
	_IO_list_unlock();
	if (!next) {
		errno = ENOSYS;
		return EOF;
	}
	return next();
}

/* fclose and freopen close the stream's descriptor through libc's
 * internal close, past close(): shunt lets go of it first, as close()
 * does - its hidden descriptors kept the kernel socket open, and the peer
 * waited for an end that never came; a write() to the number, reused for
 * freopen's file, would have gone to the peer.  Output still in the FILE
 * is flushed by libc onto the socket: the connection moves first.  The
 * entry returned is put once libc has closed. */
static struct sk *stdio_let_go(FILE *f)
{
	struct sk *s;
	int fd;

	if (!f || !shunt_active || (fd = f->_fileno) < 0 || !(s = fdtab_get(fd)))
		return NULL;
	sk_put(s);
	touch(f, WR_PENDING);
	return fdtab_closing(fd);
}

EXPORT int fclose(FILE *f)
{
	struct sk *s = stdio_let_go(f);
	int r = R(fclose)(f);

	if (s)
		sk_put(s);
	return r;
}

static FILE *reopen(FILE *(*next)(const char *, const char *, FILE *), const char *path,
		    const char *mode, FILE *f)
{
	struct sk *s = stdio_let_go(f);
	FILE *n = next(path, mode, f);

	if (s)
		sk_put(s);
	return n;
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *f)
{
	return reopen(R(freopen), path, mode, f);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	return reopen(R(freopen64), path, mode, f);
}

/* the variadic ones, through their va_list forms */
#define VWRAP(name, vname, params, last, vargs)                                          \
	EXPORT int name params                                                              \
	{                                                                                   \
		va_list ap;                                                                 \
		int r;                                                                      \
		va_start(ap, last);                                                         \
		r = vname vargs;                                                            \
		va_end(ap);                                                                 \
		return r;                                                                   \
	}

VWRAP(printf, vprintf, (const char *fmt, ...), fmt, (fmt, ap))
VWRAP(fprintf, vfprintf, (FILE *f, const char *fmt, ...), fmt, (f, fmt, ap))
VWRAP(__printf_chk, __vprintf_chk, (int fl, const char *fmt, ...), fmt, (fl, fmt, ap))
VWRAP(__fprintf_chk, __vfprintf_chk, (FILE *f, int fl, const char *fmt, ...), fmt, (f, fl, fmt, ap))
EXPORT int old_scanf(const char *fmt, ...) __asm__("scanf");
EXPORT int old_fscanf(FILE *f, const char *fmt, ...) __asm__("fscanf");
EXPORT int c99_scanf(const char *fmt, ...) __asm__("__isoc99_scanf");
EXPORT int c99_fscanf(FILE *f, const char *fmt, ...) __asm__("__isoc99_fscanf");
EXPORT int old_wscanf(const wchar_t *fmt, ...) __asm__("wscanf");
EXPORT int old_fwscanf(FILE *f, const wchar_t *fmt, ...) __asm__("fwscanf");
EXPORT int c99_wscanf(const wchar_t *fmt, ...) __asm__("__isoc99_wscanf");
EXPORT int c99_fwscanf(FILE *f, const wchar_t *fmt, ...) __asm__("__isoc99_fwscanf");
VWRAP(old_scanf, old_vscanf, (const char *fmt, ...), fmt, (fmt, ap))
VWRAP(old_fscanf, old_vfscanf, (FILE *f, const char *fmt, ...), fmt, (f, fmt, ap))
VWRAP(c99_scanf, c99_vscanf, (const char *fmt, ...), fmt, (fmt, ap))
VWRAP(c99_fscanf, c99_vfscanf, (FILE *f, const char *fmt, ...), fmt, (f, fmt, ap))
VWRAP(wprintf, vwprintf, (const wchar_t *fmt, ...), fmt, (fmt, ap))
VWRAP(fwprintf, vfwprintf, (FILE *f, const wchar_t *fmt, ...), fmt, (f, fmt, ap))
VWRAP(__wprintf_chk, __vwprintf_chk, (int fl, const wchar_t *fmt, ...), fmt, (fl, fmt, ap))
VWRAP(__fwprintf_chk, __vfwprintf_chk, (FILE *f, int fl, const wchar_t *fmt, ...), fmt, (f, fl, fmt, ap))
VWRAP(old_wscanf, old_vwscanf, (const wchar_t *fmt, ...), fmt, (fmt, ap))
VWRAP(old_fwscanf, old_vfwscanf, (FILE *f, const wchar_t *fmt, ...), fmt, (f, fmt, ap))
VWRAP(c99_wscanf, c99_vwscanf, (const wchar_t *fmt, ...), fmt, (fmt, ap))
VWRAP(c99_fwscanf, c99_vfwscanf, (FILE *f, const wchar_t *fmt, ...), fmt, (f, fmt, ap))

/* dprintf makes a FILE of its own on the descriptor: formatted here and
 * written through write(), it stays on the rings. */
EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	char *buf;
	int n = vasprintf(&buf, fmt, ap);
	size_t off = 0;

	if (n < 0)
		return -1;
	while (off < (size_t)n) {
		ssize_t w = write(fd, buf + off, (size_t)n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			free(buf);
			return -1;
		}
		off += (size_t)w;
	}
	free(buf);
	return n;
}

EXPORT int __vdprintf_chk(int fd, int fl, const char *fmt, va_list ap)
{
	(void)fl;
	return vdprintf(fd, fmt, ap);
}

VWRAP(dprintf, vdprintf, (int fd, const char *fmt, ...), fmt, (fd, fmt, ap))
VWRAP(__dprintf_chk, __vdprintf_chk, (int fd, int fl, const char *fmt, ...), fmt, (fd, fl, fmt, ap))
