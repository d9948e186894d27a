#!/usr/bin/env bash
# Description: the RDMA suite (tests/rdma/run.sh) inside the Soft-RoCE QEMU
# guest (tests/vm/run.sh): every behaviour program, the peers and the
# fallbacks over real verbs on rxe.  Skipped (77) only where QEMU or a guest
# kernel is missing; `make test-rdma` runs the same suite with its output.
# Time limit: 2400
. "$(dirname "$0")/lib.sh"
# A guest kernel that soft-locks or panics (rxe's bugs under emulation,
# tests/vm/run.sh: 126) is not shunt's outcome, and it never recovers: a
# fresh guest runs the tests the failed one had not yet passed or skipped
# (the one it was in among them, and one that failed there, since the
# kernel may have failed it), up to four guests in all, and it is said,
# with the kernel's report.  What the last guest fails fails.
done_tests= passed_before=0
for attempt in 1 2 3 4; do
	out=$("$ROOT/tests/vm/run.sh" -t 1200 -- env BUILD="$BUILD" SKIP_TESTS="$done_tests" \
		bash tests/rdma/run.sh 2>&1)
	rc=$?
	[ $rc = 126 ] && [ $attempt -lt 4 ] || break
	reported=$(echo "$out" | awk '/^(ok|skip) /{ print $2 }')
	passed_before=$((passed_before + $(echo "$out" | grep -c '^ok ')))
	done_tests="$done_tests $(echo $reported)"
	echo "rdma: the guest kernel failed in guest $attempt; a fresh guest runs what it had not passed:"
	echo "$out" | grep -v '^      |' | sed -n '/^vm: the guest kernel/,$p' | head -30
done
# the end, then every failure's own last lines (a long run's tail would
# cut the early ones off; the runner shows a failed script's last lines,
# so they come last)
echo "$out" | tail -40
echo "$out" | awk 'function show() { if (h != "") print h; for (i = n > 12 ? n - 11 : 1; i <= n; i++) print l[i]; h = ""; n = 0 }
	/^FAIL /{ show(); h = $0; p = 1; next } /^(ok|skip) |^[0-9]+ passed/{ p = 0 } p { l[++n] = $0 }
	END { show() }' | head -200
[ $rc = 77 ] && exit 77
echo "$out" | grep -Eq '^[0-9]+ passed, 0 failed' || die "the RDMA suite failed (rc $rc)"
last=$(echo "$out" | grep -E '^[0-9]+ passed' | tail -1)
[ "$passed_before" = 0 ] || last="$last (and $passed_before passed in guests whose kernel failed)"
echo "rdma: $last"
