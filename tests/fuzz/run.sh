#!/usr/bin/env bash
# tests/fuzz/run.sh - build the libFuzzer harness with ASan/UBSan and run it
# for a bounded time (FUZZ_SECONDS, default 60).  Exit 77 without clang.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/build-fuzz
command -v clang >/dev/null || { echo "clang not installed: skipping fuzz"; exit 77; }
mkdir -p "$OUT/corpus"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$ROOT/include" \
	-o "$OUT/fuzz_parsers" "$ROOT/tests/fuzz/fuzz_parsers.c" "$ROOT/src/common/msg.c" "$ROOT/src/common/config.c" "$ROOT/src/common/handshake.c" "$ROOT/src/common/synopt.c" "$ROOT/src/common/failover.c"
"$OUT/fuzz_parsers" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=512 "$OUT/corpus" 2>&1 | tail -5
