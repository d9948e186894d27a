/* Description: a multi-threaded event loop - several threads waiting in
 * one epoll set, as memcached's or Netty's workers can - makes and closes
 * short connections from any of its threads.  A closed connection's
 * number is soon a new connection's, while another thread may still hold
 * the kernel's report for the old one: the program tags each registration
 * with the connection's generation and drops a report of an earlier one,
 * and keeps its state under its lock.  Every connection is answered and
 * none is lost.  Under shunt the new connection's offer is pending, its
 * socket held by the kernel as the program registered it (epoll.c
 * pend_ctl): a stale report of the old connection's socket must not be
 * taken for it (before: a NULL connection read, the program killed by
 * SIGSEGV within a few hundred connections), nor an old pending record
 * for the new socket's (epoll.c reg_current). */
#include "common.h"
#include <sys/epoll.h>

#define TOTAL 3000
#define INFLIGHT 8
#define WORKERS 4
#define MAXFD 4096

static int ep;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static struct sockaddr_storage ss;
static socklen_t sslen;
static int started, done, accelerated;
static struct {
	uint32_t gen;
	int state; /* 0 free, 1 connecting, 2 request sent */
	char c;
} conns[MAXFD];
static uint32_t gens;

static uint64_t tag(int fd)
{
	return (uint64_t)conns[fd].gen << 32 | (uint32_t)fd;
}

/* (under lk) */
static void start_one(void)
{
	struct epoll_event ev = { .events = EPOLLOUT };
	int fd;

	if (started >= TOTAL)
		return;
	started++;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(fd >= 0 && fd < MAXFD);
	CHECK(connect(fd, (const struct sockaddr *)&ss, sslen) == 0 || errno == EINPROGRESS);
	conns[fd].gen = ++gens;
	conns[fd].state = 1;
	conns[fd].c = (char)('a' + gens % 26);
	if (gens & 1)
		ev.events |= EPOLLET;
	ev.data.u64 = tag(fd);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
}

/* (under lk) one report: a stale one is dropped */
static void handle(const struct epoll_event *e)
{
	int fd = (int)(uint32_t)e->data.u64;
	struct epoll_event ev = { .events = EPOLLIN };
	char b;
	ssize_t r;

	CHECK(fd >= 0 && fd < MAXFD);
	if (e->data.u64 != tag(fd) || !conns[fd].state)
		return;
	if (conns[fd].state == 1 && (e->events & EPOLLOUT)) {
		CHECK(write(fd, &conns[fd].c, 1) == 1);
		conns[fd].state = 2;
		if (conns[fd].gen & 2)
			ev.events |= EPOLLET;
		ev.data.u64 = tag(fd);
		CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
		return;
	}
	if (conns[fd].state != 2 || !(e->events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	r = read(fd, &b, 1);
	if (r < 0) {
		CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
		return;
	}
	CHECK(r == 1 && b == conns[fd].c);
	accelerated += sock_info(fd).mode != 0; /* (shm, or rdma) */
	if (conns[fd].gen % 3 == 0) /* some deleted first, some left to close */
		CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0);
	conns[fd].state = 0;
	CHECK(close(fd) == 0);
	done++;
	start_one();
}

static void *worker(void *arg)
{
	struct epoll_event out[8];

	(void)arg;
	for (;;) {
		int n = epoll_wait(ep, out, 8, 100), all;
		CHECK(n >= 0 || errno == EINTR);
		pthread_mutex_lock(&lk);
		for (int i = 0; i < n; i++)
			handle(&out[i]);
		all = done == TOTAL;
		pthread_mutex_unlock(&lk);
		if (all)
			return NULL;
	}
}

int main(void)
{
	int l = listen_on("127.0.0.1", &ss, &sslen);
	pthread_t t[WORKERS];
	pid_t p;

	deadline(120);
	signal(SIGPIPE, SIG_IGN);
	/* as many server threads as connections in flight: the server
	 * never waits on one while the loop waits on another */
	p = echo_server_fork(&l, INFLIGHT);
	CHECK((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
	pthread_mutex_lock(&lk);
	for (int i = 0; i < INFLIGHT; i++)
		start_one();
	pthread_mutex_unlock(&lk);
	for (int i = 0; i < WORKERS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < WORKERS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(done == TOTAL);
	if (getenv("SHUNT_EXPECT"))
		CHECK(accelerated > 0);
	close(l);
	echo_server_end(p);
	close(ep);
	return 0;
}
