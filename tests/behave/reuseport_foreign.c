/* Description: a port served by a SO_REUSEPORT group (nginx's `listen ...
 * reuseport`, HAProxy's default, a server restarted beside its old self)
 * whose members are not all under shunt.  The kernel hands each
 * connection to one socket of the group by a hash of its addresses; a
 * member shunt does not serve takes no offer.
 *
 * 1. two listening sockets of one process under shunt: every connection
 *    reaches one of them, accelerated;
 * 2. a third member, this program executed again without shunt: every
 *    connection answered by the socket the kernel picked, and all plain
 *    with reason reuseport-foreign (32) - before, each one the plain member
 *    got waited for a claim until the client gave up (200 ms,
 *    accept-timeout);
 * 3. the plain member gone: accelerated again once the client's look at
 *    the group (kept a second) is over.
 * NOT_OVER_RDMA: the group is looked at by the local rendezvous. */
#include "common.h"

#define CONNS 24

/* Each accepted connection: our tag, then its byte back; until killed. */
static void serve(const int *l, int n, char tag)
{
	struct pollfd p[2];

	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = l[i], .events = POLLIN };
	for (;;) {
		CHECK(poll(p, (nfds_t)n, -1) > 0);
		for (int i = 0; i < n; i++) {
			char b;
			int c;
			if (!(p[i].revents & POLLIN) || (c = accept(l[i], NULL, NULL)) < 0)
				continue;
			read_all(c, &b, 1);
			char out[2] = { tag, b };
			write_all(c, out, 2);
			close(c);
		}
	}
}

static int reuse_listener(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	CHECK(l >= 0);
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0);
	CHECK(bind(l, (void *)&a, sizeof a) == 0);
	CHECK(listen(l, 64) == 0);
	return l;
}

/* CONNS connections; how many each tag answered.  mode: 1 accelerated,
 * 0 plain with reason reuseport-foreign (under shunt). */
static void dial(const struct sockaddr_storage *ss, socklen_t len, int mode, int *got_a, int *got_f)
{
	*got_a = *got_f = 0;
	for (int i = 0; i < CONNS; i++) {
		char b = (char)('a' + i), r[2];
		int fd = connect_to(ss, len);
		if (mode)
			expect_mode(fd);
		else
			expect_plain_reason(fd, 32 /* reuseport-foreign */);
		write_all(fd, &b, 1);
		read_all(fd, r, 2);
		CHECK(r[1] == b);
		CHECK(r[0] == 'A' || r[0] == 'F');
		*(r[0] == 'A' ? got_a : got_f) += 1;
		CHECK(read(fd, r, 1) == 0);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l[2], a, f, st;
	pid_t ours, foreign;

	if (argc == 3 && !strcmp(argv[1], "foreign")) { /* the member without shunt */
		int lf = reuse_listener((uint16_t)atoi(argv[2]));
		CHECK(write(1, "r", 1) == 1);
		serve(&lf, 1, 'F');
	}
	deadline(60);
	l[0] = listen_on("127.0.0.1", &ss, &len);
	uint16_t port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	close(l[0]);
	l[0] = reuse_listener(port);
	l[1] = reuse_listener(port);
	CHECK((ours = fork()) >= 0);
	if (!ours) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		serve(l, 2, 'A');
	}
	close(l[0]);
	close(l[1]);

	dial(&ss, len, 1, &a, &f); /* 1. */
	CHECK(a == CONNS && f == 0);

	int ready[2];
	char r;
	CHECK(pipe(ready) == 0);
	CHECK((foreign = fork()) >= 0);
	if (!foreign) { /* 2. executed again, without shunt */
		char p[16], *args[] = { argv[0], "foreign", p, NULL };
		snprintf(p, sizeof p, "%u", port);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		unsetenv("LD_PRELOAD");
		CHECK(dup2(ready[1], 1) == 1);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(ready[1]);
	CHECK(read(ready[0], &r, 1) == 1);
	usleep(1100 * 1000); /* (the client's look at the group, a second old, is over) */
	dial(&ss, len, 0, &a, &f);
	fprintf(stderr, "with the plain member: %d answered by the shunt server, %d by the plain one\n", a, f);
	CHECK(a > 0 && f > 0);

	kill(foreign, SIGKILL); /* 3. */
	CHECK(waitpid(foreign, &st, 0) == foreign);
	usleep(1100 * 1000);
	dial(&ss, len, 1, &a, &f);
	CHECK(a == CONNS && f == 0);
	kill(ours, SIGKILL);
	CHECK(waitpid(ours, &st, 0) == ours);
	return 0;
}
