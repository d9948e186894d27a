/* Description: a closing cursor message the peer's device does not
 * acknowledge in time, on a link that works.
 *   stalled server ADDR PORT   accepts two connections; on each reads an
 *                              index byte and 256 KiB to EOF, then writes
 *                              64 KiB back and reports its mode
 *   stalled client ADDR PORT   makes two connections (one link), writes
 *                              its index and 256 KiB on each, shuts the
 *                              first's sending half, then the second's,
 *                              reads 64 KiB and EOF on each and reports
 * Every byte is checked; each side prints "role=R conn=I mode=M reason=N"
 * per connection (the first once it left RDMA, or after 10 s).  The first
 * connection's socket buffers are small and the client reads it 4 s after
 * its shutdown: the server's move of its own half (the peer moved) cannot
 * resend its 64 KiB before the server closes and exits, so a thread must
 * finish it - and read the client's failover message, or the close would
 * reset the connection under the client's last bytes.  Run the client with libshunt-faults.so
 * SHUNT_FAULT_RDMA_STALL=1 (tests/rdma/stalled.sh): the first connection
 * alone moves to TCP (rdma-stalled; peer-failover at the server), the
 * second stays on RDMA at both ends - the link was not taken for failed. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */

#define UP (256u << 10)
#define DOWN (64u << 10)

/* The first connection's move is made by the progress thread 2 s after
 * its word went unacknowledged, the peer's when the move's message comes:
 * its mode is read once it left RDMA, or after 10 s. */
static void report(const char *role, int i, int fd)
{
	struct shunt_info in = sock_info(fd);

	for (int t = 0; t < 1000 && !i && in.mode == 3; t++) {
		usleep(10000);
		in = sock_info(fd);
	}
	printf("role=%s conn=%d mode=%s reason=%u\n", role, i, mode_name(in.mode), in.reason);
}

int main(int argc, char **argv)
{
	int fd[2], l;
	struct sockaddr_in a = tool_role(argc, argv, "stalled", 2, &l);

	if (l >= 0) {
		for (int i = 0; i < 2; i++) {
			uint8_t idx;
			CHECK((fd[i] = accept(l, NULL, NULL)) >= 0);
			if (!i)
				CHECK(!setsockopt(fd[i], SOL_SOCKET, SO_SNDBUF, &(int){ 4096 }, sizeof(int)));
			read_all(fd[i], &idx, 1);
			CHECK(idx == i);
		}
		for (int i = 0; i < 2; i++) {
			CHECK(read_pattern_to_eof(fd[i], 10 + (uint32_t)i) == UP);
			write_pattern(fd[i], DOWN, 20 + (uint32_t)i);
			report("server", i, fd[i]);
		}
	} else {
		for (int i = 0; i < 2; i++) {
			uint8_t idx = (uint8_t)i;
			CHECK((fd[i] = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
			if (!i)
				CHECK(!setsockopt(fd[i], SOL_SOCKET, SO_RCVBUF, &(int){ 4096 }, sizeof(int)));
			CHECK(!connect(fd[i], (void *)&a, sizeof a));
			write_all(fd[i], &idx, 1);
			write_pattern(fd[i], UP, 10 + (uint32_t)i);
		}
		for (int i = 0; i < 2; i++)
			CHECK(!shutdown(fd[i], SHUT_WR));
		sleep(4);
		for (int i = 0; i < 2; i++) {
			CHECK(read_pattern_to_eof(fd[i], 20 + (uint32_t)i) == DOWN);
			report("client", i, fd[i]);
		}
	}
	fflush(stdout);
	close(fd[0]);
	close(fd[1]);
	return 0;
}
