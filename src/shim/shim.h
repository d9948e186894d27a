/* SPDX-License-Identifier: MIT */
/*
 * shim.h - the shim's internal objects.
 *
 * struct sk mirrors a kernel open file description: dup'd fds and fork'd
 * copies share it, exactly as they share the O_NONBLOCK flag.  A socket that
 * shunt accelerated owns a struct conn (the attached segment).  Internal
 * functions return 0/-errno; only interpose.c touches errno.
 */
#ifndef SHUNT_SHIM_H
#define SHUNT_SHIM_H
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <sys/select.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "shunt/wire.h"
#include "../common/config.h"
#include "../base/base.h"
#include "../transport/transport.h"

enum sk_kind {
	SK_TCP = 1,    /* a TCP socket shunt knows; plain (see reason) until accelerated */
	SK_LISTEN = 2, /* a TCP listener */
	SK_CONN = 3,   /* an accelerated connection */
	SK_EPOLL = 4,  /* an epoll instance that may hold accelerated fds */
};

/* After a handshake that ended by a timeout (inband.c) */
enum sk_hs {
	HS_NONE = 0,
	HS_LAZY,               /* server: a PROPOSAL may still come; answer it if first */
	HS_STRIP_PROPOSAL,     /* server: our data went first; remove a late PROPOSAL */
	HS_STRIP_ANSWER,       /* client: remove a late answer; decline a late ACCEPT */
	HS_STRIP_ANSWER_WROTE, /* client: remove a late answer; we have written */
	HS_STRIP_REPLY,        /* server: remove a late CONFIRM or DECLINE */
	HS_CONFIRM,            /* server: ACCEPT(RDMA) sent, the client's CONFIRM or
				  DECLINE (or data) not read yet: plain until it is,
				  and nothing of ours may go onto the stream before */
};

enum sk_tuple {
	SK_TUPLE_NONE = 0,
	SK_TUPLE_BOTH,   /* both ends, as the kernel sees them */
	SK_TUPLE_REMOTE, /* the peer's end (and a server's port): the local
			    address was never asked for (a plain set-up under
			    load); `shunt ss` finds it */
};

struct sk {
	_Atomic int refs;         /* first: sk_new clears all that follows */
	int kind;                 /* enum sk_kind */
	int domain;
	int reason;               /* enum shunt_reason while plain */
	int is_client;
	_Atomic int nonblock;
	struct conn *conn;        /* SK_CONN */
	struct epset *ep;         /* SK_EPOLL */
	struct shunt_stat_rec *stat;
	uint32_t stat_gen;        /* ... its generation (wire.h held) */
	struct shunt_tuple tuple; /* as the rendezvous saw it (valid if has_tuple) */
	int has_tuple;            /* SK_TUPLE_*: what of tuple is known */
	int ag_listen;            /* a listener registered with the agent (saves SYNs) */
	int defer_accept;         /* TCP_DEFER_ACCEPT set (registry.c rdv_listen_deferred) */
	int listen_reuseport;     /* a listener with SO_REUSEPORT (wire.h SHUNT_LISTENER_REUSEPORT) */
	uint32_t listen_ino;      /* ... its socket's inode, as its registry record says */
	int listen_unreg;         /* a listener whose port's registry this process could not
				     write (registry.c rdv_listen): its connections' reason */
	int kernel_opts;          /* timestamps asked for: what it connects or accepts goes to TCP */
	uint16_t short_port;      /* client: the port whose registry learns how long it lived */
	uint64_t born_ns;         /* ... and when its connect was decided */
	pid_t fork_pid;           /* accepted: the process that forked while it held it
				     (its close then scores a hand-off: server.c rdv_note_served) */
	uint16_t listen_port;     /* a listener in the port's registry (0: none) */
	struct shunt_addr listen_addr; /* ... bound there: an accepted socket's own address
				     unless it is the wildcard (registry.c) */
	_Atomic int hs;           /* enum sk_hs: a late handshake message may head the stream */
	pthread_mutex_t hs_lock;  /* serialises inband_settle (all zero = unlocked) */
	void *hs_remote;          /* HS_CONFIRM: the slot offered in our ACCEPT (remote_setup) */
	uint32_t hs_tag;
	pid_t hs_pid;             /* ... by this process */
	uint64_t hs_until;        /* ... and when a call that must know stops waiting */
	struct offer *offer;      /* a client's offer not settled yet (src/setup/early.c) */
	_Atomic int fresh;        /* made by socket(): connect() or listen() not decided yet */
	_Atomic int hs_confirming; /* a client's RDMA connection made, its CONFIRM not sent yet */
	_Atomic int ep_pre;       /* in an epoll set since before that (epoll.c pre_ctl) */
	pthread_mutex_t offer_lock; /* serialises its use (all zero = unlocked) */
	struct sk *next_free;     /* on the free list (fdtab.c) */
};

/* global state */
extern struct shunt_config shunt_cfg;
extern int shunt_active;      /* 0: pure pass-through (init failed or disabled) */
extern int shunt_dirfd;        /* the checked rendezvous directory (-1: none) */
extern int shunt_off_reason;  /* non-zero: every connection plain, for this reason */
extern int shunt_ncpus;       /* online CPUs, at start */
/* A turn to spin for up to budget_ns from now (shunt_now_ns(); 0: none
 * free - sleep at once), given back with shunt_spin_end (core.c). */
int shunt_spin_begin(uint64_t budget_ns, uint64_t now);
int shunt_cpus_crowded(uint64_t now); /* threads wait for a CPU (looked at every 10 ms) */
long shunt_cpus_runnable(uint64_t now); /* threads runnable host-wide (0: not known) */
void shunt_spin_end(int turn);
void shunt_sandbox_enter(void);
void shunt_uring_seen(void);
void shunt_read_ahead(void);          /* what a child reads of /proc, now (core.c) */
void shunt_chrooted(void);
void shunt_creds_changed(void);       /* after setuid() and its kin (core.c) */
void shunt_fork_before(void);          /* the fork() wrapper's, around the real one */
void shunt_fork_after(pid_t pid);
void shunt_clone_before(void);         /* a fork by clone(), past libc's fork(): its handlers too */
void shunt_clone_child(void);
int shunt_dir_shared(void);   /* a configured directory other users write too */
/* The name, in the rendezvous directory, of port `id`'s registry ('p'), or
 * of process `id`'s socket ('c') or stats file ('s'). */
#define SHUNT_DIR_NAME_MAX 24
void shunt_dir_name(char name[SHUNT_DIR_NAME_MAX], char kind, uint64_t id);
uint64_t shunt_netns_ino(void);
uint64_t shunt_proc_id(void);   /* given to another process: our s<id> file made first */
uint64_t shunt_proc_name(void); /* the same, for naming our own files */
int shunt_proc_alive(uint64_t id);
mode_t shunt_file_mode(void);

/* fdtab.c */
struct sk *fdtab_get(int fd);          /* takes a reference, or NULL; a pending offer settled */
struct sk *fdtab_peek(int fd);         /* the same, the offer left pending */
void fdtab_set(int fd, struct sk *s);  /* installs (takes over one reference) */
void fdtab_unborrow(int fd);           /* a dup2 or dup3 is about to replace fd */
struct sk *fdtab_take(int fd);         /* removes, returns the reference it held */
struct sk *fdtab_closing(int fd);      /* ... as a close does (its epoll registrations go): the
					  reference is put after the kernel's close */
struct sk *sk_new(int kind, int domain);
void sk_put(struct sk *s);
/* A reference if s still has one (sks are never freed, only reused): 1, else 0. */
int sk_tryref(struct sk *s);
/* cancel.c: a wrapper's references, given back if the thread is canceled
 * inside (a stack: holds and releases pair, innermost first) */
#define CANCEL_HELD_MAX 4
struct cancel_held {
	struct sk *s[CANCEL_HELD_MAX];
	unsigned n;
	int armed;
	struct sk **v; /* poll's array: nv references (NULL entries: none) */
	size_t nv;
};
extern __thread __attribute__((tls_model("initial-exec"))) struct cancel_held cancel_held;
void cancel_arm(void);
static inline void cancel_hold(struct sk *s)
{
	if (__builtin_expect(!cancel_held.armed, 0))
		cancel_arm();
	if (cancel_held.n < CANCEL_HELD_MAX)
		cancel_held.s[cancel_held.n] = s;
	cancel_held.n++;
}
static inline void cancel_release(void)
{
	if (--cancel_held.n < CANCEL_HELD_MAX)
		cancel_held.s[cancel_held.n] = NULL;
}
static inline void cancel_hold_all(struct sk **v, size_t n)
{
	if (__builtin_expect(!cancel_held.armed, 0))
		cancel_arm();
	cancel_held.v = v;
	cancel_held.nv = n;
}
static inline void cancel_release_all(void)
{
	cancel_held.v = NULL;
	cancel_held.nv = 0;
}
static inline struct sk *sk_ref(struct sk *s) { __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED); return s; }
void fdtab_each(void (*fn)(int fd, struct sk *s, void *arg), void *arg);
void fdtab_each_held(void (*fn)(int fd, struct sk *s, void *arg), void *arg); /* each held for fn */
int fdtab_conns(int **fds); /* the connections' numbers now (free the array), or -ENOMEM */
long fd_close_range(unsigned first, unsigned last, unsigned flags,
		    long (*sys_close_range)(unsigned, unsigned, unsigned));
/* shunt's own descriptors: src/base/hidefd.c */

/* conn.c: the accelerated data path */
int conn_free(struct conn *c); /* 1: this side's last owner, in any process */
void conn_closing(struct conn *c);
void conn_sock_close(struct conn *c);      /* its duplicate closed (a borrowed number is the program's) */
void conn_reset_on_close(struct conn *c);   /* SO_LINGER 0 on its kernel socket */
/* The kernel socket has nothing more to say: it was reset, or both
 * directions are closed.  Until then it is watched, after the peer's FIN
 * too: a writer's probe of a gone peer is answered with a reset. */
static inline int conn_socket_done(const struct conn *c)
{
	return c->peer_err || (c->peer_eof && c->shut_wr);
}
void conn_exit_all(void);           /* conn_closing for each, before the process ends */
void conn_load_timeouts(struct conn *c);
/* Set once a socket of this process may carry SO_RCVTIMEO/SO_SNDTIMEO: one
 * set through the wrapper, or a socket that came from elsewhere (exec, an
 * inherited listener).  Until then attaching asks the kernel nothing. */
extern int conn_timeouts_maybe;
void conn_set_timeout(struct conn *c, int name, const void *val, socklen_t len);
void conn_discard(struct conn *c);
/* ctl (sendmsg's, or NULL): control data TCP acts on (SO_TIMESTAMPING
 * asks for a send's timestamps; an unknown type is EINVAL): the
 * connection moves to TCP and the socket gets it */
/* O_NONBLOCK now (MSG_DONTWAIT among flags counts): the kernel's word on a
 * connection another process may hold, which may have changed it */
int conn_nonblock(struct sk *s, int flags);
ssize_t conn_sendmsg(struct sk *s, const struct iovec *iov, int iovcnt, int flags, const struct msghdr *ctl);
static inline ssize_t conn_send(struct sk *s, const struct iovec *iov, int iovcnt, int flags)
{
	return conn_sendmsg(s, iov, iovcnt, flags, NULL);
}
/* ctl (recvmsg's, or NULL): its control buffer gets what a read off the
 * socket brings (a moved connection: timestamps), and its controllen and
 * flags say what came - 0 from the rings */
ssize_t conn_recvmsg(struct sk *s, const struct iovec *iov, int iovcnt, int flags, struct msghdr *ctl);
static inline ssize_t conn_recv(struct sk *s, const struct iovec *iov, int iovcnt, int flags)
{
	return conn_recvmsg(s, iov, iovcnt, flags, NULL);
}
int conn_shutdown(struct sk *s, int how);
/* (at most SSIZE_MAX: a sum past it is cut, as the kernel cuts a call's
 * count) */
static inline size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;

	for (int i = 0; iov && i < n; i++)
		t += iov[i].iov_len < (size_t)SSIZE_MAX - t ? iov[i].iov_len : (size_t)SSIZE_MAX - t;
	return t;
}
/* A vector's element longer than SSIZE_MAX (a negative ssize_t): the
 * kernel's EINVAL (a read's or write's count past it is its EFAULT, which
 * the wrappers leave to the kernel: interpose_io.c). */
static inline int iov_len_bad(const struct iovec *iov, int n)
{
	for (int i = 0; iov && i < n; i++)
		if (iov[i].iov_len > (size_t)SSIZE_MAX)
			return 1;
	return 0;
}
/* An array, or a buffer of positive length, at NULL: the kernel's EFAULT
 * (other bad addresses fault in the copy, where the kernel would say
 * EFAULT: only NULL is looked for, without a system call). */
static inline int iov_null(const struct iovec *iov, int n)
{
	if (!iov)
		return n > 0;
	for (int i = 0; i < n; i++)
		if (!iov[i].iov_base && iov[i].iov_len)
			return 1;
	return 0;
}
size_t conn_send_room(struct conn *c);           /* bytes a send would take now */
/* A socket option's int (the first field of SO_TIMESTAMPING's struct):
 * 1 and *v if the program gave one, else 0 (the kernel's EFAULT or
 * EINVAL, its own to say). */
static inline int opt_int(const void *val, socklen_t len, int *v)
{
	if (!val || len < sizeof *v)
		return 0;
	__builtin_memcpy(v, val, sizeof *v);
	return 1;
}
/* sockinfo.c: the kernel's answers about an accelerated socket, corrected */
int sockinfo_corrects(int level, int name);      /* getsockopt: TCP_INFO, SO_ERROR, SO_RCVLOWAT */
void sockinfo_getsockopt(struct conn *c, int level, int name, void *val, socklen_t len);
int sockinfo_ioctl(struct conn *c, unsigned long req, int *out);
void sockinfo_rcvlowat(struct conn *c, const void *val, socklen_t len);
void sockinfo_lowat_sync(struct conn *c);        /* the socket's mark, a peer's move on */
void sockinfo_inq(struct conn *c, const void *val, socklen_t len); /* after setsockopt TCP_INQ */
int sockinfo_peer_fin(int fd);                   /* after our SHUT_RD: did the peer's FIN come? */
void sockinfo_inq_cmsg(struct conn *c, struct msghdr *ctl, size_t cap, int ended); /* recvmsg's TCP_CM_INQ */
ssize_t shim_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		    unsigned flags, int *handled);
unsigned conn_events(struct conn *c);            /* POLL* mask, no system call */
int conn_read_interrupted(struct conn *c);      /* a signal in a read's set-up wait: EINTR? */
int conn_wait_poll(struct conn *c, unsigned want, int *deadline_ms, uint64_t sig0); /* poll.c */
int sock_nap_in(int fd, int nap_ms, int *left_ms); /* a nap for bytes on a plain socket (inband.c) */
int conn_move_for(struct sk *s, const char *what); /* a kernel-only feature: to TCP first */
int conn_move_retire(int fd, struct sk *s, int why, const char *what); /* ... and plain to shunt */
int conn_move_why(struct sk *s, int why, const char *what); /* ... for reason why */
unsigned conn_urgent(struct conn *c);            /* POLLPRI if urgent data waits (a look at the socket) */
int conn_take_error(struct conn *c);              /* the peer's error, once (0: told before) */
void conn_note_sock_error(struct conn *c);        /* a reset the socket holds (SO_ERROR) -> peer_err */
void conn_refresh(struct conn *c);               /* inspect the kernel socket (FIN/RST) */
void conn_arm(struct conn *c, unsigned want);    /* ask the peer to signal efd_mine */
void conn_wake_state(struct conn *c);            /* a state change: every sleeper looks */
void conn_no_room(struct conn *c);               /* a writer or poll found the ring full */
int conn_rx_eof(struct conn *c);                 /* the peer's end: its ring's word or socket's FIN */
size_t conn_nread(struct conn *c);

/* move.c: a half on the TCP socket after a move (RDMA failover, a passed fd) */
int conn_moving(struct conn *c);                 /* our sending half moves or moved */
int conn_sock_renumbered(const struct conn *c, int fd); /* a look through fd failed: look again */
/* Its inline first look, for the data path: 0 means not moving (a load of
 * three words the path touches anyway); else ask conn_moving. */
static inline int conn_may_move(const struct conn *c)
{
	return __atomic_load_n(&c->mv.want, __ATOMIC_RELAXED) | __atomic_load_n(&c->mv.tx, __ATOMIC_RELAXED) |
	       (c->tp->flags & TP_SHARED_RINGS ? (int)__atomic_load_n(&c->tx.ctl->rd_left, __ATOMIC_RELAXED) : 0);
}
int conn_moved_reason(struct conn *c);           /* why, 0 while not moved */
unsigned conn_moved_events(struct conn *c, unsigned ring_ev);
ssize_t move_send_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock,
		      const struct msghdr *ctl);
ssize_t move_recv_tcp(struct conn *c, const struct iovec *iov, int iovcnt, int flags, int nonblock,
		      struct msghdr *ctl);
ssize_t move_send_socket(struct conn *c, const struct iovec *iov, int iovcnt, int flags); /* to a closed peer */
ssize_t move_recv_urgent(struct conn *c, const struct iovec *iov, int iovcnt, int flags); /* MSG_OOB */
int move_settling(struct conn *c);                /* a blocking write must not block yet (RDMA) */
int move_flush(struct conn *c, int flags);       /* what the move owes the peer; -EAGAIN: later */
void move_fin(struct conn *c);                   /* ... then the FIN a shutdown owed (mv.fin) */
/* ... waiting for room until the deadline (shunt_now_ns; UINT64_MAX: for
 * ever - close() when no flusher thread can be had) */
int move_flush_until(struct conn *c, uint64_t deadline);
#define MOVE_FLUSH_NS 2000000000ull                 /* a close's or shutdown's bound for it */
int sock_hung_up(int fd);                        /* the peer's FIN or RST is there (no wait) */
int move_pending(const struct conn *c);          /* ... is not all on the socket yet */
int move_settled(struct conn *c, int why);       /* the socket is all of a moved connection now */
int move_pass(struct sk *s, int why);            /* before SCM_RIGHTS carries it away (why: reason) */
int move_pass_wait(struct sk *s, int why);       /* ... waiting out a move the peer is making */
/* kernel_sock.c: a socket handed to a kernel driver (NBD) moves to TCP first */
void ksock_socket(int fd, int domain, int protocol);   /* a socket made: netlink ones listed */
void ksock_closed(unsigned first, unsigned last);      /* descriptors closed: unlisted */
int ksock_ioctl(unsigned long req, unsigned long arg); /* 0, or -errno to fail the ioctl with */
int ksock_send(int fd, const struct iovec *iov, int cnt); /* the same for a send on a netlink socket */
void spawn_prepare(int std_only, const char *why); /* before a program without shunt gets what it
						    inherits: it moves (std_only: only 0-2, a shell's) */
#define LOCK_BOUND_NS 2000000000ull              /* a ring lock's wait: no holder sleeps with one */
void move_follow(struct conn *c);                /* another holder passed our side: follow */
const char *move_cause(int why);                 /* a pass's cause, for the log */
/* A moved half's ring bytes held back for the reads to come (transport.h,
 * conn_move.held); rx lock held, but for the look. */
static inline size_t move_held(const struct conn *c)
{
	return c->mv.held_len - c->mv.held_off;
}
int move_hold_ring(struct conn *c);              /* all the ring has, held: 0 or -ENOMEM/-EPROTO */
size_t move_take_held(struct conn *c, const struct iovec *iov, int iovcnt, int flags);
void move_held_free(struct conn *c);

/* src/setup: the rendezvous (registry.c, client.c, server.c, msgsock.c) */
int rdv_listen(int fd, struct sk *s);
void rdv_listen_deferred(struct sk *s); /* s->defer_accept changed */
void rdv_listen_off(struct sk *s, int refuse); /* the process went off (core.c); refuse: its offers too */
void rdv_listen_refused(const struct sk *s); /* ... and refused an offer there: the records say off, whoever made them */
int rdv_connect(int fd, struct sk *s, const struct sockaddr *addr, socklen_t len);
int rdv_accept(const struct sk *ls, int fd, struct sk *s, const struct sockaddr *peer);
uint64_t rdv_domain(void);
int rdv_inband_ready(uint64_t *sock_id);
int rdv_inband_offer(int fd, uint64_t sock_id, uint64_t nonce, struct conn **c);
int rdv_inband_commit(struct sk *s, int fd, struct conn *c, uint64_t wait_ns);
int rdv_inband_attach(struct sk *s, int fd, uint64_t nonce, uint64_t deadline);
void rdv_atfork_child(void);
void rdv_unlisten(uint16_t port);
void rdv_note_end(struct sk *s); /* a client's connection ended: was it short? */
void rdv_note_served(struct sk *s); /* an accepted one: served here, or by a forked child? */
void rdv_exit(void);
void rdv_dir_sweep(void); /* dirsweep.c: what killed processes left goes */
int shunt_addr_from_sockaddr(struct shunt_addr *a, const struct sockaddr *sa);

/* peercred.c: the uid owning the TCP socket src -> dst on this host */
int tcp_owner_uid(const struct shunt_addr *src, const struct shunt_addr *dst, uint32_t *uid);
int tcp_listen_inodes(uint16_t port, const struct shunt_addr *dst, uint32_t *inos, int cap);
void peercred_atfork_child(void);

/* stats.c */
struct shunt_stat_rec *stats_alloc(int fd, struct sk *s);
void stats_free(struct sk *s, struct shunt_stat_rec *r, int last_owner);
void stats_fork_mark(struct sk *s); /* a fork: its child inherits s's record */
void stats_child_exit(struct sk *s); /* a forked child ends holding an inherited plain socket */
void stats_update(struct sk *s, int fd);
void sk_describe(const struct sk *s, unsigned *mode, unsigned *reason);
void stats_moved(struct sk *s);
void stats_atfork_child(void);
void stats_adopt(void);
void stats_ensure_file(void); /* this process's s<id>: before its id is given out */
void stats_exit(void);
extern int stats_pending;
static inline void stats_adopt_maybe(void)
{
	if (__builtin_expect(__atomic_load_n(&stats_pending, __ATOMIC_ACQUIRE), 0))
		stats_adopt();
}

/* epoll.c / poll.c */
struct epset;
int ep_create(int epfd);
int ep_ctl(struct sk *eps, int epfd, int op, int fd, struct epoll_event *ev);
int ep_wait(struct sk *eps, int epfd, struct epoll_event *evs, int max, int timeout_ms,
	    const sigset_t *mask);
void ep_free(struct epset *ep);
/* A forked child's reset of the library's mutexes another thread of the
 * parent may have held at the fork (it does not exist here: the child's
 * first close, dup or epoll call waited for it for ever) */
void ep_atfork_child(void);
void fdtab_atfork_child(void);
void giveback_atfork_child(void);
void ep_forget_fd(int fd);
int ep_in_use(void); /* the process has an epoll set */
void ep_pend_settled(int fd, struct sk *s); /* s's offer or handshake state settled: its registrations follow */
void ep_sock_decided(int fd, struct sk *s); /* s, in a set since before its connect() or listen(), is decided */
int ep_regs_of(int fd, struct sk *s, int *blocked); /* registrations holding s */
void ep_retire(int fd, struct sk *s);     /* s is plain now: the kernel's own */
int shim_poll(struct pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask);

/* giveback.c: the program met EMFILE: idle connections to TCP, shunt's
 * descriptors closed (how many); new connections plain for a while */
int fd_give_back(void);
int conn_retire(int fd, struct sk *s, int why); /* on its socket, all of it: plain to shunt now */
int fd_pressure(void);
void fd_room_after(int fd); /* the program got fd: in its reserve (hidefd.c), give back now */
/* A call that makes a descriptor failed with EMFILE: if shunt's own took
 * the room, they go back (giveback.c) and the call is made again - the
 * program's calls (interpose.c) and shunt's own duplicates alike. */
#define AGAIN_IF_EMFILE(r, call)                                       \
	do {                                                           \
		if ((r) < 0 && errno == EMFILE && fd_give_back() > 0)  \
			(r) = (call);                                  \
		else if ((r) > 0)                                      \
			fd_room_after(r);                              \
	} while (0)

/* bell.c: a poll()ing thread's private epoll set of the doorbells it waits
 * on (nobody reads a doorbell; see bell.c) */
int bell_waitfd(void);                       /* -errno: none (a sandbox) */
int bell_watch(int waitfd, int bell, uint64_t id);
void bell_consume(int waitfd, struct sk *const *sks, size_t n); /* sks: the poll's */
void bell_forget(int bell);                   /* before a doorbell is closed */
void bell_atfork_child(void);
uint64_t bell_new_id(void);                  /* for a connection's own doorbell */
int shim_select(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout_ms, const sigset_t *mask);

/* fault.c: a fault-injection build (libshunt-faults.so, -DSHUNT_FAULTS)
 * for tests of hostile peers; the real library has none of it. */
#ifdef SHUNT_FAULTS
void shunt_fault_hs(uint8_t *msg, int len);
int shunt_fault_rdma(uint64_t staged);
uint32_t shunt_fault_rdma_key(uint64_t raddr, uint32_t rkey);
uint64_t shunt_fault_rdma_hold(uint64_t prod);
void shunt_fault_rdma_release(void);
int shunt_fault_rdma_die(void);
int shunt_fault_rdma_stall(void);
int shunt_fault_rdma_bind(void);
struct shunt_hs_offer;
void shunt_fault_rdma_foreign(uint32_t proposed, struct shunt_hs_offer *o);
int64_t shunt_fault_fo_cut(void);
int shunt_fault_ring(struct conn *c);
int shunt_fault_ring_unsealed(void);
int shunt_fault_ring_pipebell(int bell[2]);
void shunt_fault_answer_stall(void);
int shunt_fault_peer_gone(void);
void shunt_fault_seg_free(void);
void shunt_fault_reserve(void);
void shunt_fault_publish(void);
void shunt_fault_confirm(void);
void shunt_fault_confirm_read(void);
void shunt_fault_close(void);
uint64_t shunt_fault_arena_id(uint64_t id);
#else
static inline void shunt_fault_hs(uint8_t *msg, int len) { (void)msg; (void)len; }
static inline int shunt_fault_rdma(uint64_t staged) { (void)staged; return 0; }
static inline uint32_t shunt_fault_rdma_key(uint64_t raddr, uint32_t rkey) { (void)raddr; return rkey; }
static inline uint64_t shunt_fault_rdma_hold(uint64_t prod) { return prod; }
static inline void shunt_fault_rdma_release(void) {}
static inline int shunt_fault_rdma_die(void) { return 0; }
static inline int shunt_fault_rdma_stall(void) { return 0; }
static inline int shunt_fault_rdma_bind(void) { return 0; }
struct shunt_hs_offer;
static inline void shunt_fault_rdma_foreign(uint32_t proposed, struct shunt_hs_offer *o) { (void)proposed; (void)o; }
static inline int64_t shunt_fault_fo_cut(void) { return -1; }
static inline int shunt_fault_ring(struct conn *c) { (void)c; return 0; }
static inline int shunt_fault_ring_unsealed(void) { return 0; }
static inline int shunt_fault_ring_pipebell(int bell[2]) { (void)bell; return 0; }
static inline void shunt_fault_answer_stall(void) {}
static inline int shunt_fault_peer_gone(void) { return 0; }
static inline void shunt_fault_seg_free(void) {}
static inline void shunt_fault_reserve(void) {}
static inline void shunt_fault_publish(void) {}
static inline void shunt_fault_confirm(void) {}
static inline void shunt_fault_confirm_read(void) {}
static inline void shunt_fault_close(void) {}
static inline uint64_t shunt_fault_arena_id(uint64_t id) { return id; }
#endif

/* exec.c */
/* exec wrappers live in exec.c */

/* agent.c */
int agent_mark_client(int fd);       /* 0, -ENOENT (no agent), -EBUSY, -EINVAL */
int agent_mark_listener(int fd);
int agent_take(int fd, uint64_t *nonce);
void agent_listener_off(int fd, const char *why); /* it may be accepted past us from now on */
int agent_reason_of(int state);

/* inband.c */
int inband_client(struct sk *s, int fd, uint64_t nonce, uint64_t max_wait);
int inband_server(struct sk *s, int fd, int nonblock, int quick);
int inband_syn_had_option(const struct sk *ls, int fd);
int inband_settle(struct sk *s, int fd, int writing, int nonblock);
int inband_settle_nb(struct sk *s, int fd); /* what has come decides, no wait: 1 if it did */
/* HS_CONFIRM (the client's word after our ACCEPT(RDMA) still to come):
 * settled by the first call - a read when it comes, a write (or anything
 * that puts bytes on the stream) waiting for it; 0, or -errno for the
 * call (-EAGAIN: not yet).  _try never waits; _all before fork, exec,
 * spawn, a sandbox (quick: at the exit, a short wait). */
/* a wait for that word (a blocking read, poll, select) looks every this
 * often whether another thread's call took it meanwhile */
#define CONFIRM_NAP_MS 20
int inband_confirm(struct sk *s, int fd, int writing, int nonblock);
void inband_confirm_try(struct sk *s, int fd);
void inband_confirm_all(int quick);
void inband_confirm_drop(struct sk *s);

/* early.c: a client's offer left pending after connect() */
void rdv_offer_settle(struct sk *s);
void rdv_offer_settle_nb(struct sk *s); /* ... in a call that does not block in TCP */
int rdv_offer_settle_read(struct sk *s, uint64_t max_ns); /* ... by a wait for bytes; 1: a signal came */
int rdv_offer_settle_poll(struct sk *s, int *timeout_ms); /* ... by poll's, within its time-out (left: what remains) */
int rdv_early_room(struct sk *s); /* 1: a write would go into the slot */
int rdv_offer_mark_epoll(struct sk *s); /* 0: settled already */
int rdv_offer_wake_me(struct sk *s); /* 1: the server's answer wakes our socket */
int rdv_offer_due(struct sk *s, uint64_t now, uint64_t *due); /* 1: to settle now */
void rdv_offer_settle_due(struct sk *s);
int rdv_offer_unclaimed(struct sk *s); /* 1: a non-blocking read finds nothing yet */
int rdv_msg_fd(void);   /* msgsock.c: this process's socket for answers, or -1 */
void rdv_msg_pump(void); /* ... its messages read (kept for their offers) */
ssize_t rdv_early_send(struct sk *s, const struct iovec *iov, int cnt, int flags, const struct msghdr *ctl);
void rdv_offers_settle_all(void);
void connect_log(int fd, const struct sk *s); /* interpose.c */

/* signal.c */
uint64_t shunt_signals_seen(void);
int shunt_in_handler(void);
int shunt_signal_restarts(void);
void exec_inherit(void);
void exec_env_save(void);
struct sk *listener_of(int fd);
char **exec_spawn_env(char *const envp[], const char *file, int search);
void exec_spawn_env_free(char **env, char *const envp[]);

#endif
