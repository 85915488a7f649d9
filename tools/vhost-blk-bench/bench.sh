#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The vhost-blk benchmark matrix, run inside the vhost-blk test VM (see
# tools/testing/selftests/vhost_blk/vm/run-vm.sh): sets up the null_blk and
# brd disks, starts and stops a qemu-storage-daemon vhost-user-blk export
# per disk, runs vhost-blk-bench over every disk and back-end, and writes
# one JSON document (plus the tables and a Markdown summary) to --out.
# run-bench.sh runs it from the host and draws the chart.

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
bin=${VHOST_BLK_BENCH_BIN:-$BUILD/vhost-blk-bench/vhost-blk-bench}
qsd_bin=${VHOST_BLK_BENCH_QSD:-qemu-storage-daemon}

usage() {
	cat <<EOF
Usage: $me [OPTIONS]

Run inside the vhost-blk test VM (or any machine with /dev/vhost-blk, the
null_blk and brd modules, and qemu-storage-daemon):

  run-vm.sh --out DIR -- bash $me --out DIR

Disks: null_blk irqmode=2 completion_nsec=0 ("null_blk 0us"), null_blk
irqmode=2 completion_nsec=280000 ("null_blk 280us", the setup of QEMU's
notification work) and brd (/dev/ram0, created by the VM's runner).
Back-ends: /dev/vhost-blk, qemu-storage-daemon's vhost-user-blk export
(an iothread, aio=io_uring, cache.direct=on) and io_uring on the raw disk.

Experiments:
  matrix  4k randread and randwrite, iodepth 1 8 32 128, 1 queue and one
          queue per vCPU, every disk and back-end
  notify  (null_blk 280us) iodepth 1 on 1 queue and iodepth 64 on every
          queue, VIRTIO_RING_F_EVENT_IDX negotiated or not; vhost-blk and
          qemu-storage-daemon
  poll    (null_blk 0us, a blk-mq disk, and brd, a bio-based one)
          iodepth 1, vhost-blk busy-poll timeout 0 1 2 4 8 16 32 64 128
          us, 256 and 1024 us (an emulated guest answers slower than
          128 us), and adaptive (ceilings 32 and 128 us)

Options:
  --out DIR        where results go (default \$VHOST_BLK_VM_OUT)
  --runtime SEC    measured seconds per point (default 2.5)
  --ramp SEC       warm-up seconds per point (default 0.5)
  --only LIST      experiments to run: matrix,notify,poll (default all)
  --smoke          instead: a few requests on every back-end (brd), checking
                   only that the counts add up; seconds, for 'make check'.
                   Prints TAP on stdout (one test per run, or one failed
                   test if the setup failed); details on stderr
  -h, --help       this text

Files in DIR: result.json (one document: meta + runs), runs.jsonl,
tables.txt, summary.md, bench.log.  Exit status: 0, 1 if a run failed.
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
# With --smoke stdout is TAP, so a failure before the tool runs is a test.
die() {
	msg "$*"
	[ "$smoke" = 1 ] && printf '1..1\nnot ok 1 - vhost-blk-bench smoke setup\n# %s\n' "$*"
	exit 1
}

smoke=0
out=${VHOST_BLK_VM_OUT:-}
runtime=2.5
ramp=0.5
only=matrix,notify,poll
while [ $# -gt 0 ]; do
	case "$1" in
	--out)		out=${2:?--out needs a directory}; shift 2 ;;
	--out=*)	out=${1#*=}; shift ;;
	--runtime)	runtime=${2:?--runtime needs seconds}; shift 2 ;;
	--runtime=*)	runtime=${1#*=}; shift ;;
	--ramp)		ramp=${2:?--ramp needs seconds}; shift 2 ;;
	--ramp=*)	ramp=${1#*=}; shift ;;
	--only)		only=${2:?--only needs a list}; shift 2 ;;
	--only=*)	only=${1#*=}; shift ;;
	--smoke)	smoke=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		msg "unknown argument $1 (see --help)"; exit 2 ;;
	esac
done

[ -x "$bin" ] || die "$bin not found: build it with 'make -C tools/vhost-blk-bench'"
[ -c /dev/vhost-blk ] || die "/dev/vhost-blk does not exist: is vhost_blk.ko loaded? (run this inside run-vm.sh)"
command -v "$qsd_bin" >/dev/null ||
	die "$qsd_bin not found: install qemu-system-common (Debian), or set VHOST_BLK_BENCH_QSD"
[ "$(id -u)" = 0 ] || die "must run as root (null_blk configfs, block devices)"

ncpu=$(nproc)
run_dir=$(mktemp -d /tmp/vhost-blk-bench.XXXXXX)
qsd_pid=
nullbs=()

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	stop_qsd
	local n
	for n in "${nullbs[@]}"; do
		echo 0 >"/sys/kernel/config/nullb/$n/power" 2>/dev/null || true
		rmdir "/sys/kernel/config/nullb/$n" 2>/dev/null || true
	done
	rm -rf "$run_dir"
}
trap cleanup EXIT

# A null_blk disk through configfs: name irqmode completion_nsec.  Prints
# its device node.  Queues and tags enough for every queue at iodepth 128.
# Runs in a command substitution: the caller records the name for cleanup.
setup_nullb() {
	local name=$1 irqmode=$2 nsec=$3 cfg=/sys/kernel/config/nullb/$1 idx

	[ -d /sys/kernel/config/nullb ] ||
		die "/sys/kernel/config/nullb missing: null_blk not loaded or configfs not mounted"
	mkdir "$cfg" || die "mkdir $cfg failed"
	echo 4096 >"$cfg/size"			# MiB, not memory backed
	echo "$irqmode" >"$cfg/irqmode"
	echo "$nsec" >"$cfg/completion_nsec"
	echo "$ncpu" >"$cfg/submit_queues"
	echo 256 >"$cfg/hw_queue_depth"
	echo 1 >"$cfg/power" || die "powering on null_blk $name failed"
	idx=$(cat "$cfg/index")
	# The disk takes the configfs name on recent kernels, nullb<index> before.
	local dev
	for dev in "/dev/$name" "/dev/nullb$idx"; do
		if [ -b "$dev" ]; then
			echo "$dev"
			return 0
		fi
	done
	die "null_blk $name: no /dev/$name or /dev/nullb$idx"
}

start_qsd() {
	local dev=$1 sock=$2

	"$qsd_bin" \
		--object iothread,id=io0 \
		--blockdev "driver=host_device,filename=$dev,node-name=disk,cache.direct=on,aio=io_uring" \
		--export "type=vhost-user-blk,id=exp,node-name=disk,iothread=io0,addr.type=unix,addr.path=$sock,writable=on,num-queues=$ncpu" \
		>>"$run_dir/qsd.log" 2>&1 &
	qsd_pid=$!
	for _ in $(seq 300); do
		[ -S "$sock" ] && return 0
		kill -0 "$qsd_pid" 2>/dev/null || break
		sleep 0.1
	done
	sed 's/^/  /' "$run_dir/qsd.log" >&2
	die "qemu-storage-daemon for $dev did not create $sock"
}

stop_qsd() {
	[ -n "$qsd_pid" ] || return 0
	kill "$qsd_pid" 2>/dev/null || true
	wait "$qsd_pid" 2>/dev/null || true
	qsd_pid=
}

failed=0

# bench LABEL TAG ARGS...: one invocation of the tool; appends its JSON
# lines and its table.
bench() {
	local label=$1 tag=$2

	shift 2
	if ! "$bin" --quiet --label "$label" --tag "$tag" \
	     --json "$out/runs.jsonl" "$@" >>"$out/tables.txt" 2>>"$out/bench.log"; then
		msg "$tag on $label: a run failed (see $out/bench.log)"
		failed=1
	fi
}

[ -n "$out" ] || die "no --out directory (and VHOST_BLK_VM_OUT is not set)"
mkdir -p "$out"

if [ "$smoke" = 1 ]; then
	[ -b /dev/ram0 ] || die "/dev/ram0 does not exist (brd not loaded?)"
	sock=$run_dir/smoke.sock
	start_qsd /dev/ram0 "$sock"
	"$bin" --smoke --quiet --cpus split --label "brd" -d /dev/ram0 \
		-s "$sock" --json "$out/smoke.jsonl" || failed=1
	stop_qsd
	exit "$failed"
fi

rm -f "$out/runs.jsonl" "$out/tables.txt" "$out/bench.log" \
	"$out/result.json" "$out/summary.md"
start=$(date +%s)
# Guest-model queue i on vCPU i, the back-end's threads on the last vCPU,
# for every back-end alike (see benchmark.rst: placement dominates TCG).
common=(--cpus split --runtime "$runtime" --ramp "$ramp")
want() { [[ ,$only, == *,$1,* ]]; }

# label, device node, description (for the JSON meta)
declare -a disks=()
nullbs=(vbb_nullb0 vbb_nullb280)
nb0=$(setup_nullb vbb_nullb0 2 0)
nb280=$(setup_nullb vbb_nullb280 2 280000)
disks+=("null_blk 0us|$nb0|null_blk irqmode=2 (timer) completion_nsec=0 submit_queues=$ncpu hw_queue_depth=256")
disks+=("null_blk 280us|$nb280|null_blk irqmode=2 (timer) completion_nsec=280000 submit_queues=$ncpu hw_queue_depth=256")
disks+=("brd|/dev/ram0|brd ramdisk (completes at submission), $(($(blockdev --getsize64 /dev/ram0) >> 20)) MiB")

for d in "${disks[@]}"; do
	IFS='|' read -r label dev _ <<<"$d"
	sock=$run_dir/qsd.sock
	rm -f "$sock"
	start_qsd "$dev" "$sock"
	msg "$label ($dev): qemu-storage-daemon pid $qsd_pid"
	if want matrix; then
		bench "$label" matrix -d "$dev" -s "$sock" "${common[@]}" \
			-r randread,randwrite -q 1,8,32,128 -n 1,all
	fi
	if want notify && [ "$label" = "null_blk 280us" ]; then
		bench "$label" notify -d "$dev" -s "$sock" "${common[@]}" \
			-b vhost-blk,vhost-user -q 1 -n 1 -e on,off
		bench "$label" notify -d "$dev" -s "$sock" "${common[@]}" \
			-b vhost-blk,vhost-user -q 64 -n all -e on,off
	fi
	if want poll && { [ "$label" = "null_blk 0us" ] || [ "$label" = brd ]; }; then
		bench "$label" poll -d "$dev" "${common[@]}" -b vhost-blk -q 1 -n 1 \
			-p 0,1,2,4,8,16,32,64,128,256,1024,adaptive:32,adaptive:128
	fi
	stop_qsd
done
end=$(date +%s)

# One document: what ran where, then every run.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}
{
	printf '{"meta":{'
	printf '"tool":"vhost-blk-bench","format":1'
	printf ',"date":%s' "$(json_str "${VHOST_BLK_BENCH_DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}")"
	printf ',"environment":%s' "$(json_str "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | awk 'NR == 1')")"
	if grep -q 'QEMU TCG' /proc/cpuinfo; then
		printf ',"emulated":true,"note":"Measured under QEMU TCG emulation (software CPU): not hardware figures. Compare ratios and per-request counts only."'
	else
		printf ',"emulated":false'
	fi
	printf ',"vcpus":%d' "$ncpu"
	printf ',"guest_kernel":%s' "$(json_str "$(uname -r)")"
	printf ',"qemu_storage_daemon":%s' "$(json_str "$("$qsd_bin" --version | awk 'NR == 1')")"
	printf ',"qsd_export":%s' "$(json_str "--object iothread,id=io0 --blockdev driver=host_device,cache.direct=on,aio=io_uring --export type=vhost-user-blk,iothread=io0,num-queues=$ncpu")"
	printf ',"commit":%s' "$(json_str "${VHOST_BLK_BENCH_COMMIT:-unknown}")"
	printf ',"host_cpus":%s' "$(json_str "${VHOST_BLK_BENCH_HOST_CPUS:-unknown}")"
	printf ',"host_loadavg_before":%s' "$(json_str "${VHOST_BLK_BENCH_HOST_LOAD:-unknown}")"
	printf ',"runtime_s":%s,"ramp_s":%s' "$runtime" "$ramp"
	printf ',"matrix_wall_s":%d' "$((end - start))"
	printf ',"total_wall_s":null'
	printf ',"disks":['
	sep=
	for d in "${disks[@]}"; do
		IFS='|' read -r label dev desc <<<"$d"
		printf '%s{"label":%s,"device":%s,"setup":%s}' "$sep" \
			"$(json_str "$label")" "$(json_str "$dev")" "$(json_str "$desc")"
		sep=,
	done
	printf ']},\n"runs":[\n'
	sed '$!s/$/,/' "$out/runs.jsonl"
	printf ']}\n'
} >"$out/result.json"

bash "$dir/summary.sh" "$out/result.json" >"$out/summary.md" ||
	msg "summary.sh failed"
msg "matrix done in $((end - start)) s: $out/result.json"
exit "$failed"
