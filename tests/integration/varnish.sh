#!/usr/bin/env bash
# Description: Varnish Cache (its child drops to vcache: a shared
# directory, threads from pools, an epoll waiter) in front of nginx, all
# under shunt.  Cached objects and, with a VCL that passes every request,
# each one fetched from the backend over Varnish's pooled backend
# connections: bodies byte-identical, eight clients at once, ab with
# keep-alive; client and backend connections accelerated; a plain
# client's connections plain (peer-not-shunt) and intact.
. "$(dirname "$0")/lib.sh"
need varnishd; need nginx; need curl; need ab

P=$(free_port); B=$(free_port)
[ "$P" != "$B" ] || B=$((P + 1))
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/v"
chmod 777 "$WORK/v" # varnishd's working directory, its child's too
head -c 2000000 /dev/urandom > "$WORK/www/big.bin"
echo hello > "$WORK/www/index.html"
for i in $(seq 8); do head -c $((i * 1000 + 7)) /dev/urandom > "$WORK/www/f$i"; done
sum=$(sha256sum < "$WORK/www/big.bin")
nginx_conf "sendfile on; server { listen 127.0.0.1:$B; root $WORK/www; }" > "$WORK/nginx.conf"
bg "$WORK/back.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$B"

# varnish [VCL]: varnishd in the foreground, its decisions in $WORK/vlog
varnish() {
	local how=(-b "127.0.0.1:$B")
	[ -n "${1:-}" ] && how=(-f "$1")
	bg "$WORK/varnish.log" env SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/vlog" "$SHUNT" run -- \
		varnishd -F -a "127.0.0.1:$P" "${how[@]}" -n "$WORK/v" -s malloc,64m
	wait_port "$P"
	# (the manager listens; its child accepts once it has started)
	for _ in $(seq 100); do grep -q 'said Child starts' "$WORK/varnish.log" && return; sleep 0.1; done
	die "varnish's child did not start: $(tail -5 "$WORK/varnish.log")"
}
stop_varnish() { pkill -f "varnishd -F -a 127.0.0.1:$P"; for _ in $(seq 50); do ss -Htln "sport = :$P" | grep -q . || return 0; sleep 0.1; done; }
# mostly_accel LOG MIN: at least MIN connections accelerated, the others
# plain only because a busy server took longer than a non-blocking
# connect's 5 ms to claim them (accept-timeout: curl's, and Varnish's own
# backend connects, with eight clients at once on two CPUs)
mostly_accel() {
	local n other
	n=$(grep -cE 'connect fd [0-9]+: accelerated \(shm\)|accept fd [0-9]+: shm' "$1" || true)
	other=$(grep -E '(accept|connect) fd [0-9]+: tcp' "$1" | grep -v 'accept-timeout' | head -3)
	[ "$n" -ge "$2" ] || die "$1: $n accelerated connections, expected >= $2"
	[ -z "$other" ] || die "$1: plain connections for another reason than a slow claim: $other"
	echo "  $(basename "$1"): $n accelerated, $(count 'accept-timeout' "$1") plain (accept-timeout)"
}

# 1. cached: the first fetch of each object goes to nginx
varnish
for i in $(seq 8); do
	for _ in 1 2; do
		got=$(shunted curl -s "http://127.0.0.1:$P/f$i" 2>>"$WORK/cli.log" | sha256sum)
		[ "$got" = "$(sha256sum < "$WORK/www/f$i")" ] || die "cached object f$i differs"
	done
done
mostly_accel "$WORK/cli.log" 12
stop_varnish

# 2. every request passed to the backend, eight clients at once
cat > "$WORK/pass.vcl" <<VCL
vcl 4.1;
backend b { .host = "127.0.0.1"; .port = "$B"; }
sub vcl_recv { return (pass); }
VCL
chmod 644 "$WORK/pass.vcl"
: > "$WORK/vlog"
: > "$WORK/varnish.log"
varnish "$WORK/pass.vcl"
pids=()
for j in $(seq 8); do
	(for i in $(seq 4); do
		got=$(shunted curl -s "http://127.0.0.1:$P/big.bin" 2>>"$WORK/cli$j.log" | sha256sum)
		[ "$got" = "$sum" ] || { echo "client $j round $i: the body differs"; exit 1; }
	done) &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "a passed body differs"; done
cat "$WORK"/cli[1-8].log > "$WORK/cli-pass.log"
mostly_accel "$WORK/cli-pass.log" 24
shunted ab -q -k -n 5000 -c 8 "http://127.0.0.1:$P/index.html" > "$WORK/ab.txt" 2>>"$WORK/ab.log"
grep -q 'Failed requests: *0$' "$WORK/ab.txt" && ! grep -q 'Non-2xx' "$WORK/ab.txt" || die "ab: $(cat "$WORK/ab.txt")"
cat "$WORK/ab.log" >> "$WORK/cli-pass.log"
back=$(grep -cE 'connect fd [0-9]+: accelerated \(shm\)' "$WORK/vlog" || true)
[ "$back" -ge 2 ] || die "backend connections accelerated: $back"
grep 'connect fd' "$WORK/vlog" > "$WORK/back-conn.log"
mostly_accel "$WORK/back-conn.log" 2
# Varnish's side of a client that gave up on its claim finds no offer
late=$(count 'accept-timeout' "$WORK/cli-pass.log")
[ "$(grep -E 'accept fd [0-9]+: tcp' "$WORK/vlog" | grep -vc 'peer-not-shunt')" = 0 ] &&
	[ "$(count 'tcp, peer-not-shunt' "$WORK/vlog")" -le "$late" ] ||
	die "plain accepts beyond the clients' late claims ($late): $(grep -E 'accept fd [0-9]+: tcp' "$WORK/vlog" | head -3)"
echo "  passed: 32 bodies to 8 clients at once and 5,000 keep-alive requests, over $back accelerated backend connections"

# 3. a plain client: its connections plain, intact
for i in $(seq 3); do
	got=$(curl -s "http://127.0.0.1:$P/big.bin" | sha256sum)
	[ "$got" = "$sum" ] || die "plain client: the body differs"
done
grep -qE 'accept fd [0-9]+: tcp, peer-not-shunt' "$WORK/vlog" || die "no plain accept logged"
echo "varnish: ok"
