// SPDX-License-Identifier: GPL-2.0
/*
 * replay.bpf.c - a test peer that misbehaves like the servers Alibaba's SMC
 * checker hunts: it echoes any experimental TCP option of the SYN, unchanged,
 * in its SYN-ACK.  Attached to the server's cgroup only; shunt's client must
 * see through it (its answer is the nonce itself, not ~nonce).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

struct opt {
	__u8 kind, len, exid_hi, exid_lo;
	__u8 val[8];
};

SEC("sockops")
int replay_sockops(struct bpf_sock_ops *skops)
{
	struct opt o = { .kind = 254, .len = 4, .exid_hi = 0x53, .exid_lo = 0x48 };
	int synack = (skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == (TCPHDR_SYN | TCPHDR_ACK);

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
					  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (synack && bpf_load_hdr_opt(skops, &o, sizeof o, BPF_LOAD_HDR_OPT_TCP_SYN) == 12)
			bpf_reserve_hdr_opt(skops, 12, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (synack && bpf_load_hdr_opt(skops, &o, sizeof o, BPF_LOAD_HDR_OPT_TCP_SYN) == 12)
			bpf_store_hdr_opt(skops, &o, sizeof o, 0); /* the same bytes back */
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
