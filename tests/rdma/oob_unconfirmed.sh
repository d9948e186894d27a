#!/usr/bin/env bash
# Description: tests/behave/oob over RDMA with every client's CONFIRM 1 s
# late (libshunt-faults.so SHUNT_FAULT_CONFIRM_MS=1000; the server's
# accept() waits 200 ms for it, SHUNT_ACCEPT_WAIT_MS=2000), so each accepted
# socket is plain until its first call: as between two hosts under load.
# The server's recv(MSG_OOB | MSG_DONTWAIT) with nothing urgent must say
# EINVAL, as TCP's (it said EAGAIN: the call waited for the word), and a
# client's urgent byte sent first thing after connect(), to a server that
# calls nothing for 6 s, must go at once - before, its move to TCP waited
# for the server's answer and failed after 5 s with EOPNOTSUPP (forty-third
# session, two guests).  No SHUNT_EXPECT: the accepted sockets are plain
# until their first call by design.
set -eu
. "$(dirname "$0")/lib.sh"
out=/tmp/oob-unconfirmed.out
env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
	SHUNT_FAULT_CONFIRM_MS=1000 SHUNT_ACCEPT_WAIT_MS=2000 SHUNT_TEST_ADDR=10.0.0.1 \
	timeout 120 "$BUILD/tests/behave/oob" > $out 2>&1 || { tail -20 $out; echo "FAIL: oob with late CONFIRMs"; exit 1; }
grep -q "the client's word has not come" $out || { tail -20 $out; echo "FAIL: every CONFIRM came in time (the fault did not hold it)"; exit 1; }
grep -q "moves to TCP: unsupported-feature" $out || { tail -20 $out; echo "FAIL: no connection moved for urgent data over RDMA"; exit 1; }
echo "oob_unconfirmed: urgent data with CONFIRMs 1 s late: as TCP's"
