# tests/runner.sh - sourced by tests/run.sh and tests/rdma/run.sh: run one
# test with a time limit and count it; select by TESTS; print the summary.
#   run_one NAME MODE CMD...   (TIMEOUT, or TEST_LIMIT for this one call);
#                              SHOW_OUTPUT=1 prints a passed one's output
#                              too (its figures); a failure's whole output is kept in
#                              FAIL_LOG_DIR/NAME.MODE.log when that is set
#   want NAME                  true if TESTS is empty or names NAME, and
#                              SKIP_TESTS does not name it
#   summary                    "failed: ..." and "N passed, N failed, N skipped";
#                              its status is the suite's
pass=0 fail=0 skip=0 failed=()

run_one() {
	local name=$1 mode=$2; shift 2
	local log; log=$(mktemp)
	local t0=$SECONDS
	timeout -k 5 "${TEST_LIMIT:-$TIMEOUT}" "$@" > "$log" 2>&1 < /dev/null &
	local pid=$!
	wait "$pid"
	local rc=$?
	# timeout leads a process group of its own: whatever the test left
	# running (a server child whose client failed: an alarm is not
	# inherited) goes with it
	kill -KILL -- "-$pid" 2> /dev/null
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf 'ok    %-22s %-6s %3ss\n' "$name" "$mode" $((SECONDS - t0))
		[ -z "${SHOW_OUTPUT:-}" ] || sed 's/^/      | /' "$log"
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1)); printf 'skip  %-22s %-6s %s\n' "$name" "$mode" "$(tail -1 "$log")"
	else
		fail=$((fail + 1)); failed+=("$name/$mode")
		printf 'FAIL  %-22s %-6s rc=%d\n' "$name" "$mode" "$rc"; sed 's/^/      | /' "$log" | tail -40
		[ -z "${FAIL_LOG_DIR:-}" ] || cp "$log" "$FAIL_LOG_DIR/$name.$mode.log" 2> /dev/null
	fi
	rm -f "$log"
}

want() {
	[[ " ${SKIP_TESTS:-} " != *" $1 "* ]] || return 1
	[ -z "${TESTS:-}" ] || [[ " $TESTS " == *" $1 "* ]]
}

summary() {
	[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
	echo "$pass passed, $fail failed, $skip skipped"
	[ "$fail" -eq 0 ]
}
