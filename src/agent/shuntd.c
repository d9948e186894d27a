/* SPDX-License-Identifier: MIT */
/*
 * shuntd.c - the per-host agent.
 *
 * Loads sockops.bpf.o (next to this binary) with libbpf and attaches its
 * three programs (sock_ops, cgroup setsockopt and getsockopt) to a cgroup v2
 * directory: processes below it can then have shunt's option put in their
 * sockets' handshakes and read the outcome through the sockets themselves
 * (src/common/agent.h).  Nothing is handed to processes: no map, no socket.
 * The attachment lives exactly as long as shuntd: killing it detaches the
 * programs, and connections made meanwhile keep their TCP behaviour.
 * Needs CAP_BPF + CAP_NET_ADMIN (or root).
 */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../common/agent.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* --allow-uid: who may register sockets (root always may; empty: all). */
struct allow {
	uint32_t n;
	uint32_t uid[SHUNT_AGENT_MAX_UIDS];
};

static int parse_uids(const char *v, struct allow *a)
{
	char *end;

	while (*v && a->n < SHUNT_AGENT_MAX_UIDS) {
		unsigned long u = strtoul(v, &end, 10);
		if (end == v || (*end && *end != ',') || u > 0xffffffffu)
			return -1;
		a->uid[a->n++] = (uint32_t)u;
		v = *end ? end + 1 : end;
	}
	return *v ? -1 : 0;
}

static struct bpf_link *attach(struct bpf_object *obj, const char *name, int cg)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, name);

	return prog ? bpf_program__attach_cgroup(prog, cg) : NULL;
}

int main(int argc, char **argv)
{
	static const char *const progs[] = { "shunt_sockops", "shunt_setsockopt", "shunt_getsockopt" };
	const char *cgroup = NULL;
	char obj_path[PATH_MAX], self[PATH_MAX];
	struct bpf_link *links[3] = { 0 };
	struct sigaction sa = { .sa_handler = on_term };
	struct allow allow = { 0 };
	struct bpf_object *obj;
	uint32_t zero = 0;
	int cg, map_fd, bad = 0;
	ssize_t n;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--cgroup"))
			cgroup = argv[i + 1];
		else if (strcmp(argv[i], "--allow-uid") || parse_uids(argv[i + 1], &allow))
			bad = 1;
	}
	if (!cgroup || bad || argc % 2 == 0) {
		fprintf(stderr, "usage: shuntd --cgroup CGROUP2_DIR [--allow-uid UID,...]\n");
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	snprintf(obj_path, sizeof obj_path, "%s/shunt_sockops.bpf.o", dirname(self));
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "shuntd: cannot load %s (needs CAP_BPF and CAP_NET_ADMIN)\n", obj_path);
		return 1;
	}
	map_fd = bpf_object__find_map_fd_by_name(obj, "shunt_allow");
	cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (map_fd < 0 || cg < 0 || bpf_map_update_elem(map_fd, &zero, &allow, BPF_ANY)) {
		fprintf(stderr, "shuntd: bad object or cgroup %s: %s\n", cgroup, strerror(errno));
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		links[i] = attach(obj, progs[i], cg);
		if (!links[i]) {
			fprintf(stderr, "shuntd: cannot attach %s to %s: %s\n", progs[i], cgroup,
				strerror(errno));
			return 1;
		}
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("shuntd: ready (%s", cgroup);
	for (uint32_t i = 0; i < allow.n; i++)
		printf("%s%u", i ? "," : "; uids ", allow.uid[i]);
	printf(")\n");
	fflush(stdout);
	while (!stop)
		pause();
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(links[i]);
	bpf_object__close(obj);
	return 0;
}
