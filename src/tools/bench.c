/* SPDX-License-Identifier: MIT */
/*
 * bench.c - `shunt bench`: shunt against its baselines, in one run.
 *
 * Each measurement runs in a fresh worker process (`shunt bench-worker`),
 * with libshunt.so preloaded for the shunt rows and not for the baselines,
 * so every row of a table was measured minutes apart on the same machine.
 * Ratios are what to read: this machine class is noisy.  Latencies are
 * medians of per-round-trip samples; throughput is bytes over wall time.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "shunt/shunt.h"
#include "tool.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-worker: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A transfer that failed, with what shunt says of its connection (mode,
 * reason: include/shunt/shunt.h; nothing without shunt). */
static void xfer_die(int fd, int rd, ssize_t r, size_t done)
{
	struct shunt_info info;
	socklen_t l = sizeof info;
	int e = errno;

	fprintf(stderr, "bench-worker: fd %d", fd);
	if (!getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l))
		fprintf(stderr, " (shunt mode %u, reason %u, %llu bytes out, %llu in)", info.mode, info.reason,
			(unsigned long long)info.tx, (unsigned long long)info.rx);
	if (r == 0)
		fprintf(stderr, ": %s: end of stream after %zu bytes\n", rd ? "read" : "write", done);
	else
		fprintf(stderr, ": %s: %s\n", rd ? "read" : "write", strerror(e));
	exit(1);
}

static void xfer(int fd, char *b, size_t n, int rd)
{
	size_t o = 0;

	while (o < n) {
		ssize_t r = rd ? read(fd, b + o, n - o) : write(fd, b + o, n - o);
		if (r <= 0)
			xfer_die(fd, rd, r, o);
		o += (size_t)r;
	}
}

static int tcp_listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	socklen_t al = sizeof *a;

	const char *over = getenv("SHUNT_BENCH_ADDR"); /* bench/rdma.sh: a device's address */

	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (over && inet_pton(AF_INET, over, &a->sin_addr) != 1)
		die("SHUNT_BENCH_ADDR");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (void *)a, sizeof *a) || listen(l, 128) || getsockname(l, (void *)a, &al))
		die("listen");
	return l;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connected pair: fds[0] parent's, fds[1] child's (after fork). */
static pid_t pair_fork(const char *kind, int fds[2])
{
	struct sockaddr_in a;
	pid_t p;

	if (!strcmp(kind, "unix")) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			die("socketpair");
		return fork();
	}
	int l = tcp_listener(&a);
	p = fork();
	if (!p) {
		fds[1] = accept(l, NULL, NULL);
		if (fds[1] < 0)
			die("accept");
		nodelay(fds[1]);
		close(l);
		fds[0] = -1;
		return 0;
	}
	close(l);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fds[0], (void *)&a, sizeof a))
		die("connect");
	nodelay(fds[0]);
	fds[1] = -1;
	return p;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return v[n / 2];
}

static void w_pingpong(const char *kind, size_t msg, int iters)
{
	int fds[2], warm = iters / 10 + 100;
	char *b = calloc(1, msg);
	double *s = calloc((size_t)iters, sizeof *s);
	pid_t p = pair_fork(kind, fds);

	if (!p) {
		for (int i = 0; i < iters + warm; i++) {
			xfer(fds[1], b, msg, 1);
			xfer(fds[1], b, msg, 0);
		}
		_exit(0);
	}
	for (int i = 0; i < warm; i++) {
		xfer(fds[0], b, msg, 0);
		xfer(fds[0], b, msg, 1);
	}
	for (int i = 0; i < iters; i++) {
		double t = now();
		xfer(fds[0], b, msg, 0);
		xfer(fds[0], b, msg, 1);
		s[i] = now() - t;
	}
	waitpid(p, NULL, 0);
	printf("%.3f\n", median(s, iters) * 1e6);
}

static void w_stream(const char *kind, size_t msg, size_t total)
{
	int fds[2];
	char *b = calloc(1, msg);
	pid_t p = pair_fork(kind, fds);
	double t;

	if (!p) {
		size_t got = 0;
		while (got < total) {
			ssize_t r = read(fds[1], b, msg);
			if (r <= 0)
				_exit(1);
			got += (size_t)r;
		}
		xfer(fds[1], b, 1, 0);
		_exit(0);
	}
	t = now();
	for (size_t s = 0; s < total; s += msg)
		xfer(fds[0], b, msg, 0);
	xfer(fds[0], b, 1, 1);
	t = now() - t;
	waitpid(p, NULL, 0);
	printf("%.3f\n", (double)total / t / 1e9);
}

/* Connection setup plus the first byte each way, median per connection. */
static void w_setup(int n)
{
	struct sockaddr_in a;
	int l = tcp_listener(&a);
	double *s = calloc((size_t)n, sizeof *s);
	char c = 'x';
	pid_t p = fork();

	if (!p) {
		for (int i = 0; i < n + 20; i++) {
			int fd = accept(l, NULL, NULL);
			if (fd < 0)
				die("accept");
			xfer(fd, &c, 1, 1);
			xfer(fd, &c, 1, 0);
			close(fd);
		}
		_exit(0);
	}
	for (int i = 0; i < n + 20; i++) {
		double t = now();
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (void *)&a, sizeof a))
			die("connect");
		xfer(fd, &c, 1, 0);
		xfer(fd, &c, 1, 1);
		if (i >= 20)
			s[i - 20] = now() - t;
		close(fd);
	}
	waitpid(p, NULL, 0);
	printf("%.3f\n", median(s, n) * 1e6);
}

/* Concurrent set-up: T client threads, each opening C connections in turn
 * (connect, one byte each way, close) against T server threads accepting
 * on one listener in another process; connections per second overall. */
/* The kernel's own floor (setup-floor, bench/tcp-floor.sh): what a
 * connection costs TCP with its byte each way (CS_BYTE, the benchmark's)
 * and without them (CS_NONE: the client waits for the server's close) -
 * the most an accelerated connection, whose bytes skip the socket, could
 * save.  CS_POLL: the byte each way as an event loop's client makes it -
 * a non-blocking socket, connect() in progress, poll() for each turn;
 * CS_EPOLL: the same with the thread's epoll set (libuv's, redis's ae):
 * added for room, modified for bytes, closed.  CS_LOOP: one event loop's
 * set and all the threads in it (memcached's workers, Netty's), twice as
 * many connections in flight as threads, each the same steps, made and
 * closed by whichever thread has its report; CS_LOOP_SEQ: the same
 * against a server of one thread, one connection at a time (it waits for
 * the loop's next request while the loop readies other connections).
 * CS_FORK: the server forks a process for each connection, which serves
 * it and ends with exit() (PostgreSQL's backends, inetd's, a pre-fork
 * server's recycled workers), one accepting thread, the children waited
 * for (their CPU time counted); CS_FORK_NONE: the child only closes;
 * CS_FORK_KEEP: CS_FORK whose child keeps the listener open (Python's
 * ForkingMixIn, most forking servers but PostgreSQL's). */
enum { CS_BYTE, CS_NONE, CS_POLL, CS_EPOLL, CS_LOOP, CS_LOOP_SEQ, CS_FORK, CS_FORK_NONE, CS_FORK_KEEP };

static int cs_forks(int mode)
{
	return mode == CS_FORK || mode == CS_FORK_NONE || mode == CS_FORK_KEEP;
}

static void poll_for(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	while (poll(&p, 1, -1) != 1)
		if (errno != EINTR)
			die("poll");
}

/* CS_POLL's client side of one connection */
static void cs_poll_client(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), err = 0;
	socklen_t l = sizeof err;
	char c = 'x';

	if (fd < 0 || (connect(fd, (const void *)a, sizeof *a) && errno != EINPROGRESS))
		die("connect");
	poll_for(fd, POLLOUT);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err)
		die("connect (SO_ERROR)");
	if (write(fd, &c, 1) != 1)
		die("write");
	poll_for(fd, POLLIN);
	if (read(fd, &c, 1) != 1)
		die("read");
	close(fd);
}

/* the turns of one epoll_wait for ev on the one descriptor of set ep */
static void epoll_for(int ep, int fd, uint32_t ev, int op)
{
	struct epoll_event e = { .events = ev, .data.fd = fd };

	if (epoll_ctl(ep, op, fd, &e))
		die("epoll_ctl");
	while (epoll_wait(ep, &e, 1, -1) != 1)
		if (errno != EINTR)
			die("epoll_wait");
	if (e.data.fd != fd || !(e.events & ev))
		die("epoll_wait: events");
}

/* CS_EPOLL's client side of one connection */
static void cs_epoll_client(int ep, const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), err = 0;
	socklen_t l = sizeof err;
	char c = 'x';

	if (fd < 0 || (connect(fd, (const void *)a, sizeof *a) && errno != EINPROGRESS))
		die("connect");
	epoll_for(ep, fd, EPOLLOUT, EPOLL_CTL_ADD);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err)
		die("connect (SO_ERROR)");
	if (write(fd, &c, 1) != 1)
		die("write");
	epoll_for(ep, fd, EPOLLIN, EPOLL_CTL_MOD);
	if (read(fd, &c, 1) != 1)
		die("read");
	close(fd);
}

struct csetup {
	struct sockaddr_in a;
	int l, n, mode;
};

/* CS_FORK's server: a process a connection */
static void cs_fork_serve(struct csetup *cs, int fd)
{
	char c;
	pid_t p = fork();

	if (p < 0)
		die("fork");
	if (!p) {
		if (cs->mode != CS_FORK_KEEP)
			close(cs->l);
		if (cs->mode != CS_FORK_NONE) {
			xfer(fd, &c, 1, 1);
			xfer(fd, &c, 1, 0);
		}
		close(fd);
		exit(0);
	}
	close(fd);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void *cs_server(void *arg)
{
	struct csetup *cs = arg;
	char c;

	for (;;) {
		int fd = accept(cs->l, NULL, NULL);
		if (fd < 0)
			return NULL; /* the listener is shut down: done */
		if (cs_forks(cs->mode)) {
			cs_fork_serve(cs, fd);
			continue;
		}
		if (cs->mode != CS_NONE) {
			xfer(fd, &c, 1, 1);
			xfer(fd, &c, 1, 0);
		}
		close(fd);
	}
}

static void *cs_client(void *arg)
{
	struct csetup *cs = arg;
	char c = 'x';
	int ep = cs->mode == CS_EPOLL ? epoll_create1(EPOLL_CLOEXEC) : -1;

	if (cs->mode == CS_EPOLL && ep < 0)
		die("epoll_create1");
	for (int i = 0; i < cs->n; i++) {
		if (cs->mode == CS_POLL) {
			cs_poll_client(&cs->a);
			continue;
		}
		if (cs->mode == CS_EPOLL) {
			cs_epoll_client(ep, &cs->a);
			continue;
		}
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (void *)&cs->a, sizeof cs->a))
			die("connect");
		if (cs->mode == CS_BYTE || cs->mode == CS_FORK || cs->mode == CS_FORK_KEEP) {
			xfer(fd, &c, 1, 0);
			xfer(fd, &c, 1, 1);
		} else if (read(fd, &c, 1) != 0) { /* the server's end */
			die("setup-floor: no end");
		}
		close(fd);
	}
	if (ep >= 0)
		close(ep);
	return NULL;
}

/* ---- CS_LOOP's client: one set, every thread in it ---- */
#define LOOP_MAXFD 65536
struct loop {
	struct sockaddr_in a;
	int ep, total, started, done;
	uint32_t gen;
	pthread_mutex_t lk;
	struct { uint32_t gen; int state; } *c; /* by descriptor: 0 free, 1 connecting, 2 asked */
};

static uint64_t loop_tag(const struct loop *lp, int fd)
{
	return (uint64_t)lp->c[fd].gen << 32 | (uint32_t)fd;
}

/* (under lk) one more connection, added for room */
static void loop_start(struct loop *lp)
{
	struct epoll_event e = { .events = EPOLLOUT };
	int fd;

	if (lp->started == lp->total)
		return;
	lp->started++;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || fd >= LOOP_MAXFD || (connect(fd, (const void *)&lp->a, sizeof lp->a) && errno != EINPROGRESS))
		die("connect");
	lp->c[fd].gen = ++lp->gen;
	lp->c[fd].state = 1;
	e.data.u64 = loop_tag(lp, fd);
	if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &e))
		die("epoll_ctl");
}

/* (under lk) one report; one of a connection that ended is dropped */
static void loop_event(struct loop *lp, const struct epoll_event *e)
{
	int fd = (int)(uint32_t)e->data.u64;
	struct epoll_event in = { .events = EPOLLIN, .data.u64 = e->data.u64 };
	char c = 'x';
	ssize_t r;

	if (fd < 0 || fd >= LOOP_MAXFD || e->data.u64 != loop_tag(lp, fd))
		return;
	if (lp->c[fd].state == 1 && (e->events & EPOLLOUT)) {
		if (write(fd, &c, 1) != 1 || epoll_ctl(lp->ep, EPOLL_CTL_MOD, fd, &in))
			die("write");
		lp->c[fd].state = 2;
	} else if (lp->c[fd].state == 2 && (e->events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		if ((r = read(fd, &c, 1)) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r != 1)
			die("read");
		lp->c[fd].state = 0;
		close(fd);
		lp->done++;
		loop_start(lp);
	}
}

static void *loop_thread(void *arg)
{
	struct loop *lp = arg;
	struct epoll_event out[8];

	for (;;) {
		int n = epoll_wait(lp->ep, out, 8, 100), end;
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		pthread_mutex_lock(&lp->lk);
		for (int i = 0; i < n; i++)
			loop_event(lp, &out[i]);
		end = lp->done == lp->total;
		pthread_mutex_unlock(&lp->lk);
		if (end)
			return NULL;
	}
}

static void loop_run(const struct sockaddr_in *a, int threads, int total)
{
	struct loop lp = { .a = *a, .total = total, .lk = PTHREAD_MUTEX_INITIALIZER };
	pthread_t *t = calloc((size_t)threads, sizeof *t);

	lp.c = calloc(LOOP_MAXFD, sizeof *lp.c);
	if (!t || !lp.c || (lp.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("loop");
	pthread_mutex_lock(&lp.lk);
	for (int i = 0; i < 2 * threads; i++)
		loop_start(&lp);
	pthread_mutex_unlock(&lp.lk);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, loop_thread, &lp);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	close(lp.ep);
	free(lp.c);
	free(t);
}

static double cpu_s(int who)
{
	struct rusage u;

	getrusage(who, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
	       (double)u.ru_stime.tv_usec / 1e6;
}

static void w_setup_concurrent(int threads, int per, int mode, int cpu)
{
	struct csetup cs = { .n = per, .mode = mode };
	pthread_t *t = calloc((size_t)threads, sizeof *t);
	int go[2];
	double t0;
	char b;
	pid_t p;

	cs.l = tcp_listener(&cs.a);
	if (!t || pipe(go))
		die("setup");
	p = fork();
	if (!p) {
		int one = mode == CS_LOOP_SEQ || cs_forks(mode);
		for (int i = 0; i < (one ? 1 : threads); i++)
			pthread_create(&t[i], NULL, cs_server, &cs);
		if (read(go[0], &b, 1) < 0) /* the clients are done */
			die("read");
		while (waitpid(-1, NULL, 0) > 0) /* CS_FORK's children: their CPU time counts */
			;
		_exit(0);
	}
	t0 = now();
	if (mode == CS_LOOP || mode == CS_LOOP_SEQ) {
		loop_run(&cs.a, threads, threads * per);
	} else {
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, cs_client, &cs);
		for (int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
	}
	t0 = now() - t0;
	if (write(go[1], "d", 1) != 1)
		die("write");
	waitpid(p, NULL, 0);
	if (!cpu) {
		printf("%.0f\n", (double)threads * per / t0);
		return;
	}
	/* both processes' CPU time a connection (threads' creation included) */
	printf("%.0f %.1f\n", (double)threads * per / t0,
	       (cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN)) / threads / per * 1e6);
}

/* The physical limit: two processes, one shared cache line, spinning. */
static void w_rawshm(size_t msg, int iters)
{
	struct shm { _Atomic uint32_t turn; char pad[60]; char data[65536]; } *m;
	char *b = calloc(1, msg);
	double *s = calloc((size_t)iters, sizeof *s);
	int warm = iters / 10 + 100;
	pid_t p;

	m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || msg > sizeof m->data)
		die("mmap");
	p = fork();
	if (!p) {
		for (int i = 0; i < iters + warm; i++) {
			while (__atomic_load_n(&m->turn, __ATOMIC_ACQUIRE) != 1)
				__builtin_ia32_pause();
			memcpy(b, m->data, msg);
			memcpy(m->data, b, msg);
			__atomic_store_n(&m->turn, 0, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	for (int i = 0; i < iters + warm; i++) {
		double t = now();
		memcpy(m->data, b, msg);
		__atomic_store_n(&m->turn, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&m->turn, __ATOMIC_ACQUIRE) != 0)
			__builtin_ia32_pause();
		memcpy(b, m->data, msg);
		if (i >= warm)
			s[i - warm] = now() - t;
	}
	waitpid(p, NULL, 0);
	printf("%.3f\n", median(s, iters) * 1e6);
}

static void w_memcpy(size_t chunk, size_t total)
{
	char *a = malloc(chunk), *b = malloc(chunk);
	double t;

	memset(a, 1, chunk);
	memset(b, 2, chunk);
	t = now();
	for (size_t s = 0; s < total; s += chunk) {
		memcpy(b, a, chunk);
		__asm__ volatile("" ::"r"(b) : "memory");
	}
	t = now() - t;
	printf("%.3f\n", (double)total / t / 1e9);
}

/* What memory costs a forked child on this machine (docs/architecture.md,
 * "Known limits": a forking server's connections): microseconds per
 * system call, per first write of a fresh anonymous page (a page fault),
 * and per first read, in a forked child, of a page its parent had mapped
 * (no fault in the child's page tables: any cost is the MMU's - under
 * shadow paging a fault of the hypervisor's). */
static void w_pages(int n)
{
	size_t len = (size_t)n * 4096;
	volatile char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd[2];
	double t, sys, fault, child;
	long sum = 0;
	pid_t p;

	if (a == MAP_FAILED || n < 1 || pipe(fd))
		die("pages");
	t = now();
	for (int i = 0; i < n; i++)
		syscall(SYS_getppid);
	sys = (now() - t) / n;
	t = now();
	for (int i = 0; i < n; i++)
		a[(size_t)i * 4096] = 1;
	fault = (now() - t) / n;
	p = fork();
	if (!p) {
		t = now();
		for (int i = 0; i < n; i++)
			sum += a[(size_t)i * 4096];
		child = (now() - t) / n;
		_exit(write(fd[1], &child, sizeof child) == sizeof child && sum == n ? 0 : 1);
	}
	if (p < 0 || read(fd[0], &child, sizeof child) != sizeof child)
		die("pages: child");
	waitpid(p, NULL, 0);
	printf("%.2f %.2f %.2f\n", sys * 1e6, fault * 1e6, child * 1e6);
}

/* What a fork costs with nothing but the library in the process (the
 * floor of every forking server's connection, bench/fork.sh): n children
 * that exit() at once, each waited for - wall time a fork, the children's
 * CPU time and their page faults (minor: every page a child writes, or
 * reads of its code and of memory its parent never touched). */
static void w_fork_exit(int n)
{
	struct rusage ru;
	double t;

	if (n < 1)
		die("fork-exit");
	t = now();
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (!p)
			exit(0);
		if (waitpid(p, NULL, 0) != p)
			die("waitpid");
	}
	t = now() - t;
	if (getrusage(RUSAGE_CHILDREN, &ru))
		die("getrusage");
	printf("%.1f %.1f %.2f\n", t * 1e6 / n,
	       ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6) * 1e6 / n,
	       (double)ru.ru_minflt / n);
}

/* A connection to a forked server, a byte each way, held for sec seconds:
 * prints the client's descriptor table size (FDSize, /proc/self/status)
 * once the byte is back (bench/fdtable.sh reads the kernel's memory
 * meanwhile). */
static void w_hold(int sec)
{
	int fds[2];
	char b = 'x', line[128];
	pid_t p = pair_fork("tcp", fds);
	FILE *f;

	if (p < 0)
		die("hold: fork");
	if (!p) {
		if (read(fds[1], &b, 1) != 1 || write(fds[1], &b, 1) != 1 || read(fds[1], &b, 1) != 0)
			_exit(1);
		_exit(0);
	}
	if (write(fds[0], &b, 1) != 1 || read(fds[0], &b, 1) != 1)
		die("hold: byte");
	f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "FDSize:", 7))
			printf("%d\n", atoi(line + 7));
	if (f)
		fclose(f);
	fflush(stdout);
	sleep((unsigned)sec);
	close(fds[0]);
	waitpid(p, NULL, 0);
}

/* An nginx-style server: one connection registered EPOLLIN | EPOLLOUT |
 * EPOLLRDHUP | EPOLLET (nginx's for every connection), non-blocking,
 * echoing each request; the client (blocking) sends n requests of size
 * bytes and reads each answer.  Prints the round trip (us), the server's
 * wake-ups a request and those that reported no EPOLLIN (room only: TCP
 * reports room after a writer found none), and both ends' CPU a request
 * (us). */
static void w_edge(size_t size, int n)
{
	int fds[2], st[2];
	double t, cli;
	char *b = calloc(1, size > 65536 ? size : 65536);
	pid_t p;

	if (!b || pipe(st))
		die("edge: setup");
	p = pair_fork("tcp", fds);
	if (p < 0)
		die("edge: fork");
	if (!p) {
		int ep = epoll_create1(0);
		double r[3] = { 0, 0, 0 };
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };

		if (ep < 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) || epoll_ctl(ep, EPOLL_CTL_ADD, fds[1], &ev))
			_exit(1);
		for (int end = 0; !end;) {
			ssize_t k;
			if (epoll_wait(ep, &ev, 1, -1) != 1)
				continue;
			r[0]++;
			if (!(ev.events & EPOLLIN)) {
				r[1]++;
				continue;
			}
			while ((k = read(fds[1], b, 65536)) > 0)
				for (ssize_t o = 0, w; o < k; o += w)
					if ((w = write(fds[1], b + o, (size_t)(k - o))) <= 0)
						_exit(1); /* (an answer always fits: the client reads it) */
			end = k == 0;
		}
		r[2] = cpu_s(RUSAGE_SELF);
		_exit(write(st[1], r, sizeof r) == sizeof r ? 0 : 1);
	}
	t = now();
	for (int i = 0; i < n; i++) {
		if (write(fds[0], b, size) != (ssize_t)size)
			die("edge: write");
		for (size_t got = 0; got < size;) {
			ssize_t k = read(fds[0], b, size - got);
			if (k <= 0)
				die("edge: read");
			got += (size_t)k;
		}
	}
	t = now() - t;
	cli = cpu_s(RUSAGE_SELF);
	close(fds[0]);
	double r[3];
	if (read(st[0], r, sizeof r) != sizeof r)
		die("edge: server");
	waitpid(p, NULL, 0);
	printf("%.2f %.3f %.3f %.2f %.2f\n", t / n * 1e6, r[0] / n, r[1] / n, r[2] / n * 1e6, cli / n * 1e6);
	free(b);
}

int cmd_bench_worker(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "pingpong") && argc == 5)
		w_pingpong(argv[2], strtoul(argv[3], NULL, 10), atoi(argv[4]));
	else if (!strcmp(argv[1], "stream") && argc == 5)
		w_stream(argv[2], strtoul(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
	else if (!strcmp(argv[1], "setup") && argc == 3)
		w_setup(atoi(argv[2]));
	else if (!strcmp(argv[1], "setup-concurrent") && argc == 4)
		w_setup_concurrent(atoi(argv[2]), atoi(argv[3]), CS_BYTE, 0);
	else if (!strcmp(argv[1], "setup-floor") && argc == 5)
		w_setup_concurrent(atoi(argv[2]), atoi(argv[3]),
				   !strcmp(argv[4], "none")    ? CS_NONE
				   : !strcmp(argv[4], "poll")  ? CS_POLL
				   : !strcmp(argv[4], "epoll") ? CS_EPOLL
				   : !strcmp(argv[4], "loop")  ? CS_LOOP
				   : !strcmp(argv[4], "loop-seq") ? CS_LOOP_SEQ
				   : !strcmp(argv[4], "fork") ? CS_FORK
				   : !strcmp(argv[4], "fork-none") ? CS_FORK_NONE
				   : !strcmp(argv[4], "fork-keep") ? CS_FORK_KEEP
							       : CS_BYTE,
				   1);
	else if (!strcmp(argv[1], "rawshm") && argc == 4)
		w_rawshm(strtoul(argv[2], NULL, 10), atoi(argv[3]));
	else if (!strcmp(argv[1], "hold") && argc == 3)
		w_hold(atoi(argv[2]));
	else if (!strcmp(argv[1], "pages") && argc == 3)
		w_pages(atoi(argv[2]));
	else if (!strcmp(argv[1], "fork-exit") && argc == 3)
		w_fork_exit(atoi(argv[2]));
	else if (!strcmp(argv[1], "edge") && argc == 4)
		w_edge(strtoul(argv[2], NULL, 10), atoi(argv[3]));
	else if (!strcmp(argv[1], "memcpy") && argc == 4)
		w_memcpy(strtoul(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
	else
		return 2;
	return 0;
}

/* ---- the driver ---- */

enum variant { V_TCP, V_UNIX, V_BUSY, V_NOSPIN, V_DEFAULT, V_RAW };
static const char *vname[] = { "tcp-loopback", "unix-socket", "shunt-busy-poll",
			       "shunt-no-spin", "shunt-default", "raw-shm" };

/* Run one worker; returns its single number, or -1. */
static double run_worker(enum variant v, const char *args)
{
	char cmd[PATH_MAX * 2], lib[PATH_MAX];
	const char *env = "";
	double x = -1;
	FILE *f;

	snprintf(lib, sizeof lib, "%s/libshunt.so", tool_dir());
	if (v == V_BUSY)
		env = "SHUNT_SPIN_US=-1";
	else if (v == V_NOSPIN)
		env = "SHUNT_SPIN_US=0";
	if (v == V_BUSY || v == V_NOSPIN || v == V_DEFAULT)
		snprintf(cmd, sizeof cmd, "env %s LD_PRELOAD=%s %s/shunt bench-worker %s", env, lib,
			 tool_dir(), args);
	else
		snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD %s/shunt bench-worker %s", tool_dir(), args);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lf", &x) != 1)
		x = -1;
	pclose(f);
	return x;
}

struct row {
	char test[32];
	char variant[24];
	double value;
	char unit[8];
	double vs_tcp; /* ratio in the good direction: >1 means better than TCP */
};

static struct row rows[128];
static int nrows;

static void add(const char *test, enum variant v, double value, const char *unit, double tcp)
{
	struct row *r = &rows[nrows++];
	int lower_better = !strcmp(unit, "us");

	snprintf(r->test, sizeof r->test, "%s", test);
	snprintf(r->variant, sizeof r->variant, "%s", vname[v]);
	r->value = value;
	snprintf(r->unit, sizeof r->unit, "%s", unit);
	r->vs_tcp = value <= 0 || tcp <= 0 ? 0 : lower_better ? tcp / value : value / tcp;
	printf("  %-22s %-16s %10.2f %-5s  %6.2fx vs tcp\n", test, vname[v], value, unit, r->vs_tcp);
	fflush(stdout);
}

/* One test: TCP loopback first (the baseline of every ratio), then the unix
 * socket and the three shunt modes on the same worker, then the raw limit. */
static void compare(const char *test, const char *unit, const char *what, const char *params,
		    const char *raw)
{
	char args[160];
	double tcp;

	snprintf(args, sizeof args, "%s tcp %s", what, params);
	tcp = run_worker(V_TCP, args);
	add(test, V_TCP, tcp, unit, tcp);
	snprintf(args, sizeof args, "%s unix %s", what, params);
	add(test, V_UNIX, run_worker(V_UNIX, args), unit, tcp);
	snprintf(args, sizeof args, "%s tcp %s", what, params);
	for (enum variant v = V_BUSY; v <= V_DEFAULT; v++)
		add(test, v, run_worker(v, args), unit, tcp);
	if (raw)
		add(test, V_RAW, run_worker(V_RAW, raw), unit, tcp);
}

static void latency(size_t msg, int iters)
{
	char test[32], params[64], raw[64];

	snprintf(test, sizeof test, "rtt-%zuB", msg);
	snprintf(params, sizeof params, "%zu %d", msg, iters);
	snprintf(raw, sizeof raw, "rawshm %zu %d", msg, iters);
	compare(test, "us", "pingpong", params, raw);
}

static void throughput(size_t msg, size_t total)
{
	char test[32], params[64], raw[64];

	snprintf(test, sizeof test, "stream-%zuKiB", msg / 1024);
	snprintf(params, sizeof params, "%zu %zu", msg, total);
	snprintf(raw, sizeof raw, "memcpy %zu %zu", msg, total * 4);
	compare(test, "GB/s", "stream", params, raw);
}

static void setup(int n)
{
	char args[64];
	double tcp;

	snprintf(args, sizeof args, "setup %d", n);
	tcp = run_worker(V_TCP, args);
	add("setup+first-byte", V_TCP, tcp, "us", tcp);
	add("setup+first-byte", V_BUSY, run_worker(V_BUSY, args), "us", tcp);
	add("setup+first-byte", V_NOSPIN, run_worker(V_NOSPIN, args), "us", tcp);
	add("setup+first-byte", V_DEFAULT, run_worker(V_DEFAULT, args), "us", tcp);
}

/* N threads at once, each connect/1 byte/close in turn: connections/s */
static void setup_concurrent(int threads, int per)
{
	char args[64], test[32];
	double tcp;

	snprintf(args, sizeof args, "setup-concurrent %d %d", threads, per);
	snprintf(test, sizeof test, "setup-%dthreads", threads);
	tcp = run_worker(V_TCP, args);
	add(test, V_TCP, tcp, "conn/s", tcp);
	add(test, V_BUSY, run_worker(V_BUSY, args), "conn/s", tcp);
	add(test, V_NOSPIN, run_worker(V_NOSPIN, args), "conn/s", tcp);
	add(test, V_DEFAULT, run_worker(V_DEFAULT, args), "conn/s", tcp);
}

static void write_results(const char *dir)
{
	char path[PATH_MAX];
	FILE *f;
	time_t t = time(NULL);
	char host[64] = "";

	mkdir(dir, 0755);
	snprintf(path, sizeof path, "%s/results.tsv", dir);
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "test\tvariant\tvalue\tunit\tvs_tcp\n");
	for (int i = 0; i < nrows; i++)
		fprintf(f, "%s\t%s\t%.3f\t%s\t%.3f\n", rows[i].test, rows[i].variant, rows[i].value,
			rows[i].unit, rows[i].vs_tcp);
	fclose(f);
	snprintf(path, sizeof path, "%s/results.md", dir);
	f = fopen(path, "w");
	if (!f)
		return;
	gethostname(host, sizeof host - 1);
	fprintf(f, "Measured by `build/shunt bench` on %s, %ld online CPUs, %s",
		host, sysconf(_SC_NPROCESSORS_ONLN), ctime(&t));
	fprintf(f, "\n| test | variant | value | unit | vs TCP loopback |\n|---|---|---:|---|---:|\n");
	for (int i = 0; i < nrows; i++)
		fprintf(f, "| %s | %s | %.2f | %s | %.2fx |\n", rows[i].test, rows[i].variant,
			rows[i].value, rows[i].unit, rows[i].vs_tcp);
	fclose(f);
	printf("results written to %s/results.md and results.tsv\n", dir);
}

int cmd_bench(int argc, char **argv)
{
	const char *out = NULL;
	int quick = 0, iters;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else {
			fprintf(stderr, "usage: shunt bench [--quick] [--out DIR]\n");
			return 2;
		}
	}
	iters = quick ? 2000 : 20000;
	printf("shunt bench: medians; 'vs tcp' > 1 means better than TCP loopback\n");
	latency(64, iters);
	latency(1024, iters);
	latency(16384, iters / 2);
	throughput(65536, quick ? (256u << 20) : (2048u << 20));
	setup(quick ? 200 : 2000);
	setup_concurrent(8, quick ? 100 : 500);
	setup_concurrent(64, quick ? 20 : 100);
	if (out)
		write_results(out);
	return 0;
}
