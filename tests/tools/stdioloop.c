/* Description: the cost of C stdio calls on a file (bench/stdio.sh): N
 * times fwrite of 64 bytes, putc and fprintf of a number to /dev/null,
 * then N fgetc from /dev/zero; prints nanoseconds per call of each.  What
 * shunt's stdio wrappers (src/shim/stdio.c: a look at the descriptor
 * before each call) cost a program that never uses stdio on a socket. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

static double ns_since(double t0, long n)
{
	return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	FILE *o = fopen("/dev/null", "w"), *z = fopen("/dev/zero", "r");
	char line[64] = "0123456789012345678901234567890123456789012345678901234567890\n";
	double t;
	long sum = 0;

	CHECK(o && z);
	t = now_s();
	for (long i = 0; i < n; i++)
		fwrite(line, 1, sizeof line, o);
	printf("fwrite %.1f", ns_since(t, n));
	t = now_s();
	for (long i = 0; i < n; i++)
		putc('x', o);
	printf(" putc %.1f", ns_since(t, n));
	t = now_s();
	for (long i = 0; i < n; i++)
		fprintf(o, "%ld\n", i);
	printf(" fprintf %.1f", ns_since(t, n));
	t = now_s();
	for (long i = 0; i < n; i++)
		sum += fgetc(z);
	printf(" fgetc %.1f\n", ns_since(t, n));
	return sum != 0;
}
