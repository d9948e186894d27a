/* Description: a signal handler that calls into the socket layer while the
 * thread it interrupted is inside a call on the same connection - writes a
 * byte on it, peeks at it, dups and closes it, changes its epoll
 * registration - as the kernel allows (it runs handlers between system
 * calls, where none of its locks are held).  Over TCP every call works,
 * and a handler's byte lands between two of the thread's writes, never
 * inside one that returned its whole count.  Under shunt the handler met
 * the lock its own thread held: its write waited out the ring lock's bound
 * and reset the connection ("the peer broke its shared ring"), its dup,
 * close or epoll_ctl waited for ever on the library's mutex. */
#include "common.h"
#include <setjmp.h>
#include <sys/epoll.h>

#define CHUNK (1u << 20)
#define WRITES 160
#define TICK_US 150

static int S, EP;
static volatile int mode;
static volatile long handled, failed;

static uint8_t main_byte(uint64_t pos)
{
	return (uint8_t)('a' + pos % 26); /* never '!' */
}

static void on_alarm(int sig)
{
	int e = errno;
	char c = '!';
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = S };

	(void)sig;
	switch (mode) {
	case 1: /* a byte of the handler's own, on the stream */
		if (write(S, &c, 1) == 1)
			handled++;
		else
			failed++;
		break;
	case 2: { /* a look at what the thread is reading (0: the end) */
		ssize_t r = recv(S, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (r >= 0 || errno == EAGAIN)
			handled++;
		else
			failed++;
		break;
	}
	case 3: { /* the descriptor table */
		int d = dup(S);
		if (d >= 0 && !close(d))
			handled++;
		else
			failed++;
		break;
	}
	case 4: /* the epoll set the thread is changing */
		if (!epoll_ctl(EP, EPOLL_CTL_MOD, S, &ev))
			handled++;
		else
			failed++;
		break;
	}
	errno = e;
}

/* SIGALRM every TICK_US to on_alarm; off: the test's deadline again */
static void ticking(int on)
{
	struct itimerval it = { { 0, on ? TICK_US : 0 }, { 0, on ? TICK_US : 0 } };
	struct sigaction sa = { .sa_handler = on ? on_alarm : SIG_DFL, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	if (on)
		CHECK(!sigaction(SIGALRM, &sa, NULL));
	CHECK(!setitimer(ITIMER_REAL, &it, NULL));
	if (!on) {
		CHECK(!sigaction(SIGALRM, &sa, NULL));
		deadline(100);
	}
}

/* The server: mode 1 reads the stream to its end, then answers with the
 * main bytes it counted and the main-stream positions of the '!'s; modes
 * 2-4 write the pattern the client checks. */
static void serve(int l)
{
	int c = accept(l, NULL, NULL);
	static uint8_t b[65536];
	uint64_t pos = 0, nbang = 0, *bang = malloc(sizeof(uint64_t) * 1000000);
	ssize_t r;

	CHECK(c >= 0 && bang);
	while ((r = read(c, b, sizeof b)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		for (ssize_t i = 0; i < r; i++) {
			if (b[i] == '!') {
				CHECK(nbang < 1000000);
				bang[nbang++] = pos;
			} else if (b[i] != main_byte(pos++)) {
				fprintf(stderr, "server: main byte %llu differs\n", (unsigned long long)pos - 1);
				exit(1);
			}
		}
	}
	write_all(c, &pos, sizeof pos);
	write_all(c, &nbang, sizeof nbang);
	write_all(c, bang, sizeof(uint64_t) * nbang);
	/* modes 2-4 on a second connection: the pattern, 64 MiB */
	int c2 = accept(l, NULL, NULL);
	CHECK(c2 >= 0);
	write_pattern(c2, 64u << 20, 7);
	close(c2);
	close(c);
	/* the jump's: read nothing, for 6 s */
	int c3 = accept(l, NULL, NULL);
	CHECK(c3 >= 0);
	write_all(c3, "s", 1);
	sleep(6);
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Mode 1: the thread writes 1 MiB at a time, the handler a '!': each '!'
 * must sit where one of the thread's write() calls ended. */
static void handler_writes(void)
{
	size_t cap = 1u << 20, nb = 0;
	uint64_t tot = 0, pos, nbang, *bound = malloc(sizeof(uint64_t) * cap);
	uint8_t *buf = malloc(CHUNK);

	CHECK(buf && bound);
	bound[nb++] = 0;
	mode = 1;
	ticking(1);
	for (int i = 0; i < WRITES; i++) {
		size_t off = 0;
		for (size_t k = 0; k < CHUNK; k++)
			buf[k] = main_byte(tot + k);
		while (off < CHUNK) {
			ssize_t w = write(S, buf + off, CHUNK - off);
			if (w < 0 && errno == EINTR)
				continue;
			CHECK(w > 0 && nb < cap);
			off += (size_t)w;
			bound[nb++] = tot + off;
		}
		tot += CHUNK;
	}
	ticking(0);
	mode = 0;
	CHECK(!shutdown(S, SHUT_WR));
	read_all(S, &pos, sizeof pos);
	read_all(S, &nbang, sizeof nbang);
	CHECK(pos == tot);
	CHECK(nbang == (uint64_t)handled && handled > 0);
	CHECK(!failed);
	for (uint64_t i = 0; i < nbang; i++) {
		uint64_t at;
		read_all(S, &at, sizeof at);
		if (!bsearch(&at, bound, nb, sizeof *bound, cmp_u64)) {
			fprintf(stderr, "a handler's byte at %llu: inside a write() that returned its whole count\n",
				(unsigned long long)at);
			exit(1);
		}
	}
	printf("signal_reentry: write: %llu bytes in %zu writes, %ld handler bytes\n", (unsigned long long)tot,
	       nb - 1, handled);
	free(buf);
	free(bound);
}

/* Mode 2: the thread reads the 64 MiB pattern, the handler peeks. */
static void handler_peeks(void)
{
	static uint8_t b[65536];
	uint64_t pos = 0;
	ssize_t r;

	handled = failed = 0;
	mode = 2;
	ticking(1);
	while ((r = read(S, b, sizeof b)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		for (ssize_t i = 0; i < r; i++, pos++)
			if (b[i] != pattern(pos, 7)) {
				fprintf(stderr, "byte %llu differs\n", (unsigned long long)pos);
				exit(1);
			}
	}
	ticking(0);
	mode = 0;
	CHECK(pos == 64u << 20);
	CHECK(handled > 0 && !failed);
	printf("signal_reentry: peek: %ld handler peeks\n", handled);
}

/* Modes 3 and 4: the thread dups and closes, or changes its epoll
 * registration and waits, for 300 ms; the handler does the same. */
static void handler_same_calls(int m)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = S }, got[4];
	double end = now_s() + 0.3;

	handled = failed = 0;
	mode = m;
	ticking(1);
	while (now_s() < end) {
		if (m == 3) {
			int d = dup(S);
			CHECK(d >= 0 && !close(d));
		} else {
			CHECK(!epoll_ctl(EP, EPOLL_CTL_MOD, S, &ev));
			int n = epoll_wait(EP, got, 4, 0);
			CHECK(n >= 0 || errno == EINTR);
		}
	}
	ticking(0);
	mode = 0;
	CHECK(handled > 0 && !failed);
	printf("signal_reentry: %s: %ld handler calls\n", m == 3 ? "dup/close" : "epoll_ctl", handled);
}

/* A handler that ends a blocked write (an alarm's siglongjmp: an old way
 * to bound a call) on a connection moved to TCP (urgent data moves it):
 * the write sleeps in the kernel's send with shunt's lock held, and the
 * handler must run there as in TCP's - held back, it waited for the
 * peer to read (here 6 s; for ever, were it never to). */
static sigjmp_buf jump;

static void on_alarm_jump(int sig)
{
	(void)sig;
	siglongjmp(jump, 1);
}

static void handler_jumps(const struct sockaddr_storage *ss, socklen_t len)
{
	static char buf[1 << 20]; /* (more than the room poll calls writable) */
	struct sigaction sa = { .sa_handler = on_alarm_jump, .sa_flags = SA_RESTART };
	int fd = connect_to(ss, len), fl;
	volatile double t0;

	expect_mode(fd);
	read_all(fd, buf, 1); /* the server's byte: the connection is settled (two hosts: its handshake) */
	CHECK(send(fd, "!", 1, MSG_OOB) == 1);
	CHECK((fl = fcntl(fd, F_GETFL)) >= 0 && !fcntl(fd, F_SETFL, fl | O_NONBLOCK));
	while (write(fd, buf, sizeof buf) > 0) /* the socket's buffers full: the next write sleeps */
		;
	CHECK(errno == EAGAIN && !fcntl(fd, F_SETFL, fl));
	sigemptyset(&sa.sa_mask);
	CHECK(!sigaction(SIGALRM, &sa, NULL));
	t0 = now_s();
	if (!sigsetjmp(jump, 1)) {
		alarm(1);
		write(fd, buf, sizeof buf);
		fprintf(stderr, "the write returned before the alarm\n");
		exit(1);
	}
	if (now_s() - t0 > 3) {
		fprintf(stderr, "the alarm's handler ran %.1f s late\n", now_s() - t0 - 1);
		exit(1);
	}
	signal(SIGALRM, SIG_DFL);
	deadline(100);
	printf("signal_reentry: jump: out of a blocked write after %.2f s\n", now_s() - t0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(100);
	pid_t p = test_fork();
	if (!p)
		serve(l);
	close(l);
	S = connect_to(&ss, len);
	expect_mode(S);
	handler_writes();
	close(S);
	S = connect_to(&ss, len);
	expect_mode(S);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = S };
	CHECK((EP = epoll_create1(0)) >= 0);
	CHECK(!epoll_ctl(EP, EPOLL_CTL_ADD, S, &ev));
	handler_same_calls(3);
	handler_same_calls(4);
	handler_peeks();
	close(EP);
	close(S);
	handler_jumps(&ss, len); /* (its connection is left to the exit) */
	CHECK(wait_child(p) == 0);
	return 0;
}
