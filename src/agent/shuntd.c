/* SPDX-License-Identifier: MIT */
/*
 * shuntd.c - the per-host agent (issue #3, first slice).
 *
 * Loads sockops.bpf.o (next to this binary) with libbpf, attaches it to a
 * cgroup v2 directory, and hands the socket-cookie array to local processes
 * over a unix socket (SCM_RIGHTS; the peer's credentials are logged).  The
 * attachment lives exactly as long as shuntd: killing it detaches the
 * program, and connections made meanwhile keep their TCP behaviour.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "agent.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int send_fd(int sock, int fd)
{
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	char tag[8];
	struct iovec iov = { tag, sizeof tag };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memcpy(tag, SHUNT_AGENT_TAG, sizeof tag);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof tag ? 0 : -errno;
}

/* --allow-uid: who may have the array (root always may).  Everyone who
 * holds it shares one trust domain, as the users of one SHUNT_DIR do: a
 * holder can write any socket's entry (docs/agent.md). */
static unsigned allowed[64];
static int nallowed;

static int allowed_uid(uid_t uid)
{
	if (!nallowed || uid == 0)
		return 1;
	for (int i = 0; i < nallowed; i++)
		if (allowed[i] == uid)
			return 1;
	return 0;
}

static int parse_uids(const char *v)
{
	char *end;

	while (*v && nallowed < (int)(sizeof allowed / sizeof allowed[0])) {
		unsigned long u = strtoul(v, &end, 10);
		if (end == v || (*end && *end != ',') || u > 0xffffffffu)
			return -1;
		allowed[nallowed++] = (unsigned)u;
		v = *end ? end + 1 : end;
	}
	return *v ? -1 : 0;
}

static int serve(const char *path, int map_fd)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (ls < 0 || strlen(path) >= sizeof sun.sun_path)
		return -EINVAL;
	strcpy(sun.sun_path, path);
	unlink(path);
	if (bind(ls, (void *)&sun, sizeof sun) || chmod(path, 0666) || listen(ls, 64))
		return -errno;
	printf("shuntd: ready\n");
	fflush(stdout);
	while (!stop) {
		struct ucred cr = { 0 };
		socklen_t l = sizeof cr;
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) || !allowed_uid(cr.uid)) {
			fprintf(stderr, "shuntd: refused pid %d uid %d (not in --allow-uid)\n",
				(int)cr.pid, (int)cr.uid);
			close(c);
			continue;
		}
		fprintf(stderr, "shuntd: map handed to pid %d uid %d\n", cr.pid, cr.uid);
		send_fd(c, map_fd);
		close(c);
	}
	close(ls);
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cgroup = NULL, *sockpath = "/run/shunt/agent.sock";
	char obj_path[PATH_MAX], self[PATH_MAX];
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	struct sigaction sa = { .sa_handler = on_term };
	ssize_t n;
	int cg, map_fd, r;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--cgroup"))
			cgroup = argv[i + 1];
		else if (!strcmp(argv[i], "--socket"))
			sockpath = argv[i + 1];
		else if (!strcmp(argv[i], "--allow-uid") && !parse_uids(argv[i + 1]))
			;
		else
			cgroup = NULL, i = argc;
	}
	if (!cgroup || argc % 2 == 0) {
		fprintf(stderr, "usage: shuntd --cgroup CGROUP2_DIR [--socket PATH] [--allow-uid UID,...]\n");
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
	prog = bpf_object__find_program_by_name(obj, "shunt_sockops");
	map_fd = bpf_object__find_map_fd_by_name(obj, "shunt_socks");
	cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!prog || map_fd < 0 || cg < 0) {
		fprintf(stderr, "shuntd: bad object or cgroup %s: %s\n", cgroup, strerror(errno));
		return 1;
	}
	link = bpf_program__attach_cgroup(prog, cg);
	if (!link) {
		fprintf(stderr, "shuntd: cannot attach to %s: %s\n", cgroup, strerror(errno));
		return 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	r = serve(sockpath, map_fd);
	bpf_link__destroy(link);
	bpf_object__close(obj);
	return r ? 1 : 0;
}
