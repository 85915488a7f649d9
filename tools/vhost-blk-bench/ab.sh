#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A/B two builds of vhost_blk.ko, or one build with two sets of
# vhost-blk-bench options, in one test VM: the same vhost-blk-bench
# points on brd and a null_blk, module A then module B, round after round
# (rmmod/insmod between), so that both see the same machine at nearly the
# same time.  Prints, per point, every round's IOPS and the median back-end
# CPU per request of each, and B/A of the medians.
#
# Host side:
#   tools/testing/vhost-blk-ci/vm/run-vm.sh --tcg-threads single \
#       --out DIR -- bash tools/vhost-blk-bench/ab.sh A.ko B.ko
#   ... -- bash tools/vhost-blk-bench/ab.sh --b-args --pin-memory X.ko X.ko
#
# Under TCG the figures are those of an emulated CPU: only B/A carries
# over, and only where it is well outside the round-to-round spread.

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
bin=${VHOST_BLK_BENCH_BIN:-$BUILD/vhost-blk-bench/vhost-blk-bench}

usage() {
	cat <<EOF
Usage: $me [OPTIONS] A.ko B.ko

Inside the vhost-blk test VM (run-vm.sh), with vhost and null_blk loaded:
run vhost-blk-bench on /dev/ram0 and a null_blk (irqmode 2, completion
0 ns) with module A, then module B, ROUNDS times, and report.

Options:
  --rounds N       rounds (default 3)
  --rw LIST        vhost-blk-bench -r (default randread,randwrite)
  --iodepth LIST   vhost-blk-bench -q (default 1,32)
  --runtime SEC    measured seconds per point (default 2)
  --a-args ARGS    more vhost-blk-bench options for A's runs (split at
                   spaces), e.g. --b-args --pin-memory with A.ko = B.ko
  --b-args ARGS    the same for B's runs
  --out DIR        where ab.jsonl goes (default \$VHOST_BLK_VM_OUT)
  -h, --help       this text
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { msg "$*"; exit 1; }

rounds=3
rw=randread,randwrite
iodepth=1,32
runtime=2
a_args=
b_args=
out=${VHOST_BLK_VM_OUT:-}
mods=()
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds)	rounds=${2:?--rounds needs a number}; shift 2 ;;
	--rw)		rw=${2:?--rw needs a list}; shift 2 ;;
	--iodepth)	iodepth=${2:?--iodepth needs a list}; shift 2 ;;
	--runtime)	runtime=${2:?--runtime needs seconds}; shift 2 ;;
	--a-args)	a_args=${2?--a-args needs options}; shift 2 ;;
	--b-args)	b_args=${2?--b-args needs options}; shift 2 ;;
	--out)		out=${2:?--out needs a directory}; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		die "unknown option $1 (see --help)" ;;
	*)		mods+=("$1"); shift ;;
	esac
done
[ "${#mods[@]}" = 2 ] || die "two modules needed (see --help)"
[ -n "$out" ] || die "no --out and no \$VHOST_BLK_VM_OUT"
[ -x "$bin" ] || die "$bin not found: run 'make tools'"
for m in "${mods[@]}"; do
	[ -f "$m" ] || die "$m: no such module"
done
[ -b /dev/ram0 ] || die "/dev/ram0 does not exist (brd, set up by run-vm.sh)"

nb=/sys/kernel/config/nullb/vblk-ab
mkdir "$nb" || die "mkdir $nb failed (null_blk loaded, configfs mounted?)"
trap 'echo 0 >"$nb/power"; rmdir "$nb"' EXIT
echo 256 >"$nb/size" && echo 1 >"$nb/memory_backed" &&
	echo 512 >"$nb/blocksize" && echo 2 >"$nb/irqmode" &&
	echo 0 >"$nb/completion_nsec" && echo 1 >"$nb/power" ||
	die "setting up null_blk in $nb failed"
nbdev=/dev/vblk-ab
[ -b "$nbdev" ] || nbdev=/dev/nullb$(cat "$nb/index")
[ -b "$nbdev" ] || die "no /dev/vblk-ab or $nbdev"

json=$out/ab.jsonl
: >"$json"
rmmod vhost_blk 2>/dev/null || true
for ((r = 1; r <= rounds; r++)); do
	for v in A B; do
		m=${mods[0]}
		read -r -a extra <<<"$a_args"
		if [ "$v" = B ]; then
			m=${mods[1]}
			read -r -a extra <<<"$b_args"
		fi
		insmod "$m" || die "insmod $m failed"
		for d in /dev/ram0 "$nbdev"; do
			"$bin" -b vhost-blk -d "$d" -r "$rw" -q "$iodepth" \
				-t "$runtime" --tag "$v" --label "${d#/dev/}" \
				--json "$json" --quiet "${extra[@]}" >/dev/null ||
				msg "round $r, $v on $d: vhost-blk-bench failed"
		done
		rmmod vhost_blk || die "rmmod vhost_blk failed"
	done
done

echo "# A = ${mods[0]} $a_args"
echo "# B = ${mods[1]} $b_args"
echo "# $rounds rounds; measured under QEMU TCG emulation, not on hardware"
# One line per point: the rounds' IOPS, the median CPU us per request;
# the runs read with jq.
jq -r -s -L "$dir" 'include "bench";
	def key: "\(.label) \(.rw) qd\(.iodepth)";
	def cpu: .be_cpu_us_per_req;
	def pad($n): . + (" " * ($n - length));
	def f2: (. * 100 | round) as $x |
		"\($x / 100 | floor).\($x % 100 | tostring | if length < 2 then "0" + . else . end)";
	map(select(status == "ok")) as $runs |
	($runs | map(key) | reduce .[] as $k ([]; if index([$k]) then . else . + [$k] end)) as $keys |
	"\("point" | pad(26)) \("A IOPS / med cpu us" | pad(28)) \("B IOPS / med cpu us" | pad(28)) B/A iops cpu",
	($keys[] as $k |
	 def of($v): [$runs[] | select(key == $k and .experiment == $v)];
	 def cell($v): "\(of($v) | map(.iops | floor | tostring) | join(" ")) / \(of($v) | map(cpu) | median)";
	 def ratio(f): (of("A") | map(f) | median) as $a | (of("B") | map(f) | median) as $b |
		if $a and $a != 0 then $b / $a else 0 end;
	 "\($k | pad(26)) \(cell("A") | pad(28)) \(cell("B") | pad(28)) \(ratio(.iops) | f2) \(ratio(cpu) | f2)")' \
	"$json"
