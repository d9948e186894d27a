/* Description: an arena segment's free names the use it ends
 * (src/transport/shm/arena.c).  Both sides of a connection may drop their
 * last owner at the same moment; each may see the other's 0 and try to
 * free the segment.  If the first free lets a server thread take the
 * segment again before the second side's free lands, that second free
 * must fail: a segment freed under a live connection is handed to the next
 * one too (two connections on one pair of rings, or a client finding
 * another nonce in the segment it was answered with - the cut connection
 * of session 18's benchmark).  Two threads drop the two last owners in
 * step while the main thread takes the segment again the moment it is
 * free, many times; the segment it took must stay taken.  Built with the
 * fault hooks: SHUNT_FAULT_SEG_FREE_US pauses each free a random while
 * (a thread preempted there), so that the race comes in most rounds
 * where both sides see the other's 0 - without it the window is a few
 * instructions wide and the old free survived 200,000 rounds here. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <stdlib.h>
#include "../../src/shim/shim.h"
#include "../../src/transport/shm/arena.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define ROUNDS 4000
#define PEER 0x5eed

static struct arena *A;
static unsigned S;
static pthread_barrier_t go;
static _Atomic unsigned dropped;

static void *dropper(void *arg)
{
	int side = (int)(long)arg;

	for (unsigned r = 1; r <= ROUNDS; r++) {
		pthread_barrier_wait(&go);
		arena_drop_owner(A, S, side);
		__atomic_add_fetch(&dropped, 1, __ATOMIC_ACQ_REL);
	}
	return NULL;
}

static int seg_busy(void)
{
	return __atomic_load_n(&arena_seg(A, S)->in_use, __ATOMIC_ACQUIRE) & 1;
}

int main(void)
{
	pthread_t t[2];
	struct arena *a;
	unsigned seg, caught = 0, early = 0;
	int send_fds;

	setenv("SHUNT_FAULT_SEG_FREE_US", "200", 1);
	CHECK(!pthread_barrier_init(&go, NULL, 3));
	/* every segment of one arena taken; the last one cycles */
	for (unsigned i = 0; i < SHUNT_ARENA_SLOTS; i++) {
		CHECK(arena_server_take(PEER, i + 1, &a, &seg, &send_fds) == 0);
		CHECK(!A || a == A);
		A = a;
		S = seg;
		CHECK(seg_busy());
	}
	/* a lone drop of each side, in turn: the second frees */
	CHECK(arena_drop_owner(A, S, 0) == 1 && seg_busy());
	CHECK(arena_drop_owner(A, S, 1) == 1 && !seg_busy());
	CHECK(arena_server_take(PEER, 99, &a, &seg, &send_fds) == 0 && a == A && seg == S && seg_busy());

	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, dropper, (void *)(long)i));
	for (unsigned r = 1; r <= ROUNDS; r++) {
		pthread_barrier_wait(&go);
		while (seg_busy())
			sched_yield();
		CHECK(arena_server_take(PEER, 1000 + r, &a, &seg, &send_fds) == 0);
		CHECK(a == A && seg == S);
		/* taken again while a side was still in its drop: the race */
		early += __atomic_load_n(&dropped, __ATOMIC_ACQUIRE) != 2 * r;
		while (__atomic_load_n(&dropped, __ATOMIC_ACQUIRE) != 2 * r)
			sched_yield();
		/* both drops of this round are done: ours must still hold */
		if (!seg_busy()) {
			fprintf(stderr, "round %u: a late free released the segment taken again\n", r);
			caught++;
			break;
		}
		CHECK(arena_seg(A, S)->owner[0] == 1 && arena_seg(A, S)->owner[1] == 1);
	}
	if (caught) /* the droppers wait for rounds that will not come */
		exit(1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	/* the rounds must have raced, or the test proved nothing */
	CHECK(early > ROUNDS / 20);
	printf("arena_test: ok (%u rounds, %u taken again before the late drop ended)\n", ROUNDS, early);
	return 0;
}
