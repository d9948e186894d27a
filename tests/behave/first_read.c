/* Description: a new connection's first blocking read - under shunt the
 * call that settles the client's pending offer, and that sleeps until the
 * server's reply wakes it (src/setup/client.c rdv_await_reply) - returns
 * what TCP's would: the reply the server sends a few milliseconds after
 * it accepted, EOF after its shutdown(SHUT_WR) or its close, the reply to
 * a request another thread writes while the read already waits, EINTR
 * for a signal whose handler lacks SA_RESTART, the reply after a signal
 * whose handler has it, and EAGAIN once SO_RCVTIMEO ran out.  Each case
 * on ROUNDS new connections. */
#include "common.h"

enum { C_REPLY, C_SHUT, C_CLOSE, C_THREAD, C_EINTR, C_RESTART, C_TIMEO, NCASES };
#define ROUNDS 8

static void serve(int s, int c, pid_t client)
{
	char b;

	switch (c) {
	case C_REPLY:
	case C_THREAD:
		read_all(s, &b, 1);
		usleep(3000); /* the client is asleep in its read by now */
		write_all(s, "r", 1);
		break;
	case C_SHUT:
		read_all(s, &b, 1);
		usleep(3000);
		CHECK(shutdown(s, SHUT_WR) == 0);
		CHECK(recv(s, &b, 1, 0) == 0); /* the client's close */
		break;
	case C_CLOSE:
		read_all(s, &b, 1);
		usleep(3000);
		break;
	case C_EINTR:
		serve_interrupted(s, client);
		break;
	case C_RESTART:
		read_all(s, &b, 1);
		for (int k = 0; k < 3; k++) {
			usleep(2000);
			CHECK(kill(client, SIGUSR1) == 0);
		}
		usleep(2000);
		write_all(s, "r", 1);
		break;
	case C_TIMEO:
		read_all(s, &b, 1);
		CHECK(recv(s, &b, 1, 0) == 0); /* no reply: the client gives up */
		break;
	}
}

static void *late_request(void *arg)
{
	usleep(3000); /* the main thread is in its read by now */
	write_all(*(int *)arg, "q", 1);
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t p;
	char b;

	deadline(60);
	signal(SIGPIPE, SIG_IGN);
	p = scripted_server(l, NCASES, ROUNDS, serve);
	for (int c = 0; c < NCASES; c++) {
		catch_usr1(c != C_EINTR);
		for (int i = 0; i < ROUNDS; i++) {
			int fd = connect_to(&ss, len);
			pthread_t t;
			ssize_t r;

			if (c == C_TIMEO) {
				struct timeval tv = { 0, 30000 };
				CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
			}
			if (c == C_THREAD)
				CHECK(pthread_create(&t, NULL, late_request, &fd) == 0);
			else
				write_all(fd, "q", 1);
			r = read(fd, &b, 1);
			switch (c) {
			case C_REPLY:
			case C_RESTART:
				CHECK(r == 1 && b == 'r');
				break;
			case C_THREAD:
				CHECK(r == 1 && b == 'r');
				CHECK(pthread_join(t, NULL) == 0);
				break;
			case C_SHUT:
			case C_CLOSE:
				CHECK(r == 0);
				break;
			case C_EINTR:
				CHECK(r == -1 && errno == EINTR);
				write_all(fd, "e", 1);
				break;
			case C_TIMEO:
				CHECK(r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
				break;
			}
			expect_mode(fd);
			close(fd);
		}
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
