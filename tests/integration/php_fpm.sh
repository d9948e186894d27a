#!/usr/bin/env bash
# Description: nginx in front of PHP-FPM over FastCGI on TCP (a new
# connection per request), both unmodified and under shunt: the FPM master
# opens the listener as root, its workers drop to www-data and accept on
# the inherited listener, and each is recycled after 5 requests
# (pm.max_requests) - so nginx's workers, clients of FastCGI, meet a new
# server process every few connections.  Every POSTed body is checksummed
# by PHP and every 1 MiB answer arrives intact; the FastCGI connections are
# accelerated; and nginx's workers map no more arenas than there are live
# FPM workers (plus the one the next arena reaps): before the thirty-ninth
# session a client kept the arena of every server process that had ended
# (tests/behave/child_servers), one per recycled worker.
. "$(dirname "$0")/lib.sh"
need nginx; need curl
FPM=$(command -v php-fpm8.2 || command -v php-fpm || true)
[ -n "$FPM" ] || { echo "skip: php-fpm is not installed"; exit 77; }

P=$(free_port); F=$(free_port)
[ "$P" != "$F" ] || F=$((P + 1))
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp"
chmod 777 "$WORK/tmp"
cat > "$WORK/www/echo.php" <<'PHP'
<?php
$in = file_get_contents('php://input');
echo md5($in), " ", strlen($in), " ", getmypid(), "\n";
echo str_repeat("0123456789abcdef", 65536);
PHP
cat > "$WORK/fpm.conf" <<CONF
[global]
pid = $WORK/fpm.pid
error_log = $WORK/fpm.log
daemonize = no
[www]
user = www-data
group = www-data
listen = 127.0.0.1:$F
pm = static
pm.max_children = 2
pm.max_requests = 5
clear_env = no
CONF
nginx_conf "client_max_body_size 8m;
	server {
		listen 127.0.0.1:$P; root $WORK/www;
		location ~ \.php\$ {
			include /etc/nginx/fastcgi_params;
			fastcgi_param SCRIPT_FILENAME $WORK/www\$fastcgi_script_name;
			fastcgi_pass 127.0.0.1:$F;
		}
	}" > "$WORK/nginx.conf"
# each process appends its decisions to one file (FPM's workers' standard
# error goes nowhere)
bg "$WORK/fpm.out" env SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/fpm-shunt.log" "$SHUNT" run -- "$FPM" -F -y "$WORK/fpm.conf"
wait_port "$F"
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$P"

head -c 300000 /dev/urandom > "$WORK/body.bin"
want_md5=$(md5sum < "$WORK/body.bin" | cut -d' ' -f1)
want_tail=$(head -c 1048576 < <(yes 0123456789abcdef | tr -d '\n') | sha256sum)
pids=""
for i in $(seq 40); do
	curl -s --data-binary @"$WORK/body.bin" "http://127.0.0.1:$P/echo.php" > "$WORK/out" ||
		die "request $i failed: $(tail -3 "$WORK/error.log")"
	read -r md5 len pid < "$WORK/out"
	[ "$md5 $len" = "$want_md5 300000" ] || die "request $i: PHP read '$md5 $len' (want $want_md5 300000)"
	[ "$(tail -n +2 "$WORK/out" | sha256sum)" = "$want_tail" ] || die "request $i: the answer differs"
	pids="$pids $pid"
done
nworkers=$(echo $pids | tr ' ' '\n' | sort -u | wc -l)
[ "$nworkers" -ge 8 ] || die "only $nworkers FPM workers served 40 requests (pm.max_requests = 5?)"
# the FastCGI connections: accepted by FPM's workers, accelerated
n=$(count 'accept fd [0-9]*: shm' "$WORK/fpm-shunt.log")
plain=$(grep -E 'accept fd [0-9]+: tcp' "$WORK/fpm-shunt.log" | head -3)
[ "$n" -ge 30 ] || die "FPM: $n of 40 connections accelerated: $(grep -v 'spare\|handshake' "$WORK/fpm-shunt.log" | tail -5)"
[ -z "$plain" ] || die "FPM: plain connections: $plain"
echo "  FPM: $n of 40 FastCGI connections accelerated, $nworkers worker processes"
# nginx's workers: arenas of live FPM workers only
for w in $(pgrep -P "$(cat "$WORK/nginx.pid")"); do
	a=$(grep -c shunt-arena "/proc/$w/maps" || true)
	[ "$a" -le 4 ] || die "nginx worker $w maps $a arenas after $nworkers FPM workers"
	echo "  nginx worker $w: $a arenas mapped"
done
echo "php_fpm: ok"
