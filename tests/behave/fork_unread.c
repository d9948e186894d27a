/* Description: a process forks while its connections hold unread bytes in
 * both directions; the child reads them, writes on, and exits; the parent
 * reads what was unread before the fork and what the child wrote, then both
 * of its descriptors still work.  Every byte checked, each read once. */
#include <pthread.h>
#include "common.h"

#define UNREAD 40000 /* less than any ring or socket buffer: writes never block */
#define BACK 1000
#define CHILD 30000
#define AFTER 5000

static void check_pattern(int fd, size_t n, uint32_t seed)
{
	static uint8_t buf[UNREAD];
	read_all(fd, buf, n);
	for (size_t k = 0; k < n; k++)
		CHECK(buf[k] == pattern(k, seed));
}

static void send_pattern(int fd, size_t n, uint32_t seed)
{
	static uint8_t buf[UNREAD];
	for (size_t k = 0; k < n; k++)
		buf[k] = pattern(k, seed);
	write_all(fd, buf, n);
}

static void *acceptor(void *arg)
{
	int c = accept(*(int *)arg, NULL, NULL);
	CHECK(c >= 0);
	return (void *)(intptr_t)c;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(60);
	pthread_t t;
	void *r;
	CHECK(!pthread_create(&t, NULL, acceptor, &l));
	int a = connect_to(&ss, len);
	CHECK(!pthread_join(t, &r));
	int b = (int)(intptr_t)r;
	expect_mode(a);
	expect_mode(b);
	send_pattern(a, UNREAD, 1); /* a -> b, unread at the fork */
	send_pattern(b, BACK, 2);   /* b -> a, unread at the fork */
	pid_t p = fork();
	CHECK(p >= 0);
	if (!p) {
		expect_mode(b);
		check_pattern(b, UNREAD, 1);
		send_pattern(b, CHILD, 3);
		_exit(0);
	}
	check_pattern(a, BACK, 2);
	check_pattern(a, CHILD, 3);
	CHECK(wait_child(p) == 0);
	/* the child read the bytes: they are not read again here */
	struct pollfd pf = { .fd = b, .events = POLLIN };
	CHECK(poll(&pf, 1, 100) == 0);
	send_pattern(a, AFTER, 4);
	check_pattern(b, AFTER, 4);
	send_pattern(b, AFTER, 5);
	check_pattern(a, AFTER, 5);
	expect_mode(a);
	shutdown(a, SHUT_WR);
	char c;
	CHECK(read(b, &c, 1) == 0);
	close(a);
	close(b);
	return 0;
}
