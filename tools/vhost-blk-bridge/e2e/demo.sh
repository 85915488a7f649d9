#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: vhost-blk end to end, with numbers.  In the test VM
# (tools/testing/vhost-blk-ci/vm/run-vm.sh, which loads vhost_blk.ko),
# vhost-blk-bridge serves a null_blk device to an unmodified QEMU
# (-device vhost-user-blk-pci); the small guest of the end-to-end test runs
# fio-demo.job on it: 4 KiB random reads and writes at iodepth 1 and 16.
# Then this prints the guest's IOPS and latencies and the module's
# per-queue counters.  See --help.
set -euo pipefail

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool_dir=$(cd "$e2e_dir/.." && pwd)
repo=$(cd "$tool_dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS]

Boot the test VM, serve a disk with vhost-blk-bridge and /dev/vhost-blk,
boot a small guest on it with QEMU's vhost-user-blk-pci, run 4 KiB random
reads and writes at iodepth 1 and 16 in it, and print the guest's IOPS
and latencies and the module's queue counters.  Everything runs under
TCG emulation, nested: the numbers are not a hardware figure.
Logs go to \$BUILD/bridge-e2e/demo.

Options:
  --backend nullb|file|brd  null_blk, 256 MiB in memory (default); a sparse
                       file on tmpfs; /dev/ram0
  --runtime S          seconds per fio job (default 5)
  --queues N           virtqueues (default 1)
  --smp N              CPUs of the nested guest (default 1)
  --poll-us N          the bridge's --poll-us (default 0: no busy polling)
  --timeout S          for the whole VM run (default 900)
  -h, --help           this text
EOF
}

backend=nullb runtime=5 queues=1 smp=1 poll_us=0 timeout_s=900
while [ $# -gt 0 ]; do
	case "$1" in
	--backend) backend=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--poll-us) poll_us=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$backend" in nullb|file|brd) ;; *) echo "demo.sh: --backend nullb, file or brd" >&2; exit 2 ;; esac

msg() { printf 'demo: %s\n' "$*"; }
out=$BUILD/bridge-e2e/demo
mkdir -p "$out"
rm -f "$out"/{results,guest-demo.log,bridge-demo.log,vm.log}

t0=$(date +%s)
msg "building the bridge, the guest kernel (once: about 7 min) and its tools disk"
make -s -C "$tool_dir" OUT="$BUILD/tools" >"$out/build.log" 2>&1 &&
	bash "$e2e_dir/build-guest.sh" >"$out/guest-paths" 2>>"$out/build.log" ||
	{ msg "the build failed:"; tail -n 20 "$out/build.log"; exit 1; }
mapfile -t guest <"$out/guest-paths"
[ -f "$repo/vhost_blk.ko" ] || make -s -C "$repo" module >>"$out/build.log" 2>&1 ||
	{ msg "building vhost_blk.ko failed:"; tail -n 20 "$out/build.log"; exit 1; }

msg "booting the test VM (QEMU TCG): 2-3 min in all; log: $out/vm.log"
t1=$(date +%s)
set +e
bash "$repo/tools/testing/vhost-blk-ci/vm/run-vm.sh" \
	--timeout "$timeout_s" --out "$out" --brd-mib 256 -- \
	bash "$e2e_dir/in-vm.sh" --kernel "${guest[0]}" --tools "${guest[1]}" \
	--bridge "$BUILD/tools/vhost-blk-bridge" --out "$out" --backend "$backend" \
	--queues "$queues" --smp "$smp" --poll-us "$poll_us" --demo "$runtime" 2>&1 |
	tee "$out/vm.log" | grep --line-buffered -E '^vbb-e2e: (backend|booting|error)' |
	sed -u 's/^vbb-e2e: /demo: /'
vm_rc=${PIPESTATUS[0]}
set -e
t2=$(date +%s)

# ------------------------------------------------------------------ report

guest_log=$out/guest-demo.log
bridge_log=$out/bridge-demo.log
fails=$(grep -c '^fail ' "$out/results" 2>/dev/null) || true
passes=$(grep -c '^pass ' "$out/results" 2>/dev/null) || true

case "$backend" in
nullb)	what="null_blk, 256 MiB kept in memory" ;;
file)	what="a sparse 256 MiB file on tmpfs" ;;
brd)	what="/dev/ram0 (brd), 256 MiB" ;;
esac

echo
echo "vhost-blk demo"
echo "=============="
echo "guest fio -> virtio-blk -> QEMU vhost-user-blk-pci -> vhost-blk-bridge"
echo "  -> /dev/vhost-blk (vhost_blk.ko) -> $what"
echo

if grep -q '^VBB-E2E-FIO ' "$guest_log" 2>/dev/null; then
	echo "Guest fio: 4 KiB random I/O, O_DIRECT, libaio, ${runtime} s per job; latency"
	echo "is submission to completion as the guest sees it"
	echo
	tr -d '\r' <"$guest_log" | awk -F';' '
		function lat(us) {
			if (us >= 1000) return sprintf("%.2f ms", us / 1000)
			return sprintf("%.0f us", us)
		}
		function pct(f) { sub(/.*=/, "", f); return f + 0 }
		BEGIN {
			printf "  %-16s %8s %10s %10s %10s\n", "job", "IOPS", "lat mean", "lat p50", "lat p99"
			printf "  %-16s %8s %10s %10s %10s\n", "---", "----", "--------", "-------", "-------"
		}
		/^VBB-E2E-FIO / {
			sub(/^VBB-E2E-FIO /, "")
			job = $3
			if (job ~ /^randread/)	# read: fields 6-46
				printf "  %-16s %8.0f %10s %10s %10s\n", job, $8, lat($40), lat(pct($18)), lat(pct($19))
			else			# write: fields 47-87
				printf "  %-16s %8.0f %10s %10s %10s\n", job, $49, lat($81), lat(pct($59)), lat(pct($60))
			if ($5 != 0) printf "  %-16s fio error %s\n", "", $5
		}'
else
	echo "Guest fio: no results (see $guest_log)"
fi
echo

if grep -q 'stats disconnect queue=' "$bridge_log" 2>/dev/null; then
	echo "vhost_blk's counters per queue (VHOST_BLK_GET_VRING_STATS, read by the"
	echo "bridge when QEMU disconnected; the whole guest run, boot included)"
	echo
	# The last report: one line per queue.
	grep 'stats disconnect queue=' "$bridge_log" | tail -n "$queues" | awk '
		function v(k,   i, a) {
			for (i = 1; i <= NF; i++) {
				split($i, a, "=")
				if (a[1] == k) return a[2] + 0
			}
			return 0
		}
		BEGIN {
			printf "  %-5s %8s %8s %8s %8s %8s %9s %10s %7s %9s %8s\n", "queue", "reads",
				"writes", "other", "MiB", "kicks", "notifies", "suppressed",
				"polls", "poll hits", "max infl"
		}
		{
			other = v("flush") + v("get_id") + v("discard") + v("write_zeroes") + v("unsupp")
			printf "  %-5s %8d %8d %8d %8.1f %8d %9d %10d %7d %9d %8d\n", v("queue"), v("in"),
				v("out"), other, (v("bytes_read") + v("bytes_written")) / 1048576,
				v("kicks"), v("notifies"), v("notifies_suppressed"),
				v("polls"), v("poll_hits"), v("inflight_max")
			if (v("ioerr")) printf "  %-5s I/O errors: %d\n", "", v("ioerr")
		}'
	echo
	echo "  kicks: worker runs woken by the guest; notifies: interrupts sent to it;"
	echo "  suppressed: completions the guest asked not to be told about; polls:"
	echo "  busy polls of an empty ring (--poll-us, here $poll_us)"
else
	echo "vhost_blk's counters: none reported (see $bridge_log)"
fi
echo

booted=$(tr -d '\r' <"$guest_log" 2>/dev/null | awk '/^VBB-E2E-BOOTED/ { printf "%.0f", $2 }')
fio_s=$(tr -d '\r' <"$guest_log" 2>/dev/null | awk '/^VBB-E2E-TIME fio / { printf "%.0f", $3 }')
echo "Time: build $((t1 - t0)) s, test VM $((t2 - t1)) s (nested guest kernel boot ${booted:-?} s,"
echo "fio ${fio_s:-?} s of which $((4 * runtime)) s of I/O)"
printf 'Checks: %s passed, %s failed' "${passes:-0}" "${fails:-0}"
[ "${fails:-0}" = 0 ] || printf ' (%s)' "$(awk '$1 == "fail" { printf "%s ", $2 }' "$out/results")"
echo
echo
echo "NOTE: all of this ran under QEMU TCG (software emulation, no KVM), with the"
echo "guest nested inside the TCG test VM: the figures show that the data path"
echo "works and how the counters move, not how fast vhost-blk is on hardware."
echo "For that, see Documentation/virt/vhost-blk/benchmark.rst."

if [ "$vm_rc" != 0 ] || [ "${fails:-0}" != 0 ] || ! grep -qx complete "$out/results" 2>/dev/null; then
	echo
	tail -n 15 "$out/vm.log" | sed 's/^/  | /'
	msg "FAILED (test VM status $vm_rc): see $out/vm.log"
	exit 1
fi
