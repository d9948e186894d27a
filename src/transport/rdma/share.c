/* SPDX-License-Identifier: MIT */
/*
 * share.c - RDMA connections a process shares (fork, exec), in a sandbox,
 * and at its end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "rdma.h"
#include "../../shim/shim.h"
#include "../../base/real.h"
#include "../../common/handshake.h"
#include "../../common/failover.h"

/* ---- fork and exec: connections a process shares move to TCP ----
 *
 * A forked child can use neither the parent's queue pairs nor the pages the
 * device writes (MADV_DONTFORK), and exec drops both.  So before either,
 * every RDMA connection moves to its TCP socket, both halves, exactly as
 * after a link failure (reason fork-exec, which the peer is told in its
 * failover message): our staged bytes are flushed to the socket, the
 * peer's message is read and it resends from our application's read
 * position (rdma_share_prepare), and a small shared region (wire.h
 * SHUNT_MOVED_MAGIC, a memfd) holds the rings from then on - empty but
 * for the last bytes of a peer that ended its stream over RDMA first.  A forked
 * child shares that mapping, exec hands the memfd over: every process
 * holding the connection reads those bytes first, once, then the socket,
 * as with TCP.  The move is bounded (MOVE_WAIT_MS for all connections); a
 * connection that cannot move in time (a peer that does not answer, a
 * thread holding it) stays RDMA in the parent and is EIO in the child. */
#define MOVE_WAIT_MS 5000

static uint64_t ms_left(uint64_t deadline)
{
	uint64_t now = shunt_now_ns();

	return now >= deadline ? 0 : (deadline - now) / 1000000 + 1;
}

static int lock_until(_Atomic uint32_t *l, uint64_t deadline)
{
	while (shunt_trylock(l)) {
		if (!ms_left(deadline))
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 0;
}

/* The sending half: moved and flushed (its owed FIN sent), or -errno. */
static int move_tx(struct conn *c, uint64_t deadline, int reason)
{
	int r;

	if (lock_until(&c->tx.ctl->wlock, deadline))
		return -EBUSY;
	rdma_fo_request(c, reason); /* unless it is moving already */
	rdma_fo_tx_begin(c, PUSH_MAY_POLL);
	r = move_flush_until(c, deadline);
	if (!r)
		move_fin(c);
	shunt_unlock(&c->tx.ctl->wlock);
	return r == -EPIPE || r == -ECONNRESET ? 0 : r; /* a dead socket owes nothing */
}

/* The receiving half: the peer's message and resent bytes read. */
static int move_rx(struct conn *c, uint64_t deadline)
{
	while (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2) {
		uint64_t t0 = shunt_now_ns();
		rdma_conn_refresh(c);
		if (__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) == 2)
			break;
		if (!__atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) && (c->peer_eof || c->peer_err)) {
			/* the socket ended with no message before it: the peer
			 * sent everything over RDMA and closed (its FIN came
			 * after its last cursor message), so our ring has all */
			shunt_mutex_lock(&rcn(c)->rc->link->cq_lock);
			__atomic_store_n(&c->mv.rx, 2, __ATOMIC_RELEASE);
			shunt_mutex_unlock(&rcn(c)->rc->link->cq_lock);
			__atomic_add_fetch(&c->mv.gen, 1, __ATOMIC_RELEASE);
			break;
		}
		if (!ms_left(deadline))
			return -ETIMEDOUT;
		fd_wait(c->tcp_fd, POLLIN, deadline, 20);
		if (shunt_now_ns() - t0 < 1000000) /* a message still partial */
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 0;
}

/* A move with the peer resending from our application's read position
 * (a pass, a fork: failover.c fo_rx_settle reads the flag under mv.lock,
 * on the progress thread) - or no longer.  The mover holds the reader's
 * lock throughout. */
static void pass_resend(struct conn *c, int on)
{
	shunt_mutex_lock(&c->mv.lock);
	c->mv.pass = on;
	shunt_mutex_unlock(&c->mv.lock);
}

/* Before the descriptor is passed to another process, or shunt's
 * descriptors are given back (move.c, reader's lock held; why: the
 * reason): both halves on TCP, the socket carrying the peer's bytes from
 * our application's read position on - what our ring holds unread is
 * resent there (the peer resends from our last consumer update; we drop
 * only what was read).  Bounded as a move before fork.  1: moved
 * already, for a kernel feature, with bytes (or the peer's end: it shut
 * before it moved) still to read off the rings - they stay, our reads
 * take them first. */
int rdma_conn_pass(struct conn *c, int why)
{
	uint64_t deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;
	int r;

	if (rcn(c)->moved || c->mv.rx || conn_moving(c)) {
		/* moved already (before a fork or exec, a failed link): the
		 * socket is the connection once it is all of it - else our
		 * ring may hold what the socket will not */
		if (!move_settled(c, why))
			return -EBUSY;
		return __atomic_load_n(&c->mv.rx, __ATOMIC_ACQUIRE) != 2 || ring_used(&c->rx) || move_held(c) ? 1 : 0;
	}
	if (rcn(c)->pid != shunt_pid())
		return -EBUSY; /* not this process's link (SHUNT_RDMA_FORK=keep's child) */
	pass_resend(c, 1);
	rdma_fo_request(c, why);
	r = move_tx(c, deadline, why);
	if (!r)
		r = move_rx(c, deadline);
	pass_resend(c, 0);
	return r; /* (a peer that shut down resent too: its FIN waited - cursor.c fin_owed) */
}

static int moved_map(int memfd, struct shunt_seg_hdr **out, size_t *len)
{
	struct stat st;
	struct shunt_seg_hdr *h;
	uint32_t rs;

	if (fstat(memfd, &st) || st.st_size < (off_t)SHUNT_SEG_HDR_SIZE + 4096 ||
	    st.st_size > (off_t)SHUNT_SEG_HDR_SIZE + (1 << 30))
		return -EPROTO;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (h == MAP_FAILED)
		return -errno;
	rs = h->ring_size;
	if (h->magic != SHUNT_MOVED_MAGIC || h->hdr_size != SHUNT_SEG_HDR_SIZE || rs < 4096 ||
	    (rs & (rs - 1)) || (off_t)SHUNT_SEG_HDR_SIZE + rs != st.st_size ||
	    __atomic_load_n(&h->ring[1].prod, __ATOMIC_ACQUIRE) -
	    __atomic_load_n(&h->ring[1].cons, __ATOMIC_ACQUIRE) > rs) {
		munmap(h, (size_t)st.st_size);
		return -EPROTO;
	}
	*out = h;
	*len = (size_t)st.st_size;
	return 0;
}

/* The connection's rings are the region's from now on. */
static void moved_use(struct conn *c, struct shunt_seg_hdr *h, size_t len, int memfd)
{
	uint8_t *data = (uint8_t *)h + SHUNT_SEG_HDR_SIZE;

	rcn(c)->moved = h;
	rcn(c)->moved_len = len;
	rcn(c)->moved_fd = memfd;
	c->tx.data = c->rx.data = data; /* the sending half never writes it */
	c->tx.size = c->rx.size = h->ring_size;
	c->tx.cons_seen = c->rx.cons_seen = 0;
	c->tx.prod_seen = c->rx.prod_seen = 0;
	__atomic_store_n(&c->tx.ctl, &h->ring[0], __ATOMIC_RELEASE);
	__atomic_store_n(&c->rx.ctl, &h->ring[1], __ATOMIC_RELEASE);
}

/* Both halves on TCP: the unread bytes leave the device's pages (the
 * caller holds the reader's lock). */
static int move_ring(struct conn *c, uint64_t deadline)
{
	struct shunt_ring_ctl *otx = c->tx.ctl, *orx = c->rx.ctl;
	uint64_t cons, n;
	uint32_t rs = 4096;
	struct shunt_seg_hdr *h;
	size_t len;
	int fd, r = -EBUSY;

	if (lock_until(&otx->wlock, deadline))
		return r;
	r = 0;
	if (rcn(c)->moved) /* another thread's fork moved it */
		goto out;
	cons = __atomic_load_n(&orx->cons, __ATOMIC_ACQUIRE);
	n = __atomic_load_n(&orx->prod, __ATOMIC_ACQUIRE) - cons; /* frozen: fo_rx is 2 */
	while (rs < n)
		rs <<= 1;
	len = SHUNT_SEG_HDR_SIZE + rs;
	fd = real.memfd_create("shunt-moved", MFD_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		/* no descriptor to be had (a sandbox's RLIMIT_NOFILE): shared
		 * anonymous memory, which a fork shares too; only an exec
		 * cannot take it along (exec.c) */
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED) {
			r = -errno;
			goto out;
		}
	} else if (fd < 0 || ftruncate(fd, (off_t)len) ||
		   (h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		r = -errno;
		if (fd >= 0)
			real.close(fd);
		goto out;
	}
	h->magic = SHUNT_MOVED_MAGIC;
	h->version = 1;
	h->ring_size = rs;
	h->hdr_size = SHUNT_SEG_HDR_SIZE;
	ring_readv(&c->rx, &(struct iovec){ (uint8_t *)h + SHUNT_SEG_HDR_SIZE, n }, 1, n, 1);
	h->ring[1].prod = n;
	h->ring[1].wr_done = __atomic_load_n(&orx->wr_done, __ATOMIC_ACQUIRE);
	h->ring[0].wr_done = __atomic_load_n(&otx->wr_done, __ATOMIC_ACQUIRE);
	/* threads that wait for the old locks find the rings changed (conn.c) */
	moved_use(c, h, len, fd >= 0 ? fd_hide(fd) : -1);
	/* shared from now on: a process cannot tell how much of the peer's
	 * resend the others read, so the short-resend check (fo_rx_end) is
	 * this process's only while it reads alone */
	c->mv.rx_end = 0;
	r = 0;
out:
	shunt_unlock(&otx->wlock);
	return r;
}

struct movelist {
	struct sk **v;
	int n, cap;
};

static void gather(int fd, struct sk *s, void *arg)
{
	struct movelist *m = arg;
	struct conn *c = s->conn;

	(void)fd;
	if (s->kind != SK_CONN || !c || c->tp != &rdma_transport || rcn(c)->moved || c->broken ||
	    rcn(c)->pid != shunt_pid() || __atomic_load_n(&s->hs_confirming, __ATOMIC_ACQUIRE))
		return; /* (a connect() still sending CONFIRM: stays this process's) */
	for (int i = 0; i < m->n; i++)
		if (m->v[i] == s)
			return; /* a dup'd descriptor */
	if (m->n == m->cap) {
		int cap = m->cap ? 2 * m->cap : 16;
		struct sk **v = realloc(m->v, sizeof *v * (size_t)cap);
		if (!v)
			return;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = sk_ref(s);
}

void rdma_share_prepare(const char *why, int reason)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER; /* two threads forking */
	struct movelist m = { 0 };
	uint64_t deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;
	int *err, *held;

	if (!__atomic_load_n(&rdma_links, __ATOMIC_ACQUIRE))
		return; /* no RDMA connection was ever made here */
	shunt_mutex_lock(&one);
	fdtab_each_held(gather, &m);
	if (!m.n || !(err = calloc((size_t)m.n * 2, sizeof *err))) {
		for (int i = 0; i < m.n; i++)
			sk_put(m.v[i]);
		free(m.v);
		shunt_mutex_unlock(&one);
		return;
	}
	held = err + m.n;
	/* all sending halves first: the peers move theirs meanwhile.  Each
	 * reader's lock is held from here to the ring's move, so the peer
	 * resends from our application's read position (mv.pass): the
	 * socket alone carries what nobody read, the region starts empty,
	 * and the connection can go on to any process - a pass (SCM_RIGHTS)
	 * of it later has nothing left behind in the region. */
	for (int i = 0; i < m.n; i++) {
		struct conn *c = m.v[i]->conn;
		err[i] = lock_until(&c->rx.ctl->rlock, deadline) ? -EBUSY : 0;
		if (!err[i]) {
			held[i] = 1;
			pass_resend(c, 1);
			err[i] = move_tx(c, deadline, reason);
		}
	}
	for (int i = 0; i < m.n; i++)
		if (!err[i])
			err[i] = move_rx(m.v[i]->conn, deadline);
	for (int i = 0; i < m.n; i++) {
		struct conn *c = m.v[i]->conn;
		struct shunt_ring_ctl *orx = c->rx.ctl;
		if (!err[i])
			err[i] = move_ring(c, deadline);
		if (held[i]) {
			pass_resend(c, 0); /* a message still to come is read as any move's */
			shunt_unlock(&orx->rlock);
		}
		if (err[i])
			shunt_log("rdma: connection (tcp fd %d) could not move to TCP before %s (%s): "
				  "only this process can use it", c->tcp_fd, why, strerror(-err[i]));
		sk_put(m.v[i]);
	}
	free(err);
	free(m.v);
	shunt_mutex_unlock(&one);
}

/* Before the process ends (exit(), _exit()): the kernel closes the TCP
 * socket (its FIN) and the queue pair goes with the process, so what
 * write() accepted must be at the peer's device first - TCP's buffer would
 * deliver it.  Each connection this process owns ends its sending half as
 * shutdown(SHUT_WR) does: bytes posted, then the cursor FIN, its
 * completion awaited.  Bounded (a writer blocked on a full ring holds its
 * lock, a peer may not answer): no new flush after MOVE_WAIT_MS.  A killed
 * process cannot do this. */
SHUNT_CHILD_PATH void rdma_exit_flush(void)
{
	struct movelist m = { 0 };
	uint64_t deadline;

	if (!__atomic_load_n(&rdma_links, __ATOMIC_ACQUIRE))
		return; /* no RDMA connection was ever made here */
	deadline = shunt_now_ns() + MOVE_WAIT_MS * 1000000ull;
	if (shunt_in_handler())
		return; /* _exit() in a signal handler: the interrupted thread may
			 * hold the locks a flush takes; the peer sees a reset */
	shunt_fault_rdma_release();
	/* closes whose words the progress thread still awaits (cursor.c,
	 * rdma_close_sweep): the process's end would cut them off, the
	 * kernel's FIN before the word - they end first, within their bound */
	while (__atomic_load_n(&rdma_closers, __ATOMIC_ACQUIRE) && ms_left(deadline)) {
		shunt_mutex_lock(&rdma_lock);
		rdma_links_poll();
		shunt_mutex_unlock(&rdma_lock);
		rdma_close_sweep();
		usleep(1000);
	}
	fdtab_each_held(gather, &m);
	for (int i = 0; i < m.n; i++) {
		struct conn *c = m.v[i]->conn;
		/* past the deadline the rest go as they are (each flush may
		 * wait up to 2 s for a peer that does not answer) */
		rdma_conn_closing(c);
		if (rcn(c)->close_reset && !conn_moving(c) && ms_left(deadline) &&
		    !lock_until(&c->tx.ctl->wlock, deadline)) {
			/* bytes of the peer's unread: it is reset, not ended */
			rdma_push_and_wait(c, SHUNT_CDC_F_CLOSED | SHUNT_CDC_F_RESET);
			shunt_unlock(&c->tx.ctl->wlock);
		} else if (__atomic_load_n(&rcn(c)->rc->fin_wait, __ATOMIC_ACQUIRE) && ms_left(deadline)) {
			/* shutdown()'s kernel FIN still waits for its closing
			 * word, and the progress thread ends with us: wait
			 * here, then the FIN, or the move */
			rdma_link_wait(rcn(c)->rc->link, __atomic_load_n(&rcn(c)->rc->fin_seq, __ATOMIC_ACQUIRE),
				       ms_left(deadline) * 1000000ull);
			if (!lock_until(&c->tx.ctl->wlock, deadline)) {
				rdma_fin_settle(c, 1);
				shunt_unlock(&c->tx.ctl->wlock);
			}
			if (conn_moving(c))
				move_tx(c, deadline, SHUNT_R_RDMA_STALLED);
		} else if (!c->shut_wr && ms_left(deadline) && !lock_until(&c->tx.ctl->wlock, deadline)) {
			__atomic_store_n(&c->tx.ctl->wr_done, 1, __ATOMIC_RELEASE);
			rdma_conn_shutdown_wait(c);
			shunt_unlock(&c->tx.ctl->wlock);
		}
		sk_put(m.v[i]);
	}
	free(m.v);
	/* the sockets closed with bytes still owed, or the peer's resend
	 * still to be read (failover.c): the kernel would finish them */
	rdma_fo_threads_wait(deadline);
	rdma_links_farewell();
}

SHUNT_CHILD_PATH __attribute__((destructor)) static void rdma_exit(void)
{
	rdma_exit_flush();
}

/* After exec: a connection that moved before it, from its handover. */
int rdma_conn_adopt(int fd, int memfd, int side, int reason, struct conn **out)
{
	static struct rdma_conn no_link; /* its link is gone with the old image */
	struct rconn *x = calloc(1, sizeof *x);
	struct conn *c;
	struct shunt_seg_hdr *h = NULL;
	size_t len = 0;
	int r = x ? moved_map(memfd, &h, &len) : -ENOMEM;
	int efd;

	if (r) {
		free(x);
		return r;
	}
	c = &x->c;
	c->tpd = x; /* for rcn() until conn_init */
	efd = real.eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->tcp_fd = fd_dup_hidden(fd);
	rcn(c)->moved_fd = fd_dup_hidden(memfd);
	if (efd < 0 || c->tcp_fd < 0 || rcn(c)->moved_fd < 0) {
		if (efd >= 0)
			real.close(efd);
		fd_close_internal(c->tcp_fd);
		fd_close_internal(rcn(c)->moved_fd);
		munmap(h, len);
		free(x);
		return -EMFILE;
	}
	x->rc = &no_link;
	x->pid = 0;
	c->efd_mine = fd_hide(efd);
	c->bell_id = bell_new_id();
	conn_init(c, &rdma_transport, x, side, c->tcp_fd);
	c->mv.want = reason;
	c->mv.tx = 1;
	c->mv.rx = 2;
	c->mv.hdr_off = sizeof c->mv.hdr;
	moved_use(c, h, len, rcn(c)->moved_fd);
	*out = c;
	return 0;
}

/* A forked child starts with no links; the connections that moved before
 * the fork are TCP (and their region) here, the others EIO (core.c). */
SHUNT_CHILD_PATH void rdma_atfork_child(void)
{
	SHUNT_RESET(rdma_links, NULL);
	SHUNT_RESET(rdma_spares, NULL);
	SHUNT_RESET(rdma_offered, NULL);
	SHUNT_RESET(rdma_retiring, NULL);
	rdma_closers_forget(); /* the parent's threads, not ours */
	rdma_fo_threads_forget();
	SHUNT_RESET(rdma_thread_on, 0);
	rdma_dev_forget();
	shunt_mutex_reset(&rdma_lock);
}

