/* SPDX-License-Identifier: MIT */
/*
 * bell.c - waiting on doorbells in poll() and select().
 *
 * A doorbell is an eventfd the peer writes after taking our "wake me" bit
 * (conn.c): one per arena and side, shared by the arena's 32 segments and
 * by every process holding the arena (so a connection costs no descriptor
 * for its wake-ups: issue #13, item 9), one per RDMA connection.
 *
 * Nobody ever reads a doorbell.  A read resets its counter for everyone:
 * two threads polling two connections of one arena would both wake, one
 * would read, and the other - woken, finding the counter 0 - would sleep
 * again on bytes that had arrived (a forked sibling, an epoll set holding
 * the same doorbell: the same).  Each write wakes every waiter on the
 * eventfd, whatever its counter holds, and edge-triggered epoll reports
 * each: so epoll sets register doorbells edge-triggered (epoll.c), and a
 * thread that sleeps in poll() on accelerated sockets polls one more
 * descriptor, its own private epoll set holding (edge-triggered) the
 * doorbells it has waited on; it empties that set's ready list after
 * waking (bell_consume).  One descriptor per such thread, none per
 * connection.
 *
 * An eventfd stays in an epoll set while any process holds it, not only
 * this one: a forked child that waited on its inherited connection's
 * doorbell would otherwise be woken by every ring of that arena after the
 * connection ended - at its parent's new connections there.  So a wake-up
 * by a doorbell the thread's poll() does not wait on takes that doorbell
 * out of its set (bell_consume), and a process letting go of an arena
 * takes its doorbells out of every thread's set before it closes them
 * (bell_forget: a closed descriptor's registration could not be named
 * again).  tests/behave/stale_bell.
 *
 * In a seccomp sandbox no epoll set is made (a system call the program
 * may not be allowed): poll.c looks at the rings in short naps instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include "shim.h"
#include "../base/real.h"

#define WATCH_CACHE 64 /* doorbells a thread remembers having added */

struct waiter {
	int epfd;
	uint64_t gen;                  /* fork generation it was made in */
	uint64_t forgets;              /* `forgets` when seen[] was last valid */
	unsigned next;
	struct { int fd; uint64_t id; } seen[WATCH_CACHE];
};

static __thread struct waiter *me;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_id = 1;
/* doorbells taken out of every set (bell_forget): the threads' caches of
 * what their sets hold are stale then */
static _Atomic uint64_t forgets;

/* Every thread's set, so a forked child (which has copies of the
 * descriptors but not the threads) closes them. */
static struct waiter **all;
static int nall, capall;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;

static void forget(struct waiter *w)
{
	shunt_mutex_lock(&all_lock);
	for (int i = 0; i < nall; i++)
		if (all[i] == w) {
			all[i] = all[--nall];
			break;
		}
	shunt_mutex_unlock(&all_lock);
}

static void thread_gone(void *p)
{
	struct waiter *w = p;

	if (w->gen == shunt_forks()) {
		forget(w);
		fd_close_internal(w->epfd);
	}
	free(w);
}

static void make_key(void)
{
	pthread_key_create(&key, thread_gone);
}

int bell_waitfd(void)
{
	struct waiter *w = me, **v;
	uint64_t gen = shunt_forks();
	int fd;

	if (shunt_sandboxed) /* epoll_ctl and epoll_wait: calls the filter may refuse */
		return -EPERM;
	if (w && w->gen == gen)
		return w->epfd;
	if (!w && !(w = calloc(1, sizeof *w)))
		return -ENOMEM;
	pthread_once(&key_once, make_key);
	fd = real.epoll_create1(EPOLL_CLOEXEC); /* not the wrapper: no epoll set of the program's */
	if (fd < 0) {
		int e = -errno;
		if (w != me)
			free(w);
		return e;
	}
	*w = (struct waiter){ .epfd = fd_hide(fd), .gen = gen };
	shunt_mutex_lock(&all_lock);
	if (nall == capall && (v = realloc(all, (size_t)(capall ? 2 * capall : 16) * sizeof *v))) {
		all = v;
		capall = capall ? 2 * capall : 16;
	}
	if (nall < capall)
		all[nall++] = w;
	shunt_mutex_unlock(&all_lock);
	if (!me) {
		me = w;
		pthread_setspecific(key, w);
	}
	return w->epfd;
}

/* The doorbell (bell, named id) in this thread's set: added once, then
 * remembered; one the set forgot is added again (EEXIST is fine: the
 * kernel keys registrations by file and number, so a number reused by a
 * new doorbell is a new registration). */
int bell_watch(int waitfd, int bell, uint64_t id)
{
	struct waiter *w = me;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = bell };
	uint64_t f = __atomic_load_n(&forgets, __ATOMIC_ACQUIRE);

	if (w->forgets != f) {
		memset(w->seen, 0, sizeof w->seen);
		w->forgets = f;
	}
	for (unsigned i = 0; i < WATCH_CACHE; i++)
		if (w->seen[i].fd == bell && w->seen[i].id == id && id)
			return 0;
	if (real.epoll_ctl(waitfd, EPOLL_CTL_ADD, bell, &ev) && errno != EEXIST)
		return -errno;
	w->seen[w->next % WATCH_CACHE].fd = bell;
	w->seen[w->next % WATCH_CACHE].id = id;
	w->next++;
	return 0;
}

/* Is bell the doorbell of one of the n connections waited on? */
static int waited(int bell, struct sk *const *sks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sks[i] && sks[i]->conn->efd_mine == bell)
			return 1;
	return 0;
}

/* Empty the set's ready list, so it is quiet until a doorbell rings again;
 * a doorbell that rang but is none of the n connections' (sks[i] NULL:
 * not accelerated) leaves the set, and this thread's memory of it. */
void bell_consume(int waitfd, struct sk *const *sks, size_t n)
{
	struct epoll_event evs[32];
	struct waiter *w = me;
	int r;

	do {
		r = real.epoll_pwait(waitfd, evs, 32, 0, NULL);
		for (int i = 0; i < r; i++) {
			int bell = evs[i].data.fd;
			if (waited(bell, sks, n))
				continue;
			real.epoll_ctl(waitfd, EPOLL_CTL_DEL, bell, NULL);
			for (unsigned j = 0; w && j < WATCH_CACHE; j++)
				if (w->seen[j].fd == bell)
					w->seen[j].id = 0;
		}
	} while (r == 32);
}

/* A doorbell this process is about to close leaves every thread's set. */
void bell_forget(int bell)
{
	if (shunt_sandboxed) /* no sets (bell_waitfd) */
		return;
	__atomic_add_fetch(&forgets, 1, __ATOMIC_ACQ_REL);
	shunt_mutex_lock(&all_lock);
	for (int i = 0; i < nall; i++)
		real.epoll_ctl(all[i]->epfd, EPOLL_CTL_DEL, bell, NULL);
	shunt_mutex_unlock(&all_lock);
}

/* The child has the parent's sets as descriptors, shared with the parent:
 * close them; each thread makes its own again (a set made before the
 * fork carries another shunt_forks()). */
SHUNT_CHILD_PATH void bell_atfork_child(void)
{
	shunt_mutex_reset(&all_lock);
	for (int i = 0; i < nall && !shunt_sandboxed; i++) /* else: no call of ours */
		fd_close_internal(all[i]->epfd);
	SHUNT_RESET(nall, 0);
}

uint64_t bell_new_id(void)
{
	return __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED) | (1ull << 63);
}
