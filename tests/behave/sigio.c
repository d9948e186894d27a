/* Description: signal-driven I/O on a connection behaves as TCP's: with
 * F_SETOWN and O_ASYNC (fcntl) or FIOASYNC (ioctl) the owner gets SIGIO
 * when the peer's bytes arrive, and reads them.  SIGIO comes from the
 * kernel socket's readiness, which the rings never touch: the connection
 * moves to TCP at the exact byte first.  Before, the signal never came. */
#include "common.h"
#include <sys/ioctl.h>

static volatile sig_atomic_t ios;

static void on_io(int sig)
{
	(void)sig;
	ios++;
}

/* Waits (bounded) for a SIGIO after ios was `before`. */
static void wait_sigio(int before)
{
	for (int i = 0; i < 5000 && ios == before; i++)
		usleep(1000);
	if (ios == before) {
		fprintf(stderr, "no SIGIO\n");
		exit(1);
	}
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l, fd, on = 1, before;
	char b[8];
	pid_t p;

	deadline(30);
	p = serve_forked(&l, &ss, &len);
	if (!p) {
		for (int r = 0; r < 2; r++) {
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			/* over RDMA the client's move (O_ASYNC, at once) may
			 * be here before this look: reason peer-failover */
			expect_mode_peer_forks(c);
			read_all(c, b, 1); /* the client is set up */
			write_all(c, "data", 4);
			read_all(c, b, 1);
			close(c);
		}
		_exit(0);
	}
	close(l);
	CHECK(signal(SIGIO, on_io) != SIG_ERR);
	for (int r = 0; r < 2; r++) {
		fd = connect_to(&ss, len);
		expect_mode(fd);
		CHECK(fcntl(fd, F_SETOWN, getpid()) == 0);
		if (r == 0)
			CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC | O_NONBLOCK) == 0);
		else
			CHECK(ioctl(fd, FIOASYNC, &on) == 0 && ioctl(fd, FIONBIO, &on) == 0);
		before = ios;
		write_all(fd, "s", 1);
		wait_sigio(before);
		size_t got = 0;
		while (got < 4) {
			ssize_t n = read(fd, b + got, 4 - got);
			if (n < 0 && errno == EAGAIN) {
				usleep(1000);
				continue;
			}
			CHECK(n > 0);
			got += (size_t)n;
		}
		CHECK(!memcmp(b, "data", 4));
		write_all(fd, "d", 1);
		close(fd);
	}
	CHECK(wait_child(p) == 0);
	return 0;
}
