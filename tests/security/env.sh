#!/usr/bin/env bash
# Description: attack #4 of issue #12 - the environment.  Whoever starts a
# program writes its SHUNT_* variables: a forged SHUNT_INHERIT must not
# close (or adopt) descriptors that are not what it claims (the program's
# stdout and stderr stay open); SHUNT_DISABLE=yes/true/on disables, an
# unknown value disables with a warning; a SHUNT_DIR that cannot be used
# warns and gives reason unsafe-dir; a malformed number warns and keeps the
# default.  Never silence, never a crash.
. "$(dirname "$0")/lib.sh"
V=shunt-victim

# 4a. forged hand-over entries naming stdin/stdout/stderr ("c ": one the old
# image had close-on-exec, which the new one closes once adopted)
for inh in "7,1,1,0,0,2,2" "m1,2,0,5" "0,1,abc" "3,3,1,0,0,4,4;m2,1,1,1" "c s1,1,1,0,0,2,2" "c m2,1,1,1;c x"; do
	out=$(preload $V "$LIBV" SHUNT_INHERIT="$inh" sh -c 'echo out; echo err >&2' 2> "$WORK/inh.err") ||
		die "SHUNT_INHERIT=$inh: the program failed"
	[ "$out" = out ] && grep -q '^err$' "$WORK/inh.err" ||
		die "SHUNT_INHERIT=$inh closed stdout or stderr: '$out' / $(cat "$WORK/inh.err")"
	grep -q "SHUNT_INHERIT entry .* invalid: ignored" "$WORK/inh.err" ||
		die "SHUNT_INHERIT=$inh: no warning: $(cat "$WORK/inh.err")"
done
echo "  forged SHUNT_INHERIT: stdout and stderr stay open, each entry refused with a warning"

# 4b. SHUNT_DISABLE: every spelling of yes disables; an unknown value too, with a warning
for v in 1 yes true on YES; do
	out=$(pair dis SHUNT_DISABLE=$v)
	[ "$(grep -c 'mode=tcp reason=2 ' <<< "$out")" = 2 ] || die "SHUNT_DISABLE=$v left shunt on: $out"
done
out=$(pair dis2 SHUNT_DISABLE=2)
[ "$(grep -c 'mode=tcp reason=2 ' <<< "$out")" = 2 ] || die "SHUNT_DISABLE=2 left shunt on: $out"
grep -q 'invalid SHUNT_DISABLE' "$WORK/dis2.err" || die "SHUNT_DISABLE=2: no warning"
for v in 0 no false off; do
	out=$(pair en SHUNT_DISABLE=$v)
	[ "$(grep -c 'mode=shm' <<< "$out")" = 2 ] || die "SHUNT_DISABLE=$v disabled shunt: $out"
done
echo "  SHUNT_DISABLE: 1/yes/true/on and unknown values (warned) disable; 0/no/false/off do not"

# 4c. a SHUNT_DIR that cannot be used: warned, plain with a reason
out=$(pair nodir SHUNT_DIR=/nonexistent/shunt)
[ "$(grep -c 'mode=tcp reason=19' <<< "$out")" = 2 ] || die "SHUNT_DIR nowhere: $out"
grep -q 'cannot create /nonexistent/shunt' "$WORK/nodir.err" || die "no warning: $(cat "$WORK/nodir.err")"
out=$(pair reldir SHUNT_DIR=relative/dir)
[ "$(grep -c 'mode=shm' <<< "$out")" = 2 ] || die "relative SHUNT_DIR: the default was not kept: $out"
grep -q 'invalid SHUNT_DIR' "$WORK/reldir.err" || die "relative SHUNT_DIR: no warning"
echo "  SHUNT_DIR missing: warned, plain with reason unsafe-dir; relative: warned, default kept"

# 4d. a malformed number keeps its default, with a warning
out=$(pair ring SHUNT_RING_KB=abc)
[ "$(grep -c 'mode=shm' <<< "$out")" = 2 ] || die "SHUNT_RING_KB=abc: $out"
grep -q 'invalid SHUNT_RING_KB' "$WORK/ring.err" || die "SHUNT_RING_KB=abc: no warning"
echo "  SHUNT_RING_KB=abc: warned, default kept"
echo "env: ok"
