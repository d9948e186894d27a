/* SPDX-License-Identifier: MIT */
/*
 * procnet.c - a socket's addresses from /proc, for `shunt ss`: a plain
 * connection set up under load leaves its local address unasked
 * (SHUNT_STAT_LOCAL_UNKNOWN, two system calls saved on TCP's nine), and
 * the listing finds it the way ss(8) does - the descriptor's socket inode
 * in the owning process's /proc/PID/net/tcp and tcp6.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procnet.h"

/* "0100007F:1F90" (IPv4: one 32-bit word as the kernel prints a __be32 on
 * this host) or 32 hex digits (IPv6: four such words), then the port in
 * host order.  Returns the characters used, 0 if malformed. */
static size_t parse_addr(const char *s, struct shunt_addr *a)
{
	size_t n = strspn(s, "0123456789abcdefABCDEF");
	char word[9] = { 0 };

	if ((n != 8 && n != 32) || s[n] != ':')
		return 0;
	memset(a, 0, sizeof *a);
	for (size_t w = 0; w < n / 8; w++) {
		uint32_t v;
		memcpy(word, s + 8 * w, 8);
		v = (uint32_t)strtoul(word, NULL, 16);
		memcpy(n == 8 ? &a->ip[12] : &a->ip[4 * w], &v, 4);
	}
	if (n == 8)
		a->ip[10] = a->ip[11] = 0xff;
	size_t p = strspn(s + n + 1, "0123456789abcdefABCDEF");
	if (p != 4)
		return 0;
	memcpy(word, s + n + 1, 4);
	word[4] = 0;
	a->port = (uint16_t)strtoul(word, NULL, 16);
	return n + 1 + p;
}

int procnet_parse_line(const char *line, struct procnet_sock *out)
{
	const char *s = line;
	size_t n;
	unsigned long long ino;
	int field;
	char *end;

	while (*s == ' ')
		s++;
	n = strspn(s, "0123456789");
	if (!n || s[n] != ':' || s[n + 1] != ' ')
		return -EINVAL;
	s += n + 2;
	if (!(n = parse_addr(s, &out->local)) || s[n] != ' ')
		return -EINVAL;
	s += n + 1;
	if (!(n = parse_addr(s, &out->remote)))
		return -EINVAL;
	s += n;
	/* st, tx:rx, tr:when, retrnsmt, uid, timeout, then the inode */
	for (field = 0; field < 6; field++) {
		if (*s != ' ')
			return -EINVAL;
		while (*s == ' ')
			s++;
		n = strcspn(s, " \n");
		if (!n)
			return -EINVAL;
		s += n;
	}
	while (*s == ' ')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	ino = strtoull(s, &end, 10);
	if (errno || (*end != ' ' && *end != '\n' && *end))
		return -EINVAL;
	out->ino = ino;
	return 0;
}

static int by_ino(const void *a, const void *b)
{
	const struct procnet_sock *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

int procnet_load(struct procnet *t, unsigned pid)
{
	char path[64], line[512];

	t->n = 0;
	for (int v6 = 0; v6 < 2; v6++) {
		FILE *f;
		snprintf(path, sizeof path, "/proc/%u/net/tcp%s", pid, v6 ? "6" : "");
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(line, sizeof line, f)) { /* the header */
			fclose(f);
			continue;
		}
		while (fgets(line, sizeof line, f)) {
			struct procnet_sock so;
			if (procnet_parse_line(line, &so))
				continue;
			if (t->n == t->cap) {
				size_t cap = t->cap ? 2 * t->cap : 256;
				struct procnet_sock *v = realloc(t->v, cap * sizeof *v);
				if (!v) {
					fclose(f);
					return -ENOMEM;
				}
				t->v = v;
				t->cap = cap;
			}
			t->v[t->n++] = so;
		}
		fclose(f);
	}
	qsort(t->v, t->n, sizeof *t->v, by_ino);
	return 0;
}

const struct procnet_sock *procnet_of_fd(const struct procnet *t, unsigned pid, int fd)
{
	char path[64], link[64];
	struct procnet_sock key;
	unsigned long long ino;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/%u/fd/%d", pid, fd);
	n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return NULL;
	link[n] = 0;
	if (sscanf(link, "socket:[%llu]", &ino) != 1)
		return NULL;
	key.ino = ino;
	return t->n ? bsearch(&key, t->v, t->n, sizeof *t->v, by_ino) : NULL;
}

int procnet_holds(const struct procnet *t, uint16_t lport, const struct shunt_addr *remote)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].ino && (!lport || t->v[i].local.port == lport) &&
		    !memcmp(&t->v[i].remote, remote, sizeof *remote))
			return 1;
	return 0;
}

void procnet_free(struct procnet *t)
{
	free(t->v);
	*t = (struct procnet){ 0 };
}
