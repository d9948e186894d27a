/* Description: the TCP-option exchange of shuntd's sock_ops program, seen
 * from its socket-cookie array: a registered client and listener agree
 * (client PEER_OK, the accepted socket records the client's nonce); a plain
 * client to a registered listener leaves no trace and no option; a
 * registered client to a plain listener learns PEER_NONE.  Data flows in
 * every case.  Run inside the cgroup shuntd is attached to.
 *   optcheck AGENT_SOCKET
 *   optcheck AGENT_SOCKET replay PORT   (a server that echoes options
 *                                         listens on 127.0.0.1:PORT) */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <sys/mman.h>
#include <sys/un.h>
#include "../../src/agent/agent.h"

static struct shunt_agent_entry *tab;

static int get_map(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	char tag[8];
	struct iovec iov = { tag, sizeof tag };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof u.buf };
	int s = socket(AF_UNIX, SOCK_STREAM, 0), fd;

	strncpy(sun.sun_path, path, sizeof sun.sun_path - 1);
	CHECK(connect(s, (void *)&sun, sizeof sun) == 0);
	CHECK(recvmsg(s, &mh, 0) == sizeof tag && CMSG_FIRSTHDR(&mh));
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fd);
	close(s);
	return fd;
}

static uint64_t cookie_of(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof c;
	CHECK(getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l) == 0 && c);
	return c;
}

static struct shunt_agent_entry *slot(uint64_t cookie)
{
	return &tab[cookie & (SHUNT_AGENT_SOCKS - 1)];
}

static void reg(int fd, uint64_t nonce, uint32_t state)
{
	struct shunt_agent_entry *e = slot(cookie_of(fd));
	e->cookie = cookie_of(fd);
	e->nonce = nonce;
	__atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

static int listener(int registered, struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof *a;
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (registered)
		reg(l, 0, SHUNT_AG_LISTENER);
	CHECK(bind(l, (void *)a, sizeof *a) == 0 && listen(l, 8) == 0);
	CHECK(getsockname(l, (void *)a, &al) == 0);
	return l;
}

/* One connection; returns the client's final state and the server entry. */
static uint32_t run(int reg_listener, int reg_client, uint64_t nonce, struct shunt_agent_entry *srv)
{
	struct sockaddr_in a;
	int l = listener(reg_listener, &a), c = socket(AF_INET, SOCK_STREAM, 0), s;
	char b = 'x';

	if (reg_client)
		reg(c, nonce, SHUNT_AG_CLIENT_WANT);
	CHECK(connect(c, (void *)&a, sizeof a) == 0);
	s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	write_all(c, &b, 1);
	read_all(s, &b, 1);
	write_all(s, &b, 1);
	read_all(c, &b, 1);
	*srv = *slot(cookie_of(s));
	if (srv->cookie != cookie_of(s))
		memset(srv, 0, sizeof *srv);
	uint32_t st = reg_client ? slot(cookie_of(c))->state : 0;
	close(c);
	close(s);
	close(l);
	return st;
}

int main(int argc, char **argv)
{
	struct shunt_agent_entry srv;
	int fd;

	CHECK(argc == 2 || argc == 4);
	fd = get_map(argv[1]);
	tab = mmap(NULL, sizeof *tab * SHUNT_AGENT_SOCKS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(tab != MAP_FAILED);
	if (argc == 4) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int c = socket(AF_INET, SOCK_STREAM, 0);
		reg(c, 0x0badc0ffee0ddf00ull, SHUNT_AG_CLIENT_WANT);
		CHECK(connect(c, (void *)&a, sizeof a) == 0);
		CHECK(slot(cookie_of(c))->state == SHUNT_AG_CLIENT_PEER_REPLAY);
		write_all(c, "ping\n", 5);
		close(c);
		printf("  shunt client + a server replaying options: detected (PEER_REPLAY)\n");
		return 0;
	}

	CHECK(run(1, 1, 0x1122334455667788ull, &srv) == SHUNT_AG_CLIENT_PEER_OK);
	CHECK(srv.state == SHUNT_AG_SERVER_SAW && srv.nonce == 0x1122334455667788ull);
	printf("  shunt client + shunt listener: option answered, nonce seen by the server\n");

	CHECK(run(1, 0, 0, &srv) == 0);
	CHECK(srv.state == 0);
	printf("  plain client + shunt listener: no option, no trace\n");

	CHECK(run(0, 1, 42, &srv) == SHUNT_AG_CLIENT_PEER_NONE);
	CHECK(srv.state == 0);
	printf("  shunt client + plain listener: no answer, client knows (PEER_NONE)\n");
	return 0;
}
