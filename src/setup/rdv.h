/* SPDX-License-Identifier: MIT */
/*
 * rdv.h - the rendezvous (between its files: registry.c, msgsock.c,
 * client.c, server.c): deciding, without a byte on the TCP stream, that
 * both ends of one kernel TCP connection run shunt, and handing them a
 * shared-memory segment.  (The in-band handshake, for paths the registry
 * cannot see, is inband.c; the agent's socket options agent.c.)
 *
 *   client connect()                         server accept()
 *   ----------------                         ---------------
 *   registry p<port> has a live listener?
 *   reserve a slot: FREE -> RESERVING ->
 *     CONNECTING (its next generation)
 *   real connect() (SYN leaves only now)
 *   write the 4-tuple, CONNECTING -> OFFERED  scan slots for its own 4-tuple
 *   spin, then sleep on the slot (bounded)    (CONNECTING ones reserved before the
 *                                             accept: wait <= 100 ms from it)
 *                                             OFFERED -> CLAIMED (CAS)
 *                                             take a segment, attach
 *                                             an arena the client maps: its
 *                                             id and segment into the slot;
 *   <------ else accept message + 3 fds ----- a new one: sendmsg to c<id>
 *                                             CLAIMED -> ANSWERED (CAS)
 *   attach, segment.confirm 0 -> 1 (CAS)      by message: wait for confirm
 *   free the slot                             (CAS 0->2 on time-out); in the
 *                                             slot: final, return at once
 *
 * The client's wait for the answer may come after connect() returned, at
 * its first call that needs the connection; its first writes go into the
 * slot meanwhile and the server copies them into the ring before it
 * answers (early.c).
 *
 * Why it never guesses: the slot is reserved before the SYN exists, so when
 * the server holds the accepted socket, a shunt client's offer is either
 * visible or in CONNECTING.  No offer and no CONNECTING slot means the
 * client is not shunt: plain, with no wait.  Each side commits with one CAS
 * (OFFERED->CLAIMED against OFFERED->ABANDONED, CLAIMED->ANSWERED against
 * CLAIMED->FAILED, then confirm 0->1 against 0->2), so exactly one outcome
 * exists and both sides see it (an answer in the slot is final: the client
 * made its duplicate of the socket before it offered, and maps the arena).  A shunt server writes nothing before it
 * claims, so a client that sees bytes or FIN on the TCP socket while it
 * waits knows the server is plain and stops.  Most connections between two
 * processes that met before take no system call of the set-up beyond the
 * duplicate of the socket: the answer is in the slot, the decision in the
 * segment (issue #13, item 10).
 */
#ifndef SHUNT_RDV_H
#define SHUNT_RDV_H
#include "../shim/shim.h"

struct arena;

#define CONNECTING_FRESH_NS 100000000ull       /* a server waits this long after a client's reservation */
#define STALE_SLOT_NS 30000000000ull           /* abandoned by a dead process: reaped */
#define STALE_RESERVING_NS 600000000000ull     /* a client died while it took a slot */
#define CONFIRM_WAIT_NS 1000000000ull          /* server waits for the client's attach */
#define CLAIMED_WAIT_NS 5000000000ull          /* client waits for a claimed message */
#define SPIN_MSG_NS 50000ull                   /* client spins this long before sleeping */
#define SPIN_OFFER_NS 20000ull                 /* server spins this long for an offer */
#define YIELDS_OFFER 3                         /* then gives its CPU this often before it sleeps */
#define NONBLOCK_RUNNABLE_MAX 16               /* runnable threads a CPU from which it does not wait */
#define EPOLL_RUNNABLE_MAX 16                  /* busy_short's mark at most, for a process with epoll */
#define NONBLOCK_OFFER_NS 5000000ull           /* a non-blocking accept() waits this long at most */
#define SEND_RETRIES 1000                      /* x 0.1 ms: an accept message into a full queue */

struct portreg {
	struct shunt_registry *r;
	int probe_fd;     /* for the liveness probe (flock EX|NB) */
	int lock_fd;      /* LOCK_SH held while this process listens on the port */
	int nlisten;
	ino_t ino;        /* the file mapped: the name may since point elsewhere */
	struct portreg *all_next; /* every registry this process maps (reg_lock) */
	_Atomic uint64_t live_until; /* rdv_reg_live's last yes holds until then */
	_Atomic uint64_t group_until; /* rdv_reg_group_ours's answer holds until then */
	_Atomic int group_ours;
	uint16_t port;
};


struct got_msg {
	struct shunt_accept_msg m;
	int fds[SHUNT_MSG_MAX_FDS]; /* as the flags say: a new arena's memfd and doorbells */
	uint32_t uid; /* the sender's, as the kernel says (SCM_CREDENTIALS) */
	int has_uid;
	int in_slot;  /* an answer in the slot (a private directory's: our user's) */
	int has_owner; /* owner: the user who owned the server's end of the TCP
			  connection as the server claimed our offer (client.c) */
	uint32_t owner;
};


/* A client's offer from its publication to its settling (client.c,
 * early.c): the answer may be waited for after connect() returned. */
struct offer {
	struct portreg *p;
	struct shunt_slot *sl;
	struct shunt_early *early; /* the slot's area for our first bytes */
	uint64_t nonce;
	uint32_t gen; /* the slot's generation: our reservation (wire.h) */
	int sockfd;   /* the socket: the program's number (the connection borrows it: fdtab.c) */
	uint32_t len; /* bytes we put in early->data */
	uint8_t *mine; /* ... and our own copy of them (malloc'd, len bytes): a
			* resend sends these, whatever the shared slot holds
			* by then */
	int counted;  /* one of the process's pending offers (early.c) */
	int pend_idx; /* ... its place in early.c's list */
	int in_epoll; /* registered pending in an epoll set (epoll.c): its
		       * registrations change when it settles */
};

/* registry.c */
int rdv_sys(long r);
void rdv_path_of(char *buf, size_t n, char kind, uint64_t id);
int rdv_is_loopback(const struct shunt_addr *a);
int rdv_is_any(const struct shunt_addr *a);
int rdv_sock_tuple_known(int fd, struct shunt_addr *local, struct shunt_addr *remote,
			 const struct sockaddr *remote_sa);
int rdv_sock_tuple(int fd, struct shunt_addr *local, struct shunt_addr *remote);
int rdv_is_other_host(int fd, const struct shunt_addr *dst);
int rdv_tuple_eq(const struct shunt_tuple *a, const struct shunt_tuple *b);
struct portreg *rdv_reg_get(uint16_t port, int create, int fresh);
void rdv_offers_refuse(struct portreg *p, const struct shunt_addr *listen, uint64_t netns);
int rdv_reg_live(struct portreg *p);
int rdv_reg_may_match(struct portreg *p, const struct shunt_addr *dst, int *deferred, int *reuseport);
int rdv_reg_group_ours(struct portreg *p, const struct shunt_addr *dst);
struct shunt_slot *rdv_slot_reserve(struct portreg *p, uint64_t sock_id, uint64_t *nonce,
				    const struct shunt_addr *dst, uint32_t *gen);
void rdv_slot_free(struct portreg *p, struct shunt_slot *sl, uint32_t gen);
int rdv_slot_cas(struct shunt_slot *sl, uint32_t gen, uint32_t from, uint32_t to);

/* msgsock.c */
int rdv_csock_get(uint64_t *id);
void rdv_close_fds(int *fds, int n);
int rdv_stash_take(uint64_t nonce, struct got_msg *out);
void rdv_send_wake(uint64_t sock_id);
int rdv_send_accept(uint64_t sock_id, unsigned slot, uint64_t nonce, struct arena *a,
		    unsigned seg, int send_fds);

/* client.c */
int rdv_tcp_has_input(int fd);
int rdv_client_attach(struct sk *s, int fd, uint64_t nonce, struct got_msg *g);
int rdv_offer_finish(struct sk *s, struct offer *o, uint64_t wait_ns, int *resend, int *cut);
int rdv_await_reply(struct shunt_slot *sl, uint32_t gen, uint64_t max_ns); /* 1: a signal came */

/* early.c */
int rdv_early_reserve(const struct portreg *p);
void rdv_early_unreserve(void);
void rdv_early_begin(struct sk *s);
void rdv_early_atfork_child(void);
int rdv_offers_pending(void);
/* The bucket a server waiting for client port `port`'s offer sleeps on. */
static inline struct shunt_offer_wait *rdv_offer_wait(struct portreg *p, uint16_t port)
{
	return &p->r->offer_wait[port % SHUNT_REG_WAIT];
}
int rdv_plain_seen(struct portreg *p, const struct shunt_tuple *t, uint64_t now);
int rdv_plain_record(struct portreg *p, const struct shunt_tuple *t);
int rdv_msg_await(uint64_t nonce, struct got_msg *out, uint64_t deadline);
void rdv_msgsock_exit(void);
void rdv_msgsock_atfork_child(void);
void rdv_client_atfork_child(void);
struct portreg *rdv_reg_peek(uint16_t port);
#endif
