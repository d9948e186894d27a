/* SPDX-License-Identifier: MIT */
/*
 * common.h - helpers for the behaviour tests.
 *
 * Every test is one program checking one behaviour of a TCP connection.  The
 * runner executes it twice: without shunt (SHUNT_EXPECT unset: the kernel's
 * TCP is the reference) and under shunt with SHUNT_EXPECT=shm, where
 * expect_mode() also asserts that the connection really was accelerated.
 * Exit 0 pass, 1 fail, 77 skip.
 *
 * Split mode (tests/rdma/two-hosts.sh): a program whose server is its forked
 * child (test_fork()) can also run as two processes on two hosts.  With
 * SHUNT_TEST_SPLIT=server it binds SHUNT_TEST_ADDR:SHUNT_TEST_PORT(+k for its
 * k-th listener), announces it by creating SHUNT_TEST_SYNC.k and becomes the
 * child (test_fork() returns 0); with SHUNT_TEST_SPLIT=client it waits for
 * that file, dials the address and becomes the parent; its wait_child()
 * waits for SHUNT_TEST_SYNC.status, the server's exit status written there
 * by the script on the other host.  SHUNT_TEST_SYNC is on a directory both
 * hosts see (the 9p tree).
 */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "shunt/shunt.h"

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n",   \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

static inline double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline int double_order(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* v (times, say) sorted in place, smallest first: its median. */
static inline double sort_median(double *v, size_t n)
{
	qsort(v, n, sizeof *v, double_order);
	return v[n / 2];
}

/* A listener on an ephemeral port of addr (IPv4 or IPv6 literal). */
/* SHUNT_TEST_ADDR replaces 127.0.0.1: the RDMA suite runs every program
 * between two devices' addresses (tests/rdma/run.sh). */
static inline const char *split_role(void)
{
	return getenv("SHUNT_TEST_SPLIT");
}

static inline int split_is(const char *role)
{
	const char *r = split_role();
	return r && !strcmp(r, role);
}

/* SHUNT_TEST_SYNC.what: the path of one of split mode's rendezvous files. */
static inline void split_path(char *out, size_t n, const char *what)
{
	const char *base = getenv("SHUNT_TEST_SYNC");
	CHECK(base && snprintf(out, n, "%s.%s", base, what) < (int)n);
}

/* Waits (bounded by the test's deadline) until the file exists. */
static inline FILE *split_wait_file(const char *what)
{
	char path[512];
	FILE *f;

	split_path(path, sizeof path, what);
	while (!(f = fopen(path, "r"))) {
		CHECK(errno == ENOENT); /* not there yet; anything else never ends */
		usleep(20000);
	}
	return f;
}

static inline int listen_on(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	const char *over = getenv("SHUNT_TEST_ADDR");
	static unsigned listeners; /* split mode: the k-th listener */
	unsigned port = 0;
	char what[16] = ""; /* split mode: this listener's rendezvous name */
	int fam, one = 1;

	if (over && !strcmp(addr, "127.0.0.1"))
		addr = over;
	if (split_role()) {
		const char *p = getenv("SHUNT_TEST_PORT");
		CHECK(p && over && atoi(p) > 0);
		snprintf(what, sizeof what, "%u", listeners);
		port = (unsigned)atoi(p) + listeners++;
	}
	fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	memset(ss, 0, sizeof *ss);
	if (fam == AF_INET) {
		struct sockaddr_in *in = (void *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		CHECK(inet_pton(AF_INET, addr, &in->sin_addr) == 1);
		*len = sizeof *in;
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		CHECK(inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1);
		*len = sizeof *in6;
	}
	if (split_is("client")) { /* the listener is on the other host */
		fclose(split_wait_file(what));
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	int l = socket(fam, SOCK_STREAM, 0);
	CHECK(l >= 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	CHECK(bind(l, (void *)ss, *len) == 0);
	CHECK(listen(l, 128) == 0);
	CHECK(getsockname(l, (void *)ss, len) == 0);
	if (split_is("server")) {
		char path[512];
		split_path(path, sizeof path, what);
		FILE *f = fopen(path, "w");
		CHECK(f && fclose(f) == 0);
	}
	return l;
}

/* fork() whose child is the server: in split mode the server host's process
 * is the child (0) and the client host's the parent (a pid only
 * wait_child() understands). */
static inline pid_t test_fork(void)
{
	if (split_is("server"))
		return 0;
	if (split_is("client"))
		return 1;
	return fork();
}

static inline int connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (const void *)ss, len) == 0);
	return fd;
}

/* Under shunt with SHUNT_EXPECT=shm the socket must be accelerated;
 * with SHUNT_EXPECT=tcp it must be plain; unset: plain kernel run.  With
 * SHUNT_EXPECT=rdma a connection that moved to TCP because its process
 * forked or exec'd counts too (that is how RDMA connections survive those). */
static inline void expect_mode_ex(int fd, int peer_forks)
{
	const char *want = getenv("SHUNT_EXPECT");
	struct shunt_info info;
	socklen_t l = sizeof info;
	int r = getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l);

	if (!want)
		return;
	if (r) {
		fprintf(stderr, "expect_mode: shunt is not loaded\n");
		exit(1);
	}
	if ((!strcmp(want, "shm") && info.mode != 1) || (!strcmp(want, "tcp") && info.mode != 0) ||
	    (!strcmp(want, "rdma") && info.mode != 3 &&
	     !(info.mode == 0 && (info.reason == 18 || (peer_forks && info.reason == 17))))) {
		fprintf(stderr, "expect_mode: fd %d is in mode %u (reason %u), wanted %s\n", fd,
			info.mode, info.reason, want);
		exit(1);
	}
}

#ifndef POLLRDHUP /* (a test that included a libc header before this one) */
#define POLLRDHUP 0x2000
#endif

/* Wait until fd holds n unread bytes and the peer's end (FIONREAD, and
 * poll's POLLRDHUP). */
static inline void await_unread_end(int fd, int n)
{
	for (int have = -1;; usleep(10000)) {
		struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
		CHECK(ioctl(fd, FIONREAD, &have) == 0);
		CHECK(poll(&p, 1, 0) >= 0);
		if (have == n && (p.revents & POLLRDHUP))
			return;
	}
}

/* Under shunt: fd, a connection passed to another process (SCM_RIGHTS),
 * is plain TCP now, reason 23 (fd-passed). */
static inline void expect_passed(int fd)
{
	struct shunt_info info;
	socklen_t l = sizeof info;

	if (!getenv("SHUNT_EXPECT"))
		return;
	CHECK(getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l) == 0);
	/* over RDMA the peer may hear of the move from the link first:
	 * peer-failover (17) */
	if (info.mode != 0 || (info.reason != 23 /* fd-passed */ &&
			       !(info.reason == 17 && !strcmp(getenv("SHUNT_EXPECT"), "rdma")))) {
		fprintf(stderr, "fd %d: mode %u reason %u, wanted tcp/fd-passed\n", fd, info.mode,
			info.reason);
		exit(1);
	}
}

static inline void expect_mode(int fd)
{
	expect_mode_ex(fd, 0);
}

/* A client whose server forks per connection, or uses C stdio on it at
 * once: over RDMA the server's fork or stdio moves the connection to TCP,
 * which the client may have heard already (reason 17, peer-failover).
 * Likewise a server whose client moves it at once (sigio's O_ASYNC). */
static inline void expect_mode_peer_forks(int fd)
{
	expect_mode_ex(fd, 1);
}

/* A one-way command channel from the client (the parent) to the server (the
 * child): a pipe; in split mode a file on the shared directory that the
 * client appends to and the server follows, its end marked by a second file.
 * chan_open() before test_fork(), then chan_send() in the client and
 * chan_recv() (0 at the end) in the server; chan_close() in the client. */
struct chan {
	int fd[2];
	off_t off;
};

static inline void chan_open(struct chan *ch)
{
	char path[512];

	*ch = (struct chan){ { -1, -1 }, 0 };
	if (!split_role()) {
		CHECK(pipe(ch->fd) == 0);
		return;
	}
	split_path(path, sizeof path, "chan");
	if (split_is("client"))
		CHECK((ch->fd[1] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644)) >= 0);
}

static inline void chan_send(struct chan *ch, char c)
{
	CHECK(write(ch->fd[1], &c, 1) == 1);
}

static inline int chan_recv(struct chan *ch, char *c)
{
	char path[512], end[512];

	if (ch->fd[1] >= 0) { /* the child's copy of the pipe's write end */
		close(ch->fd[1]);
		ch->fd[1] = -1;
	}
	if (!split_role())
		return read(ch->fd[0], c, 1) == 1;
	split_path(path, sizeof path, "chan");
	split_path(end, sizeof end, "chan-end");
	for (;;) {
		if (ch->fd[0] < 0)
			ch->fd[0] = open(path, O_RDONLY | O_CLOEXEC);
		if (ch->fd[0] >= 0 && pread(ch->fd[0], c, 1, ch->off) == 1) {
			ch->off++;
			return 1;
		}
		if (!access(end, F_OK) && ch->fd[0] >= 0 && pread(ch->fd[0], c, 1, ch->off) != 1)
			return 0;
		usleep(5000);
	}
}

static inline void chan_close(struct chan *ch)
{
	char path[512];

	for (int i = 0; i < 2; i++)
		if (ch->fd[i] >= 0)
			close(ch->fd[i]);
	ch->fd[0] = ch->fd[1] = -1;
	if (split_is("client")) {
		split_path(path, sizeof path, "chan-end");
		int f = open(path, O_WRONLY | O_CREAT, 0644);
		CHECK(f >= 0 && close(f) == 0);
	}
}


static inline void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		CHECK(w > 0);
		p += w;
		n -= (size_t)w;
	}
}

static inline void read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		p += r;
		n -= (size_t)r;
	}
}

/* Has something (a byte, the peer's FIN) come on fd within ms milliseconds? */
static inline int readable_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* A scripted server in a forked child: ncases cases in turn, rounds
 * connections each, accepted on l, each served by one(s, case, the
 * parent's pid) and closed.  Returns the child's pid to the parent, which
 * no longer holds l. */
static inline pid_t scripted_server(int l, int ncases, int rounds, void (*one)(int s, int c, pid_t client))
{
	pid_t client = getpid(), p = fork();

	CHECK(p >= 0);
	if (p) {
		close(l);
		return p;
	}
	for (int c = 0; c < ncases; c++)
		for (int i = 0; i < rounds; i++) {
			int s = accept(l, NULL, NULL);
			CHECK(s >= 0);
			one(s, c, client);
			close(s);
		}
	_exit(0);
}

/* The server's side of a client's wait for the reply that a signal ends:
 * the request, then 5 ms later (the client waits by then - under shunt,
 * a new connection's first wait for bytes, before the connection is made:
 * src/setup/client.c rdv_await_reply's first 20 ms) one SIGUSR1; a wait
 * it did not end gets the reply a second later; then the client's 'e'. */
static inline void serve_interrupted(int s, pid_t client)
{
	char b;

	read_all(s, &b, 1);
	usleep(5000);
	CHECK(kill(client, SIGUSR1) == 0);
	if (!readable_within(s, 1000))
		write_all(s, "r", 1);
	read_all(s, &b, 1);
	CHECK(b == 'e');
}

static inline void usr1_ignored(int sig) { (void)sig; }

/* SIGUSR1 caught by a handler that does nothing, with SA_RESTART or not:
 * the signal serve_interrupted sends ends a wait (EINTR) or not. */
static inline void catch_usr1(int restart)
{
	struct sigaction sa = { .sa_handler = usr1_ignored, .sa_flags = restart ? SA_RESTART : 0 };

	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
}

/* A listener on 127.0.0.1 (*l, its address in ss/len) and a forked child
 * to serve it: 0 in the child, its pid in the parent. */
static inline pid_t serve_forked(int *l, struct sockaddr_storage *ss, socklen_t *len)
{
	pid_t p;

	*l = listen_on("127.0.0.1", ss, len);
	CHECK((p = fork()) >= 0);
	return p;
}

/* Read fd to EOF (a failed read fails the test) and compare with want;
 * a difference is told as round r's and fails the test. */
static inline void expect_text_to_eof(int fd, const char *want, int r)
{
	char in[512];
	size_t got = 0;
	ssize_t n;

	while ((n = read(fd, in + got, sizeof in - 1 - got)) > 0)
		got += (size_t)n;
	if (n < 0) {
		fprintf(stderr, "round %d: client read failed: %s\n", r, strerror(errno));
		exit(1);
	}
	in[got] = 0;
	if (strcmp(in, want)) {
		fprintf(stderr, "round %d: client read '%s', wanted '%s'\n", r, in, want);
		exit(1);
	}
}

/* One descriptor over a unix socket (SCM_RIGHTS), with one byte. */
static inline void send_fd(int u, int fd)
{
	char c = 'x', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof ctl };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);

	memset(ctl, 0, sizeof ctl);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	CHECK(sendmsg(u, &m, 0) == 1);
}

static inline int recv_fd(int u)
{
	char c, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof ctl };
	struct cmsghdr *h;
	int fd;

	CHECK(recvmsg(u, &m, 0) == 1);
	CHECK(!(m.msg_flags & MSG_CTRUNC));
	h = CMSG_FIRSTHDR(&m);
	CHECK(h && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)));
	memcpy(&fd, CMSG_DATA(h), sizeof fd);
	return fd;
}

/* A deterministic byte stream: position -> byte. */
static inline uint8_t pattern(uint64_t pos, uint32_t seed)
{
	uint64_t x = pos * 0x9E3779B97F4A7C15ull + seed;
	x ^= x >> 29;
	return (uint8_t)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

/* n bytes of pattern(., seed) from position 0: written; read and
 * compared (a difference fails the test, naming its position). */
/* A new connection: 300 bytes of pattern seed out, echoed back intact
 * (an echo server at ss), its mode as expect_mode_ex says; closed. */
static inline void echo_new_connection(const struct sockaddr_storage *ss, socklen_t len, uint32_t seed,
				       int peer_forks)
{
	int fd = connect_to(ss, len);
	char out[300], in[300];

	expect_mode_ex(fd, peer_forks);
	for (size_t k = 0; k < sizeof out; k++)
		out[k] = (char)pattern(k, seed);
	write_all(fd, out, sizeof out);
	read_all(fd, in, sizeof in);
	CHECK(!memcmp(in, out, sizeof out));
	close(fd);
}

static inline void write_pattern(int fd, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);

	CHECK(b);
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(i, seed);
	write_all(fd, b, n);
	free(b);
}

static inline void expect_pattern(int fd, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);

	CHECK(b);
	read_all(fd, b, n);
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(i, seed)) {
			fprintf(stderr, "byte %zu of %zu differs (seed %u)\n", i, n, seed);
			exit(1);
		}
	free(b);
}

/* connect_in_flight's server side, on the connection it accepts from l:
 * `in` bytes of pattern 1, then the client's `out` bytes of pattern 2 (a
 * read the client's move to TCP wakes, to resend what it had not read),
 * a "k", and the client's end. */
static inline void serve_in_flight(int l, int in, size_t out)
{
	int c = accept(l, NULL, NULL);
	char b;

	CHECK(c >= 0);
	write_pattern(c, (size_t)in, 1);
	expect_pattern(c, out, 2);
	write_all(c, "k", 1);
	CHECK(read(c, &b, 1) == 0);
	close(c);
}

/* A connection to a forked server, serve(l) - which writes `in` bytes of
 * pattern 1, then reads - with bytes in flight both ways: buf (total
 * bytes) filled with pattern 2, its first out1 bytes written, and the
 * peer's `in` bytes all arrived here, unread.  The server's address in
 * *ss and *len, its pid in *pid. */
static inline int connect_in_flight(void (*serve)(int l), pid_t *pid, struct sockaddr_storage *ss,
				    socklen_t *len, uint8_t *buf, size_t total, size_t out1, int in)
{
	int l = listen_on("127.0.0.1", ss, len), fd, avail = 0;

	*pid = test_fork();
	if (!*pid)
		serve(l);
	close(l);
	fd = connect_to(ss, *len);
	expect_mode(fd);
	for (size_t i = 0; i < total; i++)
		buf[i] = pattern(i, 2);
	write_all(fd, buf, out1);
	for (int ms = 0; avail < in && ms < 10000; ms++) {
		CHECK(ioctl(fd, FIONREAD, &avail) == 0);
		if (avail < in)
			usleep(1000);
	}
	CHECK(avail == in);
	return fd;
}

/* A kernel driver's side of connect_in_flight's connection once the
 * socket was handed to it (the driver reads and writes the socket itself):
 * by system calls past the wrappers, the rest of our bytes (buf from out1
 * to total) and all `in` of the peer's, checked, then its "k". */
static inline void driver_stream(int fd, uint8_t *buf, size_t out1, size_t total, int in)
{
	char b;

	for (size_t off = out1; off < total;) {
		ssize_t n = syscall(SYS_write, fd, buf + off, total - off);
		CHECK(n > 0);
		off += (size_t)n;
	}
	memset(buf, 0, total);
	for (size_t got = 0; got < (size_t)in;) {
		ssize_t n = syscall(SYS_read, fd, buf + got, (size_t)in - got);
		if (n <= 0) {
			fprintf(stderr, "client: the socket ended at byte %zu of the peer's %d (%zd)\n", got, in, n);
			exit(1);
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < (size_t)in; i++)
		if (buf[i] != pattern(i, 1)) {
			fprintf(stderr, "client: byte %zu of the peer's differs on the socket\n", i);
			exit(1);
		}
	CHECK(syscall(SYS_read, fd, &b, 1) == 1 && b == 'k');
}

/* n clients of the server process pid (listening at ss): each connects
 * and sends its index as one byte, then each reads it back (the server
 * echoes it, in any order of connections) and closes; pid must exit 0. */
static inline void index_echo_clients(const struct sockaddr_storage *ss, socklen_t len, int n, pid_t pid)
{
	int *fds = calloc((size_t)n, sizeof *fds), st;

	CHECK(fds);
	for (int i = 0; i < n; i++) {
		char c = (char)i;
		fds[i] = connect_to(ss, len);
		CHECK(send(fds[i], &c, 1, 0) == 1);
	}
	for (int i = 0; i < n; i++) {
		char c;
		CHECK(recv(fds[i], &c, 1, MSG_WAITALL) == 1 && c == (char)i);
		close(fds[i]);
	}
	free(fds);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The server's side of index_echo_clients: each byte echoed. */
static inline void echo_each(const int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		char c;
		CHECK(recv(fds[i], &c, 1, MSG_WAITALL) == 1);
		CHECK(send(fds[i], &c, 1, 0) == 1);
	}
}

/* rounds servers in turn, each a forked process running server(listener,
 * round) for n index_echo_clients. */
static inline void index_echo_rounds(int rounds, int n, int (*server)(int l, int round))
{
	for (int r = 0; r < rounds; r++) {
		struct sockaddr_storage ss;
		socklen_t len;
		int l;
		pid_t pid = serve_forked(&l, &ss, &len);

		if (!pid)
			_exit(server(l, r));
		close(l);
		index_echo_clients(&ss, len, n, pid);
	}
}

/* The process's open descriptors (/proc/self/fd, less its own). */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* The process's mappings (/proc/self/maps lines). */
static inline int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, ch;

	while (f && (ch = fgetc(f)) != EOF)
		n += ch == '\n';
	if (f)
		fclose(f);
	return n;
}

/* A forking server's step (PostgreSQL's postmaster, inetd): accept on l,
 * fork a process that serves the connection - serve(c, arg), then it ends
 * - and close the parent's copy.  The child's pid. */
static inline pid_t accept_fork(int l, void (*serve)(int c, int arg), int arg)
{
	int c = accept(l, NULL, NULL);
	pid_t p;

	CHECK(c >= 0);
	CHECK((p = fork()) >= 0);
	if (!p) {
		close(l);
		serve(c, arg);
		_exit(0);
	}
	close(c);
	return p;
}

/* Shared-memory arenas this process maps; their inode numbers in ino[]
 * (up to cap), which tell one arena from another. */
static inline int arena_maps(unsigned long *ino, int cap)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	CHECK(f);
	while (fgets(line, sizeof line, f)) {
		unsigned long i;
		if (!strstr(line, "shunt-arena"))
			continue;
		if (ino && n < cap && sscanf(line, "%*s %*s %*s %*s %lu", &i) == 1)
			ino[n] = i;
		n++;
	}
	fclose(f);
	return n;
}

/* A socket's mode and reason as shunt reports them (mode 99: no answer). */
static inline struct shunt_info sock_info(int fd)
{
	struct shunt_info in = { .mode = 99 };
	socklen_t l = sizeof in;

	getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l);
	return in;
}

/* Under shunt (SHUNT_EXPECT set): fd's connection moved to TCP for what
 * (a kernel feature), and says so. */
static inline void expect_plain_now(int fd, const char *what)
{
	unsigned mode;

	if (getenv("SHUNT_EXPECT") && (mode = sock_info(fd).mode) != 0) {
		fprintf(stderr, "fd %d: mode %u after %s, wanted plain TCP\n", fd, mode, what);
		exit(1);
	}
}

/* Under shunt (SHUNT_EXPECT set): fd is plain TCP with that reason. */
static inline void expect_plain_reason(int fd, unsigned reason)
{
	struct shunt_info in;

	if (getenv("SHUNT_EXPECT") && ((in = sock_info(fd)).mode != 0 || in.reason != reason)) {
		fprintf(stderr, "fd %d: mode %u reason %u, wanted plain with reason %u\n", fd, in.mode,
			in.reason, reason);
		exit(1);
	}
}

static inline const char *mode_name(unsigned mode)
{
	return mode == 3 ? "rdma" : mode == 0 ? "tcp" : mode == 1 ? "shm" : "none";
}

/* "client: MODE, reason N" for fd on stderr (the scripts that run a test
 * through the in-band handshake look for it). */
static inline void say_client_mode(int fd)
{
	struct shunt_info si = sock_info(fd);

	fprintf(stderr, "client: %s, reason %u\n", mode_name(si.mode), si.reason);
}

/* A request-answer pair's two ends (spin_read, late_wake): the server's
 * "ok", blocking, then the client's end; the client's wait for that "ok"
 * (the first connection's mode said), its mode checked, its close. */
static inline void answer_ok_to_end(int c)
{
	char b;

	CHECK(fcntl(c, F_SETFL, 0) == 0);
	write_all(c, "ok", 2);
	CHECK(read(c, &b, 1) == 0); /* the client's end */
	close(c);
}

static inline void client_ok_end(int fd, int first)
{
	char b[2];

	read_all(fd, b, 2);
	CHECK(!memcmp(b, "ok", 2));
	if (first)
		say_client_mode(fd);
	expect_mode(fd);
	close(fd);
}

/* tests/tools' "NAME server|client ADDR PORT": the address (exit 2 on bad
 * arguments); a server role gets a listening socket in *l and says
 * "listening" (its script starts the client then). */
static inline struct sockaddr_in tool_role(int argc, char **argv, const char *name, int backlog, int *l)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int one = 1;

	if (argc != 4 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: %s server|client ADDR PORT\n", name);
		exit(2);
	}
	a.sin_port = htons((uint16_t)atoi(argv[3]));
	alarm(120);
	*l = -1;
	if (!strcmp(argv[1], "server")) {
		*l = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(*l >= 0 && !setsockopt(*l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
		CHECK(!bind(*l, (void *)&a, sizeof a) && !listen(*l, backlog));
		printf("listening\n");
		fflush(stdout);
	}
	return a;
}

/* Read until EOF, checking every byte against pattern(seed); the count. */
/* The pattern from its byte `from` on, to the end: how many bytes came. */
static inline uint64_t read_pattern_from_to_eof(int fd, uint64_t from, uint32_t seed)
{
	static char buf[1 << 16];
	uint64_t got = 0;
	ssize_t n;

	while ((n = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			CHECK((uint8_t)buf[i] == pattern(from + got + (uint64_t)i, seed));
		got += (uint64_t)n;
	}
	CHECK(n == 0);
	return got;
}

static inline uint64_t read_pattern_to_eof(int fd, uint32_t seed)
{
	return read_pattern_from_to_eof(fd, 0, seed);
}

static inline int wait_child(pid_t p)
{
	int st;
	if (split_is("client")) { /* the server's exit status, from its host */
		FILE *f = split_wait_file("status");
		CHECK(fscanf(f, "%d", &st) == 1);
		fclose(f);
		return st;
	}
	CHECK(waitpid(p, &st, 0) == p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One connection to l, served by a child of ours that accepts it (the
 * listener inherited: a prefork server's worker), echoes "ping", waits
 * for our close and ends - by exit() if by_exit, else by _exit() (as one
 * killed: no exit path).  Both ends' modes checked. */
static inline void child_ping(const struct sockaddr_storage *ss, socklen_t len, int l, int by_exit)
{
	char b[5] = { 0 };
	pid_t p = test_fork();

	CHECK(p >= 0);
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, b, 4);
		write_all(c, b, 4);
		CHECK(read(c, b, 1) == 0);
		if (by_exit)
			exit(0);
		_exit(0);
	}
	int fd = connect_to(ss, len);
	expect_mode(fd);
	write_all(fd, "ping", 4);
	read_all(fd, b, 4);
	CHECK(!memcmp(b, "ping", 4));
	close(fd);
	CHECK(wait_child(p) == 0);
}

/* One connection accepted on l: one byte echoed, then the client's end. */
static inline void echo_byte_to_end(int l)
{
	int c = accept(l, NULL, NULL);
	char b;

	CHECK(c >= 0);
	CHECK(read(c, &b, 1) == 1);
	write_all(c, &b, 1);
	CHECK(read(c, &b, 1) == 0);
	close(c);
}

/* Fail instead of hanging: every test arms this. */
/* A thread's loop: accept on *(int *)listener, echo one byte, close;
 * ends when accept fails (the listener gone). */
static inline void *echo_one_byte(void *listener)
{
	int l = *(int *)listener;

	for (;;) {
		char c;
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			return NULL;
		if (recv(fd, &c, 1, MSG_WAITALL) == 1)
			CHECK(send(fd, &c, 1, 0) == 1);
		close(fd);
	}
}

/* The server ends as a server does when told to (its files removed on
 * the way out), not killed: a killed process's files wait for `shunt ss`
 * to reap them once two seconds old, and a test may take less. */
static inline void echo_server_on_term(int sig)
{
	(void)sig;
	_exit(0);
}

/* A server process with n threads in echo_one_byte on listener *l, until
 * echo_server_end (or its parent - a failed client - dies). */
static inline pid_t echo_server_fork(int *l, int n)
{
	pid_t pid = fork();
	pthread_t t;

	CHECK(pid >= 0);
	if (pid == 0) {
		signal(SIGTERM, echo_server_on_term);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (int i = 0; i < n; i++)
			CHECK(pthread_create(&t, NULL, echo_one_byte, l) == 0);
		pause();
		_exit(0);
	}
	return pid;
}

static inline void echo_server_end(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
}

/* Byte c to an echoing peer, and back. */
static inline void echo_once(int fd, char c)
{
	char r;

	write_all(fd, &c, 1);
	read_all(fd, &r, 1);
	CHECK(r == c);
}

/* A short connection to echo_one_byte: connect, byte c each way, `look`
 * at the socket, the server's close first, ours. */
static inline void echo_byte_connection(const struct sockaddr_storage *ss, socklen_t len, char c,
					void (*look)(int fd))
{
	int fd = connect_to(ss, len);
	char got;

	CHECK(send(fd, &c, 1, 0) == 1);
	CHECK(recv(fd, &got, 1, MSG_WAITALL) == 1 && got == c);
	look(fd);
	CHECK(recv(fd, &got, 1, 0) == 0);
	close(fd);
}

static inline void deadline(unsigned sec)
{
	alarm(sec);
}

/* The common start of a test whose server is its forked child (or, split,
 * the other host's process): a listener on the loopback, SIGPIPE ignored
 * (EPIPE is what such tests look at), a 60 s deadline; the child runs
 * server(listener), which must not return; the parent - the client - gets
 * the child's pid and the address to dial. */
static inline pid_t serve_in_child(void (*server)(int l), struct sockaddr_storage *ss, socklen_t *len)
{
	int l = listen_on("127.0.0.1", ss, len);
	pid_t p;

	signal(SIGPIPE, SIG_IGN);
	deadline(60);
	CHECK((p = test_fork()) >= 0);
	if (!p) {
		server(l);
		_exit(1);
	}
	close(l);
	return p;
}

/* A scripted test's whole run: a listener on 127.0.0.1, its
 * scripted_server (server_cases x server_rounds connections), the
 * client's one(c, ...) rounds times for each of ncases, the server's exit
 * status.  Returns main's. */
static inline int scripted_run(int ncases, int rounds, int server_cases, int server_rounds,
			       void (*serve)(int s, int c, pid_t client),
			       void (*one)(int c, const struct sockaddr_storage *ss, socklen_t len))
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p;

	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	p = scripted_server(l, server_cases, server_rounds, serve);
	for (int c = 0; c < ncases; c++)
		for (int i = 0; i < rounds; i++)
			one(c, &ss, len);
	CHECK(wait_child(p) == 0);
	return 0;
}

#endif
