/* SPDX-License-Identifier: MIT */
/*
 * cancel.c - a thread canceled inside a wrapper (pthread_cancel).
 *
 * read, recv, send, poll and epoll_wait are cancellation points, and so
 * are calls shunt makes inside them (ppoll, recv, nanosleep): a thread
 * canceled while it waits in a read on an accelerated connection unwinds
 * through shunt's frames without running the rest of them.  The reference
 * the wrapper took on the connection (fdtab_get) was then never given
 * back, so the application's close() could never release the connection:
 * its kernel socket stayed open and the peer waited for an end that never
 * came - where TCP's close sends its FIN.  The wrappers that may wait name
 * the references they hold here (a few thread-local stores); a key
 * destructor, which runs when a canceled thread exits, gives back any
 * still named.  A ring lock it held is taken over by the next taker once
 * the thread is gone (lock.c), as a killed sharer's is.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include "shim.h"

__thread __attribute__((tls_model("initial-exec"))) struct cancel_held cancel_held;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int key_ok;

static void give_back(void *p)
{
	struct cancel_held *h = p;

	for (unsigned i = 0; i < h->n && i < CANCEL_HELD_MAX; i++)
		if (h->s[i]) {
			sk_put(h->s[i]);
			h->s[i] = NULL;
		}
	h->n = 0;
	for (size_t i = 0; h->v && i < h->nv; i++)
		if (h->v[i])
			sk_put(h->v[i]);
	h->v = NULL;
	h->nv = 0;
}

static void make_key(void)
{
	key_ok = !pthread_key_create(&key, give_back);
}

/* The destructor runs only for a thread whose value is set: once each. */
void cancel_arm(void)
{
	cancel_held.armed = 1;
	pthread_once(&once, make_key);
	if (key_ok)
		pthread_setspecific(key, &cancel_held);
}
