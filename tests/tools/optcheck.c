/* Description: the TCP-option exchange of shuntd's sock_ops program, seen
 * through the sockets themselves (getsockopt at SHUNT_AG_SOL): a registered
 * client and listener agree (client PEER_OK, the accepted socket records the
 * client's nonce); a plain client to a registered listener leaves no trace
 * and no option; a registered client to a plain listener learns PEER_NONE.
 * Data flows in every case.  Run inside the cgroup shuntd is attached to.
 *   optcheck              the three cases above
 *   optcheck replay PORT  (a server that echoes options listens on
 *                          127.0.0.1:PORT): PEER_REPLAY
 *   optcheck absent       no agent here: ENOPROTOOPT both ways */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include "../../src/common/agent.h"

static void reg(int fd, int opt, uint64_t nonce)
{
	CHECK(setsockopt(fd, SHUNT_AG_SOL, opt, &nonce, opt == SHUNT_AG_OPT_CLIENT ? 8 : 4) == 0);
}

static struct shunt_agent_verdict verdict(int fd)
{
	struct shunt_agent_verdict v;
	socklen_t l = sizeof v;

	CHECK(getsockopt(fd, SHUNT_AG_SOL, SHUNT_AG_OPT_VERDICT, &v, &l) == 0 && l == sizeof v);
	return v;
}

static int listener(int registered, struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof *a;
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (registered)
		reg(l, SHUNT_AG_OPT_LISTENER, 1);
	CHECK(bind(l, (void *)a, sizeof *a) == 0 && listen(l, 8) == 0);
	CHECK(getsockname(l, (void *)a, &al) == 0);
	return l;
}

/* One connection; returns the client's final state and the server's verdict. */
static uint32_t run(int reg_listener, int reg_client, uint64_t nonce, struct shunt_agent_verdict *srv)
{
	struct sockaddr_in a;
	int l = listener(reg_listener, &a), c = socket(AF_INET, SOCK_STREAM, 0), s;
	char b = 'x';

	if (reg_client)
		reg(c, SHUNT_AG_OPT_CLIENT, nonce);
	CHECK(connect(c, (void *)&a, sizeof a) == 0);
	s = accept(l, NULL, NULL);
	CHECK(s >= 0);
	write_all(c, &b, 1);
	read_all(s, &b, 1);
	write_all(s, &b, 1);
	read_all(c, &b, 1);
	*srv = verdict(s);
	uint32_t st = verdict(c).state;
	close(c);
	close(s);
	close(l);
	return st;
}

int main(int argc, char **argv)
{
	struct shunt_agent_verdict srv;

	if (argc == 2 && !strcmp(argv[1], "absent")) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		uint64_t n = 1;
		struct shunt_agent_verdict v;
		socklen_t l = sizeof v;
		CHECK(setsockopt(c, SHUNT_AG_SOL, SHUNT_AG_OPT_CLIENT, &n, 8) < 0 && errno == ENOPROTOOPT);
		CHECK(getsockopt(c, SHUNT_AG_SOL, SHUNT_AG_OPT_VERDICT, &v, &l) < 0 &&
		      (errno == ENOPROTOOPT || errno == EOPNOTSUPP));
		printf("  no agent: the kernel refuses the option (ENOPROTOOPT / EOPNOTSUPP)\n");
		return 0;
	}
	if (argc == 3) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int c = socket(AF_INET, SOCK_STREAM, 0);
		reg(c, SHUNT_AG_OPT_CLIENT, 0x0badc0ffee0ddf00ull);
		CHECK(connect(c, (void *)&a, sizeof a) == 0);
		CHECK(verdict(c).state == SHUNT_AG_CLIENT_PEER_REPLAY);
		write_all(c, "ping\n", 5);
		close(c);
		printf("  shunt client + a server replaying options: detected (PEER_REPLAY)\n");
		return 0;
	}
	CHECK(argc == 1);
	CHECK(run(1, 1, 0x1122334455667788ull, &srv) == SHUNT_AG_CLIENT_PEER_OK);
	if (srv.state != SHUNT_AG_SERVER_SAW || srv.nonce != 0x1122334455667788ull)
		fprintf(stderr, "server verdict: state %u nonce %llx\n", srv.state, (unsigned long long)srv.nonce);
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
