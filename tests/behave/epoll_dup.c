/* Description: one epoll set holding two descriptors of one connection (a
 * dup, each registered with its own events and data - a reader's EPOLLIN
 * on one, a writer's EPOLLOUT on the other, as some event libraries keep
 * them apart) behaves as TCP's: both adds succeed, each reports its own
 * events with its own data, deleting or closing one leaves the other's
 * registration whole, and the peer's bytes and its end - its process
 * killed, so only the kernel's FIN tells - reach the one left.  Under shunt each registration watched the connection's
 * TCP socket under the first descriptor's number: the second shared the
 * first's and removing it removed the first's. */
#include "common.h"
#include <sys/epoll.h>

#define A_DATA 0xa11ceull
#define B_DATA 0xb0bull

/* One epoll_wait of ms at most: the events reported for data d (0: none). */
static uint32_t events_for(int ep, uint64_t d, int ms)
{
	struct epoll_event ev[8];
	uint32_t e = 0;
	int n = epoll_wait(ep, ev, 8, ms);

	CHECK(n >= 0);
	for (int i = 0; i < n; i++)
		if (ev[i].data.u64 == d)
			e |= ev[i].events;
		else
			CHECK(ev[i].data.u64 == A_DATA || ev[i].data.u64 == B_DATA);
	return e;
}

/* Events for d within ms, through as many waits as it takes. */
static uint32_t wait_for(int ep, uint64_t d, uint32_t want, int ms)
{
	double end = now_s() + ms / 1e3;
	uint32_t e = 0;

	while (!(e & want) && now_s() < end)
		e |= events_for(ep, d, 50);
	return e;
}

static void server(int l)
{
	int c = accept(l, NULL, NULL);
	char b[4];

	CHECK(c >= 0);
	read_all(c, b, 1); /* round 1: written when both are in the set */
	write_all(c, "x", 1);
	read_all(c, b, 1); /* round 2: after one of them was deleted */
	write_all(c, "y", 1);
	read_all(c, b, 1); /* round 3: after one of them was closed */
	write_all(c, "z", 1);
	for (;;)
		pause(); /* killed: the end comes from the kernel alone */
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p;

	deadline(60);
	CHECK((p = fork()) >= 0); /* (not split across hosts: the server is killed) */
	if (!p)
		server(l);
	close(l);
	int a = connect_to(&ss, len), b = dup(a), ep = epoll_create1(0);
	struct epoll_event ea = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = A_DATA };
	struct epoll_event eb = { .events = EPOLLOUT, .data.u64 = B_DATA };
	char c;

	CHECK(b >= 0 && ep >= 0);
	expect_mode(a);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ea) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &eb) == 0);
	CHECK(wait_for(ep, B_DATA, EPOLLOUT, 5000) & EPOLLOUT); /* room, on b */

	/* Round 1: the reply reported on a (b is for room alone). */
	write_all(b, "1", 1);
	CHECK(wait_for(ep, A_DATA, EPOLLIN, 5000) & EPOLLIN);
	CHECK(read(a, &c, 1) == 1 && c == 'x');

	/* Round 2: b's registration deleted; a's still reports. */
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, b, NULL) == -1 && errno == ENOENT);
	write_all(a, "2", 1);
	CHECK(wait_for(ep, A_DATA, EPOLLIN, 5000) & EPOLLIN);
	CHECK(read(b, &c, 1) == 1 && c == 'y');

	/* Round 3: b added again for bytes, then a closed: b's registration
	 * is whole, and reports the reply and the peer's end. */
	eb.events = EPOLLIN | EPOLLRDHUP;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, b, &eb) == 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, a, NULL) == 0);
	close(a);
	write_all(b, "3", 1);
	CHECK(wait_for(ep, B_DATA, EPOLLIN, 5000) & EPOLLIN);
	CHECK(read(b, &c, 1) == 1 && c == 'z');
	CHECK(kill(p, SIGKILL) == 0);
	uint32_t e = wait_for(ep, B_DATA, EPOLLRDHUP | EPOLLHUP | EPOLLERR, 5000);
	ssize_t r = read(b, &c, 1);
	if (!(e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		fprintf(stderr, "the peer's end was not reported on the descriptor left (events %#x)\n", e);
		return 1;
	}
	/* over RDMA a peer gone without its closing message is a reset
	 * (docs/rdma.md): its last bytes cannot be known to have arrived */
	const char *want = getenv("SHUNT_EXPECT");
	if (want && !strcmp(want, "rdma"))
		CHECK(r == 0 || (r < 0 && errno == ECONNRESET));
	else
		CHECK(r == 0 && (e & EPOLLRDHUP));
	close(b);
	close(ep);
	CHECK(waitpid(p, NULL, 0) == p);
	return 0;
}
