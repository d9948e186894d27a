/* Description: a blocking writer asleep on a full connection whose peer
 * had shut its sending half and is then killed, the bytes unread.  TCP's
 * peer kernel resets; the reset after the peer's FIN is EPIPE, and the
 * send that finds it says EPIPE with SIGPIPE (or the bytes it took, and
 * the next send EPIPE with SIGPIPE) - every EPIPE with a SIGPIPE, none
 * lost, none extra.  Without the peer's FIN first it is ECONNRESET, with
 * no SIGPIPE, then EPIPE with one.  shunt's send that learned the error
 * while asleep returned EPIPE without the signal (a program that counts
 * on SIGPIPE to stop writing - a shell pipeline's - went on). */
#include "common.h"
#include <pthread.h>

static volatile sig_atomic_t sigpipes;
static void count_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static pid_t victim;
static void *killer(void *arg)
{
	(void)arg;
	usleep(300000);
	kill(victim, SIGKILL);
	return NULL;
}

/* Writes until the connection takes no more. */
static void fill(int fd)
{
	static char buf[65536];
	int idle = 0;

	while (idle < 20) {
		if (send(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
			idle = 0;
			continue;
		}
		CHECK(errno == EAGAIN);
		idle++;
		usleep(5000);
	}
}

/* One connection; the peer shuts its sending half first or not. */
static void one(const struct sockaddr_storage *ss, socklen_t len, int l, int peer_fin)
{
	static char buf[65536];
	pthread_t t;
	int fd, st;
	char b;

	CHECK((victim = fork()) >= 0);
	if (!victim) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		if (peer_fin)
			CHECK(shutdown(c, SHUT_WR) == 0);
		pause(); /* reads nothing; killed */
		_exit(0);
	}
	fd = connect_to(ss, len);
	expect_mode(fd);
	if (peer_fin) {
		CHECK(recv(fd, &b, 1, 0) == 0); /* its FIN came */
	}
	fill(fd);
	sigpipes = 0;
	CHECK(pthread_create(&t, NULL, killer, NULL) == 0);
	ssize_t r = send(fd, buf, sizeof buf, 0); /* asleep until the reset */
	int e = errno, epipes = 0;

	CHECK(pthread_join(t, NULL) == 0);
	CHECK(waitpid(victim, &st, 0) == victim);
	if (r < 0) {
		if (peer_fin)
			CHECK(e == EPIPE);
		else
			CHECK(e == ECONNRESET || e == EPIPE);
		epipes += e == EPIPE;
	}
	for (int i = 0; i < 3; i++) {
		r = send(fd, buf, 1, 0);
		CHECK(r < 0);
		if (peer_fin || i)
			CHECK(errno == EPIPE);
		else
			CHECK(errno == EPIPE || errno == ECONNRESET);
		epipes += errno == EPIPE;
	}
	if (sigpipes != epipes) {
		fprintf(stderr, "peer FIN %d: %d EPIPE, %d SIGPIPE\n", peer_fin, epipes, (int)sigpipes);
		exit(1);
	}
	close(fd);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	signal(SIGPIPE, count_sigpipe);
	deadline(60);
	one(&ss, len, l, 1);
	one(&ss, len, l, 0);
	return 0;
}
