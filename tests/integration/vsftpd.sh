#!/usr/bin/env bash
# Description: vsftpd as Debian ships it (a session process made by the
# clone system call in a new IPC namespace, an unprivileged child cloned
# again into a new network namespace, chrooted, as nobody, with its
# descriptor limit at 0, the control connection on descriptors 0-2,
# SO_OOBINLINE for ABOR's urgent data) serving lftp, both under shunt:
# listings and a 20 MB download in passive mode, three sessions, every
# byte intact, the control connections accelerated.  Before, the session
# process took itself for its parent (no fork handler runs for a clone
# system call): the listener's close ended the connection under it, the
# client's FEAT went to the bare socket and the child waited on the ring
# for ever.  The server runs with SHUNT_LOG=1, whose lines - standard
# error being the control connection - must never reach the client.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need vsftpd; need lftp
mkdir -p "$WORK/ftp/pub" /var/run/vsftpd/empty
chmod 555 "$WORK/ftp"
head -c 20000000 /dev/urandom > "$WORK/ftp/pub/big.bin"
echo hello > "$WORK/ftp/pub/small.txt"
chmod -R a+rX "$WORK/ftp"
sum=$(sha256sum < "$WORK/ftp/pub/big.bin")
P=$(free_port)
cat > "$WORK/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_port=$P
listen_address=127.0.0.1
anonymous_enable=YES
anon_root=$WORK/ftp
local_enable=NO
write_enable=NO
pasv_enable=YES
background=NO
secure_chroot_dir=/var/run/vsftpd/empty
xferlog_enable=NO
seccomp_sandbox=NO
CONF
# (seccomp_sandbox=NO: its filter kills the session on this kernel and
# libc without shunt too - "500 OOPS: child died")
SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/server.log" "$SHUNT" run -- vsftpd "$WORK/vsftpd.conf" > "$WORK/vsftpd.out" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; pkill -f "vsftpd $WORK/vsftpd.conf" 2>/dev/null; cleanup' EXIT
wait_port "$P"
for i in 1 2 3; do
	rm -f "$WORK/got.bin"
	out=$(cd "$WORK" && timeout 30 env SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/client.log" "$SHUNT" run -- \
		lftp -e "set net:max-retries 1; set net:timeout 10; cls pub; get pub/big.bin -o $WORK/got.bin; bye" \
		-p "$P" ftp://127.0.0.1 2>&1) || die "session $i: lftp failed: $out"
	echo "$out" | grep -q small.txt || die "session $i: listing: $out"
	echo "$out" | grep -q shunt && die "session $i: shunt's lines in the client's output: $out"
	[ "$(sha256sum < "$WORK/got.bin")" = "$sum" ] || die "session $i: the 20 MB file differs"
done
n=$(grep -c "connect fd [0-9]*: accelerated (shm)" "$WORK/client.log" || true)
[ "$n" -ge 3 ] || die "$n control connections accelerated, expected 3: $(cat "$WORK/client.log")"
echo "vsftpd: 3 sessions (listing, 20 MB download), intact; $n control connections on shared memory"
