/* SPDX-License-Identifier: MIT */
/* link.c - RDMA devices, links (RC queue pairs) and their data path; see link.h. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include "link.h"
#include "../../shim/shim.h"
#include "../../base/base.h"
#include "../../base/real.h"

#define RECV_WRID_BASE 0x100000000ull /* wr_id of receive i: base + i */

static struct rdma_dev *devs;
static struct rdma_dev *stale_devs; /* opened before a credential change */
static int devs_scanned;
static int devs_refused; /* errno of a device that would not open for a limit */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

static void gid_of(const struct sockaddr *sa, union ibv_gid *g)
{
	memset(g, 0, sizeof *g);
	if (sa->sa_family == AF_INET) {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(&g->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else {
		memcpy(g->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

/* Every active port's GIDs, looked up once: (device, port, index, gid). */
static void scan(void)
{
	struct ibv_device **list;
	int n = 0;

	if (ibv_load() || !(list = ibv.get_device_list(&n)))
		return;
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv.open_device(list[i]);
		struct ibv_device_attr da;
		int kept = 0;
		if (!ctx) {
			/* the rdma cgroup's hca_handle limit (EAGAIN), or out of memory */
			if (errno == EAGAIN || errno == ENOMEM || errno == EMFILE)
				devs_refused = errno;
			continue;
		}
		if (!ibv.query_device(ctx, &da)) {
			for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
				struct ibv_port_attr pa;
				memset(&pa, 0, sizeof pa);
				if (ibv.query_port(ctx, p, (void *)&pa) || pa.state != IBV_PORT_ACTIVE)
					continue;
				for (int k = 0; k < pa.gid_tbl_len && k < 256; k++) {
					union ibv_gid g;
					struct rdma_dev *d;
					if (ibv.query_gid(ctx, p, k, &g) || !memcmp(g.raw, (uint8_t[16]){ 0 }, 16))
						continue;
					if (!(d = calloc(1, sizeof *d)))
						break;
					d->ctx = ctx;
					d->port = p;
					d->gid_index = k;
					d->gid = g;
					d->mtu = pa.active_mtu;
					strncpy(d->name, ibv.get_device_name(list[i]), sizeof d->name - 1);
					d->next = devs;
					devs = d;
					kept = 1;
				}
			}
		}
		if (!kept) {
			ibv.close_device(ctx);
			continue;
		}
		/* libibverbs opened them at the lowest free numbers, which a
		 * program's dup2() may make its own (a shell's `exec 7>file`):
		 * among shunt's descriptors instead (it reads the context's
		 * fields at each use) */
		ctx->cmd_fd = fd_hide(ctx->cmd_fd);
		ctx->async_fd = fd_hide(ctx->async_fd);
	}
	ibv.free_device_list(list);
}

/* Non-zero (an errno) when a device would not open because a limit said
 * no: no device for an address then means "resources", not "no RDMA". */
int rdma_dev_refused(void)
{
	return devs_refused;
}

/* The descriptors of a list's contexts and channels, each once. */
SHUNT_CHILD_PATH static void close_fds(struct rdma_dev *list)
{
	for (struct rdma_dev *d = list; d; d = d->next) {
		int ctx_seen = 0, ch_seen = !d->ch;
		for (struct rdma_dev *e = list; e != d; e = e->next) {
			ctx_seen |= e->ctx == d->ctx; /* one context, many addresses */
			ch_seen |= e->ch == d->ch;
		}
		if (!ch_seen)
			fd_close_internal(d->ch->fd);
		if (!ctx_seen) {
			fd_close_internal(d->ctx->async_fd);
			fd_close_internal(d->ctx->cmd_fd);
		}
	}
}

/* A forked child may not use its parent's device contexts (the kernel
 * refuses commands from another address space): it opens its own. */
SHUNT_CHILD_PATH void rdma_dev_forget(void)
{
	/* ... and lets go of the parent's descriptors it inherited: the
	 * parent keeps its own references, and the child's table is the
	 * program's (a pre-fork server's workers each hold their limit) */
	close_fds(devs);
	close_fds(stale_devs);
	SHUNT_RESET(devs, NULL);
	SHUNT_RESET(stale_devs, NULL);
	SHUNT_RESET(devs_scanned, 0);
	SHUNT_RESET(devs_refused, 0);
	shunt_mutex_reset(&dev_lock);
}

/* The kernel takes a verbs command written to a device's descriptor only
 * from the credentials that opened it (ib_safe_file_access), and
 * libibverbs makes every new object - a protection domain, a queue pair,
 * a queue pair's move to RTR - with write(): after setuid() or any of its
 * kin, even seteuid() and back, the contexts opened before cannot make a
 * link.  They are kept, marked stale, for the links made on them (on
 * hardware those go on: their doorbells are in memory; Soft-RoCE rings
 * through write(), links.c rdma_creds_changed), and the next link opens
 * the devices again. */
void rdma_dev_renew(void)
{
	shunt_mutex_lock(&dev_lock);
	for (struct rdma_dev *d = devs, *next; d; d = next) {
		next = d->next;
		d->stale = 1;
		d->next = stale_devs;
		stale_devs = d;
	}
	devs = NULL;
	devs_scanned = 0;
	devs_refused = 0;
	shunt_mutex_unlock(&dev_lock);
}

int rdma_dev_same(const struct rdma_dev *a, const struct rdma_dev *b)
{
	return a == b || (a->port == b->port && a->gid_index == b->gid_index &&
			  !memcmp(a->gid.raw, b->gid.raw, 16) && !strcmp(a->name, b->name));
}

/* Close each stale context that no entry of it has a user of (rdma_lock
 * held: nothing makes a link meanwhile; the progress thread polls the
 * devices of rdma_links only, which are users). */
void rdma_dev_sweep(void)
{
	shunt_mutex_lock(&dev_lock);
	for (struct rdma_dev **pp = &stale_devs, *d; (d = *pp);) {
		struct ibv_context *ctx = d->ctx;
		struct ibv_comp_channel *ch = NULL;
		int used = 0;
		for (struct rdma_dev *e = stale_devs; e; e = e->next)
			used |= e->ctx == ctx && __atomic_load_n(&e->users, __ATOMIC_ACQUIRE);
		if (used) {
			pp = &d->next;
			continue;
		}
		/* every entry of that context goes; pp stays (d's successor, or
		 * an entry of another context, comes to it) */
		for (struct rdma_dev **qq = pp, *e; (e = *qq);) {
			if (e->ctx != ctx) {
				qq = &e->next;
				continue;
			}
			ch = e->ch ? e->ch : ch;
			*qq = e->next;
			free(e);
		}
		/* libibverbs closes the descriptors: ours no more */
		if (ch) {
			int fd = ch->fd;
			fd_unmark_internal(fd);
			if (ibv.destroy_comp_channel(ch)) /* (a queue it still counts) */
				real.close(fd);
		}
		fd_unmark_internal(ctx->async_fd);
		fd_unmark_internal(ctx->cmd_fd);
		ibv.close_device(ctx);
	}
	shunt_mutex_unlock(&dev_lock);
}

/* The last match in the table wins: rxe and most RoCE devices list a
 * RoCE v1 entry before the v2 one (UDP, routable) for the same address. */
struct rdma_dev *rdma_dev_for(const struct sockaddr *local)
{
	union ibv_gid want;
	struct rdma_dev *d, *best = NULL;

	shunt_mutex_lock(&dev_lock);
	if (!devs_scanned) {
		scan();
		devs_scanned = 1;
	}
	gid_of(local, &want);
	for (d = devs; d; d = d->next)
		if (!memcmp(d->gid.raw, want.raw, 16) && (!best || d->gid_index > best->gid_index))
			best = d;
	if (best && !best->ch) {
		/* one completion channel per device context, shared by its links */
		struct rdma_dev *o;
		for (o = devs; o; o = o->next)
			if (o->ctx == best->ctx && o->ch)
				best->ch = o->ch;
		if (!best->ch && (best->ch = ibv.create_comp_channel(best->ctx)))
			best->ch->fd = fd_hide(best->ch->fd); /* (as the context's, above) */
		if (!best->ch)
			best = NULL;
	}
	shunt_mutex_unlock(&dev_lock);
	return best;
}

static int post_recv(struct rdma_link *l, unsigned i)
{
	struct ibv_sge sge = { (uintptr_t)(l->local + (size_t)LINK_SLOTS * l->ring_size +
					   (size_t)i * sizeof(struct shunt_cdc)),
			       sizeof(struct shunt_cdc), l->local_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = RECV_WRID_BASE + i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(l->qp, &wr, &bad) ? -EIO : 0;
}

/* A link's region: aligned to 2 MiB and asking for transparent huge pages,
 * so that the registration the device translates is a few large pages
 * (4 for 8 MiB) instead of thousands of small ones; where the kernel has no
 * huge page to give, small pages work the same.  len is a page multiple. */
#define REGION_ALIGN ((size_t)2 << 20)

static void *region(size_t len)
{
	size_t span = len + REGION_ALIGN;
	uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + REGION_ALIGN - 1) & ~(uintptr_t)(REGION_ALIGN - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (p + span > a + len)
		munmap(a + len, (size_t)(p + span - (a + len)));
	madvise(a, len, MADV_HUGEPAGE);
	/* a forked child must not share pages the device writes (see rdma.md) */
	madvise(a, len, MADV_DONTFORK);
	return a;
}

/* A window per ring (type 1: re-bound in place, each bind a new key).  A
 * device without windows falls back to the region's own key (the link's
 * protection domain still isolates other peers); a limit fails the link. */
static int windows(struct rdma_link *l)
{
	for (unsigned i = 0; i < LINK_SLOTS; i++) {
		if ((l->mw[i] = ibv_alloc_mw(l->pd, IBV_MW_TYPE_1)))
			continue;
		int e = errno;
		while (i--) {
			ibv_dealloc_mw(l->mw[i]);
			l->mw[i] = NULL;
		}
		return e == EOPNOTSUPP || e == ENOSYS || e == EINVAL ? 0 : -ENOMEM;
	}
	return 0;
}

/* Completed binds; bind_lock held.  -EIO: the binder failed. */
static int bind_reap(struct rdma_link *l)
{
	struct ibv_wc wc[8];
	int n;

	while ((n = ibv_poll_cq(l->bcq, 8, wc)) > 0)
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				return -EIO;
			if (wc[i].wr_id > l->bcompleted)
				l->bcompleted = wc[i].wr_id;
		}
	return n < 0 ? -EIO : 0;
}

/* Post a bind of slot's window over its ring: a new key.  bind_lock held. */
static int bind_locked(struct rdma_link *l, unsigned slot)
{
	struct ibv_mw_bind b = { .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = l->rx_mr, .addr = (uintptr_t)rdma_slot_rx(l, slot),
			       .length = l->ring_size, .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };
	uint64_t t0 = shunt_now_ns();

	while (l->bposted - l->bcompleted >= LINK_BINDS) /* a local operation: soon */
		if (bind_reap(l) || shunt_now_ns() - t0 > 2000000000ull)
			return -EPIPE;
	b.wr_id = l->bposted + 1;
	if (shunt_fault_rdma_bind()) /* tests only (fault.c) */
		ibv.modify_qp(l->bqp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE);
	if (ibv_bind_mw(l->bqp, l->mw[slot], &b))
		return -EPIPE;
	l->mw_seq[slot] = ++l->bposted;
	return 0;
}

int rdma_slot_key(struct rdma_link *l, unsigned slot, uint32_t *rkey)
{
	uint64_t t0 = shunt_now_ns();
	int r = 0;

	if (!l->mw[slot]) {
		*rkey = l->rx_mr->rkey;
		return 0;
	}
	shunt_mutex_lock(&l->bind_lock);
	if (!l->mw_ready[slot]) /* never bound, or the re-bind could not be posted */
		r = bind_locked(l, slot);
	l->mw_ready[slot] = 0;
	*rkey = l->mw[slot]->rkey;
	/* the peer may write as soon as it has the key: bound first */
	while (!r && l->bcompleted < l->mw_seq[slot]) {
		r = bind_reap(l);
		if (!r && shunt_now_ns() - t0 > 2000000000ull)
			r = -ETIMEDOUT;
	}
	shunt_mutex_unlock(&l->bind_lock);
	if (r == -EIO || r == -EPIPE) {
		/* The binder failed: no slot of the link gets a key any more, so
		 * it fails now - its connections move to TCP as on any link
		 * failure, and the next connection makes a new link.  Left up,
		 * it refused every later connection between the two processes
		 * (each stayed TCP, link-failed; tests/rdma/binder.sh). */
		shunt_log("rdma: the window binder of the link to qp %u failed: the link goes",
			  l->peer_qpn);
		rdma_link_break(l);
	}
	return r;
}

static int qp_init(struct ibv_qp *qp, struct rdma_dev *d)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = d->port,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE };

	return ibv.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS) ? -EIO : 0;
}

/* Both ends derive each direction's first PSN from the sender's QPN. */
static int qp_connect(struct ibv_qp *qp, struct rdma_dev *d, const union ibv_gid *gid, uint32_t qpn,
		      int ack_timeout)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = d->mtu, .dest_qp_num = qpn,
				 .rq_psn = qpn & 0xffffff, .max_dest_rd_atomic = 1, .min_rnr_timer = 12 };

	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = d->port;
	if (ibv.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -EIO;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)ack_timeout; /* 4.096 us * 2^N per try (14: 67 ms) */
	a.retry_cnt = 6;  /* not 7: rxe takes 7 as "retry for ever" */
	a.rnr_retry = 7;
	a.sq_psn = qp->qp_num & 0xffffff;
	a.max_rd_atomic = 1;
	if (ibv.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -EIO;
	return 0;
}

/* The binder: a queue pair in the link's protection domain, connected to
 * itself (a window of type 1 belongs to the domain, whichever queue pair
 * bound it), with its own completion queue. */
static int binder_new(struct rdma_link *l)
{
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = LINK_BINDS, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };

	if (!(l->bcq = ibv.create_cq(l->dev->ctx, LINK_BINDS, NULL, NULL, 0)))
		return -ENOMEM;
	qa.send_cq = qa.recv_cq = l->bcq;
	if (!(l->bqp = ibv.create_qp(l->pd, &qa)))
		return -ENOMEM;
	if (qp_init(l->bqp, l->dev) || qp_connect(l->bqp, l->dev, &l->dev->gid, l->bqp->qp_num, 14))
		return -EIO;
	return 0;
}

int rdma_link_new(struct rdma_dev *d, uint32_t ring_size, const struct link_ops *ops,
		  struct rdma_link **out)
{
	struct rdma_link *l = calloc(1, sizeof *l);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = LINK_SQ, .max_recv_wr = LINK_RECVS, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = sizeof(struct shunt_cdc) } };

	if (!l)
		return -ENOMEM;
	l->dev = d;
	__atomic_fetch_add(&d->users, 1, __ATOMIC_ACQ_REL); /* (rdma_link_free: one less) */
	l->ops = ops;
	l->ring_size = ring_size;
	l->rx_len = (size_t)LINK_SLOTS * ring_size;
	l->local_len = (l->rx_len + (size_t)LINK_RECVS * sizeof(struct shunt_cdc) + 4095) & ~(size_t)4095;
	pthread_mutex_init(&l->sq_lock, NULL);
	pthread_mutex_init(&l->cq_lock, NULL);
	pthread_mutex_init(&l->bind_lock, NULL);
	if (!(l->rx = region(l->rx_len)) || !(l->local = region(l->local_len)) ||
	    !(l->pd = ibv.alloc_pd(d->ctx)) || windows(l) ||
	    !(l->rx_mr = ibv.reg_mr(l->pd, l->rx, l->rx_len, IBV_ACCESS_LOCAL_WRITE |
				    (l->mw[0] ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE))) ||
	    !(l->local_mr = ibv.reg_mr(l->pd, l->local, l->local_len, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(l->cq = ibv.create_cq(d->ctx, LINK_SQ + LINK_RECVS, l, d->ch, 0)))
		goto fail;
	qa.send_cq = qa.recv_cq = l->cq;
	if (!(l->qp = ibv.create_qp(l->pd, &qa)) || qp_init(l->qp, d) || (l->mw[0] && binder_new(l)))
		goto fail;
	for (unsigned i = 0; i < LINK_RECVS; i++)
		if (post_recv(l, i))
			goto fail;
	if (ibv_req_notify_cq(l->cq, 0))
		goto fail;
	*out = l;
	return 0;
fail:
	rdma_link_free(l);
	return -ENOMEM;
}

int rdma_link_connect(struct rdma_link *l, const union ibv_gid *gid, uint32_t qpn, int ack_timeout)
{
	if (qp_connect(l->qp, l->dev, gid, qpn, ack_timeout))
		return -EIO;
	l->peer_gid = *gid;
	l->peer_qpn = qpn;
	__atomic_store_n(&l->state, LINK_UP, __ATOMIC_RELEASE);
	return 0;
}

void rdma_link_free(struct rdma_link *l)
{
	if (l->qp)
		ibv.destroy_qp(l->qp);
	if (l->bqp)
		ibv.destroy_qp(l->bqp);
	if (l->cq)
		ibv.destroy_cq(l->cq);
	if (l->bcq)
		ibv.destroy_cq(l->bcq);
	for (unsigned i = 0; i < LINK_SLOTS && l->mw[i]; i++)
		ibv_dealloc_mw(l->mw[i]);
	if (l->rx_mr)
		ibv.dereg_mr(l->rx_mr);
	if (l->local_mr)
		ibv.dereg_mr(l->local_mr);
	if (l->pd)
		ibv.dealloc_pd(l->pd);
	if (l->rx)
		munmap(l->rx, l->rx_len);
	if (l->local)
		munmap(l->local, l->local_len);
	__atomic_fetch_sub(&l->dev->users, 1, __ATOMIC_ACQ_REL);
	free(l);
}

int rdma_slot_take(struct rdma_link *l, void *ctx, uint32_t tag)
{
	uint32_t u = __atomic_load_n(&l->used, __ATOMIC_ACQUIRE);

	for (;;) {
		unsigned s;
		if (u == 0xffffffffu)
			return -ENOSPC;
		s = (unsigned)__builtin_ctz(~u);
		if (__atomic_compare_exchange_n(&l->used, &u, u | (1u << s), 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			l->slot_ctx[s] = ctx;
			l->slot_tag[s] = tag;
			return (int)s;
		}
	}
}

void rdma_slot_put(struct rdma_link *l, unsigned slot)
{
	l->slot_ctx[slot] = NULL;
	if (l->mw[slot] && __atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == LINK_UP) {
		/* the old key dies now, and the next connection need not wait */
		shunt_mutex_lock(&l->bind_lock);
		l->mw_ready[slot] = !bind_locked(l, slot);
		shunt_mutex_unlock(&l->bind_lock);
	}
	__atomic_fetch_and(&l->used, ~(1u << slot), __ATOMIC_ACQ_REL);
}

/* Make room in the send queue: completions are asked for every LINK_SQ/4
 * posts, so at most LINK_SQ/4 * 3 are ever unaccounted.  Reaping is tried
 * for SQ_POLL_NS at most: a peer that posts no receives (stopped, SIGSTOP)
 * keeps the queue full as long as it likes - its device answers RNR,
 * retried for ever - and no caller may wait for it (-EAGAIN: what a writer
 * staged is posted later, cursor.c's backlog). */
#define SQ_POLL_NS 5000000ull

static int sq_room(struct rdma_link *l, unsigned need, int may_poll)
{
	uint64_t start = 0;

	while (l->posted + need - __atomic_load_n(&l->completed, __ATOMIC_ACQUIRE) > LINK_SQ) {
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP)
			return -EPIPE;
		if (!may_poll)
			return -EAGAIN;
		if (!start)
			start = shunt_now_ns();
		else if (shunt_now_ns() - start > SQ_POLL_NS)
			return -EAGAIN;
		shunt_mutex_unlock(&l->sq_lock);
		rdma_link_poll(l);
		shunt_mutex_lock(&l->sq_lock);
	}
	return 0;
}

static void cdc_to_wire(struct shunt_cdc *w, const struct shunt_cdc *m)
{
	w->ring = htobe64(m->ring);
	w->prod = htobe64(m->prod);
	w->cons = htobe64(m->cons);
	w->tag = htobe32(m->tag);
	w->flags = htobe32(m->flags);
}

int rdma_push(struct rdma_link *l, unsigned slot, uint64_t raddr, uint32_t rkey,
	      uint64_t from, uint64_t to, const struct shunt_cdc *m, int flags, uint64_t *seq)
{
	int may_poll = flags & PUSH_MAY_POLL;
	uint32_t rs = l->ring_size, off = (uint32_t)(from & (rs - 1));
	uint64_t len = to - from;
	struct ibv_sge sg[3];
	struct ibv_send_wr wr[3], *bad;
	struct shunt_cdc w;
	int n = 0, r;

	memset(wr, 0, sizeof wr);
	/* at most two writes: up to the end of the ring, then from its start */
	while (len) {
		uint32_t chunk = (uint32_t)(len < rs - off ? len : rs - off);
		sg[n] = (struct ibv_sge){ (uintptr_t)(rdma_slot_tx(l, slot) + off), chunk, l->local_mr->lkey };
		wr[n].opcode = IBV_WR_RDMA_WRITE;
		wr[n].sg_list = &sg[n];
		wr[n].num_sge = 1;
		wr[n].wr.rdma.remote_addr = raddr + off;
		wr[n].wr.rdma.rkey = rkey;
		len -= chunk;
		off = 0;
		n++;
	}
	cdc_to_wire(&w, m);
	sg[n] = (struct ibv_sge){ (uintptr_t)&w, sizeof w, 0 };
	wr[n].opcode = IBV_WR_SEND;
	wr[n].send_flags = IBV_SEND_INLINE;
	wr[n].sg_list = &sg[n];
	wr[n].num_sge = 1;
	n++;
	for (int i = 0; i + 1 < n; i++)
		wr[i].next = &wr[i + 1];
	shunt_mutex_lock(&l->sq_lock);
	if ((r = sq_room(l, (unsigned)n, may_poll)) == 0) {
		/* ask for a completion when crossing a quarter of the queue,
		 * and for the cursor message itself when the caller waits */
		for (int i = 0; i < n; i++)
			if ((l->posted + (uint64_t)i + 1) % (LINK_SQ / 4) == 0 ||
			    (i == n - 1 && (flags & PUSH_SIGNAL))) {
				wr[i].send_flags |= IBV_SEND_SIGNALED;
				wr[i].wr_id = l->posted + (uint64_t)i + 1;
			}
		r = ibv_post_send(l->qp, wr, &bad) ? -EPIPE : 0;
		if (!r)
			l->posted += (uint64_t)n;
		if (seq)
			*seq = l->posted;
	}
	shunt_mutex_unlock(&l->sq_lock);
	return r;
}

/* 0: a ring's cursor message for *slot; 1: a link message (m->prod its
 * op); -EPROTO: neither. */
static int cdc_from_wire(struct rdma_link *l, const struct shunt_cdc *w, unsigned *slot,
			 struct shunt_cdc *m)
{
	uint64_t base = (uintptr_t)l->rx, off;

	m->ring = be64toh(w->ring);
	m->prod = be64toh(w->prod);
	m->cons = be64toh(w->cons);
	m->tag = be32toh(w->tag);
	m->flags = be32toh(w->flags);
	if (m->flags == SHUNT_CDC_F_LINK) /* about the link (wire.h) */
		return !m->ring && !m->cons && !m->tag && m->prod >= SHUNT_LINK_RETIRE &&
				       m->prod <= SHUNT_LINK_TEST
			       ? 1
			       : -EPROTO;
	off = m->ring - base;
	if (m->ring < base || off >= l->rx_len || off % l->ring_size || (m->flags & ~SHUNT_CDC_F_ALL))
		return -EPROTO;
	*slot = (unsigned)(off / l->ring_size);
	if (!(__atomic_load_n(&l->used, __ATOMIC_ACQUIRE) & (1u << *slot)) ||
	    l->slot_tag[*slot] != m->tag)
		return -EPROTO;
	return 0;
}

static int poll_locked(struct rdma_link *l);

int rdma_link_poll(struct rdma_link *l)
{
	if (shunt_mutex_trylock(&l->cq_lock))
		return 0; /* someone else reaps: their dispatch wakes us */
	return poll_locked(l);
}

/* Every completion that exists now is processed when this returns. */
void rdma_link_drain(struct rdma_link *l)
{
	shunt_mutex_lock(&l->cq_lock);
	poll_locked(l);
}

int rdma_link_wait(struct rdma_link *l, uint64_t seq, uint64_t timeout_ns)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (__atomic_load_n(&l->completed, __ATOMIC_ACQUIRE) < seq) {
		if (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) != LINK_UP)
			return -EPIPE;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
		    (uint64_t)t0.tv_nsec > timeout_ns)
			return -ETIMEDOUT;
		if (!rdma_link_poll(l))
			sched_yield();
	}
	return 0;
}

static int poll_locked(struct rdma_link *l)
{
	struct ibv_wc wc[32];
	int n, total = 0, down = 0;

	while ((n = ibv_poll_cq(l->cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				if (!down && !l->fail_status) {
					l->fail_status = (int)wc[i].status;
					l->fail_op = (int)wc[i].opcode;
				}
				down = 1;
				continue;
			}
			if (wc[i].wr_id >= RECV_WRID_BASE && wc[i].opcode == IBV_WC_RECV) {
				unsigned k = (unsigned)(wc[i].wr_id - RECV_WRID_BASE), slot;
				const struct shunt_cdc *w = (const void *)(l->local + (size_t)LINK_SLOTS *
					l->ring_size + (size_t)k * sizeof *w);
				struct shunt_cdc m;
				int r;
				if (k >= LINK_RECVS)
					continue;
				__atomic_store_n(&l->rx_count, l->rx_count + 1, __ATOMIC_RELAXED); /* (cq_lock) */
				r = wc[i].byte_len == sizeof m ? cdc_from_wire(l, w, &slot, &m) : -EPROTO;
				if (!r)
					l->ops->cdc(l, slot, &m);
				else if (r == 1 && m.prod != SHUNT_LINK_TEST) /* the progress thread's
									 (links.c); a TEST asks nothing */
					__atomic_store_n(&l->link_rx, (uint32_t)m.prod, __ATOMIC_RELEASE);
				if (post_recv(l, k))
					down = 1;
			} else if (wc[i].wr_id > __atomic_load_n(&l->completed, __ATOMIC_RELAXED)) {
				__atomic_store_n(&l->completed, wc[i].wr_id, __ATOMIC_RELEASE);
			}
		}
		total += n;
	}
	if (n < 0)
		down = 1;
	shunt_mutex_unlock(&l->cq_lock);
	if (down && __atomic_exchange_n(&l->state, LINK_DOWN, __ATOMIC_ACQ_REL) == LINK_UP)
		l->ops->down(l);
	return total;
}

void rdma_link_break(struct rdma_link *l)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ibv.modify_qp(l->qp, &a, IBV_QP_STATE);
}

/* Out of use now, not when the flush of its posted receives is reaped: the
 * next offer does not find it. */
void rdma_link_down(struct rdma_link *l)
{
	rdma_link_break(l);
	if (__atomic_exchange_n(&l->state, LINK_DOWN, __ATOMIC_ACQ_REL) == LINK_UP)
		l->ops->down(l);
}
