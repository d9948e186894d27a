/* Description: a client never unmaps an arena while an answer to one of
 * its offers may name it.  The client's first connection to server S1
 * maps S1's arena (its descriptors by message), then closes: the arena is
 * idle.  Two more offers go out, pending (their first bytes in the
 * slots): to S1, answered in the slot naming that arena, and to S2, whose
 * first connection brings a new arena by message.  The client settles
 * S2's first: mapping the new arena reaps idle arenas whose peer is gone.
 * Under the fault-injection build with SHUNT_FAULT_PEER_GONE=1 (the
 * integration script arena_reap) S1 is judged gone - as a live server
 * whose liveness file was not made yet was - and before the fix its
 * arena was unmapped there: S1's connection was then cut ("the server's
 * answer names a segment we cannot map"), once in about twenty runs of 64
 * threads a side in bench/floor.sh.  Every connection must carry its
 * bytes, accelerated, as over TCP. */
#include "common.h"

/* A server: `n` connections, each: accepted, said (ready), one byte read
 * and answered with its upper case, then the client's end awaited. */
static void serve(int l, int n, int ready)
{
	for (int i = 0; i < n; i++) {
		int c = accept(l, NULL, NULL);
		char b;
		CHECK(c >= 0);
		expect_mode(c);
		CHECK(write(ready, "r", 1) == 1);
		read_all(c, &b, 1);
		b = (char)(b - 'a' + 'A');
		write_all(c, &b, 1);
		CHECK(read(c, &b, 1) == 0);
		close(c);
	}
	_exit(0);
}

static void await_ready(int r)
{
	char b;
	CHECK(read(r, &b, 1) == 1);
}

static void expect_reply(int fd, char want)
{
	char b;
	read_all(fd, &b, 1);
	CHECK(b == want);
}

int main(void)
{
	struct sockaddr_storage ss1, ss2;
	socklen_t len1, len2;
	int l1 = listen_on("127.0.0.1", &ss1, &len1), l2 = listen_on("127.0.0.1", &ss2, &len2);
	int r1[2], r2[2], c1, c2, c3;
	pid_t s1, s2;

	deadline(30);
	CHECK(pipe(r1) == 0 && pipe(r2) == 0);
	if (!(s1 = fork()))
		serve(l1, 2, r1[1]);
	if (!(s2 = fork()))
		serve(l2, 1, r2[1]);
	CHECK(s1 > 0 && s2 > 0);
	close(l1);
	close(l2);

	c1 = connect_to(&ss1, len1); /* maps S1's arena, then leaves it idle */
	expect_mode(c1);
	write_all(c1, "a", 1);
	expect_reply(c1, 'A');
	close(c1);
	await_ready(r1[0]);

	c2 = connect_to(&ss1, len1); /* answered in the slot: S1's arena */
	write_all(c2, "b", 1);
	c3 = connect_to(&ss2, len2); /* answered by message: a new arena */
	write_all(c3, "c", 1);
	await_ready(r1[0]); /* both answered (their accept() returned) */
	await_ready(r2[0]);
	expect_reply(c3, 'C'); /* settled first: the new arena is mapped */
	expect_reply(c2, 'B');
	expect_mode(c2);
	expect_mode(c3);
	close(c2);
	close(c3);
	CHECK(wait_child(s1) == 0);
	CHECK(wait_child(s2) == 0);
	return 0;
}
