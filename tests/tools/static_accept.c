/* static_accept [FD]: accept one connection on the listener at descriptor
 * FD (default 0: inetd's wait mode; 3: systemd's LISTEN_FDS) and copy what
 * it carries to stdout until its end - built statically (no loader, so no
 * LD_PRELOAD: tests/behave/accept_past_us). */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char b[16384];
	ssize_t n;
	int c = accept(argc > 1 ? atoi(argv[1]) : 0, NULL, NULL);

	if (c < 0)
		return 1;
	while ((n = read(c, b, sizeof b)) > 0)
		for (ssize_t o = 0, w; o < n; o += w)
			if ((w = write(1, b + o, (size_t)(n - o))) <= 0)
				return 1;
	return n < 0;
}
