#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The test part of 'make check': the bridge's host-side unit tests; one
# test VM (vm/run-vm.sh) running in_vm.sh (every selftest program against
# every backend, the hostile suite, the bench smoke run, perf); then the
# bridge's end-to-end test in a VM of its own.  Counts the TAP results
# they left in $BUILD/vm-out/selftests.  The last line
# printed is "N passed, N failed" (", N skipped" when some were).  Exits
# non-zero if a test failed, the VM failed or no test ran at all.
#
# Expects the programs built in $BUILD/selftests and vhost_blk.ko in the
# repository root (make all).

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD
bindir=$BUILD/selftests
out=$BUILD/vm-out/selftests
timeout=${VHOST_BLK_CHECK_TIMEOUT:-1800}
# Under TCG the vCPUs take turns on one host thread: with a thread each, a
# kernel text patch (a tracepoint or perf turning a static key on in
# __schedule) can race the other vCPU, which then meets a stale int3 and
# oopses.  Counts do not need parallel vCPUs, and on a 2-core host this
# is no slower for the selftests (e2e: about a minute more).
tcg_threads=${VHOST_BLK_CHECK_TCG_THREADS:-single}

note() { printf 'run_check: %s\n' "$*" >&2; }

passed=0
failed=0
skipped=0
problem=0

summary() {
	local line="$passed passed, $failed failed"

	[ "$skipped" -gt 0 ] && line+=", $skipped skipped"
	echo "$line"
}

for prog in vhost_blk_io_test vhost_blk_ctl_test vhost_blk_fastpath_test \
	vhost_blk_trust_test; do
	if [ ! -x "$bindir/$prog" ]; then
		note "$bindir/$prog is missing: run 'make tools'"
		problem=1
	fi
done
if [ "$problem" = 1 ]; then
	summary
	exit 1
fi

rm -rf "$out"
mkdir -p "$out" || { note "cannot create $out"; summary; exit 1; }

cd "$repo" || exit 1

# Host-side tests first: they need no VM.  The bridge's protocol layer
# against scripted and malformed vhost-user messages.
bridge_test=$BUILD/tools/vhost-blk-bridge-test
if [ -x "$bridge_test" ]; then
	"$bridge_test" >"$out/host.bridge-unit.tap" 2>&1
	note "bridge unit tests: $(tail -n 1 "$out/host.bridge-unit.tap")"
else
	note "$bridge_test is missing: run 'make tools'"
	printf 'TAP version 13\n1..1\nnot ok 1 bridge-unit-tests-built\n' \
		>"$out/host.bridge-unit.tap"
fi

bash "$here/vm/run-vm.sh" --timeout "$timeout" --out "$out" \
	--tcg-threads "$tcg_threads" -- bash "$here/in_vm.sh" "$bindir"
vm_rc=$?
case $vm_rc in
0)	;;
3)	note "the kernel log shows a warning: see $out/dmesg.log"
	problem=1 ;;
124)	note "the VM timed out after $timeout s"
	problem=1 ;;
*)	note "the VM failed (status $vm_rc): see $out/console.log"
	problem=1 ;;
esac

# The bridge's end-to-end test, unmodified QEMU on vhost-blk-bridge, boots
# a VM of its own; e2e.tap says what ran, a 'not ok' line if nothing did.
note "bridge end-to-end test (about 7 min; log: $out/e2e.log)"
bash "$repo/tools/vhost-blk-bridge/e2e/run.sh" --timeout "$timeout" \
	--tcg-threads "$tcg_threads" --tap "$out/e2e.tap" >"$out/e2e.log" 2>&1
[ -s "$out/e2e.tap" ] ||
	printf 'TAP version 13\n1..1\nnot ok 1 bridge-e2e-ran\n' >"$out/e2e.tap"

# Count every result line; a program that died early is missing results
# from its plan, and those count as failed.
shopt -s nullglob
taps=("$out"/*.tap)
for tap in "${taps[@]}"; do
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$tap" | head -n 1)
	p=$(grep -cE '^ok [0-9]+' "$tap")
	s=$(grep -cE '^ok [0-9]+.*# SKIP' "$tap")
	f=$(grep -cE '^not ok [0-9]+' "$tap")
	p=$((p - s))
	if [ -z "$plan" ]; then
		note "${tap##*/}: no TAP plan"
		f=$((f + 1))
	elif [ $((p + s + f)) -lt "$plan" ]; then
		note "${tap##*/}: $((plan - p - s - f)) of $plan results missing"
		f=$((plan - p - s))
	fi
	[ "$f" -eq 0 ] || note "${tap##*/}: $f failed"
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
done
if [ "${#taps[@]}" -eq 0 ]; then
	note "no results in $out"
	problem=1
fi
if [ $((passed + failed)) -eq 0 ]; then
	note "no test ran"
	problem=1
fi

summary
[ "$failed" -eq 0 ] && [ "$problem" = 0 ]
