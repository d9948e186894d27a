#!/usr/bin/env bash
# tests/fuzz/run.sh - build the libFuzzer harnesses with ASan/UBSan and run
# each for a bounded time: fuzz_parsers (every parser of received data) for
# FUZZ_SECONDS (default 60), fuzz_ring (the shared ring under a hostile
# peer) for FUZZ_RING_RUNS executions (default 10^7: ~3 minutes on the
# 2-core VM) or FUZZ_RING_SECONDS (default 300), whichever comes first.
# Exit 77 without clang; exit 1 when a harness finds a crash. Each crash
# found and mended keeps its input in tests/fuzz/regress/<harness>/, which
# every run replays first (libFuzzer writes new inputs only to the first
# corpus directory, build-fuzz/).
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
# A harness that finds a crash, a leak or a timeout makes this script fail
# (and .ci/run with it): its last lines and the input it wrote are printed.
fuzz() {
	local name=$1 log=$OUT/$1.log rc=0
	shift
	echo "== $name"
	rm -rf "$OUT/crash-$name" && mkdir -p "$OUT/crash-$name"
	"$OUT/$name" -error_exitcode=1 -timeout_exitcode=1 \
		-artifact_prefix="$OUT/crash-$name/" "$@" >"$log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$OUT/crash-$name")" ]; then
		tail -40 "$log"
		for f in "$OUT/crash-$name"/*; do
			[ -e "$f" ] || continue
			echo "-- $f (hex)"
			od -An -tx1 "$f" | head -20
		done
		echo "FAIL: $name (exit $rc)"
		return 1
	fi
	tail -5 "$log"
}
status=0
fuzz fuzz_parsers -max_total_time="${FUZZ_SECONDS:-60}" -max_len=512 "$OUT/corpus" \
	"$ROOT/tests/fuzz/regress/parsers" || status=1
fuzz fuzz_ring -runs="${FUZZ_RING_RUNS:-10000000}" -max_total_time="${FUZZ_RING_SECONDS:-300}" \
	-max_len=128 "$OUT/corpus-ring" "$ROOT/tests/fuzz/regress/ring" || status=1
exit $status
