#!/usr/bin/env bash
# scripts/guest-kernel.sh - unpack Debian 12's own 6.12 kernel (the one the
# package linux-image-6.12-amd64 names) into $SHUNT_VM_CACHE/kernels/VERSION
# and print that directory: a ROOT for tests/vm/run.sh -K (or
# SHUNT_VM_KROOT=ROOT for every guest).  Not installed: the host keeps its
# kernel and boot loader untouched.  Idempotent; needs root (apt).
#
# The test guest boots the host's 6.1 by default.  6.12 is for what 6.1
# cannot do (the kernel's SMC-R over rxe hangs on 6.1: bench/smc.sh) and to
# run the suite on a second kernel; docs/rdma.md says what each kernel's
# rxe has been seen to do under emulation.
set -euo pipefail
CACHE=${SHUNT_VM_CACHE:-/var/tmp/shunt-vm}
META=${SHUNT_VM_KERNEL_PKG:-linux-image-6.12-amd64}
say() { echo "guest-kernel: $*" >&2; }
dep() { apt-cache depends "$META" 2> /dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'; }
pkg=$(dep)
[ -n "$pkg" ] || { apt-get update -qq; pkg=$(dep); }
[ -n "$pkg" ] || { say "no package $META in this machine's archive (apt-get update?)"; exit 1; }
ver=${pkg#linux-image-}
dest=$CACHE/kernels/$ver
[ -s "$dest/boot/vmlinuz-$ver" ] && { echo "$dest"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg") ||
	{ apt-get update -qq && (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg"); } ||
	{ say "could not download $pkg"; exit 1; }
mkdir -p "$CACHE/kernels"
rm -rf "$dest.tmp"
dpkg-deb -x "$tmp"/*.deb "$dest.tmp"
# the modules' map, which the package's postinst would write
depmod -b "$dest.tmp" "$ver"
mv "$dest.tmp" "$dest"
say "$pkg unpacked in $dest"
echo "$dest"
