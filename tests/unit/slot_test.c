/* Description: an offer slot's life in the port registry
 * (src/setup/registry.c, include/shunt/wire.h): whom a reservation may
 * reap and what an actor of an ended reservation can still do.
 * - A slot whose client process is gone and whose reservation is over 30 s
 *   old is reaped by the next client that scans it, and taken in the next
 *   generation; a live client's, however old, is not; one still
 *   RESERVING (its client between taking it and naming itself) only after
 *   10 minutes - before the fix a slot taken a moment ago looked 30 s old
 *   (its time was written after it was taken) and its previous owner dead,
 *   and it was taken twice (tests/integration/reserve_race.sh has the race
 *   itself).
 * - A reservation's time is in the slot as soon as the slot is taken.
 * - The state word's generation fences off ended reservations: a free, or
 *   any CAS, in an old generation changes nothing (a server stalled past
 *   its client's wait; a reaper whose slot was reaped and taken meanwhile).
 * The library is linked in; the registry is a real file in SHUNT_DIR. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "../../src/setup/rdv.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define DEAD_ID 0x0dead0000000beefull /* no s<id> file: no live process */

static struct portreg *P;

static uint32_t word(unsigned i)
{
	return __atomic_load_n(&P->r->slots[i].state, __ATOMIC_ACQUIRE);
}

/* Every slot taken and young (not reapable), but slot k: state st,
 * reserved `age_s` seconds ago by process `owner`. */
static void fill(unsigned k, uint32_t st, uint64_t age_s, uint64_t owner)
{
	uint64_t now = shunt_now_ns();

	for (unsigned i = 0; i < SHUNT_REG_SLOTS; i++) {
		struct shunt_slot *sl = &P->r->slots[i];
		uint32_t gen = SHUNT_SLOT_GEN(word(i));
		sl->stamp_ns = i == k ? now - age_s * 1000000000ull : now;
		sl->sock_id = i == k ? owner : DEAD_ID;
		__atomic_store_n(&sl->state, gen | (i == k ? st : SLOT_ABANDONED), __ATOMIC_RELEASE);
	}
	P->r->reserved = SHUNT_REG_SLOTS;
}

static struct shunt_slot *reserve(uint32_t *gen)
{
	struct shunt_addr dst = { .port = 1 };
	uint64_t nonce;

	return rdv_slot_reserve(P, 42, &nonce, &dst, gen);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/shunt-slot-test.XXXXXX";
	uint64_t me, before;
	struct shunt_slot *sl;
	uint32_t gen, g0;

	(void)argc;
	if (!getenv("SLOT_TEST_CHILD")) { /* the library reads SHUNT_DIR when it loads */
		char rm[64];
		int st;
		pid_t pid;
		CHECK(mkdtemp(dir));
		setenv("SHUNT_DIR", dir, 1);
		setenv("SLOT_TEST_CHILD", "1", 1);
		CHECK((pid = fork()) >= 0);
		if (!pid) {
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		snprintf(rm, sizeof rm, "rm -rf %s", dir);
		CHECK(system(rm) == 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	CHECK((P = rdv_reg_get(40000 + (uint16_t)(getpid() % 20000), 1, 0)) != NULL);
	CHECK(rdv_csock_get(&me) == 0); /* our own s<id>: a live process */
	CHECK(shunt_proc_alive(me) && !shunt_proc_alive(DEAD_ID));

	/* a fresh registry: a reservation's time is there once it is taken */
	before = shunt_now_ns();
	CHECK((sl = reserve(&gen)) != NULL);
	CHECK(SHUNT_SLOT_STATE(word((unsigned)(sl - P->r->slots))) == SLOT_CONNECTING);
	CHECK(sl->stamp_ns >= before && sl->stamp_ns <= shunt_now_ns() && sl->sock_id == 42);
	CHECK(SHUNT_SLOT_GEN(word((unsigned)(sl - P->r->slots))) == gen && gen == SHUNT_SLOT_GEN_ONE);
	CHECK(P->r->reserved == 1);

	/* an ended reservation's actors change nothing */
	g0 = gen;
	rdv_slot_free(P, sl, g0);
	CHECK(SHUNT_SLOT_STATE(word((unsigned)(sl - P->r->slots))) == SLOT_FREE && P->r->reserved == 0);
	CHECK(rdv_slot_cas(sl, gen, SLOT_FREE, SLOT_CONNECTING)); /* (as a new reservation would) */
	__atomic_store_n(&sl->state, (g0 + SHUNT_SLOT_GEN_ONE) | SLOT_OFFERED, __ATOMIC_RELEASE);
	P->r->reserved = 1;
	CHECK(!rdv_slot_cas(sl, g0, SLOT_OFFERED, SLOT_CLAIMED));   /* a stale server's claim */
	CHECK(!rdv_slot_cas(sl, g0, SLOT_CLAIMED, SLOT_ANSWERED));  /* ... or answer */
	rdv_slot_free(P, sl, g0);                                  /* a stale client's free */
	CHECK(word((unsigned)(sl - P->r->slots)) == ((g0 + SHUNT_SLOT_GEN_ONE) | SLOT_OFFERED));
	CHECK(P->r->reserved == 1);

	/* a dead client's slot, 31 s old: reaped and taken, next generation */
	fill(7, SLOT_OFFERED, 31, DEAD_ID);
	g0 = SHUNT_SLOT_GEN(word(7));
	CHECK((sl = reserve(&gen)) == &P->r->slots[7]);
	CHECK(gen == g0 + SHUNT_SLOT_GEN_ONE && SHUNT_SLOT_STATE(word(7)) == SLOT_CONNECTING);
	CHECK(P->r->reserved == SHUNT_REG_SLOTS); /* -1 reaped, +1 taken */

	/* a live client's, however old: not */
	fill(9, SLOT_OFFERED, 3600, me);
	CHECK(reserve(&gen) == NULL && SHUNT_SLOT_STATE(word(9)) == SLOT_OFFERED);
	/* a dead client's, 29 s old: not yet */
	fill(9, SLOT_CLAIMED, 29, DEAD_ID);
	CHECK(reserve(&gen) == NULL && SHUNT_SLOT_STATE(word(9)) == SLOT_CLAIMED);
	/* RESERVING (its owner not named yet - here a dead one's name from
	 * before): not at 31 s, at 601 s */
	fill(11, SLOT_RESERVING, 31, DEAD_ID);
	CHECK(reserve(&gen) == NULL && SHUNT_SLOT_STATE(word(11)) == SLOT_RESERVING);
	fill(11, SLOT_RESERVING, 601, DEAD_ID);
	CHECK(reserve(&gen) == &P->r->slots[11]);

	printf("slot_test: ok\n");
	return 0;
}
