/* Description: a blocking read interrupted by a signal whose handler lacks
 * SA_RESTART fails with EINTR; with SA_RESTART it carries on and returns
 * the data that arrives later; sigaction reports the
 * application's own handler back. */
#include "common.h"

static void on_alarm(int s) { (void)s; }

static void arm(int restart)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char c;

	alarm(30);
	pid_t p = fork();
	if (!p) {
		int s = accept(l, NULL, NULL);
		expect_mode(s);
		/* The parent blocks in read right after its write; give it time to
		 * get there (a signal before the call starts interrupts nothing). */
		read_all(s, &c, 1);
		usleep(100000);
		kill(getppid(), SIGUSR1); /* interrupts read #1 */
		read_all(s, &c, 1);
		usleep(100000);
		kill(getppid(), SIGUSR1); /* interrupts read #2, then data follows */
		usleep(200000);
		write_all(s, "d", 1);
		read_all(s, &c, 1);
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	arm(0);
	write_all(fd, "1", 1);
	CHECK(read(fd, &c, 1) == -1 && errno == EINTR);
	arm(1);
	write_all(fd, "2", 1);
	CHECK(read(fd, &c, 1) == 1 && c == 'd');
	/* sigaction reports the application's own handler and flags */
	struct sigaction old;
	arm(0);
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == on_alarm);
	CHECK(!(old.sa_flags & SA_RESTART) && !(old.sa_flags & SA_SIGINFO));
	write_all(fd, "3", 1);
	CHECK(wait_child(p) == 0);
	return 0;
}
