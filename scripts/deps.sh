#!/usr/bin/env bash
# scripts/deps.sh - install what building, the demo and the tests need on
# Debian 12 (idempotent; needs root).  Services the packages would start
# (redis, nginx) are kept from starting: the tests start their own.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential clang libclang-rt-14-dev libbpf-dev iproute2 procps gnuplot-nox
      redis-server redis-tools nginx-light curl iperf3 socat sockperf wrk ncat iptables nftables
      openssh-server openssh-client haproxy liburing-dev nodejs apache2 apache2-utils vsftpd lftp dovecot-imapd xinetd
      postfix php8.2-fpm squid varnish postgresql pgbouncer nbd-client nbd-server tgt open-iscsi
      # the RDMA suite: Debian's kernel with rdma_rxe under QEMU, rdma-core
      qemu-system-x86 linux-image-amd64 busybox-static kmod cpio xz-utils zstd
      rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest libibverbs-dev librdmacm-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# The guest kernel is only booted by QEMU (tests/vm/run.sh builds its own
# initramfs): no host initramfs is generated for it.
INITRD=No apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
