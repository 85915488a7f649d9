#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything vhost-blk needs on a Debian 12 machine, and pick one
# Debian 6.12 kernel release N for which the image, the headers and the
# source package all exist.  Idempotent: a second run with everything in
# place only re-reads the stamp file and returns.
#
# Output: $BUILD/kernel.env, sourced by the Makefile and the VM runner:
#   KREL=6.12.N+deb12-amd64   KVER=6.12.N-...   KSRC=$BUILD/linux-source-6.12
#
# deps.sh --pick-release only prints the release it would pick, from the
# apt cache as it is (no root, no install): scripts/deps_test.sh runs it
# against a fake apt-cache.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
env_file=$build/kernel.env
mkdir -p "$build"

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Every apt-cache pipeline below reads its input to the end: a reader that
# stops early (grep -q, head) makes apt-cache die of SIGPIPE, which
# pipefail turns into a failure.

# The versions of binary package $1 apt can install: 'apt-cache madison'
# lists source packages too when deb-src lines are configured, as
# "pkg | version | URL suite/main Sources"; only "... Packages" lines count.
madison_versions() {
	apt-cache madison "$1" |
		awk -F'|' '$3 ~ / Packages[[:space:]]*$/ { gsub(/[[:space:]]/, "", $2); print $2 }'
}

# Pick a release: VHOST_BLK_KREL forces one, else the newest N for which
# the unsigned image, the headers and linux-source-6.12 of the same
# version are all served.
pick_release() {
	local n ver sources
	if [ -n "${VHOST_BLK_KREL:-}" ]; then
		echo "$VHOST_BLK_KREL"
		return
	fi
	sources=$(madison_versions linux-source-6.12)
	for n in $(apt-cache pkgnames linux-image-6.12. |
		   sed -n 's/^linux-image-\(6\.12\.[0-9]*\)+deb12-amd64-unsigned$/\1/p' |
		   sort -rV); do
		ver=$(madison_versions "linux-image-$n+deb12-amd64-unsigned" |
		      awk 'NR == 1 { v = $0 } END { print v }')
		[ -n "$ver" ] || continue
		[ -n "$(madison_versions "linux-headers-$n+deb12-amd64")" ] ||
			continue
		printf '%s\n' "$sources" |
			awk -v v="$ver" '$0 == v { found = 1 } END { exit !found }' ||
			continue
		echo "$n+deb12-amd64"
		return
	done
}

if [ "${1:-}" = --pick-release ]; then
	pick_release
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install)"

# Host tools: compiler, VM, initramfs, I/O tools used by tests and bench.
host_pkgs="make gcc libc6-dev qemu-system-x86 qemu-utils busybox-static cpio
	kmod xz-utils fio e2fsprogs util-linux perl gnuplot-nox liburing-dev
	linux-perf flex bison bc libelf-dev libssl-dev socat dmsetup"
# Packaging (make deb) and the package test, whose VM sees this root:
# dkms builds the module there, for the VM's kernel.
host_pkgs="$host_pkgs dpkg-dev debhelper dh-dkms dkms fakeroot udev"

have_all() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = \
		  "install ok installed" ] || return 1
	done
}

apt_updated=
apt_update() {
	[ -n "$apt_updated" ] && return 0
	log "apt-get update"
	apt-get update -qq || die "apt-get update failed"
	apt_updated=1
}

apt_install() {
	have_all "$@" && return 0
	apt_update
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "$@" >/dev/null ||
		die "apt-get install $* failed"
}

# shellcheck disable=SC2086
apt_install $host_pkgs

# Reuse the release chosen earlier as long as it is still complete.
if [ -f "$env_file" ]; then
	# shellcheck disable=SC1090
	. "$env_file"
	if [ -f "/boot/vmlinuz-$KREL" ] &&
	   [ -d "/usr/src/linux-headers-$KREL" ] &&
	   [ -f "$KSRC/drivers/vhost/vhost.h" ] &&
	   [ -f "$KSRC/scripts/checkpatch.pl" ] &&
	   [ -f "$KSRC/include/uapi/linux/virtio_config.h" ] &&
	   [ "$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null)" = "$KVER" ]; then
		log "kernel $KREL ready"
		exit 0
	fi
fi


apt_update
krel=$(pick_release)
[ -n "$krel" ] || die "no 6.12 release with image, headers and source found"
kver=$(madison_versions "linux-image-$krel-unsigned" |
       awk 'NR == 1 { v = $0 } END { print v }')
log "kernel release $krel (package version $kver)"

# The image goes in like any kernel: /boot/vmlinuz-$krel and a modules
# tree under /lib/modules that the VM sees through its 9p root.
apt_install "linux-image-$krel-unsigned" "linux-headers-$krel"

# linux-source-6.12 of the same version, installed: vhost-blk-dkms depends
# on it (its vhost.h, /usr/src/linux-source-6.12.tar.xz), and the package
# test installs that package in the VM, which sees this root.
if [ "$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null)" != "$kver" ]; then
	apt_update
	log "apt-get install linux-source-6.12=$kver"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "linux-source-6.12=$kver" >/dev/null ||
		die "apt-get install linux-source-6.12=$kver failed"
fi

# linux-source: only the files we need, never committed (build/ is ignored).
ksrc=$build/linux-source-6.12
if [ ! -f "$ksrc/drivers/vhost/vhost.h" ] || [ ! -f "$ksrc/.version" ] ||
   [ ! -f "$ksrc/include/uapi/linux/virtio_config.h" ] ||
   [ "$(cat "$ksrc/.version")" != "$kver" ]; then
	dl=$build/dl
	mkdir -p "$dl"
	if ! ls "$dl"/linux-source-6.12_"${kver//:/%3a}"_all.deb >/dev/null 2>&1; then
		log "downloading linux-source-6.12=$kver"
		(cd "$dl" && apt-get download -q "linux-source-6.12=$kver") ||
			die "apt-get download linux-source-6.12=$kver failed"
	fi
	rm -rf "$ksrc" "$build/src-deb"
	dpkg-deb -x "$dl"/linux-source-6.12_*"_all.deb" "$build/src-deb" ||
		die "dpkg-deb -x linux-source failed"
	log "extracting vhost, selftest harness and checkpatch from the tarball"
	tar -xJf "$build"/src-deb/usr/src/linux-source-6.12.tar.xz -C "$build" \
		linux-source-6.12/drivers/vhost \
		linux-source-6.12/tools/testing/selftests/kselftest.h \
		linux-source-6.12/tools/testing/selftests/kselftest_harness.h \
		linux-source-6.12/scripts/checkpatch.pl \
		linux-source-6.12/scripts/spelling.txt \
		linux-source-6.12/scripts/const_structs.checkpatch \
		linux-source-6.12/include/uapi/linux ||
		die "extracting from linux-source-6.12.tar.xz failed"
	rm -rf "$build/src-deb"
	echo "$kver" >"$ksrc/.version"
fi

cat >"$env_file" <<EOT
KREL=$krel
KVER=$kver
KSRC=$ksrc
EOT
log "kernel $krel ready"
