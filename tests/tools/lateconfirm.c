/* lateconfirm - a server and clients for tests/rdma/late_confirm.sh: one
 * client slow to confirm the server's ACCEPT(RDMA) (libshunt-faults.so,
 * SHUNT_FAULT_CONFIRM_MS) must hold up neither the server's accept() nor
 * the clients behind it, and its own connection must still carry every
 * byte once it confirms.
 *
 *   lateconfirm server ADDR PORT threads|epoll|eloop|poll|race N
 *       accepts N connections and echoes each one's request: "threads", a
 *       blocking accept() loop and a thread a connection that first writes
 *       a banner (the write waits for the client's word); "epoll", one
 *       thread, non-blocking, level-triggered, no banner (the registration
 *       made before the word must follow the connection); "poll", one
 *       thread, non-blocking, level-triggered poll(), a banner first (an
 *       event loop's server that speaks first: SMTP, MySQL) - it must not
 *       be told of room its write would wait for (before, poll said
 *       writable, each write waited 5 ms for the word and said EAGAIN:
 *       the loop spun in 5 ms stalls until the word came).  Prints
 *       "listening", then "accepted I after MS ms" for each, and in poll
 *       mode "stalled MS ms in N writes" at the end (eloop too): the time its writes
 *       took that said EAGAIN; "eloop", as "poll" with level-triggered
 *       epoll (before, the set reported room as the kernel's socket had
 *       it, and the loop stalled as poll's did); "race", a blocking accept() loop, two
 *       threads a connection, no banner: a reader, and one that asks the
 *       connection's SHUNT_INFO every 5 ms until the request is in (with SHUNT_FAULT_CONFIRM_READ_MS longer than the client's
 *       CONFIRM_MS the asking thread takes the word off the socket
 *       while the reader is about to sleep there).
 *   lateconfirm client ADDR PORT threads|epoll|eloop|poll|race TAG
 *       connects, reads the banner (threads, poll), writes 8 bytes of length and
 *       a 1 MiB request, reads its echo and checks it; prints "client TAG:
 *       connect MS ms, first MS ms, done MS ms, ok" (first: the banner, or
 *       the echo's first byte). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <stdint.h>
#include <sys/epoll.h>

#define REQ (1u << 20)
#define BANNER "HELLO\n"

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double ms_since(double t0)
{
	return (now_s() - t0) * 1e3;
}

static void *serve_one(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint64_t len;
	char *buf;

	write_all(fd, BANNER, sizeof BANNER - 1);
	read_all(fd, &len, sizeof len);
	CHECK(len <= REQ && (buf = malloc(len)));
	read_all(fd, buf, len);
	write_all(fd, buf, len);
	free(buf);
	close(fd);
	return NULL;
}

struct ec { /* an event loop's connection */
	int fd, banner;
	uint64_t len, got, sent;
	char *buf;
};

static struct ec *ec_new(int fd)
{
	struct ec *c = calloc(1, sizeof *c);

	if (!c || !(c->buf = malloc(REQ + 8)))
		die("calloc");
	c->fd = fd;
	return c;
}

static void ec_free(struct ec *c)
{
	close(c->fd);
	free(c->buf);
	free(c);
}

static int ec_reading(const struct ec *c)
{
	return !c->len || c->got < c->len + 8;
}

/* A non-blocking read of the request (its length, then its bytes). */
static void ec_read(struct ec *c)
{
	ssize_t r = read(c->fd, c->buf + c->got, REQ + 8 - c->got);

	if (r < 0 && errno == EAGAIN)
		return;
	if (r <= 0)
		die("server read");
	c->got += (uint64_t)r;
	if (c->got >= 8 && !c->len) {
		memcpy(&c->len, c->buf, 8);
		if (!c->len || c->len > REQ)
			die("server: bad length");
	}
}

/* A non-blocking write of the echo: 1 once all of it went. */
static int ec_write(struct ec *c)
{
	ssize_t w = write(c->fd, c->buf + 8 + c->sent, c->len - c->sent);

	if (w < 0 && errno == EAGAIN)
		return 0;
	if (w <= 0)
		die("server write");
	c->sent += (uint64_t)w;
	return c->sent == c->len;
}

/* One step of c for what poll reported: the banner, the request, the
 * echo; 1 when it is done.  A banner write that said EAGAIN adds its
 * time to *stall. */
static int poll_step(struct ec *c, short re, double *stall, int *nstall)
{
	if (c->banner < (int)sizeof BANNER - 1) {
		if (!(re & POLLOUT))
			return 0;
		double t = now_s();
		ssize_t r = write(c->fd, BANNER + c->banner, sizeof BANNER - 1 - (size_t)c->banner);
		if (r < 0 && errno == EAGAIN) {
			*stall += ms_since(t);
			++*nstall;
			return 0;
		}
		if (r <= 0)
			die("server banner");
		c->banner += (int)r;
		return 0;
	}
	if (ec_reading(c)) {
		if (re & (POLLIN | POLLHUP | POLLERR))
			ec_read(c);
		return 0;
	}
	return (re & POLLOUT) && ec_write(c);
}

/* What c waits for: room for its banner or echo, or its request. */
static uint32_t ec_wants(const struct ec *c)
{
	return c->banner < (int)sizeof BANNER - 1 || !ec_reading(c) ? EPOLLOUT : EPOLLIN;
}

/* epoll (banner 0: the request first) and eloop (a banner first) */
static void serve_epoll(int l, int n, int banner)
{
	double t0 = now_s(), stall = 0;
	int ep = epoll_create1(0), done = 0, accepted = 0, nstall = 0;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (ep < 0 || fcntl(l, F_SETFL, O_NONBLOCK) || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev))
		die("epoll");
	while (done < n) {
		struct epoll_event evs[16];
		int k = epoll_wait(ep, evs, 16, 60000);
		if (k <= 0)
			die("epoll_wait (nothing for 60 s)");
		for (int i = 0; i < k; i++) {
			struct ec *c = evs[i].data.ptr;
			if (!c) {
				int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK);
				if (fd < 0)
					continue;
				printf("accepted %d after %.0f ms\n", ++accepted, ms_since(t0));
				fflush(stdout);
				c = ec_new(fd);
				if (!banner)
					c->banner = sizeof BANNER - 1;
				struct epoll_event in = { .events = ec_wants(c), .data.ptr = c };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &in))
					die("epoll_ctl add");
				continue;
			}
			uint32_t was = ec_wants(c);
			if (poll_step(c, (short)evs[i].events, &stall, &nstall)) {
				ec_free(c);
				done++;
				continue;
			}
			struct epoll_event mod = { .events = ec_wants(c), .data.ptr = c };
			if (mod.events != was && epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &mod))
				die("epoll_ctl mod");
		}
	}
	if (banner)
		printf("stalled %.0f ms in %d writes\n", stall, nstall);
}

static void serve_poll(int l, int n)
{
	double t0 = now_s(), stall = 0;
	struct pollfd p[65];
	struct ec *cs[64];
	int nc = 0, done = 0, accepted = 0, nstall = 0;

	if (fcntl(l, F_SETFL, O_NONBLOCK))
		die("fcntl");
	while (done < n) {
		p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
		for (int i = 0; i < nc; i++) {
			int out = cs[i]->banner < (int)sizeof BANNER - 1 || !ec_reading(cs[i]);
			p[i + 1] = (struct pollfd){ .fd = cs[i]->fd, .events = out ? POLLOUT : POLLIN };
		}
		if (poll(p, (nfds_t)nc + 1, 60000) <= 0)
			die("poll (nothing for 60 s)");
		if (p[0].revents & POLLIN) {
			int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK);
			if (fd >= 0) {
				printf("accepted %d after %.0f ms\n", ++accepted, ms_since(t0));
				fflush(stdout);
				if (nc == 64)
					die("too many connections");
				cs[nc++] = ec_new(fd);
			}
		}
		for (int i = 0; i < nc; i++) {
			if (!p[i + 1].revents || !poll_step(cs[i], p[i + 1].revents, &stall, &nstall))
				continue;
			ec_free(cs[i]);
			cs[i] = cs[--nc];
			p[i + 1] = p[nc + 1];
			p[i + 1].revents = 0; /* (its report comes again next round) */
			i--;
			done++;
		}
	}
	printf("stalled %.0f ms in %d writes\n", stall, nstall);
}

struct racer {
	int fd;
	_Atomic int read_in;
};

static void *race_reader(void *arg)
{
	struct racer *r = arg;
	uint64_t len;
	char *buf;

	read_all(r->fd, &len, sizeof len);
	CHECK(len <= REQ && (buf = malloc(len)));
	read_all(r->fd, buf, len);
	r->read_in = 1;
	write_all(r->fd, buf, len);
	free(buf);
	close(r->fd);
	return NULL;
}

/* Another thread's calls on the connection while its reader reads: any
 * call settles a waiting word (fdtab.c) */
static void *race_one(void *arg)
{
	struct racer r = { .fd = (int)(intptr_t)arg };
	pthread_t t;

	if (pthread_create(&t, NULL, race_reader, &r))
		die("pthread_create");
	while (!r.read_in) {
		(void)sock_info(r.fd);
		usleep(5000);
	}
	pthread_join(t, NULL);
	return NULL;
}

static int server(const char *addr, int port, const char *mode, int n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	pthread_t t[64];
	double t0;

	if (n > 64 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 || l < 0 ||
	    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 64))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	if (!strcmp(mode, "epoll") || !strcmp(mode, "eloop")) {
		serve_epoll(l, n, !strcmp(mode, "eloop"));
		return 0;
	}
	if (!strcmp(mode, "poll")) {
		serve_poll(l, n);
		return 0;
	}
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			die("accept");
		printf("accepted %d after %.0f ms\n", i + 1, ms_since(t0));
		fflush(stdout);
		if (pthread_create(&t[i], NULL, strcmp(mode, "race") ? serve_one : race_one, (void *)(intptr_t)fd))
			die("pthread_create");
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int client(const char *addr, int port, const char *mode, const char *tag)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), banner = strcmp(mode, "epoll") && strcmp(mode, "race");
	uint64_t len = REQ;
	char *req = malloc(REQ), *back = malloc(REQ), b[sizeof BANNER - 1];
	double t_conn, t_first, t0;

	if (fd < 0 || !req || !back || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		die("client");
	for (unsigned i = 0; i < REQ; i++)
		req[i] = (char)(i * 131u + (unsigned char)tag[0]);
	t0 = now_s();
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa))
		die("connect");
	t_conn = ms_since(t0);
	if (banner) {
		read_all(fd, b, sizeof b);
		CHECK(!memcmp(b, BANNER, sizeof b));
	}
	t_first = ms_since(t0);
	write_all(fd, &len, sizeof len);
	write_all(fd, req, REQ);
	read_all(fd, back, 1);
	if (!banner)
		t_first = ms_since(t0);
	read_all(fd, back + 1, REQ - 1);
	if (memcmp(req, back, REQ)) {
		fprintf(stderr, "client %s: the echo differs or is short\n", tag);
		return 1;
	}
	if (read(fd, b, 1) != 0) {
		fprintf(stderr, "client %s: no end after the echo\n", tag);
		return 1;
	}
	printf("client %s: connect %.0f ms, first %.0f ms, done %.0f ms, ok\n", tag, t_conn, t_first,
	       ms_since(t0));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argv[4], argv[5]);
	fprintf(stderr, "usage: lateconfirm server ADDR PORT threads|epoll|eloop|poll|race N | client ADDR PORT threads|epoll|eloop|poll|race TAG\n");
	return 2;
}
