#!/usr/bin/env bash
# bench/smc.sh - the kernel's SMC-R against shunt over RDMA and plain TCP,
# side by side in one Soft-RoCE guest.  SMC-R works over rxe with Debian's
# 6.12 kernel (on 6.1 it hangs): scripts/guest-kernel.sh unpacks it into
# the VM cache (not installed on this machine) and the guest boots it.
# The table goes to docs/bench/smc.tsv.
# Emulated devices: relative cost and behaviour, not hardware speed.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s
mkdir -p build/bench
cc -O2 -Wall -Wextra -Werror -o build/bench/smc-config bench/smc/smc-config.c
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o build/bench/smc-preload.so bench/smc/smc-preload.c -ldl
K=$(scripts/guest-kernel.sh) # Debian's 6.12, unpacked
tests/vm/run.sh -K "$K" -t 2400 -- bash bench/smc/smc-guest.sh | tee /tmp/smc-bench.tsv
grep -E '^(test|setup|rtt|stream|rstream|roce)' /tmp/smc-bench.tsv > docs/bench/smc.tsv
bench/rdma-plot.sh docs/bench/smc.tsv docs/bench/smc.png
