#!/usr/bin/env bash
# tests/fuzz/run.sh - build the libFuzzer harnesses with ASan/UBSan and run
# each for a bounded time: fuzz_parsers (every parser of received data) for
# FUZZ_SECONDS (default 60), fuzz_ring (the shared ring under a hostile
# peer) for FUZZ_RING_RUNS executions (default 10^7: ~3 minutes on the
# 2-core VM) or FUZZ_RING_SECONDS (default 300), whichever comes first.
# Exit 77 without clang.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/build-fuzz
command -v clang >/dev/null || { echo "clang not installed: skipping fuzz"; exit 77; }
mkdir -p "$OUT/corpus" "$OUT/corpus-ring"
CC=(clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$ROOT/include")
"${CC[@]}" -o "$OUT/fuzz_parsers" "$ROOT/tests/fuzz/fuzz_parsers.c" "$ROOT/src/common/msg.c" "$ROOT/src/common/config.c" "$ROOT/src/common/handshake.c" "$ROOT/src/common/synopt.c" "$ROOT/src/common/failover.c" "$ROOT/src/common/loadavg.c" "$ROOT/src/common/nbdnl.c" "$ROOT/src/common/iscsinl.c" "$ROOT/src/common/rdvdir.c" "$ROOT/src/tools/procnet.c"
# clang refuses GCC's __atomic builtins on _Atomic objects; the harness is
# single-threaded, so plain integers are the same layout and behaviour.
"${CC[@]}" -D_Atomic= -o "$OUT/fuzz_ring" "$ROOT/tests/fuzz/fuzz_ring.c" "$ROOT/src/transport/ring.c" "$ROOT/src/common/msg.c"
echo "== fuzz_parsers"
"$OUT/fuzz_parsers" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=512 "$OUT/corpus" 2>&1 | tail -5
echo "== fuzz_ring"
"$OUT/fuzz_ring" -runs="${FUZZ_RING_RUNS:-10000000}" -max_total_time="${FUZZ_RING_SECONDS:-300}" -max_len=128 \
	"$OUT/corpus-ring" 2>&1 | tail -5
