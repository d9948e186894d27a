/* SPDX-License-Identifier: MIT */
/*
 * wire.h - every byte layout shunt shares between processes, in one place.
 *
 * What crosses a process or host boundary:
 *   1. the per-port registry file ($SHUNT_DIR/p<port>), mapped by every shunt
 *      process that listens on or connects to that port, with its offer slots;
 *   2. the arena (a memfd per process pair) and its segments, one ring per
 *      direction each, and the segment moved before fork or exec;
 *   3. the accept message, one datagram from the server's shim to the
 *      client's, carrying a new arena and its two doorbells (SCM_RIGHTS);
 *   4. the per-process stats file ($SHUNT_DIR/s<id>) read by `shunt ss`;
 *   5. the in-band handshake on the TCP stream, RDMA's cursor messages and
 *      the failover message (between hosts: network order);
 *   6. the TCP option in the SYN (the agent's BPF program).
 *
 * Within a host integers are host-endian; every structure has a magic and a
 * version and its size is checked by _Static_assert.  Nothing received from
 * another process is trusted: src/common/msg.c, handshake.c, failover.c and
 * synopt.c validate each field (each fuzzed, tests/fuzz), and the readers
 * of shared rings check every cursor (ring.c).
 */
#ifndef SHUNT_WIRE_H
#define SHUNT_WIRE_H

#include <stdint.h>
#include <stddef.h>

#define SHUNT_WIRE_VERSION 14u /* 2: doorbells per arena, not per segment; 3: answers in the offer
				 slot; 4: a slot answer names only an arena the client confirmed
				 a connection in, and the client may ask again (NEED_ARENA);
				 5: the registry counts its reserved slots, a stat record
				 may leave its local address to `shunt ss`; 6: a client's
				 first bytes in its slot (early[]), a slot answer is final
				 (no confirm wait), an arena says when its client unmapped it;
				 7: the registry says how far its slots were ever used
				 (slots_used: an accepting server reads no further), and
				 waiting servers sleep per bucket of client ports;
				 8: a segment's in_use counts its uses (odd: taken);
				 9: a slot's state word carries the slot's generation,
				 and its reservation time is written before it is taken;
				 10: an arena says when its server forked (closed);
				 11: a forked arena is taken again once no process
				 holds a connection of it, closed only past
				 SHUNT_ARENA_KEEP, and says so (closes);
				 12: a shared directory's server answers in the slot
				 too (its client checks the user who sent it the
				 arena; the server waits for its word there);
				 13: a listener record names its socket (sock_ino), one
				 record a socket for SO_REUSEPORT listeners, 64 of them;
				 14: a ring's reader says it shut its reading side (rd_shut) */
#define SHUNT_SHORT_MS 10     /* a connection that ends sooner is short-lived (registry) */

/* ---- fallback reason codes: stable, shown by `shunt ss`, never renumbered ---- */
enum shunt_reason {
	SHUNT_R_NONE = 0,          /* accelerated: no fallback */
	SHUNT_R_PEER_NOT_SHUNT = 1,/* no shunt listener for the port, or the client made no offer */
	SHUNT_R_POLICY = 2,        /* disabled by configuration (SHUNT_DISABLE, SHUNT_PORTS) */
	SHUNT_R_RESOURCE = 3,      /* registry full, memfd/mmap/eventfd failed, fd limit */
	SHUNT_R_HANDSHAKE = 4,     /* rendezvous message missing, malformed or undeliverable */
	SHUNT_R_TIMEOUT = 5,       /* the server did not accept within SHUNT_ACCEPT_WAIT_MS */
	SHUNT_R_NETNS = 6,         /* loopback peer lives in another network namespace */
	SHUNT_R_INHERITED = 7,     /* socket predates shunt in this process (unknown state) */
	SHUNT_R_UNSUPPORTED = 8,   /* a feature shunt does not carry (TCP_FASTOPEN, MSG_OOB...) */
	SHUNT_R_CONNECT_SLOW = 9,  /* the TCP handshake itself did not finish within the wait */
	/* in-band handshake (issue #3): sent in DECLINE, recorded on both ends */
	SHUNT_R_HS_MALFORMED = 10, /* a handshake message failed validation */
	SHUNT_R_HS_VERSION = 11,   /* no common handshake version */
	SHUNT_R_HS_NO_TRANSPORT = 12, /* no transport both ends can use */
	SHUNT_R_HS_TIMEOUT = 13,   /* the peer's message did not come in time */
	SHUNT_R_OPTION_REPLAYED = 14, /* the peer echoed our TCP option instead of answering */
	SHUNT_R_NO_AGENT = 15,     /* another host's peer, and no agent here to ask it (shuntd) */
	SHUNT_R_LINK_FAILED = 16,  /* was RDMA; the link failed and the connection went on over TCP */
	SHUNT_R_PEER_FAILOVER = 17,/* was RDMA; the peer moved it to TCP (its link failed, it forked...) */
	SHUNT_R_FORK = 18,         /* was RDMA; moved to TCP because this process forked or exec'd
				      (any transport: given to a posix_spawn child) */
	SHUNT_R_UNSAFE_DIR = 19,   /* the rendezvous directory was refused (owner, mode, symlink, missing) */
	SHUNT_R_PEER_BROKE = 20,   /* was accelerated; the peer broke the shared ring's rules: reset */
	SHUNT_R_SANDBOX = 21,      /* made after the process installed a seccomp filter, or an
				      RDMA connection moved to TCP when it did */
	SHUNT_R_IO_URING = 22,     /* made after the process set up io_uring (its kernel path bypasses shunt) */
	SHUNT_R_FD_PASSED = 23,    /* moved to TCP: the descriptor was passed to another process (SCM_RIGHTS) */
	SHUNT_R_DESCRIPTORS = 24,  /* plain, or moved to TCP: the application ran out of descriptors (EMFILE) and shunt gave its own back */
	SHUNT_R_BUSY_SHORT = 25,   /* plain: long run queues (SHUNT_BUSY_RUNNABLE), to a port whose connections are short-lived */
	SHUNT_R_RDMA_STALLED = 26, /* was RDMA; moved to TCP: the peer's device did not acknowledge the closing
				    * cursor message in time (a stopped peer, a congested link); the link stays */
	SHUNT_R_STALE_LINK = 27,   /* plain: the server answered on an RDMA link whose queue pair of ours is
				    * gone (our end failed while it carried nothing); the server retires its
				    * end, the next connection makes a new link */
	SHUNT_R_STDIO = 28,        /* moved to TCP: the program used C stdio (fwrite, printf, fgets...) on the
				    * socket - stdin/stdout after an exec, fdopen() - whose buffers reach
				    * the kernel socket without passing through shunt */
	SHUNT_R_SERVER_FIRST = 29, /* plain: the server accepted the connection before its client published
				    * the offer (a non-blocking accept(), or a client preempted past the
				    * server's 20 ms wait) and took it plain; it said so in the registry */
	SHUNT_R_RINGS_FULL = 30,   /* moved to TCP: both ends blocked writing into full rings, neither
				    * reading (a program that writes its whole request before it reads,
				    * to a peer that answers as it reads): TCP's larger buffers take it */
	SHUNT_R_KERNEL_SOCKET = 31,/* moved to TCP: the program handed the socket to a kernel driver that
				    * reads and writes it itself (NBD: NBD_SET_SOCK, NBD_CMD_CONNECT) */
	SHUNT_R_REUSEPORT = 32,    /* plain: the port's SO_REUSEPORT group holds a listening socket shunt
				    * does not serve (a process not under shunt, or under another
				    * rendezvous directory): the kernel may hand the connection to it,
				    * and it would take no offer */
	SHUNT_R_FORK_SHORT = 33,   /* plain: to a port whose server forks a process for each connection,
				    * and whose connections are short-lived: their set-up costs a forked
				    * child more than TCP's (the arena's pages it faults in, a wake-up
				    * each way) for the few bytes they carry */
	SHUNT_R_MAX
};

/* The connection modes a socket can be in (no flag bits mixed in). */
enum shunt_mode {
	SHUNT_M_TCP = 0,    /* plain kernel TCP; see the reason */
	SHUNT_M_SHM = 1,    /* accelerated through a shared-memory segment */
	SHUNT_M_LISTEN = 2, /* a listening socket */
	SHUNT_M_RDMA = 3,   /* accelerated over an RDMA link (issue #4) */
};

/* ---- 1. per-port registry ---- */
#define SHUNT_REG_MAGIC 0x53485247u /* "SHRG" */
#define SHUNT_REG_SLOTS 256
#define SHUNT_REG_LISTENERS 64
#define SHUNT_REG_WAIT 7 /* offer_wait buckets (client port % 7) */

/* Offer slot states.  The transitions are CAS-only; see src/setup/rdv.h.
 * The state word's low 4 bits are the state, the other 28 the slot's
 * generation: +1 at each reservation (FREE -> CONNECTING), kept by every
 * other transition.  Each party CASes the whole word it knows - the
 * reservation it acts for - so an actor stalled past the end of its
 * reservation (a server whose client gave up, a reaper whose dead slot
 * was reaped and taken meanwhile) can never move the next one's state. */
enum shunt_slot_state {
	SLOT_FREE = 0,       /* unused */
	SLOT_CONNECTING = 1, /* client reserved it and is inside connect() */
	SLOT_OFFERED = 2,    /* tuple known, waiting for the server's accept() */
	SLOT_CLAIMED = 3,    /* server won: it is sending the accept message */
	SLOT_ABANDONED = 4,  /* client won: it gave up waiting, the connection is TCP */
	SLOT_FAILED = 5,     /* server claimed but could not deliver: both use TCP */
	SLOT_DECLINED = 6,   /* server claimed and declined: it is out of descriptors (reason 24), both use TCP */
	SLOT_ANSWERED = 7,   /* server claimed and delivered: the segment is named in the slot
				(answer_seg), or by an accept message already queued on the
				client's socket (answer_seg == SHUNT_SLOT_BY_MSG).  In a
				shared directory the client takes a slot answer only if
				the user who sent it that arena owns the server's end
				(src/setup/client.c slot_sender_ok) */
	SLOT_NEED_ARENA = 8, /* retired (versions 4-5: the client asked again for an arena it
				had dropped; now an answer in the slot names only one the
				client maps: shunt_arena_hdr.client_unmapped) */
	SLOT_RESERVING = 9,  /* a client took it and is writing its nonce, process and
				destination (before its SYN; -> CONNECTING).  Reaped only
				after STALE_RESERVING_NS (src/setup/registry.c) */
	/* An answer by message leaves the decision to the segment (confirm
	 * field): the client CASes 0->1 once attached, the server 0->2 on
	 * time-out, and so does an answer in a shared directory's slot.  An
	 * answer in a private directory's slot, or to a pending offer, is final:
	 * the client, which made its duplicate of the socket before it
	 * offered, attaches (src/setup/rdv.h). */
};

/* An address in v4-mapped IPv6 form so AF_INET and AF_INET6 ends compare. */
struct shunt_addr {
	uint8_t ip[16];
	uint16_t port;    /* host order */
	uint16_t pad;
};

struct shunt_tuple {
	struct shunt_addr client; /* as the kernel sees it on both ends */
	struct shunt_addr server;
};

#define SHUNT_SLOT_STATE(w) ((w) & 0xfu)
#define SHUNT_SLOT_GEN(w) ((w) & ~0xfu)
#define SHUNT_SLOT_GEN_ONE 0x10u

struct shunt_slot {
	_Atomic uint32_t state;   /* generation | enum shunt_slot_state (above) */
	uint32_t client_pid;      /* informational (pid namespaces differ) */
	uint64_t nonce;           /* random, names this offer in the accept message */
	uint64_t sock_id;         /* names the client's $SHUNT_DIR/c<sock_id> socket */
	uint64_t netns;           /* client's network namespace inode */
	uint64_t stamp_ns;        /* CLOCK_MONOTONIC when reserved: written before the state
				     word is taken, so whoever sees the reservation sees it */
	struct shunt_tuple tuple; /* valid from OFFERED on */
	uint64_t answer_arena;    /* ANSWERED: the arena id (one the client confirmed a
				     connection in: it maps it, unless it dropped it since) */
	uint32_t answer_seg;      /* ANSWERED: the segment in it, or SHUNT_SLOT_BY_MSG */
	_Atomic uint32_t client_waiting; /* bits, one a waiter of the client's (several
				     threads may wait): SHUNT_WAIT_ANSWER, asleep on
				     state: wake it at the answer; SHUNT_WAIT_DATA (a
				     blocking read settles the offer), asleep on state:
				     at the server's first wake-up of its reader - data,
				     a shutdown, its close - or now if the answer is by
				     message (src/setup/server.c); SHUNT_WAIT_EPOLL (the
				     offer waits in an epoll set or a poll that holds the
				     client's socket, c<sock_id>): an empty datagram there after
				     the answer, no futex wake-up; a bit not known: as
				     SHUNT_WAIT_ANSWER */
};
#define SHUNT_SLOT_BY_MSG 0xffffffffu
#define SHUNT_WAIT_ANSWER 1u
#define SHUNT_WAIT_DATA 2u
#define SHUNT_WAIT_EPOLL 4u
_Static_assert(sizeof(struct shunt_slot) == 96, "slot layout");

struct shunt_listener_rec {
	uint64_t netns;           /* listener's network namespace inode */
	struct shunt_addr addr;   /* bound address (:: / 0.0.0.0 means any) */
	uint32_t pid;
	uint32_t used;            /* SHUNT_LISTENER_* (non-zero: in use) */
	uint32_t sock_ino;        /* the listening socket's inode (sockets' are 32-bit) */
};
#define SHUNT_LISTENER_USED 1u
/* TCP_DEFER_ACCEPT on: the kernel wakes its accept() only at the first
 * byte on the socket, which an offer through the registry never sends (the
 * first bytes travel in the slot), so clients do not offer there: they
 * take the in-band handshake, whose PROPOSAL is such a byte, or stay plain
 * (reason unsupported-feature).  Readers before it see "in use" only. */
#define SHUNT_LISTENER_DEFERRED 2u
/* The listening process makes every connection plain from now on (it set
 * up io_uring, installed a seccomp filter, or chrooted away from the
 * directory): it would take no offer, or could answer none, so clients do
 * not offer there - each waited for a claim that never came (200 ms,
 * accept-timeout).  A listener that registers again clears it. */
#define SHUNT_LISTENER_OFF 4u
/* The socket has SO_REUSEPORT: the kernel hands each connection to one
 * socket of the port's group, by a hash of its addresses, and a socket of
 * the group that shunt does not serve takes no offer - its clients waited
 * for a claim that never came (200 ms, accept-timeout).  Such records are
 * one a socket (sock_ino), and a client offers only if every listening
 * socket the kernel has at the address in its namespace is registered
 * (registry.c rdv_reg_group_ours; else plain, reason reuseport-foreign). */
#define SHUNT_LISTENER_REUSEPORT 8u
_Static_assert(sizeof(struct shunt_listener_rec) == 40, "listener layout");

/* A connection its client made plain without an offer (busy-short,
 * reason 25), announced once its connect returned: a server that accepted
 * it while other clients' offers were in CONNECTING need not wait for them
 * (src/setup/client.c).  A seqlock: seq is odd while the record is written. */
#define SHUNT_REG_PLAIN 64
struct shunt_plain_rec {
	_Atomic uint32_t seq;
	uint32_t pad;
	uint64_t stamp_ns;        /* CLOCK_MONOTONIC when written */
	struct shunt_tuple tuple;
	uint64_t pad2;
};
_Static_assert(sizeof(struct shunt_plain_rec) == 64, "plain record layout");

/* A client's first bytes, written after its connect() returned and before
 * the server's answer (src/setup/early.c): the server copies them into the
 * segment's client->server ring before it answers, so the first request
 * of a connection costs no turn of the set-up.  len is the client's (it
 * adds with a CAS) until the server sets SHUNT_EARLY_TAKEN: then no byte
 * more.  Only in a private directory (a shared one's members could read
 * or write them). */
#define SHUNT_EARLY_MAX 1020u
#define SHUNT_EARLY_TAKEN 0x80000000u
/* The client leaves its offer pending: it waits for no answer now, so an
 * answer by message is final too (the server does not wait for the
 * client's confirmation, which would come only at its next call). */
#define SHUNT_EARLY_PENDING 0x40000000u
#define SHUNT_EARLY_LEN(v) ((v) & ~(SHUNT_EARLY_TAKEN | SHUNT_EARLY_PENDING))
struct shunt_early {
	_Atomic uint32_t len;
	uint8_t data[SHUNT_EARLY_MAX];
};
_Static_assert(sizeof(struct shunt_early) == 1024, "early data layout");

struct shunt_registry {
	uint32_t magic;
	uint32_t version;
	uint32_t port;
	uint32_t nslots;
	_Atomic uint32_t retired; /* its last listener removed the file: a client's
				     remembered liveness of it ends (registry.c) */
	_Atomic uint32_t fork_run; /* +1 for a connection the accepting process closed
				      after it forked while holding it (a server that forks
				      a process for each connection), halved by one it
				      served itself (at most 255).  Advice only, like
				      short_run (connections then stay plain, reason 33).
				      Version 6's offers word, never written since */
	uint32_t unused;          /* version 6's sleepers' count: one pair per bucket of
				     client ports now (offer_wait) */
	_Atomic uint32_t short_run; /* +1 for a connection to the port that ended
				       within SHUNT_SHORT_MS of its connect (at most
				       255), halved by a longer one.  Advice only: a
				       member of a shared directory may write it
				       (connections then stay plain, reason 25) */
	_Atomic uint32_t reserved; /* slots not FREE: while 0 no connection to the
				       port can be on offer, and an accepting server
				       takes it plain without reading its own address
				       or the slots.  Advice only, like short_run: a
				       wrong 0 leaves an offer unanswered (the client
				       falls back at its deadline), a wrong non-zero
				       costs the scan */
	_Atomic uint32_t slots_used; /* no slot at or past it was ever reserved: an
				       accepting server scans slots[0, slots_used).  Clients
				       reserve low slots first (near twice the reserved
				       count) and raise it before their SYN.  Advice, like
				       reserved: too low leaves an offer unanswered (its
				       client falls back at its deadline) */
	struct shunt_listener_rec listeners[SHUNT_REG_LISTENERS];
	struct shunt_slot slots[SHUNT_REG_SLOTS];
	_Atomic uint32_t plain_head; /* next record of plain[] to write */
	uint32_t plain_pad;
	/* A server waiting for the offer (or plain record) of the connection
	 * it accepted sleeps on the bucket of that connection's client port;
	 * the client that publishes one bumps its port's bucket and wakes its
	 * sleepers, if any - not every waiting server (registry.c) */
	struct shunt_offer_wait {
		_Atomic uint32_t seq;     /* bumped at each publication: the futex word */
		_Atomic uint32_t waiters; /* servers asleep on it */
	} offer_wait[SHUNT_REG_WAIT];
	struct shunt_plain_rec plain[SHUNT_REG_PLAIN];
	struct shunt_early early[SHUNT_REG_SLOTS]; /* early[i] goes with slots[i] */
};
_Static_assert(8 + SHUNT_REG_WAIT * sizeof(struct shunt_offer_wait) == 64, "plain_head's line");

/* ---- 2. the arena and its segments ----
 * The first connection between two processes creates an arena (a memfd of
 * SHUNT_ARENA_SLOTS segments) that both map once; later connections between
 * them take a free segment of it: no new mapping, no page faults, no memfd.
 * This is SMC's link group and buffer pool, for shared memory. */
#define SHUNT_ARENA_MAGIC 0x53484152u /* "SHAR" */
#define SHUNT_ARENA_SLOTS 32
#define SHUNT_ARENA_HDR_SIZE 4096u
struct shunt_arena_hdr {
	uint32_t magic;
	uint32_t version;
	uint64_t id;            /* random, names the arena in accept messages */
	uint64_t proc[2];       /* [0] client, [1] server: process ids of SHUNT_DIR (s<id>) */
	uint32_t nslots;        /* SHUNT_ARENA_SLOTS */
	uint32_t ring_size;     /* bytes per direction in every segment */
	_Atomic uint32_t client_unmapped; /* 1 until the client process maps it, and again
					     before it unmaps it: answers then carry its
					     descriptors (an answer in the slot names only
					     an arena its client maps) */
	_Atomic uint32_t closed; /* 1 once its server will take no segment of it
				    again (it keeps others for that client, it unmapped
				    it, or it came across an exec): the client unmaps it
				    when it holds none (shm/arena.c) */
	_Atomic uint32_t closes; /* raised by the server as it closes other arenas of
				    this client: an answer naming this one tells the
				    client to look for them */
	uint8_t pad[12];
};
_Static_assert(sizeof(struct shunt_arena_hdr) == 64, "arena header layout");

/* ---- segment: header, then ring 0 (client->server), ring 1 ---- */
#define SHUNT_SEG_MAGIC 0x53485347u /* "SHSG" */
#define SHUNT_CACHELINE 64

/*
 * One direction.  The writer owns prod and wr_done; the reader owns cons.
 * rd_want/wr_want are the "wake me" flags in the spirit of SMC's
 * write_blocked: a side that is about to sleep sets its flag, re-checks, and
 * sleeps (a futex on the flag, or the arena's doorbell eventfd); the other
 * side clears the flag with an exchange and wakes the sleeper only then, so
 * no system call is made while both run.
 */
struct shunt_ring_ctl {
	/* line 1: written by the writer on every write, polled by the reader */
	_Alignas(SHUNT_CACHELINE) _Atomic uint64_t prod; /* bytes ever written */
	_Atomic uint32_t wr_done;   /* writer did shutdown(SHUT_WR) */
	/* line 2: written by the reader on every read (the writer caches it) */
	_Alignas(SHUNT_CACHELINE) _Atomic uint64_t cons; /* bytes ever consumed */
	/* line 3: the writer's own line: its lock, and the reader's rarely
	 * written "wake me" flag, which the writer reads after every write */
	_Alignas(SHUNT_CACHELINE) _Atomic uint32_t wlock; /* serialises writers (threads, forks) */
	_Atomic uint32_t rd_want;   /* reader sleeps until data arrives */
	_Atomic uint32_t rd_left;   /* the reader left the ring for the TCP socket (a
				       reason, SHUNT_R_FD_PASSED): the writer resends
				       from cons there and writes there (src/transport/shm/shm_move.c) */
	_Atomic uint32_t wr_moved;  /* a writer of this ring moved the connection to the TCP
				       socket (the reason): the side's other writers - other
				       processes holding it - follow (move.c, move_follow) */
	/* line 4: the mirror for the reader */
	_Alignas(SHUNT_CACHELINE) _Atomic uint32_t rlock; /* serialises readers */
	_Atomic uint32_t wr_want;   /* writer sleeps until space frees */
	_Atomic uint32_t rd_moved;  /* the same for the side's readers */
	_Atomic uint32_t rd_shut;   /* the reader did shutdown(SHUT_RD) (since version 14):
				       its kernel socket would answer data with a reset
				       once its FIN went, so no probe byte (shm.c) */
};
_Static_assert(sizeof(struct shunt_ring_ctl) == 256, "ring ctl layout");

struct shunt_seg_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t ring_size;          /* bytes per direction, power of two */
	uint32_t hdr_size;           /* offset of ring 0's data */
	uint64_t nonce;              /* equals the offer's nonce */
	_Atomic uint32_t confirm;    /* 0 pending, 1 client attached, 2 declined (CAS once) */
	_Atomic uint32_t in_use;     /* arena slot's uses: odd from allocation until both owners
				      are 0, even when free; the take and the free each add 1
				      (a free is a CAS from the use it ends: since version 8) */
	_Atomic uint32_t owner[2];   /* processes holding the connection: [0] client, [1] server */
	uint32_t reserved;           /* 0 (version 1: a per-segment eventfd generation) */
	_Atomic uint32_t confirm_waiter; /* the server sleeps on confirm: wake it */
	_Atomic uint32_t unclosed[2]; /* of owner[]: holders that have not begun their last close;
				       the one that takes it to 0 decides what the kernel
				       socket's last close says (FIN, or RST: bytes unread).
				       Each side's own processes only; 0 (pad) before it */
	uint8_t pad[8];
	struct shunt_ring_ctl ring[2];
};
_Static_assert(sizeof(struct shunt_seg_hdr) == 576, "segment header layout");
#define SHUNT_SEG_HDR_SIZE 4096u /* data starts page aligned */

/* ---- 3. the accept message (server -> client, with 0 or 3 fds) ---- */
#define SHUNT_MSG_MAGIC 0x53484d41u /* "SHMA" */
/* A new arena: its memfd and its two doorbells (eventfds: the client's, the
 * server's - each side's sleepers on any of its segments) are attached. */
#define SHUNT_MSG_F_ARENA 1u
#define SHUNT_MSG_MAX_FDS 3
#define SHUNT_MSG_NO_SLOT 0xffffffffu /* answers an in-band PROPOSAL, not a slot */
struct shunt_accept_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t nfds;       /* descriptors attached, as the flags say */
	uint64_t nonce;      /* the offer it answers; also in the segment header */
	uint32_t ring_size;  /* must match the arena */
	uint32_t slot;       /* index of the offer slot, or SHUNT_MSG_NO_SLOT (in-band) */
	uint64_t arena;      /* arena id */
	uint32_t seg;        /* segment index in the arena */
	uint32_t flags;      /* SHUNT_MSG_F_* */
	uint32_t reserved;   /* 0 */
	uint32_t pad;
};
_Static_assert(sizeof(struct shunt_accept_msg) == 48, "accept message layout");

/* ---- 4. per-process stats, read by `shunt ss` ---- */
#define SHUNT_STATS_MAGIC 0x53485354u /* "SHST" */
#define SHUNT_STATS_RECS 4096
struct shunt_stat_rec {
	_Atomic uint32_t used;   /* 0 free, 1 in use, 2 being filled (skip it) */
	int32_t fd;
	uint8_t mode;            /* enum shunt_mode */
	uint8_t reason;          /* enum shunt_reason */
	uint8_t is_client;
	uint8_t flags;           /* SHUNT_STAT_LOCAL_UNKNOWN */
	_Atomic uint32_t held;   /* a plain socket's: its generation << 3 |
				    SHUNT_STAT_H_* (who of its maker and a
				    forked child let go first) */
	struct shunt_tuple tuple;/* client = local for clients, remote for servers */
	_Atomic uint64_t tx;     /* bytes the application sent */
	_Atomic uint64_t rx;     /* bytes the application received */
};
_Static_assert(sizeof(struct shunt_stat_rec) == 72, "stat record layout");
/* The process did not ask the kernel for its own end's address (a plain
 * connection made under load: two system calls saved on a 9-call set-up);
 * `shunt ss` reads it from /proc when it lists the record. */
#define SHUNT_STAT_LOCAL_UNKNOWN 1u
/* A plain socket a forked child inherited stays in its maker's file (the
 * child makes none for it): the maker's close leaves it listed while the
 * child may hold it, the child's close (or exit) takes it then - the
 * second of the two to let go frees it.  The generation in the upper
 * bits is the record's use, so a child never marks a record reused. */
#define SHUNT_STAT_H_MAKER_LEFT 1u
#define SHUNT_STAT_H_CHILD_LEFT 2u
#define SHUNT_STAT_H_FORKED 4u  /* open in its maker at a fork */
#define SHUNT_STAT_H_GEN_SHIFT 3

struct shunt_stats_file {
	uint32_t magic;
	uint32_t version;
	uint32_t pid;
	uint32_t nrecs;
	char comm[16];
	struct shunt_stat_rec rec[SHUNT_STATS_RECS];
};

/* ---- 5. the in-band handshake (issue #3; between hosts: network order) ----
 * After both TCP options matched, before any application byte, on the TCP
 * stream itself, in SMC's CLC manner: PROPOSAL (client) -> ACCEPT (server)
 * -> CONFIRM (client), or DECLINE with a reason from either side at any
 * step.  Every message is a header, a body and a trailer that repeats the
 * eyecatcher, so a receiver can MSG_PEEK the 8-byte header, check it and
 * the length, and never consume an application byte it does not own. */
#define SHUNT_HS_EYECATCHER 0x53484e54u /* "SHNT" */
#define SHUNT_HS_VERSION 1
#define SHUNT_HS_MAX_LEN 256

enum shunt_hs_type {
	SHUNT_HS_PROPOSAL = 1,
	SHUNT_HS_ACCEPT = 2,
	SHUNT_HS_CONFIRM = 3,
	SHUNT_HS_DECLINE = 4,
};

/* transports offered (bit mask) */
#define SHUNT_HS_T_SHM 1u  /* shared memory: both ends on one host */
#define SHUNT_HS_T_RDMA 2u /* RDMA RC queue pair (issue #4) */

struct shunt_hs_hdr {
	uint32_t eyecatcher; /* SHUNT_HS_EYECATCHER */
	uint8_t type;        /* enum shunt_hs_type */
	uint8_t version;     /* SHUNT_HS_VERSION (highest the sender speaks) */
	uint16_t length;     /* whole message: header + body + trailer */
} __attribute__((packed));
_Static_assert(sizeof(struct shunt_hs_hdr) == 8, "hs header layout");

/* PROPOSAL, ACCEPT and CONFIRM share one body: what the sender is and offers. */
struct shunt_hs_offer {
	uint8_t host_id[16];  /* the sender's host (boot id): equal ids = one host */
	uint64_t proc_id;     /* the sender's process (its SHUNT_DIR s<id>) */
	uint64_t nonce;       /* the TCP option's nonce this connection carried */
	uint64_t domain;      /* the sender's SHUNT_DIR (device and inode): shared
				 memory needs one host and one directory */
	uint32_t transports;  /* SHUNT_HS_T_* offered (PROPOSAL), chosen (ACCEPT/CONFIRM) */
	uint32_t ring_size;   /* bytes per direction the sender proposes/accepts */
	uint32_t features;    /* reserved, 0 */
	uint32_t peer_qpn;    /* ACCEPT(RDMA): the client queue pair the server's queue pair
				 (qpn) is connected to - the client connects that one, not
				 whichever of its fresh ones heard first; 0 elsewhere (and
				 from servers before it: unknown) */
	/* RDMA (issue #4): zero unless SHUNT_HS_T_RDMA */
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t rkey;        /* the ring's window key (ACCEPT/CONFIRM; 0 in PROPOSAL) */
	uint64_t addr;
} __attribute__((packed));
_Static_assert(sizeof(struct shunt_hs_offer) == 88, "hs offer layout");

struct shunt_hs_decline {
	uint32_t reason;      /* enum shunt_reason */
	uint32_t pad;         /* 0 */
} __attribute__((packed));
_Static_assert(sizeof(struct shunt_hs_decline) == 8, "hs decline layout");

struct shunt_hs_trailer {
	uint32_t eyecatcher;  /* SHUNT_HS_EYECATCHER again */
} __attribute__((packed));

/* ---- 5b. RDMA cursor messages (issue #4; between hosts: network order) ----
 * SMC-R's CDC: after RDMA-WRITEs into the peer's receive ring (at the same
 * offsets as in the sender's staging ring), one SEND of this message tells
 * the peer how far it may read, and how far we have read of its writes.
 * The ring is named by its address in the receiver's registered region, and
 * checked with the connection's tag (the low bits of its option nonce). */
#define SHUNT_CDC_F_FIN 1u       /* the sender did shutdown(SHUT_WR): no byte after prod */
#define SHUNT_CDC_F_BLOCKED 2u   /* the sender waits for space: send consumer updates now */
#define SHUNT_CDC_F_CLOSED 4u    /* the sender closed: it writes no more, nor reads */
#define SHUNT_CDC_F_FAILOVER 8u /* the sender moved to the TCP socket (struct shunt_fo there) */
#define SHUNT_CDC_F_RESET 16u   /* with CLOSED: it closed with our bytes unread - a reset, not an
				    end (TCP's RST: reads ECONNRESET, then writes EPIPE) */
#define SHUNT_CDC_F_RELEASED 32u /* after a move (FAILOVER|CLOSED both ways): the sender's
				    application let go of it; a slot is reused only once both
				    sides did, or a server's free slot could face a client's full one */
#define SHUNT_CDC_F_ALL 63u
/* A message about the link itself, not a ring (flags exactly this; ring,
 * cons and tag 0): prod is one of SHUNT_LINK_*.  An idle link beyond the
 * first between two processes retires when both agree: the side that saw it
 * idle asks (RETIRE, it names it in no ACCEPT from then on); the other
 * agrees if it carries nothing there either (RETIRED, and names it no
 * more), else says KEEP.  TEST asks nothing (SMC-R's TEST_LINK): a link
 * that carries nothing is tried with it now and then, so that one whose
 * peer process is gone fails (its queue pair's retries run out) and is
 * freed.  A peer that does not know these ignores them. */
#define SHUNT_CDC_F_LINK 64u
#define SHUNT_LINK_RETIRE 1u
#define SHUNT_LINK_RETIRED 2u
#define SHUNT_LINK_KEEP 3u
#define SHUNT_LINK_TEST 4u
struct shunt_cdc {
	uint64_t ring;   /* receiver's ring address (its handshake addr) */
	uint64_t prod;   /* bytes the sender has written into that ring, ever */
	uint64_t cons;   /* bytes the sender has consumed of the receiver's writes */
	uint32_t tag;    /* connection tag */
	uint32_t flags;  /* SHUNT_CDC_F_* */
};
_Static_assert(sizeof(struct shunt_cdc) == 32, "cdc layout");

/* ---- 5c. failover to the kernel socket (issue #4; network order) ----
 * When an RDMA connection's link fails, each end moves its sending half to
 * the TCP socket it kept: it writes this message there, then every byte
 * from `start` (the peer's last consumer update: the oldest byte it may
 * not have) to `end` (all it had staged) out of its staging ring, then the
 * application's later bytes.  The receiver reads what its ring holds first,
 * freezes its producer P (start <= P <= end, end - start <= ring size) and
 * drops the P - start bytes it already has: the stream goes on at the exact
 * byte where RDMA stopped, with no answer awaited from the peer.  After the
 * handshake the socket carried only zero-byte probes, so the first non-zero
 * byte starts this message.
 * A shared-memory connection passed to another process (issue #13) uses
 * it too, with start = end = the passing side's last byte in its ring
 * (nothing is resent: the peer reads the ring up to it); after the probes
 * and any handshake message the in-band handshake left (src/transport/shm/shm_move.c).
 * The passing side's other half is asked back through ring ctl rd_left. */
#define SHUNT_FO_KIND 0xfau
#define SHUNT_FO_VERSION 1u
#define SHUNT_FO_MAGIC 0x53484e54464f5652ull /* "SHNTFOVR" */
struct shunt_fo {
	uint8_t kind;     /* SHUNT_FO_KIND */
	uint8_t version;  /* SHUNT_FO_VERSION */
	uint16_t pad;     /* 0 */
	uint32_t reason;  /* why the sender moved: enum shunt_reason */
	uint64_t magic;   /* SHUNT_FO_MAGIC */
	uint64_t start;   /* stream offset of the first byte that follows */
	uint64_t end;     /* stream offset after the last resent byte */
};
_Static_assert(sizeof(struct shunt_fo) == 32, "failover layout");

/* A connection that moved before fork or exec keeps the bytes its ring
 * held unread in a shared region (a memfd: the forked child maps it too,
 * exec hands it over in SHUNT_INHERIT): a struct shunt_seg_hdr with this
 * magic and ring[1] as the receive ring, its data at SHUNT_SEG_HDR_SIZE
 * (ring_size bytes, a power of two); ring[0] only carries the writer's lock
 * and shutdown flag (the sending half writes to the socket). */
#define SHUNT_MOVED_MAGIC 0x53484d56u /* "SHMV" */

/* ---- 6. the TCP option (issue #3; src/agent/sockops.bpf.c writes it) ----
 * RFC 6994 experimental option: kind 254, length 12, ExID 0x5348 ("SH"),
 * then 8 bytes: the client's nonce in the SYN, ~nonce in the SYN-ACK. */
#define SHUNT_OPT_KIND 254
#define SHUNT_OPT_LEN 12
#define SHUNT_OPT_EXID 0x5348

const char *shunt_reason_str(unsigned reason);
const char *shunt_mode_str(unsigned mode);

#endif
