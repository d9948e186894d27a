#!/usr/bin/env bash
# Description: kernel TLS (tests/behave/ktls) where the kernel has it - the
# guest's Debian kernel, whose tls module the test guest loads (this
# host's kernel may not: there the program skips).  The suite runs it over
# RDMA with every behaviour program; here the kernel's TCP (the
# reference) and shared memory, both ends in the guest.  Each must pass,
# not skip.
set -eu
die() { echo "FAIL: $*"; exit 1; }
P="$BUILD/tests/behave/ktls"
for mode in tcp shm; do
	rc=0
	if [ $mode = tcp ]; then
		env -u LD_PRELOAD "$P" > /tmp/ktls.out 2>&1 || rc=$?
	else
		env LD_PRELOAD="$LIB" SHUNT_EXPECT=shm "$P" > /tmp/ktls.out 2>&1 || rc=$?
	fi
	[ "$rc" = 0 ] || die "$mode: rc $rc: $(tail -5 /tmp/ktls.out)"
	echo "ktls: kernel TLS on $mode: records made and read by the kernel, unread bytes decrypted"
done
