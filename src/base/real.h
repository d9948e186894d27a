/* SPDX-License-Identifier: MIT */
/*
 * real.h - the libc functions shunt wraps, resolved once with dlsym(RTLD_NEXT).
 * Resolution happens in the library constructor and, for calls that arrive
 * before it (another library's constructor calling accept()), lazily through
 * pthread_once; every pointer is checked, and a missing symbol makes the shim
 * pass-through rather than call NULL (rsocket's bug).
 */
#ifndef SHUNT_REAL_H
#define SHUNT_REAL_H
#define _GNU_SOURCE
#include <aio.h>
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct real_fns {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*close)(int);
	int (*shutdown)(int, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execveat)(int, const char *, char *const[], char *const[], int);
	int (*fexecve)(int, char *const[], char *const[]);
	pid_t (*fork)(void);
	int (*clone)(int (*)(void *), void *, int, void *, ...);
	long (*syscall)(long, ...);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	int (*prctl)(int, ...);
	int (*mlockall)(int);
	int (*munlockall)(void);
	/* calls that make descriptors, retried after a give-back (giveback.c) */
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*pipe)(int[2]);
	int (*pipe2)(int[2], int);
	int (*socketpair)(int, int, int, int[2]);
	int (*eventfd)(unsigned int, int);
	int (*timerfd_create)(int, int);
	int (*signalfd)(int, const sigset_t *, int);
	int (*inotify_init)(void);
	int (*inotify_init1)(int);
	int (*memfd_create)(const char *, unsigned int);
	/* libc's own opens, past the wrappers above (interpose_libc.c) */
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
	DIR *(*opendir)(const char *);
	FILE *(*tmpfile)(void);
	FILE *(*popen)(const char *, const char *);
	int (*system)(const char *);
	FILE *(*freopen)(const char *, const char *, FILE *);
	FILE *(*freopen64)(const char *, const char *, FILE *);
	int (*fclose)(FILE *);
	/* readv/writev with flags (offset -1: the stream's position) */
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*preadv64v2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev64v2)(int, const struct iovec *, int, off_t, int);
	/* POSIX AIO: glibc's threads use libc's internal read and write */
	int (*aio_read)(struct aiocb *);
	int (*aio_write)(struct aiocb *);
	int (*aio_read64)(struct aiocb64 *);
	int (*aio_write64)(struct aiocb64 *);
	int (*lio_listio)(int, struct aiocb *const[], int, struct sigevent *);
	int (*lio_listio64)(int, struct aiocb64 *const[], int, struct sigevent *);
};

extern struct real_fns real;
/* Non-zero once every pointer above is resolved. */
int real_ready(void);
void real_init(void);
/* The real function, resolved first if a wrapper runs before the
 * constructor (another library's constructor may call it). */
#define R(name) (real.name ? real.name : (real_init(), real.name))
/* A wrapper the library exports (the rest is hidden: -fvisibility=hidden). */
#define EXPORT __attribute__((visibility("default")))
#endif
