#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything vhost-blk needs on a Debian 12 machine, and pick, for
# each of Debian 12's two kernel series, one release for which the image,
# the headers and the source package all exist: 6.12 (backports, the one
# the tools build against and most of make check runs on) and 6.1 (the
# default kernel, the module and its selftests are tested on it too).
# Linux 7.3, the kernel drivers/vhost/blk.c is written to, comes from
# Debian 13's trixie-backports with a Debian 13 build root for it:
# scripts/mainline.sh.  Idempotent: a second run with everything in place
# only re-reads the stamp file and returns.
#
# Output: $BUILD/kernel.env, sourced by the Makefile and the VM runner:
#   KREL=6.12.N+deb12-amd64   KVER=6.12.N-...   KSRC=$BUILD/linux-source-6.12
#   KREL_61=6.1.0-N-amd64     KVER_61=6.1.M-... KSRC_61=$BUILD/linux-source-6.1
#   KREL_73=7.3.N+deb13-amd64 KVER_73=7.3.N-... KSRC_73=$BUILD/linux-source-7.3
#   KROOT_73 (the Debian 13 build root), KIMG_73 (the 7.3 kernel for the VM)
#
# deps.sh --ceph installs only Ceph and QEMU's rbd driver, for make bench.
#
# deps.sh --pick-release [SERIES] only prints the release it would pick
# for SERIES (6.12 or 6.1, default 6.12), from the apt cache as it is (no
# root, no install): scripts/deps_test.sh runs it against a fake apt-cache.
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

# Pick a release of SERIES (6.12 or 6.1): VHOST_BLK_KREL (6.12) or
# VHOST_BLK_KREL_61 (6.1) forces one, else the newest release for which the
# unsigned image, the headers and linux-source-SERIES of the same version
# are all served.  Releases are 6.12.N+deb12-amd64 and 6.1.0-N-amd64.
pick_release() {
	local series=$1 forced krel ver sources re

	case "$series" in
	6.12) forced=${VHOST_BLK_KREL:-} ;;
	6.1)  forced=${VHOST_BLK_KREL_61:-} ;;
	*)    die "unknown kernel series '$series' (6.12 or 6.1)" ;;
	esac
	if [ -n "$forced" ]; then
		echo "$forced"
		return
	fi
	sources=$(madison_versions "linux-source-$series")
	# 6.1.0-N-amd64 or 6.12.N+deb12-amd64; not -cloud or -rt, and 6.1
	# must not take 6.12's.
	re="^linux-image-\(${series//./\\.}\.[0-9][-.0-9]*\(+deb12\)\{0,1\}-amd64\)-unsigned\$"
	for krel in $(apt-cache pkgnames "linux-image-$series." |
		      sed -n "s/$re/\\1/p" | sort -rV); do
		ver=$(madison_versions "linux-image-$krel-unsigned" |
		      awk 'NR == 1 { v = $0 } END { print v }')
		[ -n "$ver" ] || continue
		[ -n "$(madison_versions "linux-headers-$krel")" ] || continue
		printf '%s\n' "$sources" |
			awk -v v="$ver" '$0 == v { found = 1 } END { exit !found }' ||
			continue
		echo "$krel"
		return
	done
}

if [ "${1:-}" = --pick-release ]; then
	pick_release "${2:-6.12}"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install)"

# Host tools: compiler, VM, initramfs, I/O tools used by tests and bench.
host_pkgs="make gcc libc6-dev qemu-system-x86 qemu-utils busybox-static cpio
	kmod xz-utils fio e2fsprogs util-linux perl gnuplot-nox liburing-dev
	linux-perf flex bison bc libelf-dev libssl-dev socat dmsetup"
# The benchmark and exits-per-io.sh write and read their JSON with jq.
host_pkgs="$host_pkgs jq"
# Packaging (make deb) and the package test, whose VM sees this root:
# dkms builds the module there, for the VM's kernel.
host_pkgs="$host_pkgs dpkg-dev debhelper dh-dkms dkms fakeroot udev"
# The bridge: socket activation and readiness (sd_listen_fds, sd_notify).
host_pkgs="$host_pkgs libsystemd-dev"
# Its libFuzzer target (clang brings libFuzzer and the sanitizers' runtimes).
host_pkgs="$host_pkgs clang"
# The bridge's end-to-end test boots one guest through libvirt (libvirtd,
# its QEMU driver, virsh), started inside the test VM, which sees this root.
host_pkgs="$host_pkgs libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients"
# Linux 7.3's build root (scripts/mainline.sh).
host_pkgs="$host_pkgs mmdebstrap debian-archive-keyring"

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

# deps.sh --ceph: only what make bench's Ceph experiment adds, a
# one-node cluster in the test VM (which sees this root) and QEMU's librbd
# driver for qemu-storage-daemon.
if [ "${1:-}" = --ceph ]; then
	apt_install ceph-mon ceph-mgr ceph-osd ceph-common qemu-block-extra
	exit 0
fi

# shellcheck disable=SC2086
apt_install $host_pkgs

# series_ready SERIES KREL KVER KSRC: everything of a series is in place.
series_ready() {
	[ -n "$2" ] && [ -f "/boot/vmlinuz-$2" ] &&
	[ -d "/usr/src/linux-headers-$2" ] &&
	[ -f "$4/drivers/vhost/vhost.h" ] &&
	[ -f "$4/include/uapi/linux/virtio_config.h" ] &&
	[ "$(cat "$4/.version" 2>/dev/null)" = "$3" ]
}

# Reuse the releases chosen earlier as long as they are still complete.
if [ -f "$env_file" ]; then
	KREL= KVER= KSRC= KREL_61= KVER_61= KSRC_61= KREL_73=
	# shellcheck disable=SC1090
	. "$env_file"
	if series_ready 6.12 "$KREL" "$KVER" "$KSRC" &&
	   [ -f "$KSRC/scripts/checkpatch.pl" ] &&
	   [ -f "$build/dl/linux-source-6.12_${KVER//:/%3a}_all.deb" ] &&
	   [ "$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null)" = "$KVER" ] &&
	   series_ready 6.1 "$KREL_61" "$KVER_61" "$KSRC_61" &&
	   [ "$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null)" = "$KVER_61" ] &&
	   BUILD=$build bash "$top/scripts/mainline.sh" --env >/dev/null; then
		log "kernels $KREL, $KREL_61 and $KREL_73 ready"
		exit 0
	fi
fi

# unpack_source SERIES VERSION PATHS...: the given paths of
# linux-source-SERIES.tar.xz of that version into $build/linux-source-SERIES,
# never committed (build/ is ignored), from the package downloaded once
# into $build/dl: the debug kernel, make intree and the end-to-end test's
# guest kernel are built from that .deb too.
unpack_source() {
	local series=$1 ver=$2 dl=$build/dl ksrc=$build/linux-source-$1 p
	local deb=$build/dl/linux-source-${1}_${2//:/%3a}_all.deb
	local paths=()

	shift 2
	for p in "$@"; do
		paths+=("linux-source-$series/$p")
	done
	mkdir -p "$dl"
	if [ ! -f "$deb" ]; then
		log "downloading linux-source-$series=$ver"
		(cd "$dl" && apt-get download -q "linux-source-$series=$ver") ||
			die "apt-get download linux-source-$series=$ver failed"
	fi
	rm -rf "$ksrc" "$build/src-deb"
	dpkg-deb -x "$deb" "$build/src-deb" ||
		die "dpkg-deb -x linux-source-$series failed"
	log "extracting $* from linux-source-$series.tar.xz"
	tar -xJf "$build/src-deb/usr/src/linux-source-$series.tar.xz" \
		-C "$build" "${paths[@]}" ||
		die "extracting from linux-source-$series.tar.xz failed"
	rm -rf "$build/src-deb"
	echo "$ver" >"$ksrc/.version"
}

# setup_series SERIES: pick a release and install its image and headers;
# sets krel and kver.
setup_series() {
	apt_update
	krel=$(pick_release "$1")
	[ -n "$krel" ] ||
		die "no $1 release with image, headers and source found"
	kver=$(madison_versions "linux-image-$krel-unsigned" |
	       awk 'NR == 1 { v = $0 } END { print v }')
	log "kernel $1: release $krel (package version $kver)"
	# The image goes in like any kernel: /boot/vmlinuz-$krel and a
	# modules tree under /lib/modules that the VM sees through its 9p root.
	apt_install "linux-image-$krel-unsigned" "linux-headers-$krel"
}

setup_series 6.12
krel_612=$krel kver_612=$kver

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
# The 6.12 tree also gives the selftest harness, checkpatch and the uapi
# headers the tools build with.
if ! series_ready 6.12 "$krel" "$kver" "$build/linux-source-6.12" ||
   [ ! -f "$build/linux-source-6.12/scripts/checkpatch.pl" ] ||
   [ ! -f "$build/dl/linux-source-6.12_${kver//:/%3a}_all.deb" ]; then
	unpack_source 6.12 "$kver" drivers/vhost \
		tools/testing/selftests/kselftest.h \
		tools/testing/selftests/kselftest_harness.h \
		scripts/checkpatch.pl scripts/spelling.txt \
		scripts/const_structs.checkpatch include/uapi/linux
fi

# 6.1: the module is built against its headers and its vhost.h, and the
# package test's second VM builds it with DKMS on 6.1, from
# linux-source-6.1 installed as a user would install it.
setup_series 6.1
if [ "$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null)" != "$kver" ]; then
	apt_update
	log "apt-get install linux-source-6.1=$kver"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "linux-source-6.1=$kver" >/dev/null ||
		die "apt-get install linux-source-6.1=$kver failed"
fi
if ! series_ready 6.1 "$krel" "$kver" "$build/linux-source-6.1"; then
	unpack_source 6.1 "$kver" drivers/vhost include/uapi/linux
fi

# Linux 7.3: its own script, as it comes from another release.
mainline_env=$(BUILD=$build bash "$top/scripts/mainline.sh") ||
	die "setting up Linux 7.3 failed (scripts/mainline.sh)"

cat >"$env_file" <<EOT
KREL=$krel_612
KVER=$kver_612
KSRC=$build/linux-source-6.12
KREL_61=$krel
KVER_61=$kver
KSRC_61=$build/linux-source-6.1
$mainline_env
EOT
log "kernels $krel_612, $krel and $(sed -n 's/^KREL_73=//p' "$env_file") ready"
