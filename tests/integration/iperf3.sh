#!/usr/bin/env bash
# Description: iperf3 (control and data connections, non-blocking, select)
# runs to completion through shunt on both sides, and one-sided as TCP.
. "$(dirname "$0")/lib.sh"
need iperf3

P=$(free_port)
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- iperf3 -s -p "$P"
wait_port "$P"
shunted iperf3 -c 127.0.0.1 -p "$P" -t 2 -J >"$WORK/out.json" 2>"$WORK/cli.log" || die "iperf3 client failed"
grep -q '"sum_received"' "$WORK/out.json" || die "iperf3 produced no result"
bps=$(grep -A8 '"sum_received"' "$WORK/out.json" | grep bits_per_second | head -1 | tr -dc '0-9.')
echo "  iperf3 through shunt: $bps bit/s"
expect_accel "$WORK/srv.log" 2
expect_accel "$WORK/cli.log" 2

iperf3 -c 127.0.0.1 -p "$P" -t 1 >/dev/null 2>&1 || die "plain iperf3 client failed"
grep 'accept fd' "$WORK/srv.log" | tail -n 2 > "$WORK/srv-plain.log"
expect_plain "$WORK/srv-plain.log"
echo "iperf3: ok"
