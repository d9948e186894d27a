#!/usr/bin/env bash
# bench/rdma.sh - boot the Soft-RoCE guest and run bench/rdma-guest.sh in
# it; the table goes to docs/bench/rdma.tsv.  Emulated devices: the figures
# show relative cost and behaviour, not what RDMA hardware does.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s
tests/vm/run.sh -t 1200 -- bash bench/rdma-guest.sh | tee /tmp/rdma-bench.tsv
grep -E '^(test|setup|rtt|stream|rstream)' /tmp/rdma-bench.tsv > docs/bench/rdma.tsv
bench/rdma-plot.sh docs/bench/rdma.tsv docs/bench/rdma.png
