/* Description: a second link between two processes, made while the first
 * was full, retires once idle (wire.h SHUNT_CDC_F_LINK).
 *   idlelink server ADDR PORT   per round accepts 40 connections, echoes a
 *                               byte on each, reads each to EOF, closes
 *   idlelink client ADDR PORT   per round holds 40 connections at once (a
 *                               link has 32 slots: two links), a byte each
 *                               way on each, all on RDMA, closes them,
 *                               idles 5 s; two rounds
 * Each side prints "round R peak P idle I" (its mappings with the 40 open,
 * and after the idle time) and exits 0 once every byte came back.
 * tests/rdma/idle_link.sh checks that the idle count fell below the peak
 * (the second link's queue pair and rings were freed) and came back to
 * the same count after the second round. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

#define N 40
#define ROUNDS 2

int main(int argc, char **argv)
{
	int fd[N], l;
	struct sockaddr_in a = tool_role(argc, argv, "idlelink", N, &l);

	for (int r = 0; r < ROUNDS; r++) {
		int peak;
		char c;

		for (int i = 0; i < N; i++) {
			if (l >= 0) {
				CHECK((fd[i] = accept(l, NULL, NULL)) >= 0);
				read_all(fd[i], &c, 1);
				write_all(fd[i], &c, 1);
			} else {
				c = (char)i;
				CHECK((fd[i] = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
				CHECK(!connect(fd[i], (void *)&a, sizeof a));
				write_all(fd[i], &c, 1);
				read_all(fd[i], &c, 1);
				CHECK(c == (char)i);
				if (sock_info(fd[i]).mode != 3) {
					fprintf(stderr, "connection %d of round %d: %s, reason %u\n", i, r,
						mode_name(sock_info(fd[i]).mode), sock_info(fd[i]).reason);
					exit(1);
				}
			}
		}
		sleep(1); /* the spare link that replaces the one taken is made */
		peak = count_maps();
		for (int i = 0; i < N; i++) {
			if (l >= 0)
				CHECK(read(fd[i], &c, 1) == 0);
			close(fd[i]);
		}
		sleep(5);
		printf("round %d peak %d idle %d\n", r, peak, count_maps());
		fflush(stdout);
	}
	return 0;
}
