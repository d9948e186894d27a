/* SPDX-License-Identifier: MIT */
/*
 * base.h - the bottom layer: what the shim and the transports use and that
 * knows neither (the libc table is real.h).
 */
#ifndef SHUNT_BASE_H
#define SHUNT_BASE_H
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "lock.h"

/* log.c */
extern int shunt_log_on;     /* SHUNT_LOG: shunt_log writes */
extern int shunt_sandboxed;  /* a seccomp filter: no system call of shunt's own (proc.c) */
void shunt_log_file(const char *path); /* SHUNT_LOG_FILE: lines go there */
void shunt_log_check(void);           /* is standard error a socket? (before a sandbox) */
void shunt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int shunt_log_seen(void); /* shunt_log()'s lines go to a file or a terminal */
void shunt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* proc.c */
pid_t shunt_pid(void);                /* getpid() without a system call */
uint64_t shunt_random64(void);        /* the kernel's */
uint64_t shunt_fast_random(void);     /* a per-thread generator seeded by it */
void base_atfork_child(void);         /* at start and in a forked child */
unsigned shunt_forks(void);           /* forks since start in this line of processes: a
					 child's differs from its parent's and every ancestor's */
/* A forked child's reset of state its parent's pages hold: written only
 * where it differs.  Each page written in a child (or in the parent while
 * a child lives) is copied: a page fault - tens of microseconds on this
 * class of machine - per page, per fork, and the atfork hooks of every
 * module touch statics on pages of their own (a forking server's
 * short connections paid ten of them each). */
#define SHUNT_RESET(var, val)             \
	do {                              \
		if ((var) != (val))       \
			(var) = (val);    \
	} while (0)

/* Code a forked child runs - its fork hooks and its end - in one place:
 * a file's pages are not copied into a child's page tables at fork, so
 * each page of code it runs first is a page fault (tens of microseconds
 * on a machine with shadowed page tables), and the hooks of every module
 * sat on pages of their own (bench/fork.sh).  The linker gathers every
 * .text.sorted.* section, in name order. */
#define SHUNT_CHILD_PATH __attribute__((section(".text.sorted.shunt_child")))
void shunt_mutex_reset(pthread_mutex_t *m); /* pthread_mutex_init unless it is as initialised */

/* hidefd.c: shunt's own descriptors, out of the application's way and
 * protected from its close() */
int fd_hide(int fd);                  /* moved up and marked (the same fd on failure) */
void fd_mark_internal(int fd);        /* marked where it is (a library's) */
void fd_unmark_internal(int fd);      /* the library closes it now */
int fd_dup_hidden(int fd);            /* a close-on-exec duplicate, marked; never in the reserve */
int fd_reserve_mark(int reread);      /* the first number of the program's reserve (hidefd.c) */
int fd_in_reserve(int fd);
int fdtab_is_internal(int fd);
unsigned fd_next_internal(unsigned from, unsigned last); /* UINT_MAX: none */
void fd_close_internal(int fd);
int fd_is_eventfd(int fd);            /* an eventfd, as a doorbell must be */

/* wait.c */
uint64_t shunt_now_ns(void);          /* CLOCK_MONOTONIC */
int fd_wait(int fd, short events, uint64_t deadline, int slice_ms);
#endif
