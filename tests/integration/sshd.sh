#!/usr/bin/env bash
# Description: OpenSSH's sshd under shunt (privilege separation, its
# seccomp-sandboxed pre-authentication child under RLIMIT_NOFILE 1,
# closefrom() at start-up) serves logins and scp both ways with a client
# under shunt (accelerated, checksums equal) and with a plain client (plain,
# equal); a shunt client against a plain sshd works too.  No sshd child is
# killed, and the rendezvous directory holds no more files after ten
# sessions than after one.
# Time limit: 180
. "$(dirname "$0")/lib.sh"
need ssh; need scp
[ -x /usr/sbin/sshd ] || { echo "skip: sshd is not installed"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: sshd needs root"; exit 77; }

U=shunt-ssh
id "$U" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$U" || die "cannot create $U"
usermod -p '*' "$U" 2>/dev/null # key logins only (a locked '!' password refuses those too)
H=$(getent passwd "$U" | cut -d: -f6)
mkdir -p /run/sshd "$H/.ssh" "$WORK/home"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/host_key" || die "ssh-keygen"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/user_key" || die "ssh-keygen"
cp "$WORK/user_key.pub" "$H/.ssh/authorized_keys"
chown -R "$U" "$H/.ssh"; chmod 700 "$H/.ssh"; chmod 600 "$H/.ssh/authorized_keys"
chmod 755 "$WORK" # the session, as $U, writes and reads there
DST=$(mktemp -d /tmp/shunt-sshdst.XXXXXX); chown "$U" "$DST"
trap 'rm -rf "$DST"; cleanup' EXIT

config() { # port
	cat <<-EOC
	Port $1
	ListenAddress 127.0.0.1
	HostKey $WORK/host_key
	PidFile $WORK/sshd.$1.pid
	UsePAM no
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	PubkeyAuthentication yes
	StrictModes no
	Subsystem sftp internal-sftp
	EOC
}
P=$(free_port)
config "$P" > "$WORK/sshd.conf"
bg "$WORK/sshd.log" env SHUNT_LOG=1 "$SHUNT" run -- /usr/sbin/sshd -D -e -f "$WORK/sshd.conf"
wait_port "$P"

O=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes
   -o LogLevel=ERROR -o ConnectTimeout=20 -i "$WORK/user_key")
head -c 20000000 /dev/urandom > "$WORK/up.bin"
sum=$(sha256sum < "$WORK/up.bin" | cut -d' ' -f1)

# 1. both ends under shunt: a login, scp up and down
out=$(shunted ssh "${O[@]}" -p "$P" "$U@127.0.0.1" 'echo login-ok; id -un' 2>"$WORK/cli1.log")
[ "$out" = "login-ok
$U" ] || die "login under shunt: '$out' $(tail -3 "$WORK/cli1.log") $(tail -5 "$WORK/sshd.log")"
expect_accel "$WORK/cli1.log" 1
shunted scp -q "${O[@]}" -P "$P" "$WORK/up.bin" "$U@127.0.0.1:$DST/up.bin" 2>"$WORK/cli2.log" ||
	die "scp up: $(tail -3 "$WORK/cli2.log")"
[ "$(sha256sum < "$DST/up.bin" | cut -d' ' -f1)" = "$sum" ] || die "scp up: the copy differs"
shunted scp -q "${O[@]}" -P "$P" "$U@127.0.0.1:$DST/up.bin" "$WORK/down.bin" 2>"$WORK/cli3.log" ||
	die "scp down: $(tail -3 "$WORK/cli3.log")"
[ "$(sha256sum < "$WORK/down.bin" | cut -d' ' -f1)" = "$sum" ] || die "scp down: the copy differs"
expect_accel "$WORK/cli3.log" 1
n_one=$(find "$SHUNT_DIR" -type f -o -type s | wc -l)

# 2. a plain client against the shunt sshd: plain, intact
out=$(ssh "${O[@]}" -p "$P" "$U@127.0.0.1" "sha256sum < $DST/up.bin" 2>&1 | cut -d' ' -f1)
[ "$out" = "$sum" ] || die "plain client: '$out'"

# 3. nine more sessions: the directory does not grow
for i in $(seq 9); do
	out=$(shunted ssh "${O[@]}" -p "$P" "$U@127.0.0.1" "echo s$i" 2>>"$WORK/cli4.log")
	[ "$out" = "s$i" ] || die "session $i: '$out' $(tail -3 "$WORK/cli4.log")"
done
expect_accel "$WORK/cli4.log" 9
sleep 0.5
n_ten=$(find "$SHUNT_DIR" -type f -o -type s | wc -l)
[ "$n_ten" -le "$n_one" ] || die "the directory grew from $n_one to $n_ten files: $(ls "$SHUNT_DIR")"
grep -E 'shm' "$WORK/sshd.log" | grep -q 'accept fd' || die "sshd logged no accelerated accept"
! grep -Ei 'killed by signal|SIGSYS|fatal' "$WORK/sshd.log" || die "sshd: $(grep -Ei 'killed|fatal' "$WORK/sshd.log" | head -3)"

# 4. a shunt client against a plain sshd
P2=$(free_port)
config "$P2" > "$WORK/sshd2.conf"
bg "$WORK/sshd2.log" /usr/sbin/sshd -D -e -f "$WORK/sshd2.conf"
wait_port "$P2"
out=$(shunted ssh "${O[@]}" -p "$P2" "$U@127.0.0.1" "sha256sum < $DST/up.bin" 2>"$WORK/cli5.log" | cut -d' ' -f1)
[ "$out" = "$sum" ] || die "shunt client, plain sshd: '$out' $(tail -3 "$WORK/cli5.log")"
expect_plain "$WORK/cli5.log"
echo "sshd: ok ($n_one files in the directory after one session, $n_ten after ten)"
