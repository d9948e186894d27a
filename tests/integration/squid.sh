#!/usr/bin/env bash
# Description: squid as a forward proxy (it drops root to its proxy user,
# so a shared sticky directory) in front of nginx, curl through it, all
# three under shunt: bodies byte-identical, both hops accelerated, the
# upstream connection kept alive across requests.
. "$(dirname "$0")/lib.sh"
need nginx; need curl
SQUID=$(command -v squid || true)
[ -n "$SQUID" ] || { echo "skip: squid is not installed"; exit 77; }

P=$(free_port); B=$(free_port)
[ "$P" != "$B" ] || B=$((P + 1))
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/sq"
chown proxy "$WORK/sq"
head -c 3000000 /dev/urandom > "$WORK/www/big.bin"
sum=$(sha256sum < "$WORK/www/big.bin")
nginx_conf "sendfile on; server { listen 127.0.0.1:$B; root $WORK/www; }" > "$WORK/nginx.conf"
cat > "$WORK/squid.conf" <<CONF
http_port 127.0.0.1:$P
http_access allow all
cache deny all
cache_log $WORK/sq/cache.log
access_log none
pid_filename $WORK/sq/squid.pid
coredump_dir $WORK/sq
cache_effective_user proxy
shutdown_lifetime 1 seconds
CONF
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$B"
bg "$WORK/squid.out" env SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/squid.log" "$SHUNT" run -- "$SQUID" -N -f "$WORK/squid.conf"
wait_port "$P"
for i in $(seq 8); do
	got=$(shunted curl -s -x "http://127.0.0.1:$P" "http://127.0.0.1:$B/big.bin" 2>>"$WORK/cli.log" | sha256sum)
	[ "$got" = "$sum" ] || die "round $i: the body through squid differs"
done
expect_accel "$WORK/cli.log" 8
n=$(count 'accept fd [0-9]*: shm' "$WORK/squid.log")
up=$(grep -cE 'connect fd [0-9]+: accelerated \(shm\)' "$WORK/squid.log" || true)
[ "$n" -ge 8 ] || die "squid accepted $n of 8 accelerated: $(tail -5 "$WORK/squid.log")"
[ "$up" -ge 1 ] && [ "$up" -le 3 ] || die "squid's upstream connections: $up accelerated (1 to 3 expected)"
! grep -qE '(accept|connect) fd [0-9]+: tcp' "$WORK/squid.log" || die "plain connections: $(grep -E 'fd [0-9]+: tcp' "$WORK/squid.log" | head -3)"
echo "  squid: 8 of 8 client connections and $up upstream accelerated"
echo "squid: ok"
