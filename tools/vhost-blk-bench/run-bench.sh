#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# 'make bench': boot the vhost-blk test VM, run bench.sh in it, draw the
# chart, and copy the JSON document and the chart into bench/results/.
# Expects vhost_blk.ko and $BUILD/vhost-blk-bench/vhost-blk-bench to be
# built (the top-level Makefile does that first).

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD

usage() {
	cat <<EOF
Usage: $me [OPTIONS] [-- BENCH.SH OPTIONS]

Boot the vhost-blk test VM (tools/testing/vhost-blk-ci/vm/run-vm.sh),
run the benchmark matrix in it (bench.sh), then on the host draw the chart
(plot.sh) and write

  bench/results/DATE.json   every run, with the environment it ran in
  bench/results/DATE.png    the chart

and print the Markdown summary (summary.sh).  Under TCG (the default
where KVM cannot boot the test kernel) the figures are those of an
emulated CPU, and every output says so.

Options:
  --results DIR   where the JSON and PNG go (default $repo/bench/results)
  --timeout SEC   VM time limit (default 1500)
  --smp N         VM vCPUs (default: the runner's, 2); "all queues" means one
                  queue per vCPU
  --smoke         only bench.sh --smoke (a few requests per back-end); no
                  results are kept
  -h, --help      this text

Options after -- go to bench.sh (e.g. -- --runtime 1 --only poll, or
-- --quick for a short trial run: 1 s points, 2 rounds).
EOF
}

results=$repo/bench/results
timeout_s=1500
smoke=0
vm_opts=()
while [ $# -gt 0 ]; do
	case "$1" in
	--results)	results=${2:?--results needs a directory}; shift 2 ;;
	--timeout)	timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
	--smp)		vm_opts+=(--smp "${2:?--smp needs a number}"); shift 2 ;;
	--smoke)	smoke=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	--)		shift; break ;;
	*)		echo "$me: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

bin=$BUILD/vhost-blk-bench/vhost-blk-bench
[ -x "$bin" ] || { echo "$me: $bin not built (make -C tools/vhost-blk-bench)" >&2; exit 1; }
command -v jq >/dev/null || { echo "$me: jq not found (Debian: jq; scripts/deps.sh installs it)" >&2; exit 1; }

start=$(date +%s)
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out=$BUILD/vhost-blk-bench/run-$stamp
mkdir -p "$out"
export VHOST_BLK_BENCH_DATE
VHOST_BLK_BENCH_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
export VHOST_BLK_BENCH_COMMIT
VHOST_BLK_BENCH_COMMIT=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
export VHOST_BLK_BENCH_HOST_CPUS
VHOST_BLK_BENCH_HOST_CPUS=$(nproc)
export VHOST_BLK_BENCH_HOST_LOAD
VHOST_BLK_BENCH_HOST_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

vm=$repo/tools/testing/vhost-blk-ci/vm/run-vm.sh
if [ "$smoke" = 1 ]; then
	exec bash "$vm" "${vm_opts[@]}" --timeout "$timeout_s" --out "$out" -- \
		bash "$dir/bench.sh" --smoke --out "$out"
fi

rc=0
bash "$vm" -v "${vm_opts[@]}" --timeout "$timeout_s" --out "$out" -- \
	bash "$dir/bench.sh" --out "$out" "$@" || rc=$?
if [ ! -s "$out/result.json" ]; then
	echo "$me: no result document in $out (VM exit status $rc; see $out/console.log)" >&2
	[ "$rc" != 0 ] || rc=1
	exit "$rc"
fi

bash "$dir/plot.sh" "$out/result.json" "$out/result.png"
end=$(date +%s)
# The wall time of the whole thing, VM boot and chart included.
jq --argjson wall "$((end - start))" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
	'.meta.total_wall_s = $wall | .meta.host_loadavg_after = $load' \
	"$out/result.json" >"$out/result.json.new"
mv "$out/result.json.new" "$out/result.json"
bash "$dir/summary.sh" "$out/result.json" >"$out/summary.md"

mkdir -p "$results"
cp "$out/result.json" "$results/$stamp.json"
cp "$out/result.png" "$results/$stamp.png"
cat "$out/summary.md"
echo
echo "$me: $results/$stamp.json and $stamp.png ($((end - start)) s in all; tables: $out/tables.txt)"
[ "$rc" = 0 ] || echo "$me: some runs failed (VM exit status $rc; see $out/bench.log)" >&2
exit "$rc"
