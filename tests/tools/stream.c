/* Description: a long checksummed stream both ways at once, for link
 * failures in the middle of it.
 *   stream server ADDR PORT MB STYLE [CONNS]
 *   stream client ADDR PORT MB STYLE [CONNS]
 * STYLE: block (a writer thread and a reader per connection, blocking
 * calls), epoll (one thread, non-blocking sockets, edge-triggered epoll)
 * or poll (the same with level-triggered poll).
 * Each end sends MB MiB of a position-dependent pattern on each of CONNS
 * connections (default 1), shuts down its sending half and reads the
 * peer's until EOF, checking every byte.  Prints per connection
 * "role=R conn=I mode=M reason=N bytes=B ok" (mode and reason from
 * getsockopt(SOL_SHUNT) at the end); exits 1 on a wrong byte, a short
 * stream or an error.  STREAM_QUIET=1 (block style): this end sends
 * nothing, it only reads (a receiver whose failures are its reads'). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <netdb.h>
#include <pthread.h>
#include <sys/epoll.h>

#define MAXC 64
#define CHUNK 20000 /* not a power of two: writes straddle the ring's end */

struct end {
	int fd, id;
	uint64_t total, sent, rcvd;
	int shut, eof, done;
};

static const char *role;

static void fail(const char *m, struct end *e)
{
	fprintf(stderr, "stream %s conn %d: %s (sent %llu, received %llu): %s\n", role, e->id, m,
		(unsigned long long)e->sent, (unsigned long long)e->rcvd, strerror(errno));
	exit(1);
}

static uint32_t seed_of(int id, int sending)
{
	/* the client's bytes differ from the server's */
	return (uint32_t)(id * 2 + ((!strcmp(role, "client")) == sending));
}

/* The byte at stream position p is table[seed][p % PERIOD]: a prime
 * period, so a lost, repeated or misplaced span never lines up again, and
 * filling and checking cost a memcpy/memcmp (the guest is emulated). */
#define PERIOD 65521
static uint8_t table[2 * MAXC][PERIOD];

static void make_tables(void)
{
	for (uint32_t s = 0; s < 2 * MAXC; s++)
		for (size_t i = 0; i < PERIOD; i++)
			table[s][i] = pattern(i, s);
}

static void fill(struct end *e, uint8_t *b, size_t n)
{
	const uint8_t *t = table[seed_of(e->id, 1)];

	for (size_t i = 0; i < n;) {
		size_t off = (size_t)((e->sent + i) % PERIOD), k = PERIOD - off < n - i ? PERIOD - off : n - i;
		memcpy(b + i, t + off, k);
		i += k;
	}
}

static void check(struct end *e, const uint8_t *b, size_t n)
{
	const uint8_t *t = table[seed_of(e->id, 0)];

	for (size_t i = 0; i < n;) {
		size_t off = (size_t)((e->rcvd + i) % PERIOD), k = PERIOD - off < n - i ? PERIOD - off : n - i;
		if (memcmp(b + i, t + off, k)) {
			e->rcvd += i;
			errno = EBADMSG;
			fail("wrong byte", e);
		}
		i += k;
	}
	e->rcvd += n;
}

static void *writer(void *arg)
{
	struct end *e = arg;
	static __thread uint8_t b[CHUNK];

	uint64_t want = getenv("STREAM_QUIET") ? 0 : e->total;

	while (e->sent < want) {
		size_t n = want - e->sent < CHUNK ? (size_t)(want - e->sent) : CHUNK;
		ssize_t k;
		fill(e, b, n);
		k = send(e->fd, b, n, MSG_NOSIGNAL);
		if (k <= 0)
			fail("send", e);
		e->sent += (uint64_t)k;
	}
	if (shutdown(e->fd, SHUT_WR))
		fail("shutdown", e);
	return NULL;
}

static void *reader(void *arg)
{
	struct end *e = arg;
	static __thread uint8_t b[65536];
	ssize_t k;

	while ((k = recv(e->fd, b, sizeof b, 0)) > 0)
		check(e, b, (size_t)k);
	if (k < 0)
		fail("recv", e);
	return NULL;
}

/* Each connection read as it comes, as well as written: one read after
 * another would leave the later ones' writers blocked on full rings with
 * no reader yet, which shunt cannot tell from a program that never reads
 * (it moves them to TCP: docs/architecture.md, "Both ends writing"). */
static void run_block(struct end *ends, int n)
{
	pthread_t t[MAXC], r[MAXC];

	for (int i = 0; i < n; i++) {
		pthread_create(&t[i], NULL, writer, &ends[i]);
		pthread_create(&r[i], NULL, reader, &ends[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(r[i], NULL);
		pthread_join(t[i], NULL);
	}
}

/* One non-blocking turn on a connection: write, then read, each until
 * EAGAIN.  A peer that finished first does not make this end block on its
 * rest: one thread serves every connection, so a blocking write here could
 * wait for a peer that itself waits in a blocking write (the tool's old
 * deadlock, under TCP as well).  1 once both directions are done. */
static int serve(struct end *e, uint8_t *b, size_t cap)
{
	ssize_t r;

	while (e->sent < e->total) {
		size_t m = e->total - e->sent < CHUNK ? (size_t)(e->total - e->sent) : CHUNK;
		fill(e, b, m);
		r = send(e->fd, b, m, MSG_NOSIGNAL);
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0)
			fail("send", e);
		e->sent += (uint64_t)r;
	}
	if (e->sent == e->total && !e->shut) {
		if (shutdown(e->fd, SHUT_WR))
			fail("shutdown", e);
		e->shut = 1;
	}
	while (!e->eof) {
		r = recv(e->fd, b, cap, 0);
		if (r < 0 && errno == EAGAIN)
			break;
		if (r < 0)
			fail("recv", e);
		if (r == 0) {
			e->eof = 1;
			break;
		}
		check(e, b, (size_t)r);
	}
	return e->eof && e->shut;
}

static void run_epoll(struct end *ends, int n)
{
	int ep = epoll_create1(0), open = n;
	static uint8_t b[65536];

	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &ends[i] };
		fcntl(ends[i].fd, F_SETFL, O_NONBLOCK);
		if (epoll_ctl(ep, EPOLL_CTL_ADD, ends[i].fd, &ev))
			fail("epoll_ctl", &ends[i]);
	}
	while (open) {
		struct epoll_event evs[MAXC];
		int k = epoll_wait(ep, evs, MAXC, 30000);
		if (k <= 0) {
			errno = ETIMEDOUT;
			fail("epoll_wait", &ends[0]);
		}
		for (int j = 0; j < k; j++) {
			struct end *e = evs[j].data.ptr;
			/* edge-triggered: serve() goes until EAGAIN */
			if (!e->done && serve(e, b, sizeof b)) {
				epoll_ctl(ep, EPOLL_CTL_DEL, e->fd, NULL);
				open--;
				e->done = 1; /* later events for it in this batch are stale */
			}
		}
	}
	close(ep);
}

/* Level-triggered poll: each connection asks for what it still needs. */
static void run_poll(struct end *ends, int n)
{
	static uint8_t b[65536];
	int open = n;

	for (int i = 0; i < n; i++)
		fcntl(ends[i].fd, F_SETFL, O_NONBLOCK);
	while (open) {
		struct pollfd p[MAXC];
		int k;
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = ends[i].done ? -1 : ends[i].fd,
						.events = (short)((ends[i].eof ? 0 : POLLIN) |
								  (ends[i].shut ? 0 : POLLOUT)) };
		k = poll(p, (nfds_t)n, 30000);
		if (k <= 0) {
			errno = ETIMEDOUT;
			fail("poll", &ends[0]);
		}
		for (int i = 0; i < n; i++)
			if (p[i].revents && serve(&ends[i], b, sizeof b)) {
				ends[i].done = 1;
				open--;
			}
	}
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE }, *ai;
	static struct end ends[MAXC];
	int n = argc > 6 ? atoi(argv[6]) : 1, one = 1, lfd = -1;
	uint64_t total;

	if (argc < 6 || n < 1 || n > MAXC || getaddrinfo(argv[2], argv[3], &hints, &ai))
		return 2;
	role = argv[1];
	make_tables();
	total = strtoull(argv[4], NULL, 0) << 20;
	signal(SIGPIPE, SIG_IGN);
	deadline(600);
	if (!strcmp(role, "server")) {
		lfd = socket(ai->ai_family, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, MAXC))
			return 3;
		printf("listening\n");
		fflush(stdout);
	}
	for (int i = 0; i < n; i++) {
		ends[i] = (struct end){ .id = i, .total = total };
		if (lfd >= 0) {
			ends[i].fd = accept(lfd, NULL, NULL);
		} else {
			ends[i].fd = socket(ai->ai_family, SOCK_STREAM, 0);
			if (connect(ends[i].fd, ai->ai_addr, ai->ai_addrlen))
				fail("connect", &ends[i]);
		}
		if (ends[i].fd < 0)
			fail("accept", &ends[i]);
	}
	if (!strcmp(argv[5], "epoll"))
		run_epoll(ends, n);
	else if (!strcmp(argv[5], "poll"))
		run_poll(ends, n);
	else
		run_block(ends, n);
	for (int i = 0; i < n; i++) {
		struct shunt_info in;
		socklen_t l = sizeof in;
		if (ends[i].rcvd != total) {
			errno = EPIPE;
			fail("short stream", &ends[i]);
		}
		if (getsockopt(ends[i].fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
			in = (struct shunt_info){ .mode = 99 };
		printf("role=%s conn=%d mode=%s reason=%u bytes=%llu ok\n", role, i,
		       in.mode == 1 ? "shm" : in.mode == 3 ? "rdma" : in.mode == 0 ? "tcp" : "none",
		       in.reason, (unsigned long long)ends[i].rcvd);
		close(ends[i].fd);
	}
	return 0;
}
