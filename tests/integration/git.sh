#!/usr/bin/env bash
# Description: git daemon under shunt serves git clone (git://) to a client
# under shunt and to a plain one, the clones identical to the repository.
# git daemon hands each connection to a handler exec'd with the socket as
# stdin and stdout, which execs upload-pack, which answers with C stdio
# (fwrite): under shunt the connection moves to TCP at its first stdio
# call (reason stdio, both ends) - before, every clone under shunt failed
# ("the peer broke its shared ring": stdio's bytes went to the kernel
# socket past the rings).
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need git
R=$WORK/repo
git init -q --bare "$R/repo.git" || die "git init"
git clone -q "$R/repo.git" "$WORK/src" 2> /dev/null
head -c 8000000 /dev/urandom > "$WORK/src/big"
seq 100000 > "$WORK/src/lines"
git -C "$WORK/src" add big lines && git -C "$WORK/src" -c user.email=t@t -c user.name=t commit -qm one &&
	git -C "$WORK/src" push -q origin HEAD:master 2> /dev/null || die "git push"
P=$(free_port)
bg "$WORK/daemon.log" env SHUNT_LOG=1 "$SHUNT" run -- git daemon --reuseaddr --base-path="$R" \
	--export-all --port="$P" --listen=127.0.0.1
wait_port "$P"
same() { # clone directory
	for f in big lines; do cmp -s "$WORK/src/$f" "$1/$f" || die "$1/$f differs from the repository"; done
}
# 1. both ends under shunt, three clones
for i in 1 2 3; do
	shunted git clone -q "git://127.0.0.1:$P/repo.git" "$WORK/c$i" 2>> "$WORK/cli.log" ||
		die "clone $i under shunt: $(tail -3 "$WORK/cli.log")"
	same "$WORK/c$i"
done
expect_accel "$WORK/cli.log" 3
n=$(count 'the peer moved it to TCP (stdio)' "$WORK/cli.log")
[ "$n" = 3 ] || die "$n of 3 clones saw the server's connection move at its stdio (reason stdio)"
# 2. a plain client against the shunt daemon
git clone -q "git://127.0.0.1:$P/repo.git" "$WORK/plain" 2> "$WORK/plain.log" || die "plain clone: $(tail -3 "$WORK/plain.log")"
same "$WORK/plain"
! grep -q 'broke its shared ring' "$WORK/cli.log" "$WORK/daemon.log" || die "a ring was broken"
echo "git: 3 clones under shunt (moved to TCP at upload-pack's stdio, reason stdio) and 1 plain, all identical"
