#!/usr/bin/env bash
# bench/rdma2.sh - two hosts for real: two Soft-RoCE guests (two kernels,
# two agents) joined by a virtual link (tests/vm/pair.sh); redis and iperf3
# over plain TCP and over shunt (RDMA) side by side.  The table goes to
# docs/bench/rdma2.tsv, the plot to docs/bench/rdma2.png.  Emulated
# devices: relative cost and behaviour, not hardware speed.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s
mkdir -p build/bench
rm -f build/bench/rdma2.sync.*
tests/vm/pair.sh -t 1200 -- bash bench/rdma2-guest.sh | tee /tmp/rdma2-bench.out
sed -n 's/^\[B\] //p' /tmp/rdma2-bench.out | grep -E '^(test|redis|iperf3)' > docs/bench/rdma2.tsv
bench/rdma-plot.sh docs/bench/rdma2.tsv docs/bench/rdma2.png
