/* Description: attack #3 of issue #12 - forging the agent's verdicts.  Run
 * as an unprivileged user inside the agent's cgroup, it tries every way it
 * has to reach the agent's state: any BPF map by id (the old design handed
 * every process a writable array of all verdicts), and the socket options
 * of its own sockets, the only ones it can name.  Then it stays, forging
 * "peer is shunt" on its own sockets, for SECONDS.
 *   forge SECONDS
 * Prints "maps reachable: N" (N must be 0). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <linux/bpf.h>
#include <sys/syscall.h>
#include "../../src/common/agent.h"

int main(int argc, char **argv)
{
	union bpf_attr a;
	int reachable = 0, denied = 0;
	double end = now_s() + (argc > 1 ? atof(argv[1]) : 1);

	for (uint32_t id = 1; id < 4096; id++) {
		memset(&a, 0, sizeof a);
		a.map_id = id;
		int fd = (int)syscall(SYS_bpf, BPF_MAP_GET_FD_BY_ID, &a, sizeof a);
		if (fd >= 0) {
			reachable++;
			close(fd);
		} else if (errno == EPERM || errno == EACCES) {
			denied++;
		}
	}
	printf("maps reachable: %d (denied %d)\n", reachable, denied);
	fflush(stdout);
	while (now_s() < end) { /* its own sockets are all it can mark */
		int s = socket(AF_INET, SOCK_STREAM, 0);
		uint64_t n = 0x4141414141414141ull;
		setsockopt(s, SHUNT_AG_SOL, SHUNT_AG_OPT_CLIENT, &n, sizeof n);
		close(s);
		usleep(1000);
	}
	return 0;
}
