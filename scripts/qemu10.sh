#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# QEMU 10 for the benchmark's peer rows, beside the system's QEMU 7.2 (which
# the tests use and which stays as it is): qemu-storage-daemon 10.0 and
# qemu-system-x86_64 10.0 from Debian's bookworm-backports, built for
# Debian 12, unpacked with dpkg-deb into the machine cache, never
# installed.  make bench runs the daemon (bench.sh finds it at
# $BUILD/qemu-10/usr/bin/qemu-storage-daemon), make bench-guest both.
#
#   - a private apt state for bookworm-backports (a temporary sources list,
#     lists and cache under the machine cache);
#   - the newest qemu-utils 1:10.* it serves, or VHOST_BLK_QEMU10_VERSION;
#   - qemu-utils (qemu-storage-daemon, qemu-img), qemu-block-extra (the
#     rbd driver and the other block modules), qemu-system-x86 with its
#     -common and -data, and the seabios it needs (bookworm's is too old
#     for it) unpacked into $VHOST_BLK_CACHE/qemu-10/VERSION, and
#     $BUILD/qemu-10 pointing at it.
#
# Its libraries are Debian 12's (the backport is built for it); a library
# it needs and the host lacks is named and the script fails.
set -euo pipefail

me=qemu10
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
cache=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}
mirror=${VHOST_BLK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
pkgs="qemu-utils qemu-block-extra qemu-system-x86 qemu-system-common qemu-system-data"

usage() {
	cat <<EOF
Usage: ${0##*/} [-h|--help]

Fetch and unpack qemu-storage-daemon 10 and qemu-system-x86_64 10 from
bookworm-backports (see the head of this script) and print where they are:

  QSD10=\$BUILD/qemu-10/usr/bin/qemu-storage-daemon
  QEMU10=\$BUILD/qemu-10/usr/bin/qemu-system-x86_64

Environment: BUILD, VHOST_BLK_CACHE (default /var/cache/vhost-blk),
VHOST_BLK_QEMU10_VERSION (force a package version),
VHOST_BLK_DEBIAN_MIRROR (default $mirror).
EOF
}

log() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "${1:-}" in
'') ;;
-h|--help) usage; exit 0 ;;
*) log "unknown argument '$1' (see --help)"; exit 2 ;;
esac

aptdir=$cache/apt-bookworm-backports
# shellcheck source=scripts/apt-private.sh
. "$top/scripts/apt-private.sh"

for tool in apt-get apt-cache dpkg-deb flock ldd; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
mkdir -p "$cache/qemu-10" "$build"
exec {lock_fd}>"$cache/.lock-qemu10"
flock "$lock_fd"
apt_private_setup "$aptdir" "$mirror" "$keyring" bookworm-backports

ver=${VHOST_BLK_QEMU10_VERSION:-}
if [ -z "$ver" ]; then
	ver=$(apt_private_versions qemu-utils | awk '/^1:10\./' | sort -rV |
	      awk 'NR == 1')
	[ -n "$ver" ] || die "bookworm-backports serves no qemu-utils 1:10.*"
fi

# A cache entry is complete or absent: made in a temporary directory.
dest=$cache/qemu-10/${ver//:/_}
bios_ver=$(apt_private_versions seabios | sort -rV | awk 'NR == 1')
[ -n "$bios_ver" ] || die "bookworm-backports serves no seabios"
# What the entry holds: an entry of fewer packages is made again.
want="$ver $pkgs seabios=$bios_ver"
if [ "$(cat "$dest/complete" 2>/dev/null)" != "$want" ]; then
	tmp=$(mktemp -d "$cache/qemu-10/.new.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	log "downloading $pkgs $ver"
	for p in $pkgs seabios; do
		v=$ver
		[ "$p" != seabios ] || v=$bios_ver
		(cd "$tmp" && apt_private download -qq "$p=$v" 2>"$tmp/download.err") ||
			die "apt-get download $p=$v failed: $(tr '\n' ' ' <"$tmp/download.err")"
	done
	mkdir "$tmp/root"
	for deb in "$tmp"/*.deb; do
		dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
	done
	echo "$want" >"$tmp/root/complete"
	rm -rf "$dest"
	mv "$tmp/root" "$dest"
	rm -rf "$tmp"
	trap - EXIT
fi

qsd=$dest/usr/bin/qemu-storage-daemon
[ -x "$qsd" ] || die "$qsd missing from qemu-utils $ver"
missing=$(ldd "$qsd" | awk '/not found/ { print $1 }' | tr '\n' ' ')
[ -z "$missing" ] || die "$qsd needs libraries this host lacks: $missing"
"$qsd" --version >/dev/null || die "$qsd --version failed"
vmm=$dest/usr/bin/qemu-system-x86_64
[ -x "$vmm" ] || die "$vmm missing from qemu-system-x86 $ver"
missing=$(ldd "$vmm" | awk '/not found/ { print $1 }' | tr '\n' ' ')
[ -z "$missing" ] || die "$vmm needs libraries this host lacks: $missing"
"$vmm" --version >/dev/null || die "$vmm --version failed"

ln -sfn "$dest" "$build/qemu-10.new"
mv -T "$build/qemu-10.new" "$build/qemu-10"
log "$("$qsd" --version | head -n 1) in $build/qemu-10"
echo "QSD10=$build/qemu-10/usr/bin/qemu-storage-daemon"
echo "QEMU10=$build/qemu-10/usr/bin/qemu-system-x86_64"
