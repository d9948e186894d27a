// SPDX-License-Identifier: GPL-2.0
/*
 * sockops.bpf.c - shunt's capability signal in the TCP handshake (issue #3),
 * and the per-socket channel through which the shim asks for it (issue #12).
 *
 * Three programs on a cgroup v2 subtree, sharing one socket-local storage:
 *   cgroup/setsockopt  level SHUNT_AG_SOL: the shim registers the socket it
 *                      is about to connect (with a nonce) or listen on;
 *   sockops            client SYN: kind 254, len 12, ExID 0x5348 ("SH"),
 *                      8-byte nonce; server SYN-ACK: the same ExID with
 *                      ~nonce, only when the SYN had it and the listener is
 *                      registered; the outcome goes to the socket's storage;
 *   cgroup/getsockopt  level SHUNT_AG_SOL: the shim reads its verdict.
 * A peer that merely replays unknown options echoes the nonce itself, which
 * the client tells apart from ~nonce: that connection stays plain.  A
 * process reaches only the storage of sockets it holds: there is no shared
 * table to read or forge.  Every other socket option passes untouched.
 *
 * A listener goes off (OPT_LISTENER_OFF) once a process holding it may
 * accept past the shim - it set up io_uring (IORING_OP_ACCEPT), went into
 * a seccomp sandbox, or an image that will not load the shim is given it:
 * a client's PROPOSAL would reach that program as its data.  The kernel
 * runs the SYN-ACK's callbacks on the request socket, whose listener's
 * storage cannot be reached from here, so an off listener is counted in
 * shunt_off under its network namespace and port, which the request socket
 * has; such SYN-ACKs carry no answer (every listener on that port of that
 * namespace goes plain - the safe side) until the count is back at 0:
 * the listener closed (its STATE_CB).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define SHUNT_OPT_KIND 254
#define SHUNT_OPT_LEN 12
#define SHUNT_EXID_HI 0x53
#define SHUNT_EXID_LO 0x48

/* shared with src/common/agent.h (a BPF object cannot include libc headers) */
#define SHUNT_AG_SOL 0x5348
#define OPT_CLIENT 1
#define OPT_LISTENER 2
#define OPT_VERDICT 3
#define OPT_LISTENER_OFF 4
#define ST_CLIENT_WANT 1
#define ST_CLIENT_PEER_OK 2
#define ST_CLIENT_PEER_NONE 3
#define ST_CLIENT_PEER_REPLAY 4
#define ST_LISTENER 10
#define ST_SERVER_SAW 11
#define ST_SERVER_SAW_OFF 12
#define MAX_UIDS 64

#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCP_LISTEN_STATE 10 /* BPF_TCP_LISTEN */
#define PAGE_SIZE 4096

struct verdict {
	__u32 state;
	__u32 off; /* a listener's: holders that went off (OPT_LISTENER_OFF) */
	__u64 nonce;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct verdict);
} shunt_sk SEC(".maps");

/* Listeners gone off, by network namespace and port: never deleted (an
 * entry's count may rise again while another CPU lowers it; a deletion
 * would lose that rise), at most one entry per port ever gone off. */
struct off_key {
	__u64 netns;
	__u32 port;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct off_key);
	__type(value, __u32);
} shunt_off SEC(".maps");

/* Set once shunt_off was full when a listener went off: from then on no
 * SYN-ACK answers (every connection plain - the safe side - until shuntd
 * restarts; the map holds one entry per namespace and port ever gone off). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} shunt_off_full SEC(".maps");

/* --allow-uid: who may register sockets (empty: everyone).  Written by
 * shuntd before it attaches the programs. */
struct allow {
	__u32 n;
	__u32 uid[MAX_UIDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct allow);
} shunt_allow SEC(".maps");

struct opt {
	__u8 kind, len, exid_hi, exid_lo;
	__u8 val[8];
};

static __always_inline struct verdict *verdict_of(struct bpf_sock *sk, __u64 flags)
{
	return sk ? bpf_sk_storage_get(&shunt_sk, sk, 0, flags) : 0;
}

static __always_inline __u64 get_u64(const __u8 *p)
{
	__u64 v = 0;
#pragma unroll
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static __always_inline void put_u64(__u8 *p, __u64 v)
{
#pragma unroll
	for (int i = 7; i >= 0; i--) {
		p[i] = (__u8)v;
		v >>= 8;
	}
}

/* Our option in the packet (or the saved SYN); 0 if absent. */
static __always_inline int load_opt(struct bpf_sock_ops *skops, __u64 *val, __u64 flags)
{
	struct opt o = { .kind = SHUNT_OPT_KIND, .len = 4, .exid_hi = SHUNT_EXID_HI,
			 .exid_lo = SHUNT_EXID_LO };

	if (bpf_load_hdr_opt(skops, &o, sizeof o, flags) != SHUNT_OPT_LEN || o.len != SHUNT_OPT_LEN)
		return 0;
	*val = get_u64(o.val);
	return 1;
}

static __always_inline int store_opt(struct bpf_sock_ops *skops, __u64 val)
{
	struct opt o = { .kind = SHUNT_OPT_KIND, .len = SHUNT_OPT_LEN, .exid_hi = SHUNT_EXID_HI,
			 .exid_lo = SHUNT_EXID_LO };

	put_u64(o.val, val);
	return bpf_store_hdr_opt(skops, &o, sizeof o, 0);
}

/* The count of listeners gone off on k, by d (+1, -1).  The table full:
 * every listener counts as off (shunt_off_full). */
static __always_inline void off_add(struct off_key *k, int d)
{
	__u32 one = 1, zero = 0, *n;
	long r;

	for (int i = 0; i < 2; i++) {
		n = bpf_map_lookup_elem(&shunt_off, k);
		if (n) {
			__sync_fetch_and_add(n, d);
			return;
		}
		if (d < 0)
			return; /* (never made: nothing to take back) */
		r = bpf_map_update_elem(&shunt_off, k, &one, BPF_NOEXIST);
		if (!r)
			return;
		if (r != -17) /* not EEXIST (another CPU made it meanwhile: add to that one) */
			break;
	}
	n = bpf_map_lookup_elem(&shunt_off_full, &zero);
	if (n)
		*n = 1;
}

static __always_inline int listener_off(struct bpf_sock_ops *skops)
{
	struct off_key k = { .netns = bpf_get_netns_cookie(skops), .port = skops->local_port };
	__u32 zero = 0, *n = bpf_map_lookup_elem(&shunt_off_full, &zero);

	if (n && *n)
		return 1;
	n = bpf_map_lookup_elem(&shunt_off, &k);
	return n && *n;
}

SEC("sockops")
int shunt_sockops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct verdict *e;
	int one = 1;
	__u64 v;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		e = verdict_of(sk, 0);
		if (e && e->state == ST_CLIENT_WANT)
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		e = verdict_of(sk, 0);
		if (e && e->state == ST_LISTENER) {
			bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof one);
			/* STATE: its close takes back what went off */
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG |
						  BPF_SOCK_OPS_STATE_CB_FLAG);
		}
		break;
	case BPF_SOCK_OPS_STATE_CB:
		e = verdict_of(sk, 0);
		if (skops->args[0] == TCP_LISTEN_STATE && e && e->state == ST_LISTENER && e->off) {
			struct off_key k = { .netns = bpf_get_netns_cookie(skops), .port = skops->local_port };
			e->off = 0;
			off_add(&k, -1);
		}
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN)
			bpf_reserve_hdr_opt(skops, SHUNT_OPT_LEN, 0);
		else if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK) &&
			 load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN) && !listener_off(skops))
			bpf_reserve_hdr_opt(skops, SHUNT_OPT_LEN, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN) {
			e = verdict_of(sk, 0);
			if (e && e->state == ST_CLIENT_WANT)
				store_opt(skops, e->nonce);
		} else if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK) &&
			   load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN) && !listener_off(skops)) {
			store_opt(skops, ~v);
		}
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		e = verdict_of(sk, 0);
		if (!e || e->state != ST_CLIENT_WANT)
			break;
		if (!load_opt(skops, &v, 0))
			e->state = ST_CLIENT_PEER_NONE;
		else if (v == ~e->nonce)
			e->state = ST_CLIENT_PEER_OK;
		else
			e->state = ST_CLIENT_PEER_REPLAY;
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		/* the accepted socket is new: its storage is its own.  Its
		 * listener off (most likely when the SYN-ACK went too): no
		 * PROPOSAL is due, its accept() waits for none */
		if (load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN) &&
		    (e = verdict_of(sk, BPF_SK_STORAGE_GET_F_CREATE))) {
			e->nonce = v;
			e->state = listener_off(skops) ? ST_SERVER_SAW_OFF : ST_SERVER_SAW;
		}
		/* the listener's callbacks are not the connection's: none for
		 * each of its packets */
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags &
					  ~(BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG));
		break;
	}
	return 1;
}

static __always_inline int uid_allowed(void)
{
	__u32 k = 0, uid = (__u32)bpf_get_current_uid_gid();
	struct allow *a = bpf_map_lookup_elem(&shunt_allow, &k);

	if (!a || !a->n || !uid)
		return 1;
	for (int i = 0; i < MAX_UIDS; i++) {
		if (i >= a->n)
			break;
		if (a->uid[i] == uid)
			return 1;
	}
	return 0;
}

/* Leave every other option to the kernel; one longer than a page cannot
 * be seen whole here: the kernel's own buffer is used (optlen 0). */
static __always_inline int pass(struct bpf_sockopt *ctx)
{
	if (ctx->optlen > PAGE_SIZE)
		ctx->optlen = 0;
	return 1;
}

SEC("cgroup/setsockopt")
int shunt_setsockopt(struct bpf_sockopt *ctx)
{
	__u8 *p = ctx->optval, *end = ctx->optval_end;
	struct verdict *e;

	if (ctx->level != SHUNT_AG_SOL || !uid_allowed())
		return pass(ctx); /* a user not allowed sees no agent: ENOPROTOOPT */
	if (ctx->optname == OPT_CLIENT) {
		if (ctx->optlen != 8 || p + 8 > end || !(e = verdict_of(ctx->sk, BPF_SK_STORAGE_GET_F_CREATE)))
			return 0; /* EPERM */
		__builtin_memcpy(&e->nonce, p, 8); /* host order, as the shim wrote it */
		e->state = ST_CLIENT_WANT;
	} else if (ctx->optname == OPT_LISTENER) {
		if (!(e = verdict_of(ctx->sk, BPF_SK_STORAGE_GET_F_CREATE)))
			return 0;
		e->nonce = 0;
		e->state = ST_LISTENER;
	} else if (ctx->optname == OPT_LISTENER_OFF) {
		/* int32 1: a holder may accept past the shim.  A listener
		 * only (one registered before an agent restarted has no
		 * storage: made now); off once, until it closes */
		struct off_key k = { .netns = bpf_get_netns_cookie(ctx) };
		struct bpf_sock *sk = ctx->sk;
		__s32 one;

		if (ctx->optlen != 4 || p + 4 > end || !sk || sk->state != TCP_LISTEN_STATE ||
		    !(e = verdict_of(sk, BPF_SK_STORAGE_GET_F_CREATE)) ||
		    (e->state && e->state != ST_LISTENER))
			return 0; /* EPERM */
		__builtin_memcpy(&one, p, 4);
		if (one != 1)
			return 0;
		e->state = ST_LISTENER;
		k.port = sk->src_port;
		if (!__sync_val_compare_and_swap(&e->off, 0, 1))
			off_add(&k, 1);
	} else {
		return pass(ctx);
	}
	ctx->optlen = -1; /* consumed: the kernel never sees it */
	return 1;
}

SEC("cgroup/getsockopt")
int shunt_getsockopt(struct bpf_sockopt *ctx)
{
	__u8 *p = ctx->optval, *end = ctx->optval_end;
	struct verdict *e;

	if (ctx->level != SHUNT_AG_SOL || ctx->optname != OPT_VERDICT || !uid_allowed())
		return pass(ctx);
	if (p + sizeof(struct verdict) > end)
		return pass(ctx); /* too short a buffer: the kernel's error stands */
	e = verdict_of(ctx->sk, 0);
	if (e) {
		struct verdict out = { .state = e->state, .nonce = e->nonce };
		__builtin_memcpy(p, &out, sizeof out);
	} else {
		struct verdict none = { 0 };
		__builtin_memcpy(p, &none, sizeof none);
	}
	ctx->retval = 0;
	/* two 32-bit fields side by side: clang would merge the stores into
	 * one 64-bit store, which the verifier refuses */
	asm volatile("" ::: "memory");
	ctx->optlen = sizeof(struct verdict);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
