/* static_cat: stdin to stdout until EOF - built statically (no loader, so
 * no LD_PRELOAD: tests/behave/exec_foreign). */
#include <unistd.h>

int main(void)
{
	char b[16384];
	ssize_t n;

	while ((n = read(0, b, sizeof b)) > 0)
		for (ssize_t o = 0, w; o < n; o += w)
			if ((w = write(1, b + o, (size_t)(n - o))) <= 0)
				return 1;
	return n < 0;
}
