#!/usr/bin/env bash
# Description: write() and shutdown() towards a stopped peer (SIGSTOP: a
# debugger, a paused container) return at once, as TCP's.  The client's
# 600 non-blocking one-byte writes - 600 cursor messages - exhaust the
# stopped server's posted receives (RNR, retried for ever) and then fill the
# send queue; what it cannot take is posted by the progress thread once the
# server resumes a second after the shutdown, and the kernel's FIN follows
# the closing word's completion.  Before, the 512th write() spun until the
# server resumed, and shutdown() waited for the completion (2 s, then moved
# the connection to TCP).  Every byte arrives, both ends stay on RDMA.
set -eu
T=$BUILD/tests/tools/stopped
GO=/tmp/stopped.go
die() { echo "FAIL: $*"; tail -5 /tmp/sp-s.out; tail -5 /tmp/sp-c.out; exit 1; }
rm -f "$GO"
: > /tmp/sp-s.out
: > /tmp/sp-c.out
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" server 10.0.0.1 7840 > /tmp/sp-s.out 2>&1 &
sp=$!
for _ in $(seq 100); do grep -q listening /tmp/sp-s.out && break; sleep 0.05; done
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" client 10.0.0.1 7840 "$GO" > /tmp/sp-c.out 2>&1 &
cp=$!
for _ in $(seq 200); do grep -q accepted /tmp/sp-s.out && break; sleep 0.05; done
grep -q accepted /tmp/sp-s.out || die "not accepted"
sleep 0.2 # the server's accept() returned to its read
kill -STOP $sp
touch "$GO"
for _ in $(seq 200); do grep -q shutdown_ms /tmp/sp-c.out && break; sleep 0.05; done
sleep 1
kill -CONT $sp
wait $sp || die "server"
wait $cp || die "client"
wms=$(sed -n 's/^writes_ms=//p' /tmp/sp-c.out)
[ -n "$wms" ] && [ "$wms" -lt 300 ] || die "600 non-blocking writes took ${wms:-?} ms with the peer stopped"
ms=$(sed -n 's/^shutdown_ms=//p' /tmp/sp-c.out)
[ -n "$ms" ] && [ "$ms" -lt 300 ] || die "shutdown() took ${ms:-?} ms with the peer stopped"
grep -q 'role=client mode=rdma reason=0' /tmp/sp-c.out || die "client: $(grep role= /tmp/sp-c.out)"
grep -q 'role=server mode=rdma reason=0' /tmp/sp-s.out || die "server: $(grep role= /tmp/sp-s.out)"
echo "stopped peer: 600 non-blocking one-byte writes $wms ms, shutdown() $ms ms" >> "${RESULTS:-/dev/null}"
echo "stopped: towards a stopped peer 600 non-blocking writes took $wms ms, shutdown() $ms ms; the rest was posted and the FIN followed once the peer resumed; 600 bytes intact, rdma"
