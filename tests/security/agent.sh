#!/usr/bin/env bash
# Description: attack #3 of issue #12 - the agent.  With shuntd attached to
# a cgroup holding both users, an attacker there finds no BPF map it can
# open (nothing is handed out) and can register only its own sockets;
# meanwhile 100 of the victim's shunt connections to a plain server all
# stay plain with reason peer-not-shunt (1) and the server reads exactly
# the application's bytes (no handshake message injected); the victim's
# connections to a shunt server across "hosts" still negotiate.
. "$(dirname "$0")/lib.sh"
[ -x "$BIN/shuntd" ] || { echo "skip: shuntd not built (libbpf-dev, clang)"; exit 77; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "skip: no cgroup v2 mounted"; exit 77; }
CG="$cg2/shunt-sec-$$"
mkdir "$CG" || die "cannot create $CG"
V=shunt-victim A=shunt-attacker
"$BIN/shuntd" --cgroup "$CG" > "$WORK/agent.log" 2>&1 &
agent=$!
agent_cleanup() { kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null; sec_cleanup; rmdir "$CG" 2>/dev/null; }
trap agent_cleanup EXIT
for _ in $(seq 100); do grep -q ready "$WORK/agent.log" && break; sleep 0.05; done
grep -q ready "$WORK/agent.log" || die "shuntd did not start: $(cat "$WORK/agent.log")"
# in_cg USER CMD...: a process of USER in the agent's cgroup
in_cg() { local u=$1; shift; sh -c "echo \$\$ > '$CG/cgroup.procs'; exec \"\$@\"" sh "${SETPRIV[@]}" --reuid="$u" --regid="$u" "$@"; }

in_cg $A "$BIN/forge" 30 > "$WORK/forge.out" 2>&1 &
fp=$!
for _ in $(seq 100); do grep -q 'maps reachable' "$WORK/forge.out" && break; sleep 0.05; done
grep -q 'maps reachable: 0 ' "$WORK/forge.out" || die "the attacker reached the agent's maps: $(cat "$WORK/forge.out")"

chmod 0711 "$WORK"; mkdir "$WORK/vdir"; chown $V "$WORK/vdir"; chmod 0700 "$WORK/vdir"
bad=0
for i in $(seq 100); do
	P=$(free_port)
	in_cg $V "$BIN/peer" server 127.0.0.1 "$P" cfirst > "$WORK/ps" 2>&1 &
	sp=$!
	wait_port "$P"
	in_cg $V env LD_PRELOAD="$LIBV" SHUNT_LOCAL=0 SHUNT_DIR="$WORK/vdir" "$BIN/peer" client 127.0.0.1 "$P" cfirst \
		> "$WORK/pc" 2>&1 || die "connection $i: $(cat "$WORK/pc")"
	wait "$sp" || die "connection $i: the plain server's bytes differ: $(cat "$WORK/ps")"
	grep -q 'role=client mode=tcp reason=1 ' "$WORK/pc" || { bad=$((bad + 1)); cat "$WORK/pc"; }
done
[ "$bad" = 0 ] || die "$bad of 100 connections were not plain with reason 1"
# the victim's own negotiation still works: two "hosts" (two directories)
mkdir "$WORK/vdir2"; chown $V "$WORK/vdir2"; chmod 0700 "$WORK/vdir2"
P=$(free_port)
in_cg $V env LD_PRELOAD="$LIBV" SHUNT_DIR="$WORK/vdir2" "$BIN/peer" server 127.0.0.1 "$P" cfirst > "$WORK/ns" 2>&1 &
sp=$!
wait_port "$P"
in_cg $V env LD_PRELOAD="$LIBV" SHUNT_DIR="$WORK/vdir" "$BIN/peer" client 127.0.0.1 "$P" cfirst > "$WORK/nc" 2>&1 ||
	die "negotiating client: $(cat "$WORK/nc")"
wait "$sp" || die "negotiating server: $(cat "$WORK/ns")"
grep -q 'role=client mode=tcp reason=12 ' "$WORK/nc" && grep -q 'role=server mode=tcp reason=12 ' "$WORK/ns" ||
	die "the victim's negotiation: $(cat "$WORK/nc" "$WORK/ns")"
kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null
echo "  attacker in the agent's cgroup: $(cat "$WORK/forge.out")"
echo "  100 victim connections to a plain server meanwhile: all plain (reason 1), every byte the application's"
echo "  the victim's own shunt peers still negotiate in-band (reason 12: two directories, no common transport)"
echo "agent: ok"
