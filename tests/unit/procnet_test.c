/* Description: `shunt ss` finding a socket's local address in /proc
 * (tools/procnet.c): this process's own IPv4 and IPv6 loopback
 * connections, looked up by descriptor, give exactly what getsockname()
 * and getpeername() give; a descriptor that is not a socket, or a socket
 * not in the table, gives nothing; malformed lines (every truncation of a
 * real one, bad hex, a missing inode) are refused. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../src/tools/procnet.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void to_addr(struct shunt_addr *a, const struct sockaddr_storage *ss)
{
	memset(a, 0, sizeof *a);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		a->ip[10] = a->ip[11] = 0xff;
		memcpy(&a->ip[12], &in->sin_addr, 4);
		a->port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		memcpy(a->ip, &in6->sin6_addr, 16);
		a->port = ntohs(in6->sin6_port);
	}
}

/* A connected pair over loopback of this family; returns 0 if the family
 * is not available here (no IPv6). */
static int pair(int fam, int *cl, int *sv)
{
	struct sockaddr_storage a = { 0 };
	socklen_t al = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int l = socket(fam, SOCK_STREAM, 0);

	CHECK(l >= 0);
	a.ss_family = (sa_family_t)fam;
	if (fam == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	if (bind(l, (void *)&a, al) || listen(l, 4) || getsockname(l, (void *)&a, &al)) {
		close(l);
		return 0;
	}
	*cl = socket(fam, SOCK_STREAM, 0);
	CHECK(*cl >= 0 && !connect(*cl, (void *)&a, al));
	*sv = accept(l, NULL, NULL);
	CHECK(*sv >= 0);
	close(l);
	return 1;
}

static void check_fd(const struct procnet *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	struct shunt_addr l, r;
	const struct procnet_sock *so = procnet_of_fd(t, (unsigned)getpid(), fd);

	CHECK(so);
	CHECK(!getsockname(fd, (void *)&ss, &sl));
	to_addr(&l, &ss);
	sl = sizeof ss;
	CHECK(!getpeername(fd, (void *)&ss, &sl));
	to_addr(&r, &ss);
	CHECK(!memcmp(&so->local, &l, sizeof l));
	CHECK(!memcmp(&so->remote, &r, sizeof r));
}

int main(void)
{
	static const char line4[] =
		"   3: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 20 4 30 10 -1\n";
	static const char line6[] =
		"   0: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2939 1 0000000000000000 100 0 0 10 0\n";
	struct procnet t = { 0 };
	struct procnet_sock so;
	int c4, s4, c6, s6, have6, nfam = 0;
	char buf[sizeof line4];

	/* known lines */
	CHECK(!procnet_parse_line(line4, &so));
	CHECK(so.ino == 123456 && so.local.port == 8080 && so.remote.port == 0xd431);
	CHECK(so.local.ip[10] == 0xff && so.local.ip[12] == 127 && so.local.ip[15] == 1);
	CHECK(!procnet_parse_line(line6, &so));
	CHECK(so.ino == 2939 && so.local.port == 22 && so.local.ip[15] == 1 && so.local.ip[0] == 0);
	/* every truncation of a real line before its inode is refused */
	for (size_t n = 0; n < strlen(line4); n++) {
		memcpy(buf, line4, n);
		buf[n] = 0;
		if (n < (size_t)(strstr(line4, "123456") - line4) + 1)
			CHECK(procnet_parse_line(buf, &so));
	}
	CHECK(procnet_parse_line("   3: 0100007G:1F90 0100007F:D431 01 0:0 0:0 0 0 0 5\n", &so));
	CHECK(procnet_parse_line("   3: 0100007F:1F90 0100007F:D431 01 0:0 0:0 0 0 0 x\n", &so));
	CHECK(procnet_parse_line("   3: 0100007F:1F9 0100007F:D431 01 0:0 0:0 0 0 0 5\n", &so));
	CHECK(procnet_parse_line("   3: 0100007F:1F90 0100007F:D431 01 0:0 0:0 0 0 0 99999999999999999999999\n", &so));
	CHECK(!procnet_parse_line("   3: 0100007F:1F90 0100007F:D431 01 0:0 0:0 0 0 0 5\n", &so) && so.ino == 5);

	/* this process's own sockets, both ends of each connection */
	CHECK(pair(AF_INET, &c4, &s4));
	have6 = pair(AF_INET6, &c6, &s6);
	CHECK(!procnet_load(&t, (unsigned)getpid()));
	check_fd(&t, c4);
	check_fd(&t, s4);
	nfam++;
	if (have6) {
		check_fd(&t, c6);
		check_fd(&t, s6);
		nfam++;
	}
	/* not a socket; a socket made after the table was read */
	{
		int p[2], late, late_s;
		CHECK(!pipe(p));
		CHECK(!procnet_of_fd(&t, (unsigned)getpid(), p[0]));
		CHECK(pair(AF_INET, &late, &late_s));
		CHECK(!procnet_of_fd(&t, (unsigned)getpid(), late));
	}
	procnet_free(&t);
	printf("procnet: ok (%d families)\n", nfam);
	return 0;
}
