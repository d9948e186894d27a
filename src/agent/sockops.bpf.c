// SPDX-License-Identifier: GPL-2.0
/*
 * sockops.bpf.c - shunt's capability signal in the TCP handshake (issue #3).
 *
 * A sock_ops program on a cgroup v2 subtree.  Sockets of shunt processes are
 * registered by cookie in a memory-mapped array (the shim writes its entry
 * before connect() or listen()); nothing else is touched.
 *   client SYN:      kind 254, len 12, ExID 0x5348 ("SH"), 8-byte nonce
 *   server SYN-ACK:  the same ExID, answer = ~nonce, only when the SYN had it
 *                    and the listener is registered
 * A peer that merely replays unknown options echoes the nonce itself, which
 * the client tells apart from ~nonce: that connection stays plain.  Results
 * land in the array (client: verdict; server child: the nonce it saw).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define SHUNT_OPT_KIND 254
#define SHUNT_OPT_LEN 12
#define SHUNT_EXID_HI 0x53
#define SHUNT_EXID_LO 0x48
#define SOCKS 65536

#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define SOL_TCP 6
#define TCP_SAVE_SYN 27

/* entry states (shared with src/agent/agent.h) */
#define ST_CLIENT_WANT 1
#define ST_CLIENT_PEER_OK 2
#define ST_CLIENT_PEER_NONE 3
#define ST_CLIENT_PEER_REPLAY 4
#define ST_LISTENER 10
#define ST_SERVER_SAW 11

#define STALE_NS 10000000000ull

struct entry {
	__u64 cookie;
	__u64 nonce;
	__u64 stamp;
	__u32 state;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SOCKS);
	__type(key, __u32);
	__type(value, struct entry);
} shunt_socks SEC(".maps");

struct opt {
	__u8 kind, len, exid_hi, exid_lo;
	__u8 val[8];
};

static __always_inline struct entry *entry_of(__u64 cookie)
{
	__u32 k = (__u32)(cookie & (SOCKS - 1));
	struct entry *e = bpf_map_lookup_elem(&shunt_socks, &k);

	return e && e->cookie == cookie ? e : 0;
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

SEC("sockops")
int shunt_sockops(struct bpf_sock_ops *skops)
{
	__u64 cookie = bpf_get_socket_cookie(skops), v;
	struct entry *e;
	int one = 1;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		e = entry_of(cookie);
		if (e && e->state == ST_CLIENT_WANT)
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		e = entry_of(cookie);
		if (e && e->state == ST_LISTENER) {
			bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof one);
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		}
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN)
			bpf_reserve_hdr_opt(skops, SHUNT_OPT_LEN, 0);
		else if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK) &&
			 load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN))
			bpf_reserve_hdr_opt(skops, SHUNT_OPT_LEN, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN) {
			e = entry_of(cookie);
			if (e && e->state == ST_CLIENT_WANT)
				store_opt(skops, e->nonce);
		} else if ((skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK) &&
			   load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN)) {
			store_opt(skops, ~v);
		}
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		e = entry_of(cookie);
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
		if (load_opt(skops, &v, BPF_LOAD_HDR_OPT_TCP_SYN)) {
			__u32 k = (__u32)(cookie & (SOCKS - 1));
			__u64 now = bpf_ktime_get_ns();
			struct entry n = { .cookie = cookie, .nonce = v, .stamp = now,
					   .state = ST_SERVER_SAW };
			e = bpf_map_lookup_elem(&shunt_socks, &k);
			/* Never take a live client's or listener's entry: the
			 * server's shim finds the nonce in the saved SYN then. */
			if (!e || (e->state != 0 && e->state != ST_SERVER_SAW &&
				   now - e->stamp < STALE_NS))
				break;
			bpf_map_update_elem(&shunt_socks, &k, &n, BPF_ANY);
		}
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
