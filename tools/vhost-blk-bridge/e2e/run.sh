#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end test of vhost-blk-bridge with unmodified QEMU, from the host:
# build the bridge and the nested guest (build-guest.sh), then boot the
# test VM (tools/testing/vhost-blk-ci/vm/run-vm.sh), which loads
# vhost_blk.ko and runs in-vm.sh.  See --help.
set -euo pipefail

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$e2e_dir/../../testing/vhost-blk-ci/tap.sh"
tool_dir=$(cd "$e2e_dir/.." && pwd)
repo=$(cd "$tool_dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS]

Run the vhost-blk-bridge end-to-end test: a nested QEMU guest with
-device vhost-user-blk-pci, served by vhost-blk-bridge and /dev/vhost-blk
inside the test VM.  Logs go to \$BUILD/bridge-e2e/out.

Options:
  --ko PATH            load this vhost_blk.ko instead of $repo/vhost_blk.ko
  --backend file|brd   a file on tmpfs (default) or /dev/ram0
  --queues N           virtqueues (default 1)
  --smp N              CPUs of the nested guest (default 1)
  --qd1-size SIZE      fio at iodepth 1 (default 2m)
  --qd16-size SIZE     fio at iodepth 16 (default 8m)
  --poll-us N          the bridge's --poll-us (default 0)
  --no-migrate         leave out boot 3, the live migration (make check
                       does; make check-long does not)
  --no-libvirt         leave out boot 5, the guest of libvirt's (make
                       check does: its Debian 13 machine boots that guest
                       with real systemd and libvirt; make check-long
                       does not)
  --probe              only boot the nested guest once, with its kernel
                       log, and time program start-up (diagnostics)
  --timeout S          for the whole VM run (default 1800)
  --tcg-threads MODE   the test VM's TCG threads, multi (default) or
                       single (see run-vm.sh --help)
  --tap FILE           also write the results as TAP to FILE, with a
                       'not ok' line for whatever did not run
  -h, --help           this text
EOF
}

ko= vm_args=() args=() timeout_s=1800 tap=
while [ $# -gt 0 ]; do
	case "$1" in
	--ko) ko=$(realpath "$2"); shift 2 ;;
	--backend|--queues|--smp|--qd1-size|--qd16-size|--poll-us)
		args+=("$1" "$2"); shift 2 ;;
	--probe|--no-migrate|--no-libvirt) args+=("$1"); shift ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--tcg-threads) vm_args+=(--tcg-threads "$2"); shift 2 ;;
	--tap) tap=$(realpath -m "$2"); shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

out=$BUILD/bridge-e2e/out
mkdir -p "$out"
rm -f "$out/results"

# The TAP file: a line per result in-vm.sh left in $out/results, then
# whether the build and the VM run as a whole went through.  Written on
# any exit, so that a run that never got going still says so.
stage=build vm_rc=
write_tap() {
	local what=e2e-test-vm

	[ -n "$tap" ] || return 0
	{
		tap_start
		tap_diag "vhost-blk-bridge end-to-end test, logs in $out"
		if [ "$stage" = build ]; then
			tap_not_ok "e2e-build - the bridge, the guest kernel or tools.img did not build"
		else
			tap_ok e2e-build
			tap_results "$out/results"
			if [ "$vm_rc" = 3 ]; then
				tap_not_ok "$what - a kernel warning in the test VM, see $out/dmesg.log"
			elif [ "$vm_rc" = 124 ]; then
				tap_not_ok "$what - timed out after $timeout_s s, see $out/console.log"
			elif ! grep -qx complete "$out/results" 2>/dev/null; then
				tap_not_ok "$what - in-vm.sh did not finish (status ${vm_rc:-none}), see $out/console.log"
			elif [ "$vm_rc" = 0 ] || [ "$vm_rc" = 1 ]; then
				tap_ok "$what"
			else
				tap_not_ok "$what - status $vm_rc, see $out/console.log"
			fi
		fi
		tap_end || true
	} >"$tap.tmp"
	mv "$tap.tmp" "$tap"
}
trap write_tap EXIT

t0=$(date +%s)
make -s -C "$tool_dir" OUT="$BUILD/tools"
mapfile -t guest < <(bash "$e2e_dir/build-guest.sh")
[ "${#guest[@]}" = 2 ] || { echo "run.sh: build-guest.sh failed" >&2; exit 1; }

if [ -n "$ko" ]; then
	vm_args+=(--no-module)
	args+=(--ko "$ko")
elif [ ! -f "$repo/vhost_blk.ko" ]; then
	make -s -C "$repo" module
fi
echo "run.sh: build step $(( $(date +%s) - t0 )) s"
stage=vm

# --brd-mib: /dev/ram0 of 256 MiB for --backend brd.
bash "$repo/tools/testing/vhost-blk-ci/vm/run-vm.sh" \
	--timeout "$timeout_s" --out "$out" --brd-mib 256 "${vm_args[@]}" -- \
	bash "$e2e_dir/in-vm.sh" --kernel "${guest[0]}" --tools "${guest[1]}" \
	--bridge "$BUILD/tools/vhost-blk-bridge" --out "$out" "${args[@]}" && vm_rc=0 || vm_rc=$?
exit "$vm_rc"
