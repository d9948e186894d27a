/* Description: a server that accepts and forks a handler per connection
 * (the parent closes its copy), and a server whose forked workers share one
 * listener and each accept: every connection is served, nothing hangs. */
#include "common.h"

static void handle(int c)
{
	char buf[1024];
	ssize_t n;
	expect_mode(c);
	while ((n = read(c, buf, sizeof buf)) > 0)
		write_all(c, buf, (size_t)n);
	CHECK(n == 0);
}

static void client_round(struct sockaddr_storage *ss, socklen_t len, int n)
{
	for (int i = 0; i < n; i++)
		echo_new_connection(ss, len, (uint32_t)i, 1);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(60);
	/* accept, then fork a handler */
	pid_t srv = fork();
	if (!srv) {
		for (int i = 0; i < 20; i++) {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			pid_t h = fork();
			if (!h) {
				close(l);
				handle(c);
				_exit(0);
			}
			close(c);
		}
		while (wait(NULL) > 0)
			;
		_exit(0);
	}
	client_round(&ss, len, 20);
	CHECK(wait_child(srv) == 0);

	/* pre-forked workers sharing the listener */
	pid_t w[3];
	for (int k = 0; k < 3; k++) {
		w[k] = fork();
		if (!w[k]) {
			for (;;) {
				int c = accept(l, NULL, NULL);
				if (c < 0)
					_exit(1);
				handle(c);
				close(c);
			}
		}
	}
	client_round(&ss, len, 30);
	for (int k = 0; k < 3; k++) {
		kill(w[k], SIGTERM);
		waitpid(w[k], NULL, 0);
	}
	return 0;
}
