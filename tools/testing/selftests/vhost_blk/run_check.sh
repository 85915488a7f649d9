#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The test part of 'make check': the bridge's host-side unit tests; one
# test VM (vm/run-vm.sh) on Debian's stock kernel running in_vm.sh (every
# selftest program against every backend, the hostile suite, the bench
# smoke run, perf); one on the debug kernel (KASAN, lockdep, UBSAN,
# DEBUG_OBJECTS, kmemleak) running in_vm.sh --pass debug (the selftests,
# the hostile suite with fewer fuzzer requests, kmemleak and lockdep
# checks); then the bridge's end-to-end test in a VM of its own.  Counts
# the TAP results they left in $BUILD/vm-out/selftests (the debug VM's in
# its debug/ subdirectory, named debug.*).  Each VM adds one result of its
# own, "not ok" when it timed out, crashed or its kernel log shows a
# report.  The last line printed is "N passed, N failed" (", N skipped"
# when some were).  Exits non-zero if a test failed, the VM failed or no
# test ran at all.
#
# With --fuzz-debug N it runs only the hostile-guest suite on the debug
# kernel, N fuzzer requests per backend, into $BUILD/vm-out/fuzz-debug
# (make fuzz-debug).
#
# Expects the programs built in $BUILD/selftests, vhost_blk.ko in the
# repository root and $BUILD/module-debug/vhost_blk.ko with the debug
# kernel (make all module-debug).

set -u

me=run_check.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD
bindir=$BUILD/selftests
timeout=${VHOST_BLK_CHECK_TIMEOUT:-1800}
# The debug kernel is several times slower under TCG.
debug_timeout=${VHOST_BLK_CHECK_DEBUG_TIMEOUT:-3600}
# Fuzzer requests per backend on the debug kernel (60,000 in all, against
# the stock run's 100,000): it answers 200 to 600 requests a second there,
# several times fewer than the stock kernel.
debug_fuzz=${VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS:-20000}
# Under TCG the vCPUs take turns on one host thread: with a thread each, a
# kernel text patch (a tracepoint or perf turning a static key on in
# __schedule) can race the other vCPU, which then meets a stale int3 and
# oopses.  Counts do not need parallel vCPUs, and on a 2-core host this
# is no slower for the selftests (e2e: about a minute more).
tcg_threads=${VHOST_BLK_CHECK_TCG_THREADS:-single}

usage() {
	cat <<EOF
Usage: $me [--fuzz-debug N]

Run every vhost-blk test (make check): the bridge's unit tests, the test
VM on the stock kernel and on the debug kernel, the bridge's end-to-end
test; print "N passed, N failed" last.

Options:
  --fuzz-debug N  only the hostile-guest suite on the debug kernel, with N
                  fuzzer requests per backend (make fuzz-debug); results
                  in \$BUILD/vm-out/fuzz-debug
  -h, --help      this text

Environment: VHOST_BLK_CHECK_TIMEOUT (stock VM and e2e, default 1800 s),
VHOST_BLK_CHECK_DEBUG_TIMEOUT (debug VM, default 3600 s; with
--fuzz-debug VHOST_BLK_FUZZ_DEBUG_TIMEOUT, default 172800 s),
VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS (fuzzer requests per backend on the
debug kernel, default 20000), VHOST_BLK_CHECK_TCG_THREADS (default
single).
EOF
}

fuzz_debug=
while [ $# -gt 0 ]; do
	case "$1" in
	--fuzz-debug)	[ $# -ge 2 ] || { echo "$me: $1 needs an argument" >&2; exit 2; }
			fuzz_debug=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	*)		echo "$me: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
if [ -n "$fuzz_debug" ] && ! [[ $fuzz_debug =~ ^[1-9][0-9]*$ ]]; then
	echo "$me: --fuzz-debug: '$fuzz_debug' is not a positive number" >&2
	exit 2
fi
if ! [[ $debug_fuzz =~ ^[1-9][0-9]*$ ]]; then
	echo "$me: VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS='$debug_fuzz' is not a positive number" >&2
	exit 2
fi

out=$BUILD/vm-out/selftests
[ -z "$fuzz_debug" ] || out=$BUILD/vm-out/fuzz-debug

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
	    vhost_blk_hostile_test vhost_blk_fuzz; do
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

# run_vm NAME DIR TIMEOUT RUN-VM-OPTION... -- COMMAND...: one test VM,
# with DIR as its output directory; leaves DIR/NAME.vm.tap, one result
# that is "not ok" if the VM failed, timed out or its kernel log shows a
# report (then with the report), so that the last line counts it.
run_vm() {
	local name=$1 dir=$2 t=$3 rc why

	shift 3
	mkdir -p "$dir"
	# run-vm.sh's messages (a dmesg report among them) go to the
	# terminal and to run-vm.log.
	bash "$here/vm/run-vm.sh" --timeout "$t" --out "$dir" \
		--tcg-threads "$tcg_threads" "$@" 2> >(tee "$dir/run-vm.log" >&2)
	rc=$?
	wait
	case $rc in
	0)	why= ;;
	3)	why="the kernel log shows a warning or a checker's report: see $dir/dmesg.log" ;;
	124)	why="the VM timed out after $t s: see $dir/console.log" ;;
	*)	why="the VM failed (status $rc): see $dir/console.log" ;;
	esac
	{
		printf 'TAP version 13\n1..1\n'
		if [ -z "$why" ]; then
			printf 'ok 1 - %s VM: ran, kernel log clean\n' "$name"
		else
			printf 'not ok 1 - %s VM: %s\n' "$name" "$why"
			sed -n '/dmesg shows a kernel warning/,$p' "$dir/run-vm.log" |
				head -n 300 | sed 's/^/# /'
		fi
	} >"$dir/$name.vm.tap"
	[ -z "$why" ] || { note "$name VM: $why"; problem=1; }
	return 0
}

# The debug kernel's VM: in_vm.sh --pass debug with ARGS.
run_debug_vm() {	# run_debug_vm DIR TIMEOUT IN_VM-ARGS...
	local dir=$1 t=$2 ko=$BUILD/module-debug/vhost_blk.ko

	shift 2
	if [ ! -f "$ko" ] || ! bash "$repo/scripts/debug-kernel.sh" --path >/dev/null; then
		note "no debug kernel or no $ko: run 'make module-debug'"
		mkdir -p "$dir"
		printf 'TAP version 13\n1..1\nnot ok 1 - debug VM: no debug kernel or no %s (make module-debug)\n' \
			"$ko" >"$dir/debug.vm.tap"
		problem=1
		return 0
	fi
	run_vm debug "$dir" "$t" --kernel debug -- \
		bash "$here/in_vm.sh" --pass debug "$@" "$bindir"
}

if [ -n "$fuzz_debug" ]; then
	note "the hostile-guest suite on the debug kernel, $fuzz_debug fuzzer requests per backend (log: $out/console.log)"
	run_debug_vm "$out" "${VHOST_BLK_FUZZ_DEBUG_TIMEOUT:-172800}" \
		--hostile-only --fuzz-requests "$fuzz_debug"
else
	# Host-side tests first: they need no VM.  The bridge's protocol
	# layer against scripted and malformed vhost-user messages.
	bridge_test=$BUILD/tools/vhost-blk-bridge-test
	if [ -x "$bridge_test" ]; then
		"$bridge_test" >"$out/host.bridge-unit.tap" 2>&1
		note "bridge unit tests: $(tail -n 1 "$out/host.bridge-unit.tap")"
	else
		note "$bridge_test is missing: run 'make tools'"
		printf 'TAP version 13\n1..1\nnot ok 1 bridge-unit-tests-built\n' \
			>"$out/host.bridge-unit.tap"
	fi

	note "selftests on the stock kernel (log: $out/console.log)"
	run_vm stock "$out" "$timeout" -- bash "$here/in_vm.sh" "$bindir"

	note "selftests on the debug kernel, $debug_fuzz fuzzer requests per backend (log: $out/debug/console.log)"
	run_debug_vm "$out/debug" "$debug_timeout" --fuzz-requests "$debug_fuzz"

	# The bridge's end-to-end test, unmodified QEMU on vhost-blk-bridge,
	# boots a VM of its own; e2e.tap says what ran, a 'not ok' line if
	# nothing did.
	note "bridge end-to-end test (about 7 min; log: $out/e2e.log)"
	bash "$repo/tools/vhost-blk-bridge/e2e/run.sh" --timeout "$timeout" \
		--tcg-threads "$tcg_threads" --tap "$out/e2e.tap" >"$out/e2e.log" 2>&1
	[ -s "$out/e2e.tap" ] ||
		printf 'TAP version 13\n1..1\nnot ok 1 bridge-e2e-ran\n' >"$out/e2e.tap"
fi

# Count every result line; a program that died early is missing results
# from its plan, and those count as failed.
shopt -s nullglob
taps=("$out"/*.tap "$out"/debug/*.tap)
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
