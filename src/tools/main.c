/* SPDX-License-Identifier: MIT */
/* main.c - `shunt` command dispatch. */
#define _GNU_SOURCE
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "tool.h"
#include "../common/config.h"
#include "../common/rdvdir.h"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shunt run [--busy-poll|--no-spin] [--ring-kb N] [--log] -- PROGRAM [ARGS...]\n"
		"       shunt ss [--json] [-p PID]      list shunt connections and why they are not accelerated\n"
		"       shunt bench [--quick] [--out DIR]  shunt vs TCP loopback vs unix socket vs raw shared memory\n"
		"       shunt agent --cgroup DIR [--allow-uid UID,...]  run the per-host agent (shuntd; root)\n");
}

const char *tool_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", dir, sizeof dir - 1);
	if (n <= 0)
		return ".";
	dir[n] = 0;
	return strcpy(dir, dirname(dir));
}

const char *tool_shunt_dir(void)
{
	static struct shunt_config cfg;
	enum rdvdir_kind kind;
	const char *bad;
	char why[256];
	int fd;

	shunt_config_parse(&cfg, environ, &bad);
	if (cfg.dir_explicit)
		return cfg.dir;
	/* the name the shim of this uid uses (rdvdir.c) */
	fd = rdvdir_open_default(cfg.dir, sizeof cfg.dir, 0, &kind, why, sizeof why);
	if (fd >= 0)
		close(fd);
	return cfg.dir;
}

/* `shunt agent ...` runs shuntd from the same directory. */
static int cmd_agent(int argc, char **argv)
{
	char path[PATH_MAX + 16];

	(void)argc;
	snprintf(path, sizeof path, "%s/shuntd", tool_dir());
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr, "shunt: cannot run %s (built only with libbpf-dev and clang)\n", path);
	return 127;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ss"))
		return cmd_ss(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "agent"))
		return cmd_agent(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench-worker"))
		return cmd_bench_worker(argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "shunt: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
