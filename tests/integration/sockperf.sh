#!/usr/bin/env bash
# Description: sockperf ping-pong and throughput over TCP, server and
# client unmodified, through shunt on both sides; plain client one-sided.
. "$(dirname "$0")/lib.sh"
need sockperf

P=$(free_port)
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- sockperf sr --tcp -i 127.0.0.1 -p "$P"
wait_port "$P"
# sockperf sizes its sequence table for at most 600k messages/s unless told
# (--mps): through shunt a ping-pong can go faster and would trip
# "_seqN > m_maxSequenceNo".
shunted sockperf pp --tcp -i 127.0.0.1 -p "$P" -t 2 -m 64 --mps 5000000 >"$WORK/pp.txt" 2>"$WORK/cli.log" || die "sockperf pp failed: $(grep ERROR "$WORK/pp.txt")"
grep -q 'Summary: Latency is' "$WORK/pp.txt" || die "no latency summary: $(tail -3 "$WORK/pp.txt")"
echo "  shunt: $(grep 'Summary: Latency is' "$WORK/pp.txt" | sed 's/.*Summary: //')"
shunted sockperf tp --tcp -i 127.0.0.1 -p "$P" -t 1 -m 1400 >"$WORK/tp.txt" 2>>"$WORK/cli.log" || die "sockperf tp failed"
grep -q 'Summary: Message Rate' "$WORK/tp.txt" || die "no throughput summary"
expect_accel "$WORK/srv.log" 2
expect_accel "$WORK/cli.log" 2
sockperf pp --tcp -i 127.0.0.1 -p "$P" -t 1 -m 64 >"$WORK/pp-plain.txt" 2>&1 || die "plain sockperf failed"
echo "  tcp:   $(grep 'Summary: Latency is' "$WORK/pp-plain.txt" | sed 's/.*Summary: //')"
grep 'accept fd' "$WORK/srv.log" | tail -n 1 > "$WORK/srv-plain.log"
expect_plain "$WORK/srv-plain.log"
echo "sockperf: ok"
