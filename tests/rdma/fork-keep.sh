#!/usr/bin/env bash
# Description: SHUNT_RDMA_FORK.  By default a fork moves the process's RDMA
# connections to TCP first, and the child reads the parent's unread bytes
# (reason 18, fork-exec); with SHUNT_RDMA_FORK=keep the connection stays
# RDMA in the parent, intact, and the child's use of it fails with EIO.
set -eu
T=$BUILD/tests/tools/forkmode
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_ACCEPT_WAIT_MS=30000)
out=$("${R[@]}" "$T" 10.0.0.1 2>&1) || { echo "FAIL move: $out"; exit 1; }
grep -q '^child=0 mode=0 reason=18 ok$' <<< "$out" || { echo "FAIL move: $out"; exit 1; }
out=$("${R[@]}" SHUNT_RDMA_FORK=keep "$T" 10.0.0.1 2>&1) || { echo "FAIL keep: $out"; exit 1; }
grep -q '^child=3 mode=3 reason=0 ok$' <<< "$out" || { echo "FAIL keep: $out"; exit 1; }
echo "fork: move (the child reads the parent's unread bytes, reason 18); keep (RDMA stays, the child gets EIO)"
