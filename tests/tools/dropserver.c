/* Description: a server whose listening socket is made by root and whose
 * connections are accepted and served by another user, as a pre-fork
 * server's workers are (nginx, sshd): the listener is created, then the
 * process drops to UID before accept().  It exchanges "hello"/"world" and
 * prints "role=server mode=M reason=R" (getsockopt(SOL_SHUNT)).
 *   dropserver PORT UID
 *   dropserver PORT UID early  drops to UID before it makes its listener
 *                              (mosquitto: the shim, started as root,
 *                              opened the directory as root's)
 *   dropserver PORT UID late   serves a connection as root first, then
 *                              drops to UID and serves another (an arena
 *                              its client knows by root's uid: the second
 *                              answer must bring it again, by message)
 *   dropserver client PORT [N] the other end, N connections one after
 *                              another, "role=client ..." each */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <grp.h>

static void report(const char *role, int fd)
{
	struct shunt_info in;
	socklen_t l = sizeof in;

	if (getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &in, &l))
		printf("role=%s mode=none\n", role);
	else
		printf("role=%s mode=%s reason=%u\n", role, in.mode == 1 ? "shm" : "tcp", in.reason);
}

static void drop(const char *uid)
{
	CHECK(setgroups(0, NULL) == 0 && setgid((gid_t)atoi(uid)) == 0 && setuid((uid_t)atoi(uid)) == 0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char b[5];
	int s, c, one = 1;

	CHECK(argc == 3 || argc == 4);
	if (!strcmp(argv[1], "client")) {
		a.sin_port = htons((uint16_t)atoi(argv[2]));
		for (int i = 0; i < (argc == 4 ? atoi(argv[3]) : 1); i++) {
			c = socket(AF_INET, SOCK_STREAM, 0);
			CHECK(connect(c, (void *)&a, sizeof a) == 0);
			write_all(c, "hello", 5);
			read_all(c, b, 5);
			CHECK(!memcmp(b, "world", 5));
			report("client", c);
			close(c);
		}
		return 0;
	}
	int late = argc == 4 && !strcmp(argv[3], "late");
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	if (argc == 4 && !late)
		drop(argv[2]);
	s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	CHECK(bind(s, (void *)&a, sizeof a) == 0 && listen(s, 8) == 0);
	if (argc == 3)
		drop(argv[2]);
	printf("listening\n");
	fflush(stdout);
	for (int i = 0; i < 1 + late; i++) {
		if (late && i == 1)
			drop(argv[2]);
		c = accept(s, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, b, 5);
		CHECK(!memcmp(b, "hello", 5));
		write_all(c, "world", 5);
		report("server", c);
		close(c);
	}
	return 0;
}
