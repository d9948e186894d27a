/* SPDX-License-Identifier: MIT */
/*
 * lock.h - futex words shared between processes (lock.c): the rings' locks
 * (any transport's), the registry's and segments' wait words.
 */
#ifndef SHUNT_LOCK_H
#define SHUNT_LOCK_H
#include <stdint.h>

void shunt_lock(_Atomic uint32_t *l);
/* The lock, or -ETIMEDOUT after timeout_ns (0: no bound, as shunt_lock):
 * holders never sleep with it (conn.c), so a longer wait means a dead
 * holder - taken over once the kernel says it is gone (lock.c) - or a
 * peer that wrote the word (a lock word in shared memory is the peer's to
 * scribble on). */
int shunt_lock_bounded(_Atomic uint32_t *l, uint64_t timeout_ns);
void shunt_unlock(_Atomic uint32_t *l);
int shunt_trylock(_Atomic uint32_t *l); /* 0 if taken */
void shunt_lock_forget_self(void);      /* in a forked child: its thread id is new */
extern int shunt_lock_probe_off;        /* no kill(2) to look for a dead holder (sandbox) */
void shunt_futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns);
void shunt_futex_wake(_Atomic uint32_t *w, int n);

#endif
