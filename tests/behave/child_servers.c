/* Description: a client of a server that serves each connection in a
 * process of its own which accepts and then ends (a listener inherited by
 * short-lived children: a prefork server's recycled workers, postfix's
 * smtpd, a test harness) keeps its descriptors and mappings flat: each
 * child made an arena the client mapped, and the arena of a server process
 * that is gone is unmapped when the next one comes.  Before, the client
 * kept every child's arena - three descriptors and a 16 MiB mapping per
 * connection.  Over RDMA: a link per child, each freed once its peer is
 * gone - at once if it ended with exit(), which tells its peers; else when
 * the link, tried while idle, fails.  Before, every child's link stayed. */
#include "common.h"

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), fds0, maps0, fds1 = 0, maps1 = 0;

	deadline(60);
	/* (half the children end by exit(), half without an exit path) */
	for (int i = 0; i < 3; i++) /* warm up */
		child_ping(&ss, len, l, i % 2);
	fds0 = count_fds();
	maps0 = count_maps();
	for (int i = 0; i < 30; i++)
		child_ping(&ss, len, l, i % 2);
	/* flat at once over shared memory; over RDMA a link whose peer is
	 * gone goes when its peer said so at its exit, or when a test of the
	 * idle link fails (links.c: idle 2 s, a test every 2 s, then the
	 * queue pair's retries - 4 s in the Soft-RoCE suite): 15 s at most */
	for (int t = 0; t <= 75; t++) {
		fds1 = count_fds();
		maps1 = count_maps();
		if (fds1 <= fds0 + 3 && maps1 <= maps0 + 3)
			break;
		usleep(200000);
	}
	fprintf(stderr, "after 30 children: fds %d -> %d, maps %d -> %d\n", fds0, fds1, maps0, maps1);
	CHECK(fds1 <= fds0 + 3);
	CHECK(maps1 <= maps0 + 3);
	close(l);
	return 0;
}
