/* Description: poll() on one connection, one direction - under shunt a
 * sleep on the ring's word, as a blocking read's (src/shim/poll.c
 * poll_one) - answers as TCP's: 0 when its time-out runs out with nothing
 * to read, POLLIN for bytes that come later and for the peer's close,
 * EINTR for a signal whatever SA_RESTART says, POLLOUT once a full
 * connection's peer reads, and select() on one descriptor the same.  A
 * second round with 8 threads, each polling its own connection of the
 * same pair of processes for 200 round trips, checks that no wake-up goes
 * to another's connection unnoticed. */
#include "common.h"
#include <sys/select.h>

#define THREADS 8
#define TRIPS 200

static void on_usr1(int s) { (void)s; }

static int conns[THREADS];

static void *echo_thread(void *arg)
{
	int fd = *(int *)arg;
	char c;

	for (int i = 0; i < TRIPS; i++) {
		read_all(fd, &c, 1);
		write_all(fd, &c, 1);
	}
	return NULL;
}

static void *poll_thread(void *arg)
{
	int fd = *(int *)arg;

	for (int i = 0; i < TRIPS; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char c = (char)i, got;
		write_all(fd, &c, 1);
		CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
		CHECK(read(fd, &got, 1) == 1 && got == c);
	}
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fd, s;
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	pthread_t t[THREADS];
	char big[65536], c;
	pid_t p;

	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	p = fork();
	CHECK(p >= 0);
	if (!p) {
		CHECK((s = accept(l, NULL, NULL)) >= 0);
		read_all(s, &c, 1); /* the client polls in vain, then asks */
		usleep(5000);
		write_all(s, "a", 1);
		read_all(s, &c, 1); /* the client polls; a signal comes */
		usleep(5000);
		CHECK(kill(getppid(), SIGUSR1) == 0);
		read_all(s, &c, 1); /* the client filled the connection: drain it */
		usleep(5000);
		for (char *e = NULL; !e;) { /* to the 'e' that ends the fill */
			ssize_t r = read(s, big, sizeof big);
			CHECK(r > 0);
			if ((e = memchr(big, 'e', (size_t)r)) && e == big + r - 1)
				read_all(s, &c, 1); /* select's turn, then the close */
		}
		usleep(5000);
		write_all(s, "b", 1);
		usleep(5000);
		close(s);
		for (int i = 0; i < THREADS; i++)
			CHECK((conns[i] = accept(l, NULL, NULL)) >= 0);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_create(&t[i], NULL, echo_thread, &conns[i]) == 0);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
		_exit(0);
	}
	close(l);
	fd = connect_to(&ss, len);
	expect_mode(fd);

	/* nothing to read: the time-out runs out */
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	double t0 = now_s();
	CHECK(poll(&pf, 1, 30) == 0 && pf.revents == 0);
	CHECK(now_s() - t0 >= 0.025);
	/* bytes that come while it waits */
	write_all(fd, "1", 1);
	CHECK(poll(&pf, 1, 5000) == 1 && pf.revents == POLLIN);
	CHECK(read(fd, &c, 1) == 1 && c == 'a');
	/* a signal: EINTR, SA_RESTART or not (poll is never restarted) */
	write_all(fd, "2", 1);
	CHECK(poll(&pf, 1, 5000) == -1 && errno == EINTR);
	/* a full connection: POLLOUT once the peer reads */
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	write_all(fd, "3", 1);
	memset(big, 'x', sizeof big);
	for (;;) {
		ssize_t w = write(fd, big, sizeof big);
		if (w < 0) {
			CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
			break;
		}
	}
	struct pollfd po = { .fd = fd, .events = POLLOUT };
	CHECK(poll(&po, 1, 5000) == 1 && (po.revents & POLLOUT));
	CHECK(fcntl(fd, F_SETFL, 0) == 0);
	write_all(fd, "e", 1);
	/* select on one descriptor, then the peer's close */
	write_all(fd, "4", 1);
	fd_set rd;
	struct timeval tv = { 5, 0 };
	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	CHECK(select(fd + 1, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(fd, &rd));
	CHECK(read(fd, &c, 1) == 1 && c == 'b');
	pf.events = POLLIN | POLLRDHUP;
	CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLIN) && (pf.revents & POLLRDHUP));
	CHECK(read(fd, &c, 1) == 0);
	close(fd);

	/* threads, each polling its own connection */
	for (int i = 0; i < THREADS; i++) {
		conns[i] = connect_to(&ss, len);
		expect_mode(conns[i]);
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, poll_thread, &conns[i]) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(wait_child(p) == 0);
	return 0;
}
