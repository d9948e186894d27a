/* Description: the registry's advice words written against the protocol by
 * someone who may write the port's file (a member of a shared directory,
 * or a program of the same user): reserved and slots_used at values no
 * client writes (one that made the reserving client divide by zero), the
 * offer buckets' sleeper counts and words at random.  Connections stay
 * correct - every byte echoed in order - and accelerated; nothing
 * crashes.  NOT_OVER_RDMA: the registry is the local rendezvous. */
#include "common.h"
#include <sys/mman.h>
#include "shunt/wire.h"

#define ROUNDS 40

/* The port's registry, mapped writable (NULL: not under shunt). */
static struct shunt_registry *registry(const struct sockaddr_storage *ss)
{
	const char *dir = getenv("SHUNT_DIR");
	char path[512];
	struct shunt_registry *r;
	int fd;

	if (!dir || !getenv("SHUNT_EXPECT"))
		return NULL;
	snprintf(path, sizeof path, "%s/p%u", dir, ntohs(((const struct sockaddr_in *)ss)->sin_port));
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(r != MAP_FAILED);
	close(fd);
	return r;
}

int main(void)
{
	/* reserved: never 0xffffffff - the next client's +1 would make it 0,
	 * and a 0 sends servers the fast way (plain): slow, the documented
	 * cost of that lie, not tested here */
	static const uint32_t words[] = { 0x7ffffff8u, 0xfffffff8u, 0x80000000u, 256, 257, 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	struct shunt_registry *r;

	deadline(60);
	pid_t pid = test_fork();
	if (!pid) {
		for (int i = 0; i < ROUNDS + 1; i++) {
			char buf[300];
			int c = accept(l, NULL, NULL);
			CHECK(c >= 0);
			expect_mode(c);
			read_all(c, buf, sizeof buf);
			write_all(c, buf, sizeof buf);
			close(c);
		}
		_exit(0);
	}
	close(l);
	echo_new_connection(&ss, len, 0, 0); /* the server's file exists from here on */
	r = registry(&ss);
	for (int i = 1; i <= ROUNDS; i++) {
		if (r) {
			uint32_t w = words[i % (int)(sizeof words / sizeof words[0])];
			__atomic_store_n(&r->reserved, w, __ATOMIC_SEQ_CST);
			/* past the slots, never below them: a value too low
			 * hides offers until their clients' deadline - a slow
			 * connection, the documented cost of that lie */
			__atomic_store_n(&r->slots_used, ~(uint32_t)i, __ATOMIC_SEQ_CST);
			for (int b = 0; b < SHUNT_REG_WAIT; b++) {
				__atomic_store_n(&r->offer_wait[b].waiters, w ^ (uint32_t)b, __ATOMIC_SEQ_CST);
				__atomic_store_n(&r->offer_wait[b].seq, w + (uint32_t)i, __ATOMIC_SEQ_CST);
			}
		}
		echo_new_connection(&ss, len, (uint32_t)i, 0);
	}
	CHECK(wait_child(pid) == 0);
	return 0;
}
