/* Description: an accelerated connection uses the program's own descriptor
 * as its socket - no descriptor of shunt's a connection - and stays
 * correct whatever the program does with the number: 20 connections cost
 * 20 descriptors (and an arena's three; over RDMA three each: its
 * doorbell and the socket's duplicate are shunt's); a dup then a close of the
 * original, a dup2 of a pipe over it, a close while another thread sleeps
 * in recv() on it (the bytes sent later still reach that reader, as TCP's
 * do), and a number closed past the wrappers (a raw system call) and given
 * again to a new connection, which keeps its own socket options (not the old
 * connection's reset-on-close) and ends with a FIN. */
#include "common.h"
#include <pthread.h>
#include <sys/syscall.h>

#define N 20
#define CONNS (N + 5)

/* close(2) past every wrapper, libc's syscall() included (shunt's
 * interposes that too): what a static binary or an inline system call does */
static long raw_close(int fd)
{
#if defined(__x86_64__)
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
	return r;
#else
	return syscall(SYS_close, fd);
#endif
}

static _Atomic int resets; /* the server's: a connection that ended with an error */

/* The server's side of one connection: its first byte says what to do. */
static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char cmd, buf[256];
	ssize_t n;

	if (read(c, &cmd, 1) != 1) {
		resets++;
		close(c);
		return NULL;
	}
	if (cmd == 'd') { /* a late reply: the client closed its number by then */
		usleep(300000);
		write_all(c, "late", 4);
	} else if (cmd == 'u') { /* bytes the client leaves unread */
		memset(buf, 'u', 100);
		write_all(c, buf, 100);
		while (read(c, buf, sizeof buf) > 0)
			;
		close(c);
		return NULL; /* its end (a raw close) is not TCP's to compare */
	}
	while ((n = read(c, buf, sizeof buf)) > 0) /* 'e': echo */
		write_all(c, buf, (size_t)n);
	if (n < 0)
		resets++;
	close(c);
	return NULL;
}

static int dial(struct sockaddr_storage *ss, socklen_t len, char cmd)
{
	int fd = connect_to(ss, len);

	expect_mode(fd);
	write_all(fd, &cmd, 1);
	return fd;
}

static void echo_check(int fd, const char *what)
{
	char got[8];

	write_all(fd, what, strlen(what));
	read_all(fd, got, strlen(what));
	CHECK(!memcmp(got, what, strlen(what)));
}

static _Atomic int reader_started;

static void *late_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char got[4];

	reader_started = 1;
	CHECK(recv(fd, got, 4, MSG_WAITALL) == 4);
	CHECK(!memcmp(got, "late", 4));
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fds[N], before, after, fd, d, p[2];
	pthread_t th[CONNS], rd;
	char buf[100];
	const char *want = getenv("SHUNT_EXPECT");
	int rdma = want && !strcmp(want, "rdma");
	struct linger lg;
	socklen_t lglen = sizeof lg;

	deadline(30);
	pid_t pid = test_fork();
	if (!pid) {
		for (int i = 0; i < CONNS; i++) {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			CHECK(pthread_create(&th[i], NULL, serve, (void *)(intptr_t)c) == 0);
		}
		for (int i = 0; i < CONNS; i++)
			pthread_join(th[i], NULL);
		if (resets)
			fprintf(stderr, "server: %d connections ended with an error\n", (int)resets);
		_exit(resets ? 1 : 0);
	}
	close(l);

	/* twenty connections: twenty descriptors, and an arena's three */
	fds[0] = dial(&ss, len, 'e');
	echo_check(fds[0], "first");
	before = count_fds();
	for (int i = 1; i < N; i++) {
		fds[i] = dial(&ss, len, 'e');
		echo_check(fds[i], "x");
	}
	after = count_fds();
	fprintf(stderr, "descriptors: %d -> %d for %d more connections\n", before, after, N - 1);
	/* over RDMA a connection keeps two of shunt's: its doorbell and the
	 * socket's duplicate (docs/rdma.md) */
	CHECK(after - before <= (N - 1) * (rdma ? 3 : 1) + 3);
	for (int i = 0; i < N; i++)
		close(fds[i]);

	/* dup, then the original closed: the duplicate carries it on */
	fd = dial(&ss, len, 'e');
	d = dup(fd);
	CHECK(d >= 0);
	close(fd);
	echo_check(d, "dup");
	close(d);

	/* a pipe dup2'd over it: the number writes into the pipe, the
	 * connection goes on on its duplicate */
	fd = dial(&ss, len, 'e');
	d = dup(fd);
	CHECK(d >= 0 && pipe(p) == 0);
	CHECK(dup2(p[1], fd) == fd);
	CHECK(write(fd, "zz", 2) == 2);
	CHECK(read(p[0], buf, 2) == 2 && !memcmp(buf, "zz", 2));
	echo_check(d, "after");
	close(d);
	close(fd);
	close(p[0]);
	close(p[1]);

	/* closed while another thread sleeps in recv() on it */
	fd = dial(&ss, len, 'd');
	CHECK(pthread_create(&rd, NULL, late_reader, (void *)(intptr_t)fd) == 0);
	while (!reader_started) /* (on a loaded machine the thread may start late: its */
		usleep(1000);   /*  recv after the close is EBADF, TCP's too) */
	usleep(100000);
	close(fd);
	pthread_join(rd, NULL);

	/* a number closed past the wrappers, with bytes unread, and the
	 * lowest number given again to the next connection: that one ends
	 * as TCP's (a FIN), whatever the old one held */
	fd = dial(&ss, len, 'u');
	read_all(fd, buf, 1);                                /* the bytes are here: 99 unread */
	usleep(50000);
	CHECK(raw_close(fd) == 0);
	d = dial(&ss, len, 'e');
	fprintf(stderr, "old number %d, new connection's %d\n", fd, d);
	CHECK(getsockopt(d, SOL_SOCKET, SO_LINGER, &lg, &lglen) == 0 && !lg.l_onoff); /* its own options */
	echo_check(d, "reused");
	close(d);

	CHECK(wait_child(pid) == 0);
	return 0;
}
