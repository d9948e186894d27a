/* Description: attach tests/bpf/replay.bpf.o to a cgroup until killed: the
 * "server that replays unknown options" of the negotiation tests.
 *   replayd OBJECT CGROUP_DIR */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	sigset_t s;
	int cg, sig;

	if (argc != 3)
		return 2;
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj))
		return 1;
	prog = bpf_object__find_program_by_name(obj, "replay_sockops");
	cg = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (!prog || cg < 0 || !bpf_program__attach_cgroup(prog, cg))
		return 1;
	printf("replayd: ready\n");
	fflush(stdout);
	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	sigprocmask(SIG_BLOCK, &s, NULL);
	sigwait(&s, &sig);
	return 0;
}
