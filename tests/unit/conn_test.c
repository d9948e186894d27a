/* Description: the data path (src/shim/conn.c) through a fake transport
 * (issue #14): two connections in one process over two rings in plain
 * memory, their transport a table of counters.  Checks conn.c's contract
 * with any transport: push after bytes are published and ack after bytes
 * are consumed (never after a peek), tx_blocked when a writer waits on a
 * full ring, progress before a non-blocking read gives up, shutdown with
 * the writer's lock held and wr_done set, then shut_wake; a reader woken
 * through the want words by the other thread; a write that would deadlock
 * (the peer blocked writing to us) returns short; a transport's reset is
 * ECONNRESET once, then EPIPE; MSG_TRUNC with no buffer consumes; closing
 * and release reach the transport; refresh keeps errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include "../../src/shim/shim.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define RING 4096

struct fake {
	struct conn c;          /* first: what conn.c sees */
	struct fake *peer;
	int efd;                /* our doorbell */
	_Atomic int pushes, acks, blocked, progress, refreshes, shutdowns, shut_wakes;
	_Atomic int closings, releases, discards;
	int shut_locked, shut_done; /* what shutdown found: the writer lock, wr_done */
	int peer_blocked;       /* make peer_blocked say so */
};

static struct fake *F(struct conn *c)
{
	return c->tpd;
}

static void f_push(struct conn *c)
{
	F(c)->pushes++;
	conn_wake_word(&c->tx.ctl->rd_want, F(c)->peer->efd);
}

static void f_ack(struct conn *c)
{
	F(c)->acks++;
	conn_wake_word(&c->rx.ctl->wr_want, F(c)->peer->efd);
}

static void f_blocked(struct conn *c) { F(c)->blocked++; }
static void f_progress(struct conn *c) { F(c)->progress++; }

static int f_peer_blocked(struct conn *c)
{
	return F(c)->peer_blocked || __atomic_load_n(&c->rx.ctl->wr_want, __ATOMIC_ACQUIRE);
}

static void f_refresh(struct conn *c)
{
	F(c)->refreshes++;
	errno = EBADF; /* conn_refresh must not let this through */
}

static int f_shutdown(struct conn *c)
{
	F(c)->shutdowns++;
	F(c)->shut_locked = __atomic_load_n(&c->tx.ctl->wlock, __ATOMIC_ACQUIRE) != 0;
	F(c)->shut_done = __atomic_load_n(&c->tx.ctl->wr_done, __ATOMIC_ACQUIRE);
	return 0;
}

static void f_shut_wake(struct conn *c)
{
	F(c)->shut_wakes++;
	conn_wake_word(&c->tx.ctl->rd_want, F(c)->peer->efd);
}

static void f_closing(struct conn *c) { F(c)->closings++; }
static int f_release(struct conn *c) { F(c)->releases++; return 1; }
static void f_discard(struct conn *c) { F(c)->discards++; }

static const struct transport fake_tp = {
	.name = "fake",
	.mode = SHUNT_M_SHM,
	.push = f_push,
	.ack = f_ack,
	.tx_blocked = f_blocked,
	.peer_blocked = f_peer_blocked,
	.progress = f_progress,
	.refresh = f_refresh,
	.shutdown = f_shutdown,
	.shut_wake = f_shut_wake,
	.closing = f_closing,
	.release = f_release,
	.discard = f_discard,
};

static struct shunt_ring_ctl ctl[2] __attribute__((aligned(64)));
static uint8_t data[2][RING];
static struct fake a, b;
static struct sk sa, sb;

/* a writes ring 0 and reads ring 1; b the other way round */
static void setup(void)
{
	int sv[2];

	memset(ctl, 0, sizeof ctl);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	a.peer = &b;
	b.peer = &a;
	a.efd = eventfd(0, EFD_NONBLOCK);
	b.efd = eventfd(0, EFD_NONBLOCK);
	CHECK(a.efd >= 0 && b.efd >= 0);
	conn_init(&a.c, &fake_tp, &a, 0, sv[0]);
	conn_init(&b.c, &fake_tp, &b, 1, sv[1]);
	a.c.efd_mine = a.efd;
	b.c.efd_mine = b.efd;
	a.c.tx = (struct ring){ .ctl = &ctl[0], .data = data[0], .size = RING };
	a.c.rx = (struct ring){ .ctl = &ctl[1], .data = data[1], .size = RING };
	b.c.tx = (struct ring){ .ctl = &ctl[1], .data = data[1], .size = RING };
	b.c.rx = (struct ring){ .ctl = &ctl[0], .data = data[0], .size = RING };
	memset(&sa, 0, sizeof sa);
	memset(&sb, 0, sizeof sb);
	sa.kind = sb.kind = SK_CONN;
	sa.conn = &a.c;
	sb.conn = &b.c;
}

static void teardown(void)
{
	close(a.c.tcp_fd);
	close(b.c.tcp_fd);
	close(a.efd);
	close(b.efd);
}

static ssize_t snd(struct sk *s, const void *p, size_t n, int flags)
{
	struct iovec iov = { (void *)p, n };
	return conn_send(s, &iov, 1, flags);
}

static ssize_t rcv(struct sk *s, void *p, size_t n, int flags)
{
	struct iovec iov = { p, n };
	return conn_recv(s, &iov, 1, flags);
}

static uint64_t bell(int efd)
{
	uint64_t v = 0;

	return read(efd, &v, sizeof v) == sizeof v ? v : 0;
}

static void transfer(void)
{
	char out[1000], in[1000];

	setup();
	for (size_t i = 0; i < sizeof out; i++)
		out[i] = (char)(i * 13 + 5);
	CHECK(!(conn_events(&b.c) & POLLIN));
	CHECK(snd(&sa, out, sizeof out, 0) == (ssize_t)sizeof out);
	CHECK(a.pushes >= 1 && a.acks == 0);
	CHECK(conn_events(&b.c) & POLLIN);
	CHECK(conn_nread(&b.c) == sizeof out);
	CHECK(rcv(&sb, in, 10, MSG_PEEK) == 10 && !memcmp(in, out, 10));
	CHECK(b.acks == 0); /* a peek frees nothing */
	CHECK(rcv(&sb, in, sizeof in, 0) == (ssize_t)sizeof in && !memcmp(in, out, sizeof in));
	CHECK(b.acks >= 1);
	CHECK(!(conn_events(&b.c) & POLLIN) && (conn_events(&a.c) & POLLOUT));
	teardown();
}

static void full_ring(void)
{
	static char out[2 * RING], in[RING];
	int p0;

	setup();
	CHECK(snd(&sa, out, sizeof out, MSG_DONTWAIT) == RING); /* a partial write */
	CHECK(snd(&sa, out, 1, MSG_DONTWAIT) == -EAGAIN);
	CHECK(a.blocked >= 1);                  /* the transport is told the writer waits */
	CHECK(!(conn_events(&a.c) & POLLOUT));
	bell(a.efd);
	/* the reader frees room: the writer's doorbell rings through ack */
	CHECK(rcv(&sb, in, 100, 0) == 100);
	CHECK(bell(a.efd) >= 1);
	CHECK(conn_events(&a.c) & POLLOUT);
	/* an empty ring, non-blocking: progress is asked for before EAGAIN */
	CHECK(rcv(&sb, in, sizeof in, 0) == RING - 100);
	p0 = b.progress;
	CHECK(rcv(&sb, in, 1, MSG_DONTWAIT) == -EAGAIN);
	CHECK(b.progress > p0);
	teardown();
}

static void *late_writer(void *arg)
{
	(void)arg;
	usleep(50 * 1000);
	CHECK(snd(&sa, "wake", 4, 0) == 4);
	return NULL;
}

static void blocking_reader(void)
{
	pthread_t t;
	char in[16];

	setup();
	CHECK(!pthread_create(&t, NULL, late_writer, NULL));
	CHECK(rcv(&sb, in, sizeof in, 0) == 4 && !memcmp(in, "wake", 4));
	pthread_join(t, NULL);
	teardown();
}

static void shutdown_eof(void)
{
	char in[8];

	setup();
	CHECK(snd(&sa, "abc", 3, 0) == 3);
	CHECK(!conn_shutdown(&sa, SHUT_WR));
	CHECK(a.shutdowns == 1 && a.shut_locked && a.shut_done && a.shut_wakes == 1);
	CHECK(conn_events(&b.c) & (POLLIN | POLLRDHUP));
	CHECK(rcv(&sb, in, sizeof in, 0) == 3);
	CHECK(rcv(&sb, in, sizeof in, 0) == 0); /* EOF after the bytes */
	CHECK(snd(&sa, "x", 1, MSG_NOSIGNAL) == -EPIPE);
	teardown();
}

static void short_on_deadlock(void)
{
	static char out[2 * RING];

	setup();
	CHECK(snd(&sb, out, RING, 0) == RING); /* our receive ring is full */
	a.peer_blocked = 1;                     /* and the peer waits to write more */
	alarm(10);                              /* a hang is a failure */
	CHECK(snd(&sa, out, sizeof out, 0) == RING);
	alarm(0);
	teardown();
}

static void reset(void)
{
	setup();
	a.c.peer_reset = 1;
	CHECK(snd(&sa, "x", 1, MSG_NOSIGNAL) == -ECONNRESET);
	CHECK(snd(&sa, "x", 1, MSG_NOSIGNAL) == -EPIPE);
	teardown();
}

static void trunc_null(void)
{
	setup();
	CHECK(snd(&sa, "0123456789", 10, 0) == 10);
	CHECK(rcv(&sb, NULL, 4, MSG_TRUNC) == 4);
	CHECK(conn_nread(&b.c) == 6 && b.acks >= 1);
	teardown();
}

static void lifecycle(void)
{
	setup();
	errno = 1234;
	conn_refresh(&a.c);
	CHECK(a.refreshes == 1 && errno == 1234);
	conn_closing(&a.c);
	CHECK(a.closings == 1);
	CHECK(conn_free(&a.c) == 1 && a.releases == 1);
	conn_discard(&b.c);
	CHECK(b.discards == 1);
	teardown();
}

int main(void)
{
	transfer();
	full_ring();
	blocking_reader();
	shutdown_eof();
	short_on_deadlock();
	reset();
	trunc_null();
	lifecycle();
	printf("conn_test: ok\n");
	return 0;
}
