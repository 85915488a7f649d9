#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Linux 7.3, the kernel drivers/vhost/blk.c is written to: Debian builds it
# for Debian 13 (trixie-backports), with gcc-14 and trixie's glibc, so its
# headers and kbuild do not run on this Debian 12 host.  This script, run
# by scripts/deps.sh, sets up everything the 7.3 build and test need,
# never touching the host's own packages:
#
#   - a private apt state for trixie and trixie-backports (a temporary
#     sources list, lists and cache under the machine cache);
#   - the newest 7.3 release whose image, headers and linux-source-7.3 are
#     served, or VHOST_BLK_KREL_73;
#   - a Debian 13 build root (mmdebstrap) with gcc-14, make and the 7.3
#     headers, in which 'make module-7.3' builds vhost_blk.ko;
#   - the 7.3 kernel and its modules, unpacked for the test VM;
#   - linux-source-7.3 (build/dl), and from it build/linux-source-7.3:
#     vhost.h, the uapi headers, checkpatch, the kselftest harness.
#
# See --help.  Everything but build/ is cached machine-wide under
# $VHOST_BLK_CACHE (default /var/cache/vhost-blk), so that only the first
# run on a machine pays for it (a few minutes, mostly the build root).
set -euo pipefail

me=mainline
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
cache=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}
series=7.3
mirror=${VHOST_BLK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# What the build root holds besides the headers: a compiler and make for
# kbuild (the headers package brings the rest: kbuild, pahole, libc6-dev).
root_pkgs="gcc-14 make"
# Bump when the layout of a cache entry or the way it is made changes.
format=1

usage() {
	cat <<EOF
Usage: ${0##*/} [--env] [-h|--help]

Set up Linux $series for vhost-blk (see the head of this script), and print
the lines scripts/deps.sh adds to \$BUILD/kernel.env:

  KREL_73=7.3.N+deb13-amd64   the release
  KVER_73=7.3.N-...           its package version
  KSRC_73=\$BUILD/linux-source-7.3
  KROOT_73=DIR                the Debian 13 build root
  KIMG_73=DIR                 DIR/vmlinuz and DIR/modules/lib/modules/KREL_73

Options:
  --env       only print those lines if everything is in place (status 0),
              else fail (status 1); never download or build
  -h, --help  this text

Environment: BUILD, VHOST_BLK_CACHE, VHOST_BLK_KREL_73 (force a release),
VHOST_BLK_DEBIAN_MIRROR (default $mirror).
EOF
}

log() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { log "error: $*"; exit 1; }

check_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--env)		check_only=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		log "unknown argument '$1' (see --help)"; exit 2 ;;
	esac
done

aptdir=$cache/apt-trixie
# shellcheck source=scripts/apt-private.sh
. "$top/scripts/apt-private.sh"
apt13() { apt_private "$@"; }
apt13_cache() { apt_private_cache "$@"; }

# The versions of binary package $1 in trixie and trixie-backports.
versions() { apt_private_versions "$1"; }

# Everything below is named by release and version: a cached entry is
# complete or absent (each is made in a temporary directory and renamed).
paths() {
	kimg=$cache/kernel/${krel}_$kver
	key=$( { echo "format $format"; echo "$krel $kver"; echo "$root_pkgs"; } |
	       sha256sum | cut -c1-16)
	kroot=$cache/trixie-root/$key
	ksrc=$build/linux-source-$series
	deb=$build/dl/linux-source-${series}_${kver//:/%3a}_all.deb
}

ready() {
	[ -f "$kimg/complete" ] && [ -f "$kroot/.complete" ] &&
	[ -f "$deb" ] && [ "$(cat "$ksrc/.version" 2>/dev/null)" = "$kver" ]
}

print_env() {
	cat <<EOF
KREL_73=$krel
KVER_73=$kver
KSRC_73=$ksrc
KROOT_73=$kroot
KIMG_73=$kimg
EOF
}

if [ "$check_only" = 1 ]; then
	KREL_73= KVER_73=
	# shellcheck disable=SC1091
	[ -f "$build/kernel.env" ] && . "$build/kernel.env"
	krel=$KREL_73 kver=$KVER_73
	[ -n "$krel" ] && [ -n "$kver" ] || exit 1
	paths
	ready || exit 1
	print_env
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, chroot)"
for tool in apt-get apt-cache mmdebstrap dpkg-deb depmod sha256sum flock xz; do
	command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done
mkdir -p "$cache/kernel" "$cache/trixie-root" "$build/dl"
exec {lock_fd}>"$cache/.lock-mainline"
flock "$lock_fd"
apt_private_setup "$aptdir" "$mirror" "$keyring" trixie trixie-backports

# The newest 7.3.N+deb13-amd64 with image, headers and source of one version.
krel=${VHOST_BLK_KREL_73:-}
if [ -z "$krel" ]; then
	re="^linux-image-\\(${series//./\\.}\\.[0-9][0-9]*+deb13-amd64\\)\$"
	for k in $(apt13_cache pkgnames "linux-image-$series." | sed -n "s/$re/\\1/p" |
		   sort -rV); do
		v=$(versions "linux-image-$k" | head -n1)
		[ -n "$v" ] || continue
		versions "linux-headers-$k" | grep -qxF "$v" || continue
		versions "linux-source-$series" | grep -qxF "$v" || continue
		krel=$k
		break
	done
fi
[ -n "$krel" ] || die "no Linux $series release with image, headers and source in trixie-backports"
kver=$(versions "linux-image-$krel" | head -n1)
[ -n "$kver" ] || die "linux-image-$krel is not served"
paths
log "Linux $series: release $krel (package version $kver)"

# linux-source-7.3, and the parts of it the build and the checks read.
if [ ! -f "$deb" ]; then
	log "downloading linux-source-$series=$kver"
	(cd "$build/dl" && apt13 download -q "linux-source-$series=$kver" >/dev/null) ||
		die "apt-get download linux-source-$series=$kver failed"
fi
if [ "$(cat "$ksrc/.version" 2>/dev/null)" != "$kver" ]; then
	log "extracting vhost.h, uapi headers and scripts from linux-source-$series"
	rm -rf "$ksrc"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -xO "./usr/src/linux-source-$series.tar.xz" |
		tar -xJ -C "$build" "linux-source-$series/drivers/vhost" \
			"linux-source-$series/include/uapi/linux" \
			"linux-source-$series/scripts/checkpatch.pl" \
			"linux-source-$series/scripts/spelling.txt" \
			"linux-source-$series/scripts/const_structs.checkpatch" \
			"linux-source-$series/scripts/kernel-doc" \
			"linux-source-$series/tools/lib/python" \
			"linux-source-$series/tools/testing/selftests/kselftest.h" \
			"linux-source-$series/tools/testing/selftests/kselftest_harness.h" ||
		die "extracting from linux-source-$series.tar.xz failed"
	echo "$kver" >"$ksrc/.version"
fi

# The kernel and its modules, for the test VM.
if [ ! -f "$kimg/complete" ]; then
	log "unpacking the $krel kernel into $kimg"
	tmp=$kimg.tmp.$$
	rm -rf "$tmp"
	mkdir -p "$tmp/debs" "$tmp/root"
	pkgs=$(apt13_cache show "linux-image-$krel=$kver" |
	       sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
	       sed -n "s/^ *\\([^ ]*$krel\\) .*/\\1/p")
	(cd "$tmp/debs" && apt13 download -q "linux-image-$krel=$kver" \
		$(for p in $pkgs; do echo "$p=$kver"; done) >/dev/null) ||
		die "apt-get download of the $krel kernel failed"
	for d in "$tmp"/debs/*.deb; do
		dpkg-deb -x "$d" "$tmp/root" || die "dpkg-deb -x $d failed"
	done
	mods=$tmp/root/lib/modules/$krel
	[ -d "$mods" ] || mods=$tmp/root/usr/lib/modules/$krel
	# /boot/vmlinuz-KREL, or (the packages since 7.3.4-1~bpo13+1, where
	# linux-image-KREL is a metapackage of linux-binary-KREL and
	# linux-modules-KREL) /usr/lib/modules/KREL/vmlinuz.
	vmlinuz=$tmp/root/boot/vmlinuz-$krel
	[ -f "$vmlinuz" ] || vmlinuz=$mods/vmlinuz
	[ -f "$vmlinuz" ] || die "no vmlinuz-$krel in the $krel packages ($pkgs)"
	[ -d "$mods/kernel" ] || die "no modules for $krel in its packages"
	mv "$vmlinuz" "$tmp/vmlinuz"
	mkdir -p "$tmp/modules/lib/modules"
	mv "$mods" "$tmp/modules/lib/modules/$krel"
	depmod -b "$tmp/modules" "$krel" || die "depmod of $krel failed"
	echo "$krel" >"$tmp/kernelrelease"
	printf 'release %s\nversion %s\npackages %s\nunpacked %s\n' "$krel" "$kver" \
		"$pkgs" "$(date -u +%FT%TZ)" >"$tmp/info"
	rm -rf "$tmp/debs" "$tmp/root"
	touch "$tmp/complete"
	rm -rf "$kimg"
	mv "$tmp" "$kimg"
fi

# The build root: Debian 13 with gcc-14 and the 7.3 headers.
if [ ! -f "$kroot/.complete" ]; then
	log "creating the Debian 13 build root $kroot (mmdebstrap; a few minutes)"
	tmp=$kroot.tmp.$$
	rm -rf "$tmp"
	# shellcheck disable=SC2086
	mmdebstrap --variant=apt --mode=root --skip=cleanup/reproducible \
		--include="$(echo $root_pkgs | tr ' ' ,),linux-headers-$krel" \
		trixie "$tmp" \
		"deb [signed-by=$keyring] $mirror trixie main" \
		"deb [signed-by=$keyring] $mirror trixie-backports main" \
		>"$kroot.log" 2>&1 ||
		die "mmdebstrap of the build root failed (log: $kroot.log)"
	[ -d "$tmp/usr/src/linux-headers-$krel" ] ||
		die "the build root has no linux-headers-$krel"
	touch "$tmp/.complete"
	rm -rf "$kroot"
	mv "$tmp" "$kroot"
fi

print_env
