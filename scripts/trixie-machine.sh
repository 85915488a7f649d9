#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A Debian 13 machine for the package test: a disk image that boots trixie
# with systemd as PID 1 under QEMU, made with mmdebstrap from the apt
# archive and cached machine-wide (never in the clone).  It holds what a
# Debian 13 host that serves guests has: systemd, udev, dbus, dkms,
# trixie's kernel with its headers and linux-source-6.12 (the DKMS build
# takes vhost.h from it), QEMU and libvirt from trixie.  trixie-backports
# is in its sources, and its 7.3 kernel, headers and linux-source are in
# its apt cache, downloaded but not installed: the test upgrades the
# kernel with apt-get as a user would, with no network.
#
# The image is a raw ext4 file system (mkfs.ext4 -d: no loop device, no
# partition table), booted with the kernel and initrd copied out of it
# next to it; tools/testing/vhost-blk-ci/trixie/run.sh boots it on a
# copy-on-write overlay, so the cached image is never changed.  See --help.
set -euo pipefail

me=trixie-machine
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}
mirror=${VHOST_BLK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# Installed in the image.  The rest of a server (ssh, networking) is not
# needed by the test, and the test runs without a network.  zstd is what
# initramfs-tools recommends, and compresses the initrd the kernel upgrade
# makes (gzip without it).
#
# mmdebstrap installs no Recommends, where apt-get on a Debian host does:
# build-essential (dkms's), apparmor (libvirt-daemon-system's), rsync and
# manpages-dev are what a host installed with them has and this one would
# otherwise get only with the kernel upgrade, its apt-get following the
# 7.3 packages' Recommends (g++ and the rest: minutes under TCG that are
# not the upgrade's).
pkgs="systemd-sysv udev dbus kmod initramfs-tools zstd xz-utils e2fsprogs procps
      linux-image-amd64 linux-headers-amd64 linux-source-6.12 dkms
      build-essential apparmor rsync manpages-dev
      qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients"
# Downloaded into its apt cache, for the kernel upgrade.
upgrade_pkgs="linux-image-amd64 linux-headers-amd64 linux-source"
size=8G
# Bump when the way the image is made changes.
format=3

usage() {
	cat <<EOF
Usage: ${0##*/} [--path] [--rebuild] [-h|--help]

Make the Debian 13 test machine (see the head of this script) if it is not
in the cache, and print its directory, which holds:

  disk.img    the root file system (raw ext4, $size sparse)
  vmlinuz     the kernel of its first boot (trixie's linux-image-amd64)
  initrd.img  its initrd
  info        the kernel release, the packages' versions, when it was made

Options:
  --path      only print the directory if the machine is complete (status
              0), else fail (status 1); never download or build
  --rebuild   make it again even if it is cached
  -h, --help  this text

Environment: VHOST_BLK_CACHE (default /var/cache/vhost-blk),
VHOST_BLK_DEBIAN_MIRROR (default $mirror).  The first run downloads about
1 GB and takes a few minutes.
EOF
}

log() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { log "error: $*"; exit 1; }

check_only=0
rebuild=0
while [ $# -gt 0 ]; do
	case "$1" in
	--path)		check_only=1; shift ;;
	--rebuild)	rebuild=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		log "unknown argument '$1' (see --help)"; exit 2 ;;
	esac
done

key=$( { echo "format $format"; echo "$pkgs"; echo "$upgrade_pkgs"; echo "$size"; } |
       sha256sum | cut -c1-16)
dir=$cache/trixie-machine/$key

if [ "$check_only" = 1 ]; then
	[ -f "$dir/complete" ] || exit 1
	echo "$dir"
	exit 0
fi
if [ "$rebuild" = 0 ] && [ -f "$dir/complete" ]; then
	echo "$dir"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, chroot)"
for tool in mmdebstrap mkfs.ext4 sha256sum flock; do
	command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done
[ -f "$keyring" ] || die "$keyring not found (debian-archive-keyring)"
mkdir -p "$cache/trixie-machine"
exec {lock_fd}>"$cache/.lock-trixie-machine"
flock "$lock_fd"

tmp=$dir.tmp.$$
root=$tmp/root
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

log "creating the Debian 13 machine in $dir (mmdebstrap; a few minutes)"
# The hooks run on the host, with the root as \$1:
#   - the machine's identity: fstab, hostname, an empty machine-id (made
#     at first boot), no root password prompt on the console;
#   - dpkg without its fsyncs (force-unsafe-io, as Debian's container
#     images have it): the disk is a throw-away overlay, and each fsync
#     is a journal commit under TCG, thousands of them in a kernel
#     upgrade;
#   - the 7.3 packages downloaded into its apt cache (with their
#     Recommends, which apt-get installs there by default), which is kept
#     (--skip=cleanup/apt/cache) with the lists (cleanup/apt/lists), so
#     that apt-get installs them offline;
#   - the unit that runs the test's stage script at each boot
#     (tools/testing/vhost-blk-ci/trixie/stage.sh, from the 9p share the
#     runner gives it).  It is the test harness, not part of what is
#     tested: the test checks every other unit.
# shellcheck disable=SC2086,SC2016
mmdebstrap --variant=required --mode=root --skip=cleanup/reproducible \
	--skip=cleanup/apt/cache --skip=cleanup/apt/lists \
	--include="$(echo $pkgs | tr ' ' ,)" \
	--customize-hook='echo "/dev/vda / ext4 defaults,errors=remount-ro 0 1" >"$1/etc/fstab"' \
	--customize-hook='echo vhost-blk-trixie >"$1/etc/hostname"' \
	--customize-hook='printf "127.0.1.1\tvhost-blk-trixie\n" >>"$1/etc/hosts"' \
	--customize-hook=': >"$1/etc/machine-id"' \
	--customize-hook='echo force-unsafe-io >"$1/etc/dpkg/dpkg.cfg.d/vhost-blk-test-unsafe-io"' \
	--customize-hook="chroot \"\$1\" apt-get install -y -q --download-only -o APT::Install-Recommends=true -t trixie-backports $upgrade_pkgs" \
	--customize-hook="cp '$top/tools/testing/vhost-blk-ci/trixie/vhost-blk-test-stage.service' \"\$1/etc/systemd/system/\"" \
	--customize-hook='mkdir -p "$1/etc/systemd/system/multi-user.target.wants" "$1/mnt/vbt"' \
	--customize-hook='ln -s ../vhost-blk-test-stage.service "$1/etc/systemd/system/multi-user.target.wants/"' \
	trixie "$root" \
	"deb [signed-by=$keyring] $mirror trixie main" \
	"deb [signed-by=$keyring] $mirror trixie-backports main" \
	>"$tmp/mmdebstrap.log" 2>&1 ||
	{ cp "$tmp/mmdebstrap.log" "$cache/trixie-machine/mmdebstrap.log";
	  die "mmdebstrap failed (log: $cache/trixie-machine/mmdebstrap.log)"; }

krel=$(cd "$root/lib/modules" && ls | sort -V | tail -n 1)
[ -n "$krel" ] || die "no kernel in the image"
vmlinuz=$root/boot/vmlinuz-$krel
[ -f "$vmlinuz" ] || vmlinuz=$root/lib/modules/$krel/vmlinuz
[ -f "$vmlinuz" ] || die "no vmlinuz for $krel in the image"
[ -f "$root/boot/initrd.img-$krel" ] || die "no initrd.img-$krel in the image"
cp "$vmlinuz" "$tmp/vmlinuz"
cp "$root/boot/initrd.img-$krel" "$tmp/initrd.img"
ls "$root"/var/cache/apt/archives/linux-image-7.*.deb >/dev/null 2>&1 ||
	die "the 7.x kernel was not downloaded into the image's apt cache"

log "making its file system ($size, sparse)"
mkfs.ext4 -q -F -L vhost-blk-trixie -d "$root" "$tmp/disk.img" "$size" ||
	die "mkfs.ext4 -d failed"
{
	echo "release $krel"
	echo "made $(date -u +%FT%TZ) from $mirror"
	chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' \
		systemd linux-image-amd64 dkms qemu-system-x86 libvirt-daemon-system
	echo "downloaded: $(cd "$root/var/cache/apt/archives" && ls linux-*.deb | tr '\n' ' ')"
} >"$tmp/info"
rm -rf "$root"
touch "$tmp/complete"
trap - EXIT
rm -rf "$dir"
mv "$tmp" "$dir"
log "done: $(head -n 1 "$dir/info")"
echo "$dir"
