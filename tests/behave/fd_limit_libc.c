/* Description: a server under RLIMIT_NOFILE 256 accepts 120 connections
 * one by one - far below the limit under TCP - and after each one looks a
 * name up (getaddrinfo("localhost"): libc opens /etc/hosts itself),
 * reads a user entry (getpwuid: /etc/passwd) and receives a descriptor
 * with SCM_RIGHTS: all succeed, as under TCP.  None of these can be made
 * again after shunt gives its descriptors back (libc's opens are internal;
 * the kernel drops a passed descriptor that does not fit, MSG_CTRUNC), so
 * shunt keeps the last numbers below the limit for the program and gives
 * back as soon as one of the program's descriptors lands there.  Before,
 * a connection's duplicate could take the table's last number: the next
 * lookup failed (EAI_NONAME, errno EMFILE).  Two rounds, one descriptor
 * apart, so that either parity of the table's filling is met. */
#include "common.h"
#include <netdb.h>
#include <pwd.h>
#include <sys/resource.h>

#define LIMIT 256
#define N 120

static int server(int l, int extra)
{
	struct rlimit rl;
	int sp[2], fds[N];

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = LIMIT;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	for (int i = 0; i < extra; i++)
		CHECK(dup(0) >= 0);
	for (int i = 0; i < N; i++) {
		struct addrinfo *ai = NULL;
		int r, got;
		CHECK((fds[i] = accept(l, NULL, NULL)) >= 0);
		if (i < 8)
			expect_mode(fds[i]);
		errno = 0;
		r = getaddrinfo("localhost", "80", NULL, &ai);
		if (r) {
			fprintf(stderr, "connection %d: getaddrinfo: %s (errno %s)\n", i + 1, gai_strerror(r),
				strerror(errno));
			return 1;
		}
		freeaddrinfo(ai);
		CHECK(getpwuid(getuid()) != NULL);
		send_fd(sp[0], 0);
		got = recv_fd(sp[1]);
		CHECK(got >= 0);
		close(got);
	}
	echo_each(fds, N);
	return 0;
}

int main(void)
{
	deadline(120);
	index_echo_rounds(2, N, server);
	return 0;
}
