/* SPDX-License-Identifier: MIT */
/*
 * ss.c - `shunt ss`: every shunt connection of every live process on this
 * host (sharing SHUNT_DIR), its mode and, when plain, why.  Files left by
 * dead processes are removed on the way.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "procnet.h"
#include "../common/rdvdir.h"
#include "tool.h"
#include "shunt/wire.h"

static void fmt_addr(char *buf, size_t n, const struct shunt_addr *a)
{
	static const uint8_t v4pfx[12] = { [10] = 0xff, [11] = 0xff };
	char ip[INET6_ADDRSTRLEN];

	if (!memcmp(a->ip, v4pfx, 12)) {
		inet_ntop(AF_INET, a->ip + 12, ip, sizeof ip);
		snprintf(buf, n, "%s:%u", ip, a->port);
	} else {
		inet_ntop(AF_INET6, a->ip, ip, sizeof ip);
		snprintf(buf, n, "[%s]:%u", ip, a->port);
	}
}

struct opts {
	int json;
	int pid;
	int first;
};

/* A record whose process left its local address to us: the socket its
 * descriptor is now, if that socket's peer is the record's - else the one
 * socket of the table with that peer (a forked child serves it: its maker
 * closed the descriptor; otherwise the descriptor was reused, or the pid
 * is another process's - a pid namespace of its own - and the address is
 * shown as unknown). */
static const struct shunt_addr *local_of(struct procnet *pn, int *loaded, const struct shunt_stats_file *f,
					 const struct shunt_stat_rec *r)
{
	const struct shunt_addr *p = r->is_client ? &r->tuple.server : &r->tuple.client;
	const struct procnet_sock *so, *one = NULL;
	uint16_t port = r->is_client ? 0 : r->tuple.server.port;

	if (!*loaded) {
		*loaded = 1;
		procnet_load(pn, f->pid);
	}
	so = procnet_of_fd(pn, f->pid, r->fd);
	if (so && !memcmp(&so->remote, p, sizeof *p) && (!port || so->local.port == port))
		return &so->local;
	for (size_t i = 0; i < pn->n; i++) {
		so = &pn->v[i];
		if (!so->ino || memcmp(&so->remote, p, sizeof *p) || (port && so->local.port != port))
			continue;
		if (one)
			return NULL; /* (two: which is unknown) */
		one = so;
	}
	return one ? &one->local : NULL;
}

/* A connection's record outlives it when its last holder was a program
 * the process exec'd (the record is in the maker's file, out of that
 * program's reach): the kernel's TCP connection, which lives exactly as
 * long as it, is gone then - listed no more.  (No table to look in - a
 * /proc we may not read - lists it.) */
static int gone(struct procnet *pn, int *loaded, const struct shunt_stats_file *f,
		const struct shunt_stat_rec *r)
{
	const struct shunt_addr *p = r->is_client ? &r->tuple.server : &r->tuple.client;
	const struct shunt_addr *l = r->is_client ? &r->tuple.client : &r->tuple.server;

	if (r->mode == SHUNT_M_LISTEN)
		return 0;
	if (!*loaded) {
		*loaded = 1;
		procnet_load(pn, f->pid);
	}
	return pn->n && !procnet_holds(pn, r->flags & SHUNT_STAT_LOCAL_UNKNOWN ? 0 : l->port, p);
}

static void print_rec(struct opts *o, const struct shunt_stats_file *f, const struct shunt_stat_rec *r,
		      const struct shunt_addr *l)
{
	char local[64], peer[64];
	const struct shunt_addr *p = r->is_client ? &r->tuple.server : &r->tuple.client;
	char comm[17] = { 0 };

	memcpy(comm, f->comm, 16);
	for (char *c = comm; *c; c++) /* another process wrote it: no quotes, no controls */
		if (*c < 0x20 || *c == '"' || *c == '\\' || *c == 0x7f)
			*c = '?';
	if (l)
		fmt_addr(local, sizeof local, l);
	else
		strcpy(local, "?");
	fmt_addr(peer, sizeof peer, p);
	if (r->mode == SHUNT_M_LISTEN)
		strcpy(peer, "*");
	if (o->json) {
		printf("%s\n  {\"pid\": %u, \"comm\": \"%s\", \"fd\": %d, \"role\": \"%s\", \"mode\": \"%s\", "
		       "\"local\": \"%s\", \"peer\": \"%s\", \"tx\": %llu, \"rx\": %llu, "
		       "\"reason\": \"%s\", \"reason_code\": %u}",
		       o->first ? "" : ",", f->pid, comm, r->fd,
		       r->mode == SHUNT_M_LISTEN ? "listen" : r->is_client ? "client" : "server",
		       shunt_mode_str(r->mode), local, peer, (unsigned long long)r->tx,
		       (unsigned long long)r->rx, shunt_reason_str(r->reason), r->reason);
	} else {
		printf("%-7u %-15s %-5d %-7s %-6s %-24s %-24s %12llu %12llu  %s\n", f->pid, comm,
		       r->fd, r->mode == SHUNT_M_LISTEN ? "listen" : r->is_client ? "client" : "server",
		       shunt_mode_str(r->mode), local, peer, (unsigned long long)r->tx,
		       (unsigned long long)r->rx, r->mode != SHUNT_M_TCP ? "-" : shunt_reason_str(r->reason));
	}
	o->first = 0;
}

/* A process's file (s<id>) - or, a dead one's, any of its files: removed
 * (src/common/rdvdir.c). */
static void show_file(struct opts *o, int dfd, const char *name)
{
	struct shunt_stats_file *f;
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return;
	if (rdvdir_reap(dfd, name, fd) || name[0] != 's' || fstat(fd, &st) || (size_t)st.st_size < sizeof *f)
		goto out;
	/* A copy, not a mapping: the file's owner may truncate it meanwhile
	 * (a mapping would SIGBUS us) or rewrite it (we print what we read). */
	f = malloc(sizeof *f);
	if (!f || pread(fd, f, sizeof *f, 0) != (ssize_t)sizeof *f) {
		free(f);
		goto out;
	}
	if (f->magic == SHUNT_STATS_MAGIC && f->version == SHUNT_WIRE_VERSION &&
	    (!o->pid || (int)f->pid == o->pid)) {
		struct procnet pn = { 0 };
		int loaded = 0;
		for (unsigned i = 0; i < SHUNT_STATS_RECS; i++) {
			const struct shunt_stat_rec *r = &f->rec[i];
			if (__atomic_load_n(&r->used, __ATOMIC_ACQUIRE) != 1)
				continue; /* free, or being filled */
			if (gone(&pn, &loaded, f, r))
				continue;
			print_rec(o, f, r, r->flags & SHUNT_STAT_LOCAL_UNKNOWN ? local_of(&pn, &loaded, f, r)
						: r->is_client ? &r->tuple.client : &r->tuple.server);
		}
		procnet_free(&pn);
	}
	free(f);
out:
	close(fd);
}

int cmd_ss(int argc, char **argv)
{
	struct opts o = { .first = 1 };
	const char *dir = tool_shunt_dir();
	struct dirent *de;
	DIR *d;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			o.json = 1;
		else if (!strcmp(argv[i], "-p") && i + 1 < argc)
			o.pid = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: shunt ss [--json] [-p PID]\n");
			return 2;
		}
	}
	if (o.json)
		printf("[");
	else
		printf("%-7s %-15s %-5s %-7s %-6s %-24s %-24s %12s %12s  %s\n", "PID", "COMM", "FD",
		       "ROLE", "MODE", "LOCAL", "PEER", "TX", "RX", "FALLBACK");
	d = opendir(dir);
	while (d && (de = readdir(d)))
		if (rdvdir_entry_kind(de->d_name))
			show_file(&o, dirfd(d), de->d_name);
	if (d)
		closedir(d);
	if (o.json)
		printf("\n]\n");
	return 0;
}
