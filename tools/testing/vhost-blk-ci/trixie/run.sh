#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The package test on a real Debian 13 machine: scripts/trixie-machine.sh's
# image, booted under QEMU on a copy-on-write overlay, with systemd as
# PID 1.  Each boot runs one stage of stage.sh (see its head): install the
# .debs, reboot, check what the boot did, upgrade the kernel to
# trixie-backports' 7.3, boot it, check again, purge.  See --help.
set -euo pipefail

me=trixie/run.sh
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
build=${BUILD:-$repo/build}

usage() {
	cat <<EOF
Usage: $me [--out DIR] [--tap FILE] [--timeout S] [DEBDIR [BINDIR]]

Boot the Debian 13 machine (scripts/trixie-machine.sh makes it the first
time, about 1 GB downloaded) under QEMU, TCG, and run its package test:
DEBDIR/vhost-blk-dkms_*_all.deb and DEBDIR/vhost-blk-tools_*.deb (default
\$BUILD/deb) installed with apt-get, a reboot, what systemd, udev and
modules-load.d did at boot, a bridge socket enabled with systemctl,
BINDIR/vhost_blk_ctl_test (default \$BUILD/selftests) on brd, a guest of
libvirt's (the shipped domain XML; the end-to-end test's guest kernel and
tools.img, which build-guest.sh makes) on a disk a packaged bridge
instance serves, the kernel upgraded to 7.3 with apt-get (DKMS builds for
it), a boot of 7.3, the same checks and guest, purge.

Options:
  --out DIR    results, logs and each boot's console (default
               \$BUILD/vm-out/trixie)
  --tap FILE   the TAP results (default DIR/trixie.tap)
  --timeout S  the most one boot may take (default 2400)
  -h, --help   this text

Environment: BUILD, VHOST_BLK_VM_QEMU (default qemu-system-x86_64),
VHOST_BLK_VM_KEEP=1 keeps the overlay and the share.
EOF
}

die() { echo "$me: error: $*" >&2; exit 1; }
msg() { echo "$me: $*" >&2; }

out=$build/vm-out/trixie
tap=
timeout=2400
while [ $# -gt 0 ]; do
	case "$1" in
	--out)		[ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
	--tap)		[ $# -ge 2 ] || die "--tap needs a file"; tap=$2; shift 2 ;;
	--timeout)	[ $# -ge 2 ] || die "--timeout needs seconds"; timeout=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		die "unknown option '$1' (see --help)" ;;
	*)		break ;;
	esac
done
[ $# -le 2 ] || die "too many arguments (see --help)"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout: '$timeout' is not a number of seconds"
debdir=${1:-$build/deb}
bindir=${2:-$build/selftests}
tap=${tap:-$out/trixie.tap}
qemu=${VHOST_BLK_VM_QEMU:-qemu-system-x86_64}

dkms_deb=$(ls "$debdir"/vhost-blk-dkms_*_all.deb 2>/dev/null | sort -V | tail -n 1 || true)
tools_deb=$(ls "$debdir"/vhost-blk-tools_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$dkms_deb" ] && [ -n "$tools_deb" ] ||
	die "no vhost-blk-dkms_*_all.deb and vhost-blk-tools_*.deb in $debdir: run 'make deb'"
[ -x "$bindir/vhost_blk_ctl_test" ] ||
	die "no $bindir/vhost_blk_ctl_test: run 'make tools'"
command -v "$qemu" >/dev/null || die "$qemu not found (scripts/deps.sh installs it)"

machine=$(bash "$repo/scripts/trixie-machine.sh") ||
	die "scripts/trixie-machine.sh failed"
# The libvirt guest: the end-to-end test's kernel and tools.img.
mapfile -t guest < <(bash "$repo/tools/vhost-blk-bridge/e2e/build-guest.sh")
[ "${#guest[@]}" = 2 ] ||
	die "tools/vhost-blk-bridge/e2e/build-guest.sh failed (the libvirt guest's kernel and tools.img)"

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vhost-blk-trixie.XXXXXX")
cleanup() {
	if [ "${VHOST_BLK_VM_KEEP:-0}" = 1 ]; then
		msg "kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
share=$tmp/share
mkdir -p "$share/in" "$share/out"
cp "$here/stage.sh" "$dkms_deb" "$tools_deb" "$bindir/vhost_blk_ctl_test" \
	"$repo/Documentation/virt/vhost-blk/vhost-blk-bridge-domain.xml" "$share/in/"
cp "${guest[0]}" "$share/in/bzImage"
cp "${guest[1]}" "$share/in/tools.img"
qemu-img create -q -f qcow2 -F raw -b "$machine/disk.img" "$tmp/disk.qcow2" ||
	die "qemu-img create of the overlay failed"
kernel=$machine/vmlinuz
initrd=$machine/initrd.img
release=$(sed -n 's/^release //p' "$machine/info")
msg "machine $machine ($(head -n 1 "$machine/info"))"

# mitigations=off: TCG has none of the CPU flaws they guard against, and
# emulates each of them slowly (see vm/run-vm.sh).
# Each boot until the last stage says it is done; a stage ends with a
# reboot or a power-off, either of which ends QEMU (-no-reboot).
boots=0
status=ok
while [ ! -e "$share/out/done" ]; do
	boots=$((boots + 1))
	if [ "$boots" -gt 4 ]; then
		status="no stage said it was done after 4 boots"
		break
	fi
	if [ -f "$share/out/next/vmlinuz" ]; then
		mv "$share/out/next" "$tmp/kernel-$boots"
		kernel=$tmp/kernel-$boots/vmlinuz
		initrd=$tmp/kernel-$boots/initrd.img
		release=$(cat "$tmp/kernel-$boots/release")
	fi
	msg "boot $boots: $release"
	t0=$SECONDS
	rc=0
	timeout -k 10 "$timeout" "$qemu" -nodefaults -no-reboot -display none \
		-accel tcg,thread=single -cpu max -smp 1 -m 2048 \
		-machine q35 -serial "file:$out/console-$boots.log" \
		-kernel "$kernel" -initrd "$initrd" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 mitigations=off vbt.run=1" \
		-drive "file=$tmp/disk.qcow2,format=qcow2,if=virtio,cache=unsafe" \
		-virtfs "local,path=$share,mount_tag=vbt,security_model=none" \
		-device virtio-rng-pci </dev/null >"$out/qemu-$boots.log" 2>&1 || rc=$?
	msg "boot $boots: QEMU exited $rc after $((SECONDS - t0)) s"
	if [ "$rc" != 0 ]; then
		status="boot $boots: QEMU exited $rc (timeout after ${timeout} s: 124; see $out/qemu-$boots.log, $out/console-$boots.log)"
		break
	fi
done
cp -r "$share/out/." "$out/"

# The TAP: the stages' results in order, then the runner's own: the boots,
# and no kernel warning in any boot's kernel log.
dmesg_pattern='WARNING:|BUG:|kernel BUG|Oops|general protection fault|Call Trace|blocked for more than|UBSAN|KASAN|list_(add|del) corruption|refcount_t'
{
	n=0
	echo "TAP version 13"
	while read -r res name detail; do
		n=$((n + 1))
		if [ "$res" = pass ]; then
			echo "ok $n - trixie:$name${detail:+ - $detail}"
		else
			echo "not ok $n - trixie:$name${detail:+ - $detail}"
		fi
	done <"$out/results" 2>/dev/null
	n=$((n + 1))
	if [ "$status" = ok ]; then
		echo "ok $n - trixie:boots - $boots boots, every stage ran"
	else
		echo "not ok $n - trixie:boots - $status"
	fi
	n=$((n + 1))
	warn=$(cat "$out"/dmesg-*.log 2>/dev/null | grep -E "$dmesg_pattern" |
	       head -n 5 | tr '\n' ';' || true)
	if ls "$out"/dmesg-*.log >/dev/null 2>&1 && [ -z "$warn" ]; then
		echo "ok $n - trixie:kernel-log - no warning in $(ls "$out"/dmesg-*.log | wc -l) boots' kernel logs"
	else
		echo "not ok $n - trixie:kernel-log - ${warn:-no kernel log saved}"
	fi
	echo "1..$n"
} >"$tap"
cat "$tap"
! grep -q '^not ok' "$tap"
