/* Description: attack on a shared directory's server side - a member
 * writes an offer for another user's TCP connection (a plain client's, to
 * a shunt server of the shared directory) naming a process of its own as
 * the connection's client.  A server that answered it would give that
 * process the connection's rings: the member would read the victim's
 * request and answer for it.  The server must check that the user who
 * owns the connection's client end is the named process's, and refuse.
 *   fakeoffer DIR PORT VPORT SYNC [mapped]
 * The victim's connection is 127.0.0.1:VPORT -> 127.0.0.1:PORT; once it
 * is established the offer goes into p<PORT>'s slots and SYNC is made
 * (the server accepts then).  The named process is this one: its own
 * c<id> socket (bound here), or with "mapped" - run under the shim - the
 * shim's, after a connection of its own to PORT, so that the server maps
 * an arena with this process (its answer would go in the slot: the
 * server's remembered check).  Prints "offer state S" as the server left
 * it (5 FAILED: refused; 7 ANSWERED: the server answered the member) and
 * "messages N" (accept messages to our own socket). */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <dirent.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include "shunt/wire.h"

static void v4(struct shunt_addr *a, int port)
{
	memset(a, 0, sizeof *a);
	a->ip[10] = a->ip[11] = 0xff;
	a->ip[12] = 127;
	a->ip[15] = 1;
	a->port = (uint16_t)port;
}

/* Is 127.0.0.1:vport -> 127.0.0.1:port there (/proc/net/tcp; in any
 * state: the victim may have shut its side down already)? */
static int established(int vport, int port)
{
	char line[512], want[64];
	FILE *f = fopen("/proc/net/tcp", "r");
	int found = 0;

	CHECK(f != NULL);
	snprintf(want, sizeof want, "0100007F:%04X 0100007F:%04X ", vport, port);
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* The shim's socket in dir (mapped): the one c<id> of our user there. */
static uint64_t shim_sock_id(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint64_t id = 0;
	int n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (e->d_name[0] == 'c' && !lstat(path, &st) && S_ISSOCK(st.st_mode) && st.st_uid == getuid()) {
			id = strtoull(e->d_name + 1, NULL, 16);
			n++;
		}
	}
	closedir(d);
	CHECK(n == 1);
	return id;
}

int main(int argc, char **argv)
{
	int port, vport, mapped = argc == 6 && !strcmp(argv[5], "mapped"), own = -1, rfd, msgs = 0;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct shunt_registry *r;
	struct shunt_slot *sl = NULL;
	char path[PATH_MAX], buf[512];
	uint64_t sock_id;
	uint32_t st = 0;
	struct stat ns;
	double end;

	CHECK(argc == 5 || mapped);
	port = atoi(argv[2]);
	vport = atoi(argv[3]);
	if (mapped) { /* a connection of our own, for real: the server's arena */
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct shunt_info in;
		socklen_t l = sizeof in;
		own = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(own >= 0 && connect(own, (void *)&a, sizeof a) == 0);
		write_all(own, "mine\n", 5);
		read_all(own, buf, 5);
		CHECK(!getsockopt(own, SOL_SHUNT, SHUNT_INFO, &in, &l) && in.mode == 1);
		sock_id = shim_sock_id(argv[1]);
	} else { /* a socket of our own, as a client process's */
		sock_id = 0x5eed000000000001ull;
		own = socket(AF_UNIX, SOCK_DGRAM, 0);
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s/c%016llx", argv[1], (unsigned long long)sock_id);
		unlink(sun.sun_path);
		CHECK(own >= 0 && bind(own, (void *)&sun, sizeof sun) == 0);
		chmod(sun.sun_path, 0666);
	}
	printf("member ready\n");
	fflush(stdout);
	for (end = now_s() + 10; !established(vport, port); usleep(2000))
		CHECK(now_s() < end);
	snprintf(path, sizeof path, "%s/p%d", argv[1], port);
	rfd = open(path, O_RDWR);
	CHECK(rfd >= 0);
	r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
	CHECK(r != MAP_FAILED);
	CHECK(stat("/proc/self/ns/net", &ns) == 0);
	for (unsigned i = 0; i < SHUNT_REG_SLOTS && !sl; i++) { /* a free slot, taken as a client does */
		uint32_t w = __atomic_load_n(&r->slots[i].state, __ATOMIC_ACQUIRE);
		uint32_t gen = SHUNT_SLOT_GEN(w) + SHUNT_SLOT_GEN_ONE;
		if (SHUNT_SLOT_STATE(w) != SLOT_FREE ||
		    !__atomic_compare_exchange_n(&r->slots[i].state, &w, gen | SLOT_RESERVING, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		sl = &r->slots[i];
		sl->client_pid = (uint32_t)getpid();
		sl->nonce = 0x0ffe4ed0ffe4ed01ull;
		sl->sock_id = sock_id;
		sl->netns = (uint64_t)ns.st_ino;
		sl->stamp_ns = 0;
		v4(&sl->tuple.client, vport); /* the victim's connection */
		v4(&sl->tuple.server, port);
		sl->answer_seg = 0;
		__atomic_add_fetch(&r->reserved, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&r->slots_used, __ATOMIC_ACQUIRE) <= i)
			__atomic_store_n(&r->slots_used, i + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&sl->state, gen | SLOT_OFFERED, __ATOMIC_RELEASE);
	}
	CHECK(sl != NULL);
	printf("offer written for 127.0.0.1:%d\n", vport);
	fflush(stdout);
	rfd = open(argv[4], O_CREAT | O_WRONLY, 0644); /* the server accepts now */
	CHECK(rfd >= 0);
	close(rfd);
	/* the server's decision: any state but OFFERED and CLAIMED */
	for (end = now_s() + 10; now_s() < end; usleep(1000)) {
		st = SHUNT_SLOT_STATE(__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE));
		if (st != SLOT_OFFERED && st != SLOT_CLAIMED)
			break;
	}
	usleep(200000);
	if (!mapped) /* whatever reached our socket */
		while (recv(own, buf, sizeof buf, MSG_DONTWAIT) >= 0)
			msgs++;
	printf("offer state %u\nmessages %d\n", st, msgs);
	if (!mapped)
		unlink(sun.sun_path);
	return 0;
}
