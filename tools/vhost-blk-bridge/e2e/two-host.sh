#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo-migrate: live migration of a guest between two hosts that
# share an NVMe/TCP disk.  Two test VMs (vm/run-vm.sh), each with its own
# vhost_blk.ko and vhost-blk-bridge, joined by a QEMU socket network on
# this machine's loopback; two-host-vm.sh runs in each (see there).  Host
# A exports the disk and runs the guest first; the guest moves to host B
# while it reads and verifies, and finishes there.
#
# Prints each VM's results, then "N passed, N failed"; writes TAP with
# --tap.  Logs in $BUILD/two-host/{a,b}.
set -euo pipefail

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$e2e_dir/../../testing/vhost-blk-ci/tap.sh"
tool_dir=$(cd "$e2e_dir/.." && pwd)
repo=$(cd "$tool_dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD
vm=$repo/tools/testing/vhost-blk-ci/vm/run-vm.sh

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS]

Live migration between two test VMs sharing an NVMe/TCP namespace (make
demo-migrate).  Logs in \$BUILD/two-host.

Options:
  --timeout S   for each VM (default 2400)
  --tap FILE    also write the results as TAP to FILE
  -h, --help    this text
EOF
}

timeout_s=2400 tap=
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
	--tap) tap=$(realpath -m "${2:?--tap needs a file}"); shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "two-host.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

out=$BUILD/two-host
rm -rf "$out"
mkdir -p "$out/a" "$out/b"
make -s -C "$tool_dir" OUT="$BUILD/tools"
mapfile -t guest < <(bash "$e2e_dir/build-guest.sh")
[ "${#guest[@]}" = 2 ] || { echo "two-host.sh: build-guest.sh failed" >&2; exit 1; }

# The link: A's QEMU listens on a loopback port, B's connects to it.
port=$((20000 + RANDOM % 20000))
vm_cmd() {	# vm_cmd ROLE
	echo bash "$e2e_dir/two-host-vm.sh" --role "$1" --kernel "${guest[0]}" \
		--tools "${guest[1]}" --bridge "$BUILD/tools/vhost-blk-bridge" \
		--out "$out/$1"
}
start=$(date +%s)
# shellcheck disable=SC2046  # the command's words
bash "$vm" --timeout "$timeout_s" --out "$out/a" \
	--netdev "socket,listen=127.0.0.1:$port" --mac 52:54:00:76:62:0a \
	-- $(vm_cmd a) >"$out/a.log" 2>&1 &
pid_a=$!
for _ in $(seq 600); do
	ss -ltn | grep -q "127.0.0.1:$port " && break
	kill -0 "$pid_a" 2>/dev/null || break
	sleep 0.1
done
# shellcheck disable=SC2046
bash "$vm" --timeout "$timeout_s" --out "$out/b" \
	--netdev "socket,connect=127.0.0.1:$port" --mac 52:54:00:76:62:0b \
	-- $(vm_cmd b) >"$out/b.log" 2>&1 &
pid_b=$!
rc_a=0 rc_b=0
wait "$pid_a" || rc_a=$?
wait "$pid_b" || rc_b=$?
end=$(date +%s)

{
	tap_start
	for r in a b; do
		tap_results "$out/$r/results"
		rc=$rc_a
		[ "$r" = b ] && rc=$rc_b
		if [ "$rc" = 0 ] && grep -qx complete "$out/$r/results" 2>/dev/null; then
			tap_ok "host-$r-vm"
		else
			tap_not_ok "host-$r-vm - status $rc, see $out/$r.log and $out/$r/console.log"
		fi
	done
	tap_end || true
} >"$out/two-host.tap"
failed=$tap_failed
passed=$((tap_n - tap_failed))
[ -z "$tap" ] || cp "$out/two-host.tap" "$tap"
grep -E '^(ok|not ok|# time)' "$out/two-host.tap"
echo "two-host migration: $((end - start)) s, logs in $out"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
