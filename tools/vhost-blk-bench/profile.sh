#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Profile the vhost worker of one or more builds of vhost_blk.ko in one
# test VM: for each module in turn, insmod it, run vhost-blk-bench
# (randread 4 KiB, iodepth 32, 1 queue, on a null_blk "0us" disk as
# bench.sh sets it up) under 'perf record -g -a', rmmod it, and keep the
# vhost worker's flat profile (self time per symbol).
#
# Host side:
#   tools/testing/vhost-blk-ci/vm/run-vm.sh --no-module --out DIR -- \
#       bash tools/vhost-blk-bench/profile.sh before.ko after.ko
#   ... profile.sh X.ko --args --pin-memory X.ko   (one build, two options)
#
# Under TCG the samples are of an emulated CPU: shares of the worker's own
# time carry over only roughly, absolute times not at all.

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
bin=${VHOST_BLK_BENCH_BIN:-$BUILD/vhost-blk-bench/vhost-blk-bench}

usage() {
	cat <<EOF
Usage: $me [OPTIONS] MODULE.ko...

Inside the vhost-blk test VM (run-vm.sh --no-module), with vhost and
null_blk loaded: for each module, profile its vhost worker during one
vhost-blk-bench run and write DIR/profile-N.txt (the worker thread's
samples by symbol: self time), DIR/profile-N.json (the run, with the
module's counters), DIR/perf-N.data and DIR/kallsyms-N; then DIR/rounds.jsonl and
DIR/iops.txt: each module's IOPS per round and their median.

Options:
  --runtime SEC    measured seconds of the profiled run (default 12)
  --iodepth N      requests in flight (default 32)
  --rounds N       then N rounds of a 3 s run of each module in turn,
                   unprofiled, for IOPS (default 5)
  --top N          symbols kept per report (default 40)
  --args ARGS      more vhost-blk-bench options (split at spaces) for the
                   module named next, e.g. --args --pin-memory
  --out DIR        where the reports go (default \$VHOST_BLK_VM_OUT)
  -h, --help       this text
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { msg "$*"; exit 1; }

runtime=12
rounds=5
round_time=3
iodepth=32
top=40
out=${VHOST_BLK_VM_OUT:-}
mods=()
margs=()
next_args=
while [ $# -gt 0 ]; do
	case "$1" in
	--runtime)	runtime=${2:?--runtime needs seconds}; shift 2 ;;
	--iodepth)	iodepth=${2:?--iodepth needs a number}; shift 2 ;;
	--rounds)	rounds=${2:?--rounds needs a number}; shift 2 ;;
	--top)		top=${2:?--top needs a number}; shift 2 ;;
	--out)		out=${2:?--out needs a directory}; shift 2 ;;
	--args)		next_args=${2?--args needs options}; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		die "unknown option $1 (see --help)" ;;
	*)		mods+=("$1"); margs+=("$next_args"); next_args=; shift ;;
	esac
done
[ "${#mods[@]}" -ge 1 ] || die "no module given (see --help)"
[ -n "$out" ] || die "no --out and no \$VHOST_BLK_VM_OUT"
[ -x "$bin" ] || die "$bin not found: run 'make tools'"
command -v perf >/dev/null || die "perf not found (Debian: linux-perf)"
for m in "${mods[@]}"; do
	[ -f "$m" ] || die "$m: no such module"
done

# As bench.sh's "null_blk 0us": not memory backed, completion by timer.
nb=/sys/kernel/config/nullb/vblk-prof
mkdir "$nb" || die "mkdir $nb failed (null_blk loaded, configfs mounted?)"
trap 'echo 0 >"$nb/power"; rmdir "$nb"' EXIT
if ! { echo 4096 >"$nb/size" && echo 2 >"$nb/irqmode" &&
	echo 0 >"$nb/completion_nsec" && nproc >"$nb/submit_queues" &&
	echo 256 >"$nb/hw_queue_depth" && echo 1 >"$nb/power"; }; then
	die "setting up null_blk in $nb failed"
fi
dev=/dev/vblk-prof
[ -b "$dev" ] || dev=/dev/nullb$(cat "$nb/index")
[ -b "$dev" ] || die "no /dev/vblk-prof or $dev"

# One queue on vCPU 0, the worker on the last one, as bench.sh places them.
bench=("$bin" -b vhost-blk -d "$dev" -r randread -q "$iodepth" -n 1
       --cpus split --label "null_blk 0us" --quiet)

# Kernel and module symbols for perf script.
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

rmmod vhost_blk 2>/dev/null || true
n=0
for m in "${mods[@]}"; do
	n=$((n + 1))
	read -r -a extra <<<"${margs[n - 1]}"
	insmod "$m" || die "insmod $m failed"
	data=$out/perf-$n.data
	rm -f "$out/profile-$n.json"
	# cpu-clock: TCG emulates no PMU.  Whole system, so that completion
	# interrupts taken while the worker runs are in its samples.
	perf record -q --no-buildid-cache -e cpu-clock -F 999 -g -a \
		-o "$data" -- "${bench[@]}" "${extra[@]}" -t "$runtime" --tag "profile-$n" \
		--json "$out/profile-$n.json" >"$out/profile-$n.table" 2>&1 &
	pid=$!
	# The vhost worker is a thread of its owner's, named vhost-PID, which
	# perf itself sees under the owner's name: profile it by thread id.
	tid=
	for _ in $(seq 200); do
		tid=$(grep -lxE 'vhost-[0-9]+' /proc/[0-9]*/task/*/comm 2>/dev/null |
		      sed -n 's|^/proc/[0-9]*/task/\([0-9]*\)/comm$|\1|p' | head -n 1) || true
		[ -n "$tid" ] && break
		sleep 0.1
	done
	wait "$pid" || msg "$m: the profiled run failed"
	# This boot's addresses, for reading perf-N.data again elsewhere.
	cat /proc/kallsyms >"$out/kallsyms-$n"
	[ -n "$tid" ] || die "$m: no vhost worker thread found"
	{
		echo "# module: $m ${margs[n - 1]}"
		echo "# randread 4 KiB, iodepth $iodepth, 1 queue, null_blk irqmode 2 completion 0 ns, $runtime s"
		echo "# perf record -e cpu-clock -F 999 -g -a; samples of thread $tid (the vhost worker) by symbol"
		echo "# measured under QEMU TCG emulation, not on hardware"
		sed -n 's/.*"iops":\([0-9]*\).*"reqs_in":\([0-9]*\).*/# profiled run: \1 IOPS, \2 requests answered/p' \
			"$out/profile-$n.json"
		# Self time: the sampled function, its callers hidden.  The
		# running kernel's symbols, not a cached copy's (KASLR).
		perf script -i "$data" --kallsyms "$out/kallsyms-$n" \
			--tid "$tid" -F ip,sym -G 2>/dev/null |
			awk 'NF { n++; c[$2]++ }
			     END {
				printf "# %d samples of the worker\n", n
				for (s in c)
					printf "%6.2f%%  %s\n", 100 * c[s] / n, s
			     }' | sort -k1,1 -rn | sed -n "1,$((top + 1))p"
	} >"$out/profile-$n.txt"
	rmmod vhost_blk || die "rmmod vhost_blk failed"
done

# IOPS: the modules in turn, round after round, so that both see the
# same machine at nearly the same time.
rm -f "$out/rounds.jsonl"
for ((r = 1; r <= rounds; r++)); do
	n=0
	for m in "${mods[@]}"; do
		n=$((n + 1))
		read -r -a extra <<<"${margs[n - 1]}"
		insmod "$m" || die "insmod $m failed"
		"${bench[@]}" "${extra[@]}" -t "$round_time" --tag "module-$n" \
			--json "$out/rounds.jsonl" >/dev/null ||
			msg "round $r, $m: vhost-blk-bench failed"
		rmmod vhost_blk || die "rmmod vhost_blk failed"
	done
done
{
	echo "# randread 4 KiB qd$iodepth 1 queue, null_blk 0us, $rounds rounds of $round_time s"
	echo "# measured under QEMU TCG emulation, not on hardware"
	n=0
	for m in "${mods[@]}"; do
		n=$((n + 1))
		sed -n 's/.*"experiment":"module-'"$n"'".*"iops":\([0-9.]*\).*"be_cpu_us_per_req":\([0-9.]*\).*/\1 \2/p' \
			"$out/rounds.jsonl" | sort -n | awk -v m="$m ${margs[n - 1]}" '
			{ iops[NR] = int($1); cpu[NR] = $2; all = all " " int($1) }
			END { printf "%s: IOPS%s, median %d (cpu us/req of that run %s)\n",
			      m, all, iops[int((NR + 1) / 2)], cpu[int((NR + 1) / 2)] }'
	done
} >"$out/iops.txt"
