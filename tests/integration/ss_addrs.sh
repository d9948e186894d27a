#!/usr/bin/env bash
# Description: `shunt ss` lists every live connection with its real
# addresses, and nothing else.  Programs we did not write, under `shunt run`:
# a Python client; a Python echo server (a thread per connection); socat
# as an echo server with a child per connection.
# - A connection made plain under load (busy-short, reason 25) has ends
#   that never asked the kernel for their own address (a set-up with TCP's
#   system calls and nothing more, issue #13 item 10): the listing finds it
#   in /proc like ss(8).  The client holds four accelerated connections,
#   makes short ones until the port is known as short-lived, then - the
#   run queues made long by spinners - holds four made plain; each client end's
#   local address must be what the client's getsockname() gives, and its
#   server end's what the client's getpeername() gives.
# - No record outlives its connection: socat's children end without
#   close(), and the records of the short connections they served (their
#   parent's, who accepted them accelerated) must be gone, the two held
#   ones listed once each.
# - A plain connection (from a socat client without shunt) is listed once,
#   with its addresses, under the socat process that accepted it (a forked
#   child makes no file of its own for what it inherited - since the
#   fiftieth session; before, the child made one, a forking server's
#   system calls doubled), while the child serves it after the parent
#   closed its copy.
# - The registries count no reserved slot once the offers are done.
. "$(dirname "$0")/lib.sh"
need socat
need python3
PS=$(free_port)
PP=$(free_port)
[ "$PS" != "$PP" ] || PP=$(free_port)
export SHUNT_BUSY_SHORT=1
# the rule from 2 runnable threads a CPU (default 16): the spinners below
# cross it on any host without starting 16 a CPU
export SHUNT_BUSY_RUNNABLE=2
SHUNT_LOG=1 "$SHUNT" run -- socat "TCP-LISTEN:$PS,reuseaddr,fork" PIPE > "$WORK/socat.log" 2>&1 &
PIDS+=($!)
cat > "$WORK/server.py" <<'PY'
import socket, sys, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(128)
def echo(c):
    while True:
        d = c.recv(4096)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
PY
SHUNT_LOG=1 "$SHUNT" run -- python3 "$WORK/server.py" "$PP" > "$WORK/server.log" 2>&1 &
PIDS+=($!)
wait_port "$PS"
wait_port "$PP"

cat > "$WORK/client.py" <<'PY'
import os, socket, struct, sys, time
ps, pp, out, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def info(s):  # getsockopt(SOL_SHUNT, SHUNT_INFO): mode, reason
    return struct.unpack("IIQQ", s.getsockopt(0x5348, 1, 24))[:2]
def conn(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"x"); s.recv(1)
    return s
for _ in range(20):                  # socat's children: records must go
    conn(ps).close()
held = [conn(ps) for _ in range(2)] + [conn(pp) for _ in range(4)]
for _ in range(200):                 # the port's connections are short-lived
    conn(pp).close()
open(go + ".ready", "w").close()
while not os.path.exists(go):        # the spinners are running
    time.sleep(0.01)
plain = 0
for _ in range(50):                  # under load: plain (or, rarely, not yet)
    s = conn(pp)
    if info(s) == (0, 25):
        held.append(s)
        plain += 1
        if plain == 4:
            break
    else:
        s.close()
with open(out + ".tmp", "w") as f:
    for s in held:
        l, p = s.getsockname(), s.getpeername()
        f.write(f"{os.getpid()} {s.fileno()} {l[0]}:{l[1]} {p[0]}:{p[1]}\n")
os.rename(out + ".tmp", out)
for _ in range(600):                 # held until the listing is checked
    if os.path.exists(go + ".done"):
        break
    time.sleep(0.1)
PY

spin=()
stop_spin() { for p in "${spin[@]}"; do kill "$p" 2>/dev/null; done; spin=(); }
trap 'stop_spin; touch "$WORK/go.done"; cleanup' EXIT
SHUNT_LOG=1 "$SHUNT" run -- python3 "$WORK/client.py" "$PS" "$PP" "$WORK/held" "$WORK/go" > "$WORK/cli.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 400); do [ -e "$WORK/go.ready" ] && break; sleep 0.05; done
[ -e "$WORK/go.ready" ] || die "the client did not start: $(tail -3 "$WORK/cli.log")"
# twice as many runnable threads as CPUs and more: SHUNT_BUSY_RUNNABLE's 2
for _ in $(seq $(( $(nproc) * 2 + 2 ))); do
	sh -c 'while :; do :; done' &
	spin+=($!)
done
touch "$WORK/go"
for _ in $(seq 600); do [ -s "$WORK/held" ] && break; sleep 0.05; done
stop_spin
[ -s "$WORK/held" ] || die "the client did not get its connections: $(tail -3 "$WORK/cli.log")"
python3 - "$PS" "$WORK/plain.out" "$WORK/go.done" > "$WORK/plain.log" 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"y"); s.recv(1)
open(sys.argv[2], "w").write("up\n")
for _ in range(600):
    if os.path.exists(sys.argv[3]):
        break
    time.sleep(0.1)
PY
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/plain.out" ] && break; sleep 0.05; done
plain_end=$(ss -Htn state established "( dport = :$PS )" | awk '{print $3}' |
	grep -v -F -f <(awk '{print $3}' "$WORK/held") | head -1)
[ -n "$plain_end" ] || die "no plain connection to socat (client: $(tail -3 "$WORK/plain.log"; cat "$WORK/plain.out" 2>/dev/null); socat: $(tail -3 "$WORK/socat.log"))"
sleep 0.5 # socat's last children end
"$SHUNT" ss --json > "$WORK/ss.json"

python3 - "$WORK/ss.json" "$WORK/held" "$PS" "$plain_end" <<'PY' || die "shunt ss: wrong records (see above)"
import json, sys
recs = json.load(open(sys.argv[1]))
held = [l.split() for l in open(sys.argv[2])]
socat_port = sys.argv[3]
pid, busy = int(held[0][0]), 0
for _, fd, local, peer in held:
    mine = [r for r in recs if r["pid"] == pid and r["fd"] == int(fd) and r["role"] == "client"]
    assert len(mine) == 1, f"client fd {fd}: {mine}"
    r = mine[0]
    assert r["local"] == local and r["peer"] == peer, f"client fd {fd}: {r} vs {local} {peer}"
    busy += r["reason"] == "busy-short"
    # (the kernel gives one local port to connections to different
    # servers: the client's port alone may name two server ends)
    srv = [s for s in recs if s["role"] == "server" and s["peer"] == local and s["local"] == peer]
    assert len(srv) == 1, f"server end of {local} -> {peer}: {srv} among " + str(
        [s for s in recs if s["role"] == "server" and s["peer"] == local])
    assert srv[0]["mode"] == r["mode"], f"server end of {local}: {srv[0]}"
assert busy >= 4, "not four held connections made plain under load: " + " ".join(
    f"{r['mode']}/{r['reason']}" for r in recs if r["pid"] == pid)
plain_end = sys.argv[4]
srv = [s for s in recs if s["role"] == "server" and s["peer"] == plain_end and s["local"] == "127.0.0.1:" + socat_port]
lst = [s for s in recs if s["role"] == "listen" and s["local"].endswith(":" + socat_port)]
assert len(srv) == 1 and len(lst) == 1, f"plain connection {plain_end}: {srv} {lst}"
assert srv[0]["mode"] == "tcp" and srv[0]["local"] == "127.0.0.1:" + socat_port and \
    srv[0]["pid"] == lst[0]["pid"], f"plain connection {plain_end}: {srv[0]}, listener's pid {lst[0]['pid']}"
ends = [h[2] for h in held] + [plain_end]
stale = [r for r in recs if r["role"] == "server" and r["peer"] not in ends]
assert not stale, f"records of ended connections: {stale[:3]} ({len(stale)})"
print(f"  ss: {len(held)} held connections ({busy} busy-short), both ends' addresses right, no stale record")
PY
# every slot reserved for an offer was given back: the registry's count
# (which lets accept skip the slots) is 0 again
for port in "$PS" "$PP"; do
	n=$(od -A n -t u4 -j 32 -N 4 "$SHUNT_DIR/p$port" | tr -d ' ')
	[ "$n" = 0 ] || die "port $port's registry counts $n reserved slots after the connections"
done
grep -q '"local": "?"' "$WORK/ss.json" && die "an unresolved address: $(grep '"?"' "$WORK/ss.json")"
echo "ss_addrs: ok"
