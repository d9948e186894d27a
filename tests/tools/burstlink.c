/* Description: rounds of connections made at once between two processes,
 * each round followed by an idle time, with the client's mappings counted
 * after each (tests/rdma/foreign.sh: a hostile server's ACCEPTs).
 *   burstlink server ADDR PORT   per round accepts K connections, echoes a
 *                                byte on each, reads each to EOF, closes
 *   burstlink client ADDR PORT   per round K threads connect at once (each
 *                                offer takes a spare queue pair of its
 *                                own), a byte each way, all close, 4 s idle
 * The client prints "round R idle I rdma N" (its mappings after the idle
 * time, and how many of the K were on RDMA); both exit 0 once every byte
 * came back, whatever transport carried it. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <pthread.h>

#define K 8
#define ROUNDS 4

static struct sockaddr_in addr;
static pthread_barrier_t all_open;
static int fds[K];

static void *one(void *arg)
{
	int i = (int)(intptr_t)arg, fd;
	char c = (char)(i + 1);

	CHECK((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	pthread_barrier_wait(&all_open);
	CHECK(!connect(fd, (void *)&addr, sizeof addr));
	write_all(fd, &c, 1);
	read_all(fd, &c, 1);
	CHECK(c == (char)(i + 1));
	fds[i] = fd;
	return NULL;
}

int main(int argc, char **argv)
{
	int l;
	char c;

	addr = tool_role(argc, argv, "burstlink", K, &l);
	for (int r = 0; r < ROUNDS; r++) {
		if (l >= 0) {
			for (int i = 0; i < K; i++) {
				CHECK((fds[i] = accept(l, NULL, NULL)) >= 0);
				read_all(fds[i], &c, 1);
				write_all(fds[i], &c, 1);
			}
			for (int i = 0; i < K; i++) {
				CHECK(read(fds[i], &c, 1) == 0);
				close(fds[i]);
			}
			continue;
		}
		pthread_t t[K];
		int rdma = 0;

		CHECK(!pthread_barrier_init(&all_open, NULL, K));
		for (int i = 0; i < K; i++)
			CHECK(!pthread_create(&t[i], NULL, one, (void *)(intptr_t)i));
		for (int i = 0; i < K; i++)
			CHECK(!pthread_join(t[i], NULL));
		pthread_barrier_destroy(&all_open);
		for (int i = 0; i < K; i++) {
			rdma += sock_info(fds[i]).mode == 3;
			close(fds[i]);
		}
		sleep(4); /* spares beyond one per device go after 2 s unused */
		printf("round %d idle %d rdma %d\n", r, count_maps(), rdma);
		fflush(stdout);
	}
	return 0;
}
