#!/usr/bin/env bash
# tests/run.sh - run every test program with a timeout; name failures; end
# with "N passed, N failed".  Behaviour tests run twice: on plain kernel TCP
# (the reference) and under shunt with SHUNT_EXPECT=shm (accelerated, same
# behaviour).  Set TESTS="name ..." to run a subset.
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB="$ROOT/$BUILD/libshunt.so"
if [ -n "${SHUNT_ASAN:-}" ]; then
	# An instrumented preload library needs the ASan runtime loaded first.
	LIB="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):$LIB"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
	SKIP_INTEGRATION=1
fi
TIMEOUT=${TEST_TIMEOUT:-120}
export SHUNT_DIR=${SHUNT_DIR:-$(mktemp -d /tmp/shunt-test.XXXXXX)}
# The busy-short rule (reason 25) follows the host's load, which other jobs
# change, and the tests count accelerated connections: off, but for the
# test of that rule (marked BUSY_SHORT_RULE).
export SHUNT_BUSY_SHORT=0

. "$ROOT/tests/runner.sh"

for t in "$ROOT/$BUILD"/tests/unit/*; do
	[ -x "$t" ] || continue; n=$(basename "$t"); want "$n" || continue
	run_one "$n" unit "$t"
done
for t in "$ROOT/$BUILD"/tests/behave/*; do
	[ -x "$t" ] || continue; n=$(basename "$t"); want "$n" || continue
	run_one "$n" tcp env -u LD_PRELOAD "$t"
	bs=0; grep -q BUSY_SHORT_RULE "$ROOT/tests/behave/$n.c" 2>/dev/null && bs=1
	run_one "$n" shunt env LD_PRELOAD="$LIB" SHUNT_EXPECT=shm SHUNT_BUSY_SHORT=$bs "$t"
done
# The attacks of issue #12, with two real users (also under ASan).
for t in "$ROOT"/tests/security/*.sh; do
	n=$(basename "$t" .sh); [ "$n" = lib ] && continue; n=security-$n; want "$n" || continue
	run_one "$n" security env BUILD="$BUILD" bash "$t"
done
if [ -z "${SKIP_INTEGRATION:-}" ]; then
	for t in "$ROOT"/tests/integration/*.sh; do
		n=$(basename "$t" .sh); want "$n" || continue
		# a script may need longer: "# Time limit: SECONDS" in its header
		TEST_LIMIT=$(sed -n 's/^# Time limit: \([0-9]*\).*/\1/p' "$t" | head -1) \
			run_one "$n" integ env BUILD="$BUILD" bash "$t"
	done
fi

# Nothing may be left behind by processes that exited.  A process that
# ends in _exit() leaves its statistics file to `shunt ss`, which reaps
# only files older than 2 s: a short subset's last test may need the wait.
leftovers() {
	"$ROOT/$BUILD/shunt" ss >/dev/null 2>&1
	find "$SHUNT_DIR" -name 's*' -o -name 'c*' 2>/dev/null | grep -v '^'"$SHUNT_DIR"'$' | wc -l
}
left=$(leftovers)
[ "$left" -eq 0 ] || { sleep 2.5; left=$(leftovers); }
if [ "$left" -ne 0 ]; then
	fail=$((fail + 1)); failed+=("leftovers"); echo "FAIL  leftovers: $(ls "$SHUNT_DIR")"
else
	pass=$((pass + 1)); echo "ok    no-leftovers"
fi
rm -rf "$SHUNT_DIR"
summary
