#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The test part of 'make check': the counter's own test and the bridge's
# host-side unit tests; one test VM (vm/run-vm.sh) running in_vm.sh (every
# selftest program against every backend, the hostile suite, the bench
# smoke run, perf); then the bridge's end-to-end test in a VM of its own,
# and the in-tree build with its kselftest run (scripts/intree.sh).
# Counts the TAP results they left in $BUILD/vm-out/selftests with
# tap_count.sh, which prints why anything failed, every skip with its
# reason, and last "N passed, N failed" (", N skipped" when some were).
# A VM that failed (a kernel warning, a timeout, a crash) is a failed
# result of its own, test-vm.  Exits non-zero if anything failed or no
# test ran.
#
# Expects the programs built in $BUILD/selftests and vhost_blk.ko in the
# repository root (make all).

set -u
shopt -s nullglob

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

# Skips make check does not accept: the module, its device, the backend
# or the module's own tracepoints missing.  (in_vm.sh sets
# VHOST_BLK_TEST_STRICT, under which the programs fail there anyway.)
refused_skips='/dev/vhost-blk|vhost_blk loaded|VHOST_BLK_TEST_DEV|cannot open the backend|tracepoints|events/vhost_blk'

note() { printf 'run_check: %s\n' "$*" >&2; }

count() {
	bash "$here/tap_count.sh" --name run_check --fail-skip "$refused_skips" "$@"
}

rm -rf "$out"
if ! mkdir -p "$out"; then
	note "cannot create $out"
	echo "0 passed, 1 failed"
	exit 1
fi

# The counter first: if it cannot count fabricated results right, no
# count below could be trusted.  (Counted here without it.)
if ! bash "$here/tap_count_test.sh" >"$out/host.tap-count.tap" 2>&1; then
	note "tap_count.sh fails its own test ($out/host.tap-count.tap):"
	grep '^not ok' "$out/host.tap-count.tap" | sed 's/^/run_check: failed: /'
	echo "$(grep -c '^ok' "$out/host.tap-count.tap") passed, $(grep -c '^not ok' "$out/host.tap-count.tap") failed"
	exit 1
fi

problem=0
for prog in vhost_blk_io_test vhost_blk_ctl_test vhost_blk_fastpath_test \
	    vhost_blk_trust_test \
	    vhost_blk_hostile_test vhost_blk_fuzz; do
	if [ ! -x "$bindir/$prog" ]; then
		note "$bindir/$prog is missing: run 'make tools'"
		problem=1
	fi
done
if [ "$problem" = 1 ]; then
	printf 'TAP version 13\n1..1\nnot ok 1 selftests-built - programs missing from %s\n' \
		"$bindir" >"$out/host.build.tap"
	count "$out"/*.tap
	exit 1
fi

cd "$repo" || exit 1

# Host-side tests first: they need no VM.  The bridge's protocol layer
# against scripted and malformed vhost-user messages.
# scripts/deps.sh's release picker, against a fake apt-cache with deb-src
# entries.
bash "$repo/scripts/deps_test.sh" >"$out/host.deps-picker.tap" 2>&1
note "release picker: $(grep -c '^ok' "$out/host.deps-picker.tap") ok, $(grep -c '^not ok' "$out/host.deps-picker.tap") not ok"

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
3)	note "the kernel log shows a warning: see $out/dmesg.log" ;;
124)	note "the VM timed out after $timeout s" ;;
*)	note "the VM failed (status $vm_rc): see $out/console.log" ;;
esac
# The VM itself is a result: whatever ran in it, a failed VM fails the run.
bash "$here/tap_count.sh" --vm-result test-vm "$vm_rc" "$out" "$timeout" \
	>"$out/test-vm.tap"

# The bridge's end-to-end test, unmodified QEMU on vhost-blk-bridge, boots
# a VM of its own; e2e.tap says what ran, a 'not ok' line if nothing did.
note "bridge end-to-end test (about 7 min; log: $out/e2e.log)"
bash "$repo/tools/vhost-blk-bridge/e2e/run.sh" --timeout "$timeout" \
	--tcg-threads "$tcg_threads" --tap "$out/e2e.tap" >"$out/e2e.log" 2>&1
[ -s "$out/e2e.tap" ] ||
	printf 'TAP version 13\n1..1\nnot ok 1 bridge-e2e-ran\n' >"$out/e2e.tap"

# Our files in a 6.12 kernel tree: drivers/vhost/ built with and without
# O=, the kselftests built there and run in a VM (scripts/intree.sh).  One
# result; about 30 s once build/intree is unpacked and prepared, 1.5 min
# the first time.
note "in-tree build and kselftest run_tests (log: $out/intree.log)"
if bash "$repo/scripts/intree.sh" >"$out/intree.log" 2>&1; then
	printf 'TAP version 13\n1..1\nok 1 intree - %s\n' \
		"$(tail -n 1 "$out/intree.log")" >"$out/intree.tap"
else
	why=$(sed -n 's/^intree: error: //p' "$out/intree.log" | tail -n 1)
	printf 'TAP version 13\n1..1\nnot ok 1 intree - %s; log: %s\n' \
		"${why:-scripts/intree.sh failed}" "$out/intree.log" >"$out/intree.tap"
fi

# Count every result; the last line is the count.
count "$out"/*.tap
