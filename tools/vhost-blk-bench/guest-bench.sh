#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-guest: the real-guest benchmark.  A Linux guest runs fio on
# one null_blk disk of the host, served to it in turn by
#   - QEMU 10's own virtio-blk-pci, an IOThread per queue
#     (iothread-vq-mapping), aio=io_uring and aio=native, IOThread polling
#     on (QEMU's default, adaptive up to 32 us) and off;
#   - qemu-storage-daemon 10 over vhost-user-blk (QEMU's vhost-user-blk-pci);
#   - vhost-blk through vhost-blk-bridge: one worker, a worker per queue,
#     and that with queue polling (adaptive up to 32 us, as QEMU's) and
#     with completion polling;
# and the host's cost of each I/O is counted the same way for all (see
# guest-bench-vm.sh).  The guest's QEMU is QEMU 10 (scripts/qemu10.sh)
# for every peer.  Everything runs in the test VM (vm/run-vm.sh), with
# KVM where the test VM has it, else nested under TCG.  See --help and
# Documentation/virt/vhost-blk/benchmark.rst.
set -euo pipefail

me=guest-bench
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$bench_dir/../.." && pwd)
e2e_dir=$repo/tools/vhost-blk-bridge/e2e
BUILD=${BUILD:-$repo/build}
export BUILD

all_peers="virtio-blk-io_uring virtio-blk-io_uring-nopoll virtio-blk-native virtio-blk-native-nopoll qsd vhost-blk vhost-blk-wpq vhost-blk-qpoll vhost-blk-cpoll"

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS]

Boot the test VM and, in it, a Linux guest for each peer and queue count;
the guest runs fio (4 KiB random reads and writes, iodepth 1 and 32 per
queue, a job per queue) on the same null_blk disk, served by each peer in
turn.  Reports IOPS, latency percentiles, and the host's CPU time, system
calls and context switches (and with KVM, VM exits and injected
interrupts) per I/O.  Writes OUT/result.json, OUT/summary.txt and, with
gnuplot, OUT/guest-bench.png.

Options:
  --quick            a short run that tests the harness: 1 queue, 2 s per
                     job, unless --queues or --runtime say else (what
                     runs here under TCG)
  --queues LIST      queue counts, comma-separated (default 1,2,4; at most 4)
  --peers LIST       of: $all_peers
                     (default: all)
  --runtime S        seconds per fio job (default 20)
  --out DIR          results and logs (default build/bench-guest/DATE,
                     and result.json, summary.txt and the chart copied to
                     bench/results-guest/DATE.json, .txt and .png)
  --timeout S        for the whole VM run (default: from the matrix)
  --vm-smp N         the test VM's CPUs (default: the most queues + 1,
                     at least 2)
  --tap FILE         also write the results as TAP to FILE (a result per
                     peer, queue count and job, and one for the run)
  --tcg-threads MODE the test VM's TCG threads (default single: perf's
                     text patching races another TCG thread; see
                     run-vm.sh --help)
  -h, --help         this text

On a host with KVM the test VM uses it, and the guest needs nested KVM
(kvm_intel nested=1, or kvm_amd nested=1) to run on KVM too; without it
the guest is emulated, and result.json says so ("accel": "tcg").
EOF
}

# The test VM's vCPUs take turns on one host thread under TCG: perf
# switches tracepoints and events on and off for each job, patching the
# kernel's text, which another TCG thread could run half-patched (an int3
# oops in syscall_trace_enter, seen here).  --tcg-threads multi to risk it.
quick=0 queues=1,2,4 peers=$all_peers runtime=20 out= timeout_s= tap=
queues_set= runtime_set=
vm_args=(--tcg-threads single)
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1; shift ;;
	--queues) queues=$2; queues_set=1; shift 2 ;;
	--peers) peers=${2//,/ }; shift 2 ;;
	--runtime) runtime=$2; runtime_set=1; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--tcg-threads) vm_args+=(--tcg-threads "$2"); shift 2 ;;
	--vm-smp) vm_args+=(--smp "$2"); shift 2 ;;
	--tap) tap=$(realpath -m "$2"); shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { msg "error: $*"; exit 1; }

# The TAP file, written on any exit: what ran, and whether the run did.
# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$repo/tools/testing/vhost-blk-ci/tap.sh"
vm_rc=
write_tap() {
	[ -n "$tap" ] || return 0
	{
		tap_start
		tap_diag "make bench-guest${out:+, results in $out}"
		[ -z "$out" ] || tap_results "$out/results"
		if [ -z "$vm_rc" ]; then
			tap_not_ok "guest-bench - the build or the set-up failed"
		elif [ "$vm_rc" != 0 ] || ! grep -qx complete "$out/results" 2>/dev/null; then
			tap_not_ok "guest-bench - the test VM's status $vm_rc, see $out/vm.log"
		else
			tap_ok "guest-bench - $(wc -l <"$out/rows.jsonl") rows in $out/result.json"
		fi
		tap_end || true
	} >"$tap.tmp"
	mv "$tap.tmp" "$tap"
}
trap write_tap EXIT
# --quick: 1 queue and 2 s per job, unless --queues or --runtime say else.
if [ "$quick" = 1 ]; then
	[ -n "$queues_set" ] || queues=1
	[ -n "$runtime_set" ] || runtime=2
fi
for q in ${queues//,/ }; do
	case "$q" in 1|2|3|4) ;; *) die "--queues: 1 to 4 (the guest's CPUs), not '$q'" ;; esac
done
for p in $peers; do
	case " $all_peers " in *" $p "*) ;; *) die "--peers: unknown peer '$p'" ;; esac
done
[[ "$runtime" =~ ^[1-9][0-9]*$ ]] || die "--runtime: whole seconds, not '$runtime'"
for tool in jq; do command -v "$tool" >/dev/null || die "$tool not found"; done
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
keep=
if [ -z "$out" ]; then
	# Everything in the build tree; the document, the summary and the
	# chart kept in bench/results-guest/ as bench.sh keeps its own.
	out=$BUILD/bench-guest/$stamp
	keep=$repo/bench/results-guest/$stamp
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

msg "building the module, the bridge, the guest and fetching QEMU 10 (log: $out/build.log)"
{
	make -s -C "$repo" module &&
	make -s -C "$repo/tools/vhost-blk-bridge" OUT="$BUILD/tools" &&
	bash "$e2e_dir/build-guest.sh" >"$out/guest-paths" &&
	bash "$repo/scripts/qemu10.sh"
} >"$out/build.log" 2>&1 || { tail -n 20 "$out/build.log" >&2; die "the build failed"; }
mapfile -t guest <"$out/guest-paths"
q10=$BUILD/qemu-10/usr/bin
[ -x "$q10/qemu-system-x86_64" ] || die "$q10/qemu-system-x86_64 missing (scripts/qemu10.sh)"

nq=$(wc -w <<<"${queues//,/ }")
# A CPU of the test VM for each of the guest's, and one for the host side.
maxq=$(tr ',' '\n' <<<"$queues" | sort -n | tail -n 1)
[[ " ${vm_args[*]} " == *" --smp "* ]] || vm_args+=(--smp "$((maxq > 1 ? maxq + 1 : 2))")
np=$(wc -w <<<"$peers")
# A boot and 4 jobs of fio per peer and queue count, nested under TCG:
# up to 3 min for the boot, and 45 s more than its runtime for each job.
[ -n "$timeout_s" ] || timeout_s=$(( 300 + nq * np * (180 + 4 * (runtime + 45)) ))
msg "$np peers x $nq queue counts, ${runtime} s per job: the test VM may take up to $timeout_s s"
set +e
bash "$repo/tools/testing/vhost-blk-ci/vm/run-vm.sh" "${vm_args[@]}" \
	--timeout "$timeout_s" --out "$out" --mem 3072 -- \
	bash "$bench_dir/guest-bench-vm.sh" --kernel "${guest[0]}" \
	--tools "${guest[1]}" --bridge "$BUILD/tools/vhost-blk-bridge" \
	--qemu "$q10/qemu-system-x86_64" --qsd "$q10/qemu-storage-daemon" \
	--out "$out" --runtime "$runtime" --queues "$queues" --peers "$peers" \
	--boot-timeout "$((300 + 4 * (runtime + 120)))" \
	>"$out/vm.log" 2>&1
vm_rc=$?
set -e
grep -E '^guest-bench-vm: ' "$out/vm.log" >&2 || true

# The document: context, then a row per peer, queue count and job (none
# if the test VM died before the first).
touch "$out/rows.jsonl" "$out/results"
qemu_ver=$("$q10/qemu-system-x86_64" --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')
jq -n --slurpfile rows "$out/rows.jsonl" --arg date "$(date -u +%FT%TZ)" \
	--arg qemu "$qemu_ver" --arg commit "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	--argjson runtime "$runtime" --argjson quick "$quick" '
	($rows | map(.accel) | unique) as $accel
	| {context: {date: $date, commit: $commit, qemu: $qemu,
		     runtime_s: $runtime, quick: ($quick == 1),
		     disk: "null_blk (no memory), one for every peer",
		     accel: ($accel | join(",")),
		     emulated: ($accel | index("tcg") != null),
		     note: (if ($accel | index("tcg")) then
			"the guest ran under TCG, nested in the TCG test VM: the figures test the harness, they are not a performance result"
			else "the guest ran on KVM" end)},
	   rows: $rows}' >"$out/result.json"

{
	echo "vhost-blk real-guest benchmark ($(jq -r .context.date "$out/result.json"), QEMU $qemu_ver)"
	echo "$(jq -r .context.note "$out/result.json")"
	echo
	jq -r '
		def f(x; n): if x == null then "-" else (x * pow(10; n) | round / pow(10; n) | tostring) end;
		["peer", "q", "job", "IOPS", "p50us", "p99us", "p99.9us", "CPUus/io", "sysc/io", "cs/io", "exits/io", "irqs/io"],
		(.rows[] | [.peer, .queues, .job, f(.iops; 0), f(.lat_us.p50; 1), f(.lat_us.p99; 1),
			    f(.lat_us.p99_9; 1), f(.cpu_us_per_io; 1), f(.syscalls_per_io; 2),
			    f(.cs_per_io; 2), f(.exits_per_io; 2), f(.irqs_per_io; 2)])
		| @tsv' "$out/result.json" | column -t -s $'\t'
	echo
	echo "Each vhost-blk row against QEMU's virtio-blk with io_uring and IOThread polling"
	echo "(IOPS ratio; same queue count and job)$(jq -r 'if .context.emulated then ": EMULATED, noise that tests the harness, not a result" else "" end' "$out/result.json"):"
	jq -r '
		[.rows[] | select(.peer == "virtio-blk-io_uring")] as $base
		| .rows[] | select(.peer | startswith("vhost-blk")) as $r
		| ($base[] | select(.queues == $r.queues and .job == $r.job)) as $b
		| "  \($r.peer) q\($r.queues) \($r.job): \(if $b.iops > 0 then ($r.iops / $b.iops * 100 | round / 100) else "-" end)x"
		' "$out/result.json"
} >"$out/summary.txt"
cat "$out/summary.txt"

if command -v gnuplot >/dev/null && [ -s "$out/rows.jsonl" ]; then
	jq -r '.rows[] | [.peer, .queues, .job, .iops] | @tsv' \
		"$out/result.json" >"$out/plot.tsv"
	gnuplot <<-GNUPLOT >"$out/plot.log" 2>&1 || msg "gnuplot failed (see $out/plot.log)"
		set terminal pngcairo size 1400,700 noenhanced
		set output "$out/guest-bench.png"
		set title "$(jq -r 'if .context.emulated then "make bench-guest: EMULATED (the guest under TCG in the TCG test VM), a test of the harness, not a performance result" else "make bench-guest: guest fio on KVM, QEMU \(.context.qemu)" end' "$out/result.json")"
		set bmargin 14
		set rmargin 12
		set style data histogram
		set style histogram cluster gap 1
		set style fill solid 0.8
		set xtics rotate by -30
		set ylabel "IOPS (guest fio)"
		set datafile separator "\t"
		plot "$out/plot.tsv" using 4:xtic(sprintf("%s q%s %s", strcol(1), strcol(2), strcol(3))) notitle
	GNUPLOT
fi

if [ -n "$keep" ] && [ -s "$out/result.json" ]; then
	mkdir -p "${keep%/*}"
	cp "$out/result.json" "$keep.json"
	cp "$out/summary.txt" "$keep.txt"
	[ ! -f "$out/guest-bench.png" ] || cp "$out/guest-bench.png" "$keep.png"
	msg "kept: $keep.json, .txt and .png"
fi
rows=$(wc -l <"$out/rows.jsonl")
fails=$(grep -c '^fail ' "$out/results" 2>/dev/null) || true
msg "$rows rows in $out/result.json; $fails failures"
if [ "$vm_rc" != 0 ] || [ "${fails:-0}" != 0 ] || ! grep -qx complete "$out/results" 2>/dev/null; then
	grep '^fail ' "$out/results" >&2 || true
	tail -n 15 "$out/vm.log" | sed 's/^/  | /' >&2
	die "FAILED (test VM status $vm_rc): see $out/vm.log"
fi
