/* static_accept: accept one connection on the listener at descriptor 0
 * (inetd's wait mode) and copy what it carries to stdout until its end -
 * built statically (no loader, so no LD_PRELOAD: tests/behave/accept_past_us). */
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	char b[16384];
	ssize_t n;
	int c = accept(0, NULL, NULL);

	if (c < 0)
		return 1;
	while ((n = read(c, b, sizeof b)) > 0)
		for (ssize_t o = 0, w; o < n; o += w)
			if ((w = write(1, b + o, (size_t)(n - o))) <= 0)
				return 1;
	return n < 0;
}
