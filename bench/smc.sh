#!/usr/bin/env bash
# bench/smc.sh - the kernel's SMC-R against shunt over RDMA and plain TCP,
# side by side in one Soft-RoCE guest.  SMC-R works over rxe with Debian's
# 6.12 kernel (on 6.1 it hangs), so that kernel package is downloaded and
# unpacked into the VM cache - not installed on this machine - and the guest
# boots it (tests/vm/run.sh -K).  The table goes to docs/bench/smc.tsv.
# Emulated devices: relative cost and behaviour, not hardware speed.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s
mkdir -p build/bench
cc -O2 -Wall -Wextra -Werror -o build/bench/smc-config bench/smc/smc-config.c
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o build/bench/smc-preload.so bench/smc/smc-preload.c -ldl
K=${SHUNT_VM_CACHE:-/var/tmp/shunt-vm}/k6.12
if ! ls "$K"/root/boot/vmlinuz-* > /dev/null 2>&1; then
	pkg=$(apt-cache depends linux-image-6.12-amd64 | awk '/Depends: linux-image-6/ { print $2; exit }')
	[ -n "$pkg" ] || { echo "bench/smc.sh: no linux-image-6.12-amd64 (apt-get update?)" >&2; exit 1; }
	rm -rf "$K" && mkdir -p "$K"
	(cd "$K" && apt-get download "$pkg") && dpkg-deb -x "$K"/*.deb "$K/root" && rm -f "$K"/*.deb
fi
tests/vm/run.sh -K "$K/root" -t 2400 -- bash bench/smc/smc-guest.sh | tee /tmp/smc-bench.tsv
grep -E '^(test|setup|rtt|stream|rstream|roce)' /tmp/smc-bench.tsv > docs/bench/smc.tsv
bench/rdma-plot.sh docs/bench/smc.tsv docs/bench/smc.png
