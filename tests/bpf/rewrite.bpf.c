// SPDX-License-Identifier: GPL-2.0
/*
 * rewrite.bpf.c - a middlebox that rewrites shunt's TCP option: on a SYN
 * passing through (tc ingress of a router's interface), the last byte of
 * the nonce is flipped and the TCP checksum fixed.  The server then answers
 * ~(rewritten nonce), which the client cannot match: the connection must
 * stay plain, with every byte intact, whichever side speaks first.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/types.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int rewrite_syn(struct __sk_buff *skb)
{
	__u32 ip_off = sizeof(struct ethhdr), tcp_off, opt, end;
	struct iphdr ip;
	struct tcphdr th;
	__u8 o[4], b;

	if (skb->protocol != bpf_htons(ETH_P_IP) ||
	    bpf_skb_load_bytes(skb, ip_off, &ip, sizeof ip) || ip.protocol != 6)
		return TC_ACT_OK;
	tcp_off = ip_off + ip.ihl * 4;
	if (bpf_skb_load_bytes(skb, tcp_off, &th, sizeof th) || !th.syn || th.ack)
		return TC_ACT_OK;
	end = tcp_off + th.doff * 4;
	opt = tcp_off + sizeof th;
	for (int i = 0; i < 20 && opt < end; i++) {
		if (bpf_skb_load_bytes(skb, opt, o, 2))
			return TC_ACT_OK;
		if (o[0] == 0)
			break;
		if (o[0] == 1) {
			opt++;
			continue;
		}
		if (o[1] < 2)
			break;
		if (o[0] == 254 && o[1] == 12 && !bpf_skb_load_bytes(skb, opt, o, 4) &&
		    o[2] == 0x53 && o[3] == 0x48 && !bpf_skb_load_bytes(skb, opt + 11, &b, 1)) {
			__u16 from = 0, to = 0;
			/* the checksum sums 16-bit words: place the byte where it sits */
			if ((opt + 11 - tcp_off) & 1) {
				from = b;
				to = (__u8)~b;
			} else {
				from = (__u16)b << 8;
				to = (__u16)((__u8)~b) << 8;
			}
			b = ~b;
			bpf_skb_store_bytes(skb, opt + 11, &b, 1, 0);
			bpf_l4_csum_replace(skb, tcp_off + 16, bpf_htons(from), bpf_htons(to), 2);
			break;
		}
		opt += o[1];
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
