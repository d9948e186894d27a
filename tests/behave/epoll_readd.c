/* Description: a connection put back into an epoll set for room by one
 * thread while another sleeps in epoll_wait on that set - Apache's event
 * MPM after a short write (write completion: the listener thread reports
 * the socket writable and deletes it, a worker writes until EAGAIN and
 * adds it again) - is reported as soon as it has room, as the kernel looks
 * at a registration added or modified at once and wakes a sleeper.  Twenty
 * rounds, by EPOLL_CTL_ADD after a delete and by EPOLL_CTL_MOD: the writer
 * fills the connection, the reader - told so through a pipe - drains
 * exactly what was written and says so, and only then is the socket put
 * back (so nothing else would wake the sleeper); each report must come
 * within 5 s (the sleeper's own time-out is 60 s), and every byte arrives.
 * (The reader reads only when told: one that drained all the time kept a
 * writer on fast shared memory or slow emulated RDMA from ever filling
 * the connection - 2.6 GB in a round, past the test's deadline.)  Under shunt the registration went onto the set's check list,
 * looked at only before a sleep: the sleeper slept on - Apache stalled a
 * 20 MB sendfile for its listener's 50 s time-out. */
#include "common.h"
#include <sys/epoll.h>

#define ROUNDS 20

static int ep, fd;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int reported, use_mod, cmd[2], ack[2];

/* The listener thread: asleep in epoll_wait; a report takes the socket
 * out of the set (delete, or modify to no events) and wakes the writer. */
static void *listener(void *arg)
{
	(void)arg;
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(ep, &ev, 1, 60000);
		CHECK(n >= 0 || errno == EINTR);
		if (n <= 0)
			continue;
		if (ev.data.u64 == 1) /* the end */
			return NULL;
		CHECK(ev.data.u64 == 7 && (ev.events & EPOLLOUT));
		struct epoll_event none = { .events = 0, .data.u64 = 7 };
		CHECK(epoll_ctl(ep, use_mod ? EPOLL_CTL_MOD : EPOLL_CTL_DEL, fd, &none) == 0);
		pthread_mutex_lock(&mu);
		reported = 1;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
	}
}

static void server(int l)
{
	static char buf[65536];
	struct epoll_event out = { .events = EPOLLOUT, .data.u64 = 7 }, end = { .events = EPOLLIN, .data.u64 = 1 };
	int stop[2];
	pthread_t t;
	uint64_t total = 0;

	fd = accept(l, NULL, NULL);
	CHECK(fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	CHECK((ep = epoll_create1(0)) >= 0 && pipe(stop) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, stop[0], &end) == 0);
	memset(buf, 'w', sizeof buf);
	CHECK(pthread_create(&t, NULL, listener, NULL) == 0);
	for (int round = 0; round < ROUNDS * 2; round++) {
		ssize_t w;
		char done;
		while ((w = write(fd, buf, sizeof buf)) > 0)
			total += (uint64_t)w;
		CHECK(w < 0 && errno == EAGAIN);
		/* the reader drains it all; the listener sleeps on */
		CHECK(write(cmd[1], &total, sizeof total) == sizeof total);
		CHECK(read(ack[0], &done, 1) == 1);
		use_mod = round >= ROUNDS;
		pthread_mutex_lock(&mu);
		reported = 0;
		pthread_mutex_unlock(&mu);
		/* the first time a fresh add; then the set's own again */
		CHECK(epoll_ctl(ep, use_mod && round > ROUNDS ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &out) == 0);
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 5;
		pthread_mutex_lock(&mu);
		while (!reported)
			if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT) {
				fprintf(stderr, "round %d (%s): room not reported within 5 s\n", round,
					use_mod ? "modified" : "added again");
				_exit(1);
			}
		pthread_mutex_unlock(&mu);
	}
	CHECK(write(stop[1], "x", 1) == 1);
	CHECK(pthread_join(t, NULL) == 0);
	total |= 1ull << 63; /* the last: read to the end */
	CHECK(write(cmd[1], &total, sizeof total) == sizeof total);
	close(fd);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[65536];
	uint64_t got = 0, told;
	ssize_t r = 1;
	pid_t p;

	deadline(120);
	CHECK(pipe(cmd) == 0 && pipe(ack) == 0);
	CHECK((p = fork()) >= 0); /* (not split across hosts: the rounds go through pipes) */
	if (!p)
		server(l);
	close(l);
	close(cmd[1]);
	close(ack[0]);
	int c = connect_to(&ss, len);
	expect_mode(c);
	do {
		CHECK(read(cmd[0], &told, sizeof told) == sizeof told);
		uint64_t upto = told & ~(1ull << 63);
		while (got < upto || (told >> 63 && got == upto)) {
			size_t want = got < upto && upto - got < sizeof buf ? (size_t)(upto - got) : sizeof buf;
			if ((r = read(c, buf, want)) <= 0)
				break;
			for (ssize_t i = 0; i < r; i++)
				CHECK(buf[i] == 'w');
			got += (uint64_t)r;
		}
		CHECK(told >> 63 ? r == 0 : got == upto);
		if (!(told >> 63))
			CHECK(write(ack[1], "k", 1) == 1);
	} while (!(told >> 63));
	told &= ~(1ull << 63);
	if (told != got) {
		fprintf(stderr, "read %llu bytes, the server wrote %llu\n", (unsigned long long)got,
			(unsigned long long)told);
		return 1;
	}
	close(c);
	CHECK(wait_child(p) == 0);
	return 0;
}
