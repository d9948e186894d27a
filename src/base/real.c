/* SPDX-License-Identifier: MIT */
/* real.c - resolve the wrapped libc symbols once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include "real.h"

struct real_fns real;
static int ready;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define RESOLVE(name) \
	do { \
		*(void **)&real.name = dlsym(RTLD_NEXT, #name); \
		if (!real.name) \
			ok = 0; \
	} while (0)

#define OPTIONAL(name) (*(void **)&real.name = dlsym(RTLD_NEXT, #name))

static void resolve(void)
{
	int ok = 1;

	RESOLVE(socket); RESOLVE(bind); RESOLVE(listen); RESOLVE(accept);
	RESOLVE(accept4); RESOLVE(connect); RESOLVE(read); RESOLVE(readv);
	RESOLVE(write); RESOLVE(writev); RESOLVE(send); RESOLVE(sendto);
	RESOLVE(sendmsg); RESOLVE(recv); RESOLVE(recvfrom); RESOLVE(recvmsg);
	RESOLVE(close); RESOLVE(shutdown); RESOLVE(dup); RESOLVE(dup2);
	RESOLVE(dup3); RESOLVE(fcntl); RESOLVE(ioctl); RESOLVE(getsockopt);
	RESOLVE(setsockopt); RESOLVE(poll); RESOLVE(ppoll); RESOLVE(select);
	RESOLVE(pselect); RESOLVE(epoll_create); RESOLVE(epoll_create1);
	RESOLVE(epoll_ctl); RESOLVE(epoll_wait); RESOLVE(epoll_pwait);
	RESOLVE(sendfile); RESOLVE(execve); RESOLVE(fexecve); RESOLVE(fork);
	RESOLVE(clone);
	RESOLVE(mlockall); RESOLVE(munlockall);
	RESOLVE(syscall); RESOLVE(prctl); RESOLVE(splice); RESOLVE(sendmmsg);
	RESOLVE(recvmmsg); RESOLVE(open); RESOLVE(openat); RESOLVE(pipe); RESOLVE(pipe2);
	RESOLVE(socketpair); RESOLVE(eventfd); RESOLVE(timerfd_create); RESOLVE(signalfd);
	RESOLVE(inotify_init); RESOLVE(inotify_init1); RESOLVE(memfd_create);
	RESOLVE(fopen); RESOLVE(opendir); RESOLVE(tmpfile); RESOLVE(popen); RESOLVE(system);
	RESOLVE(freopen); RESOLVE(freopen64); RESOLVE(fclose);
	*(void **)&real.fopen64 = dlsym(RTLD_NEXT, "fopen64");
	if (!real.fopen64)
		real.fopen64 = real.fopen;
	/* the same as open/openat where off_t is 64 bits: optional */
	*(void **)&real.open64 = dlsym(RTLD_NEXT, "open64");
	*(void **)&real.openat64 = dlsym(RTLD_NEXT, "openat64");
	if (!real.open64)
		real.open64 = real.open;
	if (!real.openat64)
		real.openat64 = real.openat;
	/* Newer than some libcs, or in librt before glibc 2.34: optional. */
	OPTIONAL(epoll_pwait2); OPTIONAL(execveat);
	OPTIONAL(preadv2); OPTIONAL(pwritev2); OPTIONAL(preadv64v2); OPTIONAL(pwritev64v2);
	OPTIONAL(aio_read); OPTIONAL(aio_write); OPTIONAL(aio_read64); OPTIONAL(aio_write64);
	OPTIONAL(lio_listio); OPTIONAL(lio_listio64);
	__atomic_store_n(&ready, ok, __ATOMIC_RELEASE);
}

void real_init(void)
{
	pthread_once(&once, resolve);
}

int real_ready(void)
{
	if (__builtin_expect(!__atomic_load_n(&ready, __ATOMIC_ACQUIRE), 0))
		real_init();
	return __atomic_load_n(&ready, __ATOMIC_ACQUIRE);
}
