#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end test of vhost-blk-bridge with unmodified QEMU, from the host:
# build the bridge and the nested guest (build-guest.sh), then boot the
# test VM (tools/testing/selftests/vhost_blk/vm/run-vm.sh), which loads
# vhost_blk.ko and runs in-vm.sh.  See --help.
set -euo pipefail

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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
  --probe              only boot the nested guest once, with its kernel
                       log, and time program start-up (diagnostics)
  --timeout S          for the whole VM run (default 1800)
  -h, --help           this text
EOF
}

ko= vm_args=() args=() timeout_s=1800
while [ $# -gt 0 ]; do
	case "$1" in
	--ko) ko=$(realpath "$2"); shift 2 ;;
	--backend|--queues|--smp|--qd1-size|--qd16-size|--poll-us)
		args+=("$1" "$2"); shift 2 ;;
	--probe) args+=("$1"); shift ;;
	--timeout) timeout_s=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

out=$BUILD/bridge-e2e/out
mkdir -p "$out"

t0=$(date +%s)
make -s -C "$tool_dir" OUT="$BUILD/tools"
mapfile -t guest < <(bash "$e2e_dir/build-guest.sh")
[ "${#guest[@]}" = 2 ] || { echo "run.sh: build-guest.sh failed" >&2; exit 1; }
echo "run.sh: build step $(( $(date +%s) - t0 )) s"

if [ -n "$ko" ]; then
	vm_args+=(--no-module)
	args+=(--ko "$ko")
elif [ ! -f "$repo/vhost_blk.ko" ]; then
	make -s -C "$repo" module
fi

# --brd-mib: /dev/ram0 of 256 MiB for --backend brd.
exec bash "$repo/tools/testing/selftests/vhost_blk/vm/run-vm.sh" \
	--timeout "$timeout_s" --out "$out" --brd-mib 256 "${vm_args[@]}" -- \
	bash "$e2e_dir/in-vm.sh" --kernel "${guest[0]}" --tools "${guest[1]}" \
	--bridge "$BUILD/tools/vhost-blk-bridge" --out "$out" "${args[@]}"
