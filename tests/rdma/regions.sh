#!/usr/bin/env bash
# Description: a link's registered regions are few large pages: the
# receive region (32 rings of 256 KiB, 8 MiB) and the staging region are
# 2 MiB-aligned and backed by transparent huge pages, so the device
# translates 4 pages per region instead of 2,048 (/proc/PID/smaps of a
# process with a live RDMA connection: AnonHugePages covers both regions).
set -eu
. "$(dirname "$0")/lib.sh"
THP=/sys/kernel/mm/transparent_hugepage/enabled
[ -r $THP ] && ! grep -q '\[never\]' $THP || { echo "skip: no transparent huge pages in this kernel"; exit 77; }
STREAM=$BUILD/tests/tools/stream
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma)
die() { echo "FAIL: $*"; exit 1; }
: > /tmp/s.out # a stale "listening" must not start the client
"${R[@]}" "$STREAM" server 10.0.0.1 7790 32 block 1 >> /tmp/s.out 2>&1 &
sp=$!
listening /tmp/s.out
"${R[@]}" "$STREAM" client 10.0.0.1 7790 32 block 1 > /tmp/c.out 2>&1 &
cp=$!
# rx: Size 8192 kB; staging: 8192 kB of rings + the cursor buffers
regions() {
	awk '/^[0-9a-f]+-[0-9a-f]+ /{size=0} /^Size:/{size=$2} /^AnonHugePages:/{
		if (size >= 8192 && size < 8192 + 2048) printf "%d %d\n", size, $2 }' "/proc/$1/smaps" 2> /dev/null
}
found=
for _ in $(seq 100); do
	r=$(regions $sp)
	# the connection's link and the spare made after it: at least 2 regions each
	[ "$(echo "$r" | awk '$2 >= 8192' | wc -l)" -ge 2 ] && { found=1; break; }
	sleep 0.1
done
wait $cp || die "client: $(tail -3 /tmp/c.out)"
wait $sp || die "server: $(tail -3 /tmp/s.out)"
grep -q 'mode=rdma reason=0 .* ok$' /tmp/c.out || die "not over rdma: $(tail -3 /tmp/c.out)"
[ -n "$found" ] || die "link regions not on huge pages (size kB, AnonHugePages kB): $(echo $r)"
echo "regions: $(echo "$r" | awk '$2 >= 8192' | wc -l) link regions wholly on 2 MiB pages: $(echo "$r" | awk '$2 >= 8192 {printf "%s kB ", $1}')"
