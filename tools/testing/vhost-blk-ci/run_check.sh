#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The test part of 'make check': the counter's own test, the release
# picker's and the bridge's host-side unit tests; one test VM
# (vm/run-vm.sh) on Debian's stock kernel running in_vm.sh (every selftest
# program against every backend, the hostile suite, the bench smoke run,
# perf); one on Debian 12's default kernel, 6.1 LTS, and one on Debian
# 13's Linux 7.3, running in_vm.sh --pass 6.1 and --pass 7.3 (the
# selftests, the hostile suite and the fuzzer, with the module built for
# that kernel); one on the debug kernel (7.3 with KASAN, lockdep, UBSAN,
# DEBUG_OBJECTS, kmemleak) running in_vm.sh --pass debug (the selftests,
# the hostile suite with fewer fuzzer requests, kmemleak and lockdep
# checks); between the 7.3 and the debug VM, the Debian packages (make
# deb) installed, used and purged on 6.1 in a VM of their own
# (package_test.sh).  Beside them, on the other core: the same on 6.12,
# the bridge's end-to-end test in a VM of its own, then the packages on a
# real Debian 13 machine (trixie/run.sh).
# From the start, beside the host tests: the patch series check
# (scripts/patches.sh --check), then, with --long, the in-tree build in a
# 7.3 tree with its kselftest run (scripts/intree.sh).  Counts the TAP results they left in
# $BUILD/vm-out/selftests (the 6.1 and 7.3 VMs' in 6.1/ and 7.3/, named
# 6.1.* and 7.3.*; the debug VM's in debug/, named debug.*; the packages'
# in package/ and package-6.1/, the Debian 13 machine's in trixie/) with tap_count.sh, which prints why anything
# failed, every skip with its reason, and last "N passed, N failed"
# (", N skipped" when some were).  Each VM is a result of its own,
# "not ok" when it timed out, crashed or its kernel log shows a report
# (then with the report).  Exits non-zero if anything failed or no test
# ran.
#
# make check keeps to its budget of 30 min under TCG on a 2-core host by
# leaving some repetitions to --long (make check-long): see "Scope" below.
#
# With --fuzz-debug N it runs only the hostile-guest suite on the debug
# kernel, N fuzzer requests per backend, into $BUILD/vm-out/fuzz-debug
# (make fuzz-debug).
#
# Expects the programs built in $BUILD/selftests, vhost_blk.ko in the
# repository root, $BUILD/module-debug/vhost_blk.ko with the debug
# kernel, $BUILD/module-6.1/vhost_blk.ko and the .debs in $BUILD/deb
# (make all module-debug module-6.1 deb).

set -u
shopt -s nullglob

me=run_check.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
BUILD=${BUILD:-$repo/build}
export BUILD
bindir=$BUILD/selftests
timeout=${VHOST_BLK_CHECK_TIMEOUT:-1800}
# The debug kernel is several times slower under TCG.
debug_timeout=${VHOST_BLK_CHECK_DEBUG_TIMEOUT:-3600}
trixie_timeout=${VHOST_BLK_CHECK_TRIXIE_TIMEOUT:-2700}
# Fuzzer requests per backend on the debug kernel (18,000 in all, against
# the stock run's 100,000): it answers 50 (ext4) to 400 (brd) requests a
# second there, and 20,000 per backend took 10 of the debug VM's 27 min on
# 2026-12-06.  make fuzz-debug is the long run (10^6 per backend).
# make check: 2000 (one hostile pass on null_blk and ext4 each).
debug_fuzz=${VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS:-}
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

# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$here/tap.sh"

note() { printf 'run_check: %s\n' "$*" >&2; }

usage() {
	cat <<EOF
Usage: $me [--build TARGETS] [--long] [--fuzz-debug N]

Run every vhost-blk test (make check): the bridge's unit tests, the test
VM on the stock kernel and on the debug kernel, the Debian packages'
test, the bridge's end-to-end test; print "N passed, N failed" last.

Options:
  --build TARGETS make these targets first ('all module-6.1 deb' for
                  make check), each a result: a failed build is a failed
                  result, and the count is printed all the same
  --build-behind TARGETS
                  make these in the background, beside the builds, the
                  host tests and the first VMs, and wait for them before
                  the debug VM ('module-debug' for make check: on a new
                  machine it builds the debug kernel, 20 to 30 min)
  --long          every pass on every backend, the e2e live migration,
                  make intree (with its kselftest run in a VM) and 6000
                  fuzzer and stress requests per debug backend (make
                  check-long); without it make check's scope (28 min
                  cached on 2 cores)
  --fuzz-debug N  only the hostile-guest suite on the debug kernel, with N
                  fuzzer requests per backend (make fuzz-debug); results
                  in \$BUILD/vm-out/fuzz-debug
  -h, --help      this text

Environment: VHOST_BLK_CHECK_TIMEOUT (stock VM and e2e, default 1800 s),
VHOST_BLK_CHECK_TRIXIE_TIMEOUT (each boot of the Debian 13 machine,
default 2700 s), VHOST_BLK_CHECK_DEBUG_TIMEOUT (debug VM, default 3600 s; with
--fuzz-debug VHOST_BLK_FUZZ_DEBUG_TIMEOUT, default 172800 s),
VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS (fuzzer requests per backend on the
debug kernel, default 2000, 6000 with --long), VHOST_BLK_CHECK_TCG_THREADS
(default single).
EOF
}

fuzz_debug=
long=0
builds=
builds_behind=
while [ $# -gt 0 ]; do
	case "$1" in
	--fuzz-debug)	[ $# -ge 2 ] || { echo "$me: $1 needs an argument" >&2; exit 2; }
			fuzz_debug=$2; shift 2 ;;
	--build)	[ $# -ge 2 ] || { echo "$me: $1 needs an argument" >&2; exit 2; }
			builds=$2; shift 2 ;;
	--long)		long=1; shift ;;
	--build-behind)	[ $# -ge 2 ] || { echo "$me: $1 needs an argument" >&2; exit 2; }
			builds_behind=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	*)		echo "$me: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
if [ -n "$fuzz_debug" ] && ! [[ $fuzz_debug =~ ^[1-9][0-9]*$ ]]; then
	echo "$me: --fuzz-debug: '$fuzz_debug' is not a positive number" >&2
	exit 2
fi
if [ -z "$debug_fuzz" ]; then
	debug_fuzz=2000
	[ "$long" = 0 ] || debug_fuzz=6000
fi
if ! [[ $debug_fuzz =~ ^[1-9][0-9]*$ ]]; then
	echo "$me: VHOST_BLK_CHECK_DEBUG_FUZZ_REQUESTS='$debug_fuzz' is not a positive number" >&2
	exit 2
fi

# Scope.  Every pass runs every selftest program, the hostile suite and
# the fuzzer; what make check leaves to --long are repetitions, the costs
# measured on 2026-12-06 (CI5, 2 cores, TCG):
#   - 6.1: brd (nullb is the other block device; 1 min);
#   - stock: the hostile suite on NVMe/TCP (its selftests and the path
#     failure stay; 1.7 min);
#   - debug: the selftests on brd and ext4 and the hostile suite on brd
#     (null_blk's completions from a timer take the asynchronous paths; the
#     hostile suite and the fuzzer still run on ext4), fewer fuzzer
#     requests per backend than 6000 (8 min);
#   - the e2e live migration (boot 3, 6.5 min), and make intree (our
#     files in a whole 7.3 tree, and its kselftest run in a VM; 7 min, on
#     the host's second core while the first VMs run).
# After CI6 (2026-12-06, 43.6 min with the e2e guest kernel built) also
# 2000 fuzzer and 2000 stress requests per debug backend instead of
# 3000 and 6000 (the stress run took 2 min of the debug VM's 16).
# 7.3, the kernel blk.c is written to, keeps all three local backends.
if [ "$long" = 1 ]; then
	stock_args=()
	k61_args=()
	debug_args=()
	e2e_args=()
else
	stock_args=(--hostile-backends brd,nullb,ext4)
	k61_args=(--backends nullb,ext4)
	# The trust suite on ext4 too: a file's durable writes and syncs.
	debug_args=(--backends nullb,ext4:vhost_blk_trust_test
		--hostile-backends nullb,ext4 --stress-requests 2000)
	# The guest of libvirt's: the Debian 13 machine boots it twice, with
	# real systemd and libvirt.
	e2e_args=(--no-migrate --no-libvirt)
fi

out=$BUILD/vm-out/selftests
[ -z "$fuzz_debug" ] || out=$BUILD/vm-out/fuzz-debug

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

# The builds the tests need (make check passes 'all module-6.1 deb', and
# 'module-debug' behind them), each a result: one that fails is a failed
# result, and whatever needs it fails in turn, but the count below is
# still printed.
build() {	# build TARGET
	local target=$1 t0=$SECONDS

	if make -C "$repo" "$target" >"$out/host.build-$target.log" 2>&1; then
		tap_file "$out/host.build-$target.tap" ok \
			"build: make $target ($((SECONDS - t0)) s)"
	else
		note "make $target failed: see $out/host.build-$target.log"
		tap_file "$out/host.build-$target.tap" not_ok \
			"build: make $target failed" \
			"$(tail -n 20 "$out/host.build-$target.log")"
	fi
}
# Behind the rest: on a new machine the debug kernel's build takes 20 to
# 30 min, most of which the set-up, the host tests and the first VMs
# would otherwise spend waiting for it.
behind_pid=
if [ -n "$builds_behind" ]; then
	note "building in the background: $builds_behind"
	( for target in $builds_behind; do build "$target"; done ) &
	behind_pid=$!
fi
for target in $builds; do
	build "$target"
done

problem=0
for prog in vhost_blk_io_test vhost_blk_ctl_test vhost_blk_fastpath_test \
	    vhost_blk_trust_test vhost_blk_cpoll_test \
	    vhost_blk_hostile_test vhost_blk_fuzz; do
	if [ ! -x "$bindir/$prog" ]; then
		note "$bindir/$prog is missing: run 'make tools'"
		problem=1
	fi
done
if [ "$problem" = 1 ]; then
	tap_file "$out/host.build.tap" not_ok \
		"selftests-built - programs missing from $bindir"
	count "$out"/*.tap
	exit 1
fi

cd "$repo" || exit 1

# run_vm NAME DIR TIMEOUT RUN-VM-OPTION... -- COMMAND...: one test VM,
# with DIR as its output directory; leaves DIR/NAME.vm.tap, one result
# that is "not ok" if the VM failed, timed out or its kernel log shows a
# report (then with the report), so that the last line counts it.
run_vm() {
	local name=$1 dir=$2 t=$3 rc

	shift 3
	mkdir -p "$dir"
	# run-vm.sh's messages (a dmesg report among them) go to the
	# terminal and to run-vm.log: its stderr through tee, its stdout
	# around it (fd 3).  A pipeline, not a process substitution, so
	# that nothing is left to wait for: another VM may be running in
	# the background, and a bare 'wait' would wait for it too.
	{
		bash "$here/vm/run-vm.sh" --timeout "$t" --out "$dir" \
			--tcg-threads "$tcg_threads" "$@" 2>&1 1>&3 3>&- |
			tee "$dir/run-vm.log" >&2
		rc=${PIPESTATUS[0]}
	} 3>&1
	# The VM itself is a result: whatever ran in it, a failed VM fails
	# the run; a report in its kernel log is quoted.
	{
		bash "$here/tap_count.sh" --vm-result "$name-vm" "$rc" "$dir" "$t"
		[ "$rc" = 0 ] ||
			sed -n '/dmesg shows a kernel warning/,$p' "$dir/run-vm.log" |
			awk 'NR <= 300 { print "# " $0 }'
	} >"$dir/$name.vm.tap"
	[ "$rc" = 0 ] || note "$name VM: status $rc, see $dir/$name.vm.tap"
	return 0
}

# The debug kernel's VM: in_vm.sh --pass debug with ARGS.
run_debug_vm() {	# run_debug_vm DIR TIMEOUT IN_VM-ARGS...
	local dir=$1 t=$2 ko=$BUILD/module-debug/vhost_blk.ko

	shift 2
	if [ ! -f "$ko" ] || ! bash "$repo/scripts/debug-kernel.sh" --path >/dev/null; then
		note "no debug kernel or no $ko: run 'make module-debug'"
		mkdir -p "$dir"
		tap_file "$dir/debug.vm.tap" not_ok \
			"debug VM: no debug kernel or no $ko (make module-debug)"
		return 0
	fi
	run_vm debug "$dir" "$t" --kernel debug -- \
		bash "$here/in_vm.sh" --pass debug "$@" "$bindir"
}

if [ -n "$fuzz_debug" ]; then
	note "the hostile-guest suite on the debug kernel, $fuzz_debug fuzzer requests per backend (log: $out/console.log)"
	run_debug_vm "$out" "${VHOST_BLK_FUZZ_DEBUG_TIMEOUT:-172800}" \
		--hostile-only --fuzz-requests "$fuzz_debug"
	count "$out"/*.tap
	exit
fi

# The host's own checks of our files in a kernel tree, in the background
# from the start: they keep the second core busy while the host tests run
# on one, and are waited for at the end.
series_checks() {
	# The patch series against pristine linux-source-7.3 (make patches): it
	# applies with git am, and every patch builds drivers/vhost/ with W=1 C=1
	# and passes checkpatch --strict and kernel-doc.  About 3 min once the
	# pristine tree is in the cache (2 min more the first time).
	note "patch series check (log: $out/patches.log)"
	if ! bash "$repo/scripts/patches.sh" --check --tap "$out/patches.tap" \
		>"$out/patches.log" 2>&1 && [ ! -s "$out/patches.tap" ]; then
		tap_file "$out/patches.tap" not_ok \
			"patches - scripts/patches.sh failed; log: $out/patches.log"
	fi

	# With --long, our files in a whole 7.3 kernel tree: drivers/vhost/
	# built with and without O=, the kselftests built there with
	# kselftest's Makefile and run in a VM (scripts/intree.sh).  One
	# result; 7 min on a clean clone, most of it unpacking and configuring
	# the trees, on a core the VMs need.  make check leaves it out: the
	# series check above builds drivers/vhost/ in a 7.3 tree per patch.
	[ "$long" = 1 ] || return 0
	note "in-tree build and kselftest run_tests on 7.3 (log: $out/intree.log)"
	if bash "$repo/scripts/intree.sh" >"$out/intree.log" 2>&1; then
		tap_file "$out/intree.tap" ok "intree - $(tail -n 1 "$out/intree.log")"
	else
		why=$(sed -n 's/^intree: error: //p' "$out/intree.log" | tail -n 1)
		tap_file "$out/intree.tap" not_ok \
			"intree - ${why:-scripts/intree.sh failed}; log: $out/intree.log"
	fi
}
series_checks &
series_pid=$!

# The Debian packages (make deb) in VMs of their own, on the stock kernel
# here and on 6.1 in the first stream (after its 7.3 VM), with no module
# loaded by the runner: apt-get installs them (DKMS builds vhost_blk.ko
# there), package_test.sh uses and purges them.  package/package.tap and
# package-6.1/package-6.1.tap have their results, NAME.vm.tap the VMs'.
# Most of their 3 to 5 min each is the DKMS build and depmod under TCG,
# on one vCPU thread.
#
# Then the bridge's end-to-end test, unmodified QEMU on vhost-blk-bridge,
# in a VM of its own that boots nested guests (about 11 min here); e2e.tap
# says what ran, a 'not ok' line if nothing did.
#
# Then the packages on a real Debian 13 machine (trixie/run.sh: systemd as
# PID 1, a reboot, a guest of libvirt's whose disk grows under it, the
# kernel upgrade to 7.3 with apt-get, the guest again, purge; three boots
# of one vCPU).  On a new machine it first makes the machine's image
# (5 min).  Each boot may take 2700 s (VHOST_BLK_CHECK_TRIXIE_TIMEOUT):
# a hang guard, not a budget.
#
# All of that runs in the background, one VM after the other, from as
# soon as the builds are done: beside the host tests below, then the
# stock, 6.1, 7.3, 6.1 package and debug VMs (each keeps one host CPU
# busy), and is waited for after them.  Two streams, not three: with a
# third VM on two cores each of them ran at two thirds of its speed, the
# nested guests slower still, and the run took longer (CI of 6792d83:
# 63 min, and boots that timed out).
pkg_out=$out/package
pkg61_out=$out/package-6.1
debs=("$BUILD"/deb/vhost-blk-dkms_*_all.deb "$BUILD"/deb/vhost-blk-tools_*.deb)
background() {
	if [ "${#debs[@]}" -ge 2 ]; then
		run_vm package "$pkg_out" "$timeout" --no-module -- \
			bash "$here/package_test.sh" --tap "$pkg_out/package.tap" \
			"$BUILD/deb" "$bindir"
	fi
	bash "$repo/tools/vhost-blk-bridge/e2e/run.sh" --timeout "$timeout" \
		--tcg-threads "$tcg_threads" --tap "$out/e2e.tap" \
		${e2e_args[@]+"${e2e_args[@]}"} >"$out/e2e.log" 2>&1
	[ -s "$out/e2e.tap" ] ||
		tap_file "$out/e2e.tap" not_ok bridge-e2e-ran
	bash "$here/trixie/run.sh" --timeout "$trixie_timeout" \
		--out "$out/trixie" "$BUILD/deb" "$bindir" >"$out/trixie.log" 2>&1
	if [ ! -s "$out/trixie/trixie.tap" ]; then
		mkdir -p "$out/trixie"
		tap_file "$out/trixie/trixie.tap" not_ok \
			"trixie-machine - trixie/run.sh did not run: $(tail -n 1 "$out/trixie.log")"
	fi
	# With --long, the real-guest benchmark's harness run (make
	# bench-guest --quick, every peer; about 25 min under TCG).
	[ "$long" = 1 ] || return 0
	bash "$repo/tools/vhost-blk-bench/guest-bench.sh" --quick \
		--out "$out/guest-bench" --tap "$out/guest-bench.tap" \
		>"$out/guest-bench.log" 2>&1
	[ -s "$out/guest-bench.tap" ] ||
		tap_file "$out/guest-bench.tap" not_ok guest-bench-ran
}
if [ "${#debs[@]}" -ge 2 ]; then
	note "in the background: Debian packages on 6.12: install with the DKMS build, use, purge (log: $pkg_out/package.log); the bridge end-to-end test (log: $out/e2e.log); the Debian 13 machine (log: $out/trixie.log)"
else
	note "no .debs in $BUILD/deb: run 'make deb'"
	mkdir -p "$pkg_out" "$pkg61_out"
	tap_file "$pkg_out/package.tap" not_ok \
		"packages: no vhost-blk-dkms and vhost-blk-tools .debs in $BUILD/deb (make deb)"
	note "in the background: the bridge end-to-end test (log: $out/e2e.log), the Debian 13 machine (log: $out/trixie.log)"
fi
background &
bg_pid=$!

# Host-side tests, before the foreground's VMs: they need none.  scripts/deps.sh's release
# picker, against a fake apt-cache with deb-src entries.
bash "$repo/scripts/deps_test.sh" >"$out/host.deps-picker.tap" 2>&1
note "release picker: $(grep -c '^ok' "$out/host.deps-picker.tap") ok, $(grep -c '^not ok' "$out/host.deps-picker.tap") not ok"

# The DKMS package's PRE_BUILD (debian/dkms-vhost-h.sh) on the real
# linux-source tarballs of 6.1, 6.12 and 7.3 (scripts/deps.sh put them in
# $BUILD/dl): the header a full read gives, by the few-blocks path.
bash "$here/dkms_vhost_h_test.sh" "$BUILD"/dl/linux-source-*_all.deb \
	>"$out/host.dkms-vhost-h.tap" 2>&1
note "DKMS PRE_BUILD: $(grep -c '^ok' "$out/host.dkms-vhost-h.tap") ok, $(grep -c '^not ok' "$out/host.dkms-vhost-h.tap") not ok"

# exits-per-io.sh's counting, on saved perf script output (the e2e test
# runs it for real, without KVM).
bash "$repo/tools/vhost-blk-bench/exits_test.sh" >"$out/host.exits-per-io.tap" 2>&1
note "exits-per-io: $(grep -c '^ok' "$out/host.exits-per-io.tap") ok, $(grep -c '^not ok' "$out/host.exits-per-io.tap") not ok"

# The bridge's protocol layer against scripted and malformed vhost-user
# messages.
bridge_test=$BUILD/tools/vhost-blk-bridge-test
if [ -x "$bridge_test" ]; then
	"$bridge_test" >"$out/host.bridge-unit.tap" 2>&1
	note "bridge unit tests: $(tail -n 1 "$out/host.bridge-unit.tap")"
else
	note "$bridge_test is missing: run 'make tools'"
	tap_file "$out/host.bridge-unit.tap" not_ok bridge-unit-tests-built
fi

# The same unit tests built with ASan and UBSan (make -C
# tools/vhost-blk-bridge check-asan): a report stops the program, and the
# results its plan then misses are failures.  A build that fails is a
# failure too.
bridge_make=(make -s -C "$repo/tools/vhost-blk-bridge" OUT="$BUILD/tools")
if ! "${bridge_make[@]}" "$BUILD/tools/vhost-blk-bridge-test-asan" \
	>"$out/host.bridge-asan-build.log" 2>&1; then
	tap_file "$out/host.bridge-unit-asan.tap" not_ok \
		"bridge-unit-tests-asan-built" "see host.bridge-asan-build.log"
else
	"$BUILD/tools/vhost-blk-bridge-test-asan" \
		>"$out/host.bridge-unit-asan.tap" 2>&1
fi
note "bridge unit tests under ASan+UBSan: $(tail -n 1 "$out/host.bridge-unit-asan.tap")"

# The libFuzzer target on the bridge's message handler (clang, ASan, UBSan),
# a bounded run from the seed corpus: one result, its statistics as
# comments.  make -C tools/vhost-blk-bridge fuzz FUZZ_RUNS=10000000 is the
# long run.
fuzz_runs=${VHOST_BLK_CHECK_BRIDGE_FUZZ_RUNS:-100000}
if "${bridge_make[@]}" fuzz FUZZ_RUNS="$fuzz_runs" \
	>"$out/host.bridge-fuzz.log" 2>&1; then
	tap_file "$out/host.bridge-fuzz.tap" ok \
		"bridge-fuzz: $fuzz_runs inputs through the message handler, no crash, leak or report" \
		"$(grep '^stat::' "$out/host.bridge-fuzz.log")"
else
	tap_file "$out/host.bridge-fuzz.tap" not_ok \
		"bridge-fuzz: a crash, leak or sanitizer report, or the build failed (see host.bridge-fuzz.log)" \
		"$(grep '^stat::' "$out/host.bridge-fuzz.log")"
fi
note "bridge fuzzer: $(sed -n 's/^\(not \)\{0,1\}ok 1 - //p' "$out/host.bridge-fuzz.tap")"

# Line coverage of the bridge (make coverage): the unit tests and a replay
# of the seeds and the corpus the fuzzer just grew.  A figure, printed,
# not a result: what counts is what the tests above check.
if "${bridge_make[@]}" coverage >"$out/host.bridge-coverage.log" 2>&1; then
	note "coverage: $(tail -n 1 "$out/host.bridge-coverage.log") (per file: $out/host.bridge-coverage.log)"
else
	note "coverage: the bridge's coverage build failed (see $out/host.bridge-coverage.log)"
fi

note "selftests on the stock kernel (log: $out/console.log)"
run_vm stock "$out" "$timeout" -- bash "$here/in_vm.sh" \
	${stock_args[@]+"${stock_args[@]}"} "$bindir"

# Debian 12's default kernel, 6.1 LTS (make module-6.1, with the backport
# layer), and Linux 7.3, the kernel blk.c is written to (make module-7.3,
# built in the Debian 13 root): every selftest program on brd, null_blk
# and ext4, the hostile suite and the fuzzer, then rmmod.  About 5 min
# each.
for kv in 6.1 7.3; do
	ko=$BUILD/module-$kv/vhost_blk.ko
	if [ -f "$ko" ]; then
		note "selftests on the $kv kernel (log: $out/$kv/console.log)"
		pass_args=()
		[ "$kv" != 6.1 ] || pass_args=(${k61_args[@]+"${k61_args[@]}"})
		run_vm "$kv" "$out/$kv" "$timeout" --kernel "$kv" -- \
			bash "$here/in_vm.sh" --pass "$kv" \
			${pass_args[@]+"${pass_args[@]}"} "$bindir"
	else
		note "no $ko: run 'make module-$kv'"
		mkdir -p "$out/$kv"
		tap_file "$out/$kv/$kv.vm.tap" not_ok \
			"$kv VM: no $ko (make module-$kv)"
	fi
done

# Debian 12's own kernel for the packages too: the package VM on 6.1 (see
# the other stream below), here to even out the two streams.
if [ "${#debs[@]}" -ge 2 ]; then
	note "Debian packages on 6.1 (log: $pkg61_out/package.log)"
	run_vm package-6.1 "$pkg61_out" "$timeout" --no-module --kernel 6.1 -- \
		bash "$here/package_test.sh" --tap "$pkg61_out/package-6.1.tap" \
		"$BUILD/deb" "$bindir"
fi

if [ -n "$behind_pid" ]; then
	note "waiting for the background builds: $builds_behind"
	wait "$behind_pid"
fi
note "selftests on the debug kernel, $debug_fuzz fuzzer requests per backend (log: $out/debug/console.log)"
run_debug_vm "$out/debug" "$debug_timeout" --fuzz-requests "$debug_fuzz" \
	${debug_args[@]+"${debug_args[@]}"}
# Line and branch coverage of blk.c by the debug VM's tests (its module is
# built for gcov): one result, with the figures; the uncovered lines in
# $out/debug/coverage/uncovered.txt.
if [ -f "$BUILD/module-debug/vhost_blk.ko" ]; then
	bash "$here/kernel_coverage.sh" --tap "$out/debug/debug.coverage.tap" \
		"$out/debug/gcov" "$BUILD/module-debug" "$out/debug/coverage" \
		>"$out/debug/coverage.log" 2>&1
	note "coverage: $(sed -n 's/^\(not \)\{0,1\}ok 1 - //p' "$out/debug/debug.coverage.tap") (uncovered lines: $out/debug/coverage/uncovered.txt)"
fi

wait "$bg_pid"
wait "$series_pid"
for tap in "$pkg_out/package.tap" "$pkg61_out/package-6.1.tap" "$out/e2e.tap"; do
	note "$tap: $(grep -c '^ok' "$tap" 2>/dev/null) ok, $(grep -c '^not ok' "$tap" 2>/dev/null) not ok"
done

# Count every result; the last line is the count.  Skips are judged by
# skips.allow: one that a pass is not expected to have on its kernel and
# backends fails the run.
count --allow-skips "$here/skips.allow" \
	"$out"/*.tap "$out"/6.1/*.tap "$out"/7.3/*.tap "$out"/debug/*.tap \
	"$out"/package/*.tap \
	"$out"/package-6.1/*.tap "$out"/trixie/trixie.tap
