# tests/security/lib.sh - two real users and the binaries they may run.
# The victim (shunt-victim) and the attacker (shunt-attacker) are created
# once (system users, no home, no shell) and kept; each script runs its
# processes as them with setpriv.  The build is copied to a directory both
# may read, so the tests work from a checkout under /root too.  Under
# SHUNT_ASAN the sanitizer runtimes are preloaded first (tests/run.sh).
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (creates users)"; exit 77; }
command -v setpriv > /dev/null || { echo "skip: setpriv missing (util-linux)"; exit 77; }
for u in shunt-victim shunt-attacker; do
	id "$u" > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$u" ||
		die "cannot create user $u"
done
export -n SHUNT_DIR # the victim's default directory is what these tests are about
VUID=$(id -u shunt-victim) AUID=$(id -u shunt-attacker)
BIN=$(mktemp -d /tmp/shunt-sec.XXXXXX)
chmod 755 "$BIN"
cp "$ROOT/$BUILD"/libshunt.so "$ROOT/$BUILD"/libshunt-faults.so "$ROOT/$BUILD"/shunt "$BIN"/
cp "$ROOT/$BUILD"/tests/tools/* "$BIN"/
[ -x "$ROOT/$BUILD/shuntd" ] && cp "$ROOT/$BUILD/shuntd" "$ROOT/$BUILD/shunt_sockops.bpf.o" "$BIN"/
chmod -R a+rX "$BIN"
PRE=""
if [ -n "${SHUNT_ASAN:-}" ]; then
	PRE="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
fi
LIBV="$PRE$BIN/libshunt.so" LIBF="$PRE$BIN/libshunt-faults.so"
sec_cleanup() {
	pkill -u shunt-victim 2>/dev/null; pkill -u shunt-attacker 2>/dev/null
	rm -rf "$BIN" /tmp/shunt-"$VUID" /tmp/shunt-"$AUID" /run/user/"$VUID"
	cleanup
}
trap sec_cleanup EXIT
# run_as USER CMD...: run as that user (its own group, no supplementary groups)
SETPRIV=(setpriv --clear-groups --inh-caps=-all)
run_as() { local u=$1; shift; "${SETPRIV[@]}" --reuid="$u" --regid="$u" "$@"; }
# preload USER LIB CMD...: a process of USER with the shim LIB, the rest of
# the environment as given
preload() { local u=$1 l=$2; shift 2; run_as "$u" env LD_PRELOAD="$l" "$@"; }

# pair NAME ENV...: a victim server and client, both under shunt with ENV;
# prints both report lines; stderr of both in $WORK/NAME.err
pair() {
	local name=$1 P; shift; P=$(free_port)
	preload shunt-victim "$LIBV" "$@" "$BIN/peer" server 127.0.0.1 "$P" cfirst > "$WORK/$name.s" 2> "$WORK/$name.err" &
	local sp=$!
	wait_port "$P"
	preload shunt-victim "$LIBV" "$@" "$BIN/peer" client 127.0.0.1 "$P" cfirst > "$WORK/$name.c" 2>> "$WORK/$name.err" ||
		die "$name: client failed: $(cat "$WORK/$name.c" "$WORK/$name.err")"
	wait "$sp" || die "$name: server failed: $(cat "$WORK/$name.err")"
	cat "$WORK/$name.s" "$WORK/$name.c"
}

