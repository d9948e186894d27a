/* SPDX-License-Identifier: MIT */
/* reason.c - names of modes and fallback reasons, shared by shim and tools. */
#include "shunt/wire.h"

static const char *const reasons[SHUNT_R_MAX] = {
	[SHUNT_R_NONE] = "none",
	[SHUNT_R_PEER_NOT_SHUNT] = "peer-not-shunt",
	[SHUNT_R_POLICY] = "policy",
	[SHUNT_R_RESOURCE] = "resource-limit",
	[SHUNT_R_HANDSHAKE] = "handshake-failed",
	[SHUNT_R_TIMEOUT] = "accept-timeout",
	[SHUNT_R_NETNS] = "other-netns",
	[SHUNT_R_INHERITED] = "inherited",
	[SHUNT_R_UNSUPPORTED] = "unsupported-feature",
	[SHUNT_R_CONNECT_SLOW] = "connect-slow",
	[SHUNT_R_HS_MALFORMED] = "handshake-malformed",
	[SHUNT_R_HS_VERSION] = "handshake-version",
	[SHUNT_R_HS_NO_TRANSPORT] = "no-common-transport",
	[SHUNT_R_HS_TIMEOUT] = "handshake-timeout",
	[SHUNT_R_OPTION_REPLAYED] = "option-replayed",
	[SHUNT_R_NO_AGENT] = "no-agent",
	[SHUNT_R_LINK_FAILED] = "link-failed",
	[SHUNT_R_PEER_FAILOVER] = "peer-failover",
	[SHUNT_R_FORK] = "fork-exec",
	[SHUNT_R_UNSAFE_DIR] = "unsafe-dir",
	[SHUNT_R_PEER_BROKE] = "peer-broke-ring",
	[SHUNT_R_SANDBOX] = "sandboxed",
	[SHUNT_R_IO_URING] = "io-uring",
	[SHUNT_R_FD_PASSED] = "fd-passed",
	[SHUNT_R_DESCRIPTORS] = "descriptors",
	[SHUNT_R_BUSY_SHORT] = "busy-short",
	[SHUNT_R_RDMA_STALLED] = "rdma-stalled",
	[SHUNT_R_STALE_LINK] = "stale-link",
	[SHUNT_R_STDIO] = "stdio",
	[SHUNT_R_SERVER_FIRST] = "server-first",
	[SHUNT_R_RINGS_FULL] = "rings-full",
	[SHUNT_R_KERNEL_SOCKET] = "kernel-socket",
	[SHUNT_R_REUSEPORT] = "reuseport-foreign",
	[SHUNT_R_FORK_SHORT] = "fork-short",
};

const char *shunt_reason_str(unsigned reason)
{
	return reason < SHUNT_R_MAX && reasons[reason] ? reasons[reason] : "unknown";
}

const char *shunt_mode_str(unsigned mode)
{
	switch (mode) {
	case SHUNT_M_TCP: return "tcp";
	case SHUNT_M_SHM: return "shm";
	case SHUNT_M_RDMA: return "rdma";
	case SHUNT_M_LISTEN: return "listen";
	default: return "unknown";
	}
}
