/* SPDX-License-Identifier: MIT */
/* run.c - `shunt run -- PROGRAM`: exec PROGRAM with libshunt.so preloaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tool.h"

static int set_preload(void)
{
	char lib[PATH_MAX], *v;
	const char *old = getenv("LD_PRELOAD");

	if (snprintf(lib, sizeof lib, "%s/libshunt.so", tool_dir()) >= (int)sizeof lib ||
	    access(lib, R_OK)) {
		fprintf(stderr, "shunt: cannot find %s/libshunt.so\n", tool_dir());
		return -1;
	}
	if (old && strstr(old, lib))
		return 0;
	if (asprintf(&v, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0)
		return -1;
	setenv("LD_PRELOAD", v, 1);
	free(v);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--busy-poll"))
			setenv("SHUNT_SPIN_US", "-1", 1);
		else if (!strcmp(argv[i], "--no-spin"))
			setenv("SHUNT_SPIN_US", "0", 1);
		else if (!strcmp(argv[i], "--log"))
			setenv("SHUNT_LOG", "1", 1);
		else if (!strcmp(argv[i], "--ring-kb") && i + 1 < argc)
			setenv("SHUNT_RING_KB", argv[++i], 1);
		else
			break;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		fprintf(stderr, "usage: shunt run [options] -- PROGRAM [ARGS...]\n");
		return 2;
	}
	if (set_preload())
		return 127;
	execvp(argv[i], argv + i);
	fprintf(stderr, "shunt: cannot run %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
