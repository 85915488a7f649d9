#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run inside the test VM by run_check.sh (through vm/run-vm.sh): every
# vhost-blk selftest program against each backend,
#
#   brd     /dev/ram0, set up by the VM
#   nullb   a memory-backed null_blk made through configfs, completing
#           from a timer so that requests really are in flight
#   ext4    a raw image file on ext4, on a loop device
#   nvmetcp a memory-backed null_blk exported by the kernel's NVMe target
#           over TCP on 127.0.0.1 and connected with nvme-tcp: the
#           namespace /dev/nvmeXn1 (nvme_tcp.sh); on the stock kernel
#           only (the debug kernel has no IP stack)
#
# leaving one TAP file per program and backend, BACKEND.PROGRAM.tap, in
# $VHOST_BLK_VM_OUT; and vhost_blk_cpoll_test, which makes its own
# backends, once (cpoll.vhost_blk_cpoll_test.tap).  A backend that cannot
# be set up leaves BACKEND.setup.tap with one failed test instead.  Then the hostile-guest
# suite (hostile.tap) and, on the stock kernel, the NVMe/TCP path failure
# (nvmetcp.pathfail.tap), the benchmark smoke run and the perf check.
#
# On Debian's 6.1 kernel (--pass 6.1) and on Debian 13's Linux 7.3
# (--pass 7.3) every TAP file's name starts with "6.1." or "7.3.", there
# is no bench or perf run, and the module must unload at the end.
#
# On the debug kernel (--pass debug) every TAP file's name starts with
# "debug.", and there is no bench or perf run.  Instead kmemleak forgets
# what boot left before the tests, and is scanned after them and again
# after vhost_blk is unloaded (debug.kmemleak.tap); and lockdep must still
# be on at the end (debug.lockdep.tap), because any lockdep report or a
# taint turns it off, and every lockdep_assert_held() with it.
#
# Usage: in_vm.sh [--pass stock|debug|6.1|7.3] [--fuzz-requests N]
#                 [--stress-requests N] [--hostile-only]
#                 [--backends LIST] [--hostile-backends LIST] BINDIR

set -u
# A program that would skip for want of /dev/vhost-blk or of its backend
# fails instead (vblk_test.h, hostile.sh).
export VHOST_BLK_TEST_STRICT=${VHOST_BLK_TEST_STRICT:-1}

me=in_vm.sh

usage() {
	cat <<EOF
Usage: $me [OPTIONS] BINDIR

Inside the test VM (vm/run-vm.sh): every vhost-blk selftest program in
BINDIR against brd, null_blk and a file on ext4, then the hostile-guest
suite; TAP files in \$VHOST_BLK_VM_OUT.

Options:
  --pass stock|debug|6.1|7.3
                       stock (default): then the bench smoke run and the
                       perf check.  debug: TAP files named debug.*, no
                       bench or perf; kmemleak cleared before the tests,
                       scanned after them and after unloading vhost_blk;
                       lockdep must still be on at the end.  6.1 (on
                       Debian's 6.1 LTS kernel) and 7.3 (Debian 13's
                       Linux 7.3): TAP files named 6.1.* or 7.3.*, no
                       bench or perf, rmmod at the end
  --fuzz-requests N    fuzzer requests per backend (hostile.sh --requests;
                       default: hostile.sh's)
  --stress-requests N  stress requests per backend (hostile.sh
                       --stress-requests; default: hostile.sh's)
  --hostile-only       only the hostile-guest suite, no selftest programs
  --backends LIST      the backends the selftest programs run on, of brd,
                       nullb, ext4 and nvmetcp (nvmetcp on the stock
                       kernel only), separated by spaces or commas; an
                       empty list runs none (default: all of the pass's);
                       NAME:PROG+PROG runs only those programs on NAME
  --hostile-backends LIST
                       the backends of the hostile-guest suite (default:
                       the same as --backends)
  -h, --help           this text
EOF
}

bad_usage() {
	echo "$me: $*" >&2
	exit 2
}

pass=stock
fuzz_requests=
stress_requests=
hostile_only=0
sel_list=-
hostile_list=-
while [ $# -gt 0 ]; do
	case "$1" in
	--pass)		[ $# -ge 2 ] || bad_usage "$1 needs an argument"
			pass=$2; shift 2 ;;
	--fuzz-requests) [ $# -ge 2 ] || bad_usage "$1 needs an argument"
			fuzz_requests=$2; shift 2 ;;
	--stress-requests) [ $# -ge 2 ] || bad_usage "$1 needs an argument"
			stress_requests=$2; shift 2 ;;
	--hostile-only)	hostile_only=1; shift ;;
	--backends)	[ $# -ge 2 ] || bad_usage "$1 needs an argument"
			sel_list=$2; shift 2 ;;
	--hostile-backends) [ $# -ge 2 ] || bad_usage "$1 needs an argument"
			hostile_list=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		bad_usage "unknown option $1 (see --help)" ;;
	*)		break ;;
	esac
done
case "$pass" in
stock)	prefix= ;;
debug)	prefix=debug.
	# The guest model's hang guard (10 s without a completion): three
	# times that on the debug kernel.  null_blk writes its 16 MB cache
	# back under a spinlock on every flush, page by page, which KASAN
	# makes slow; with the host loaded, blk-mq's flushes one after the
	# other took more than 10 s (2026-12-07: 4 flushes of one test, in
	# flight at the block layer after 11 s, a kick later too, and done
	# before the device was closed).
	export VHOST_BLK_TEST_HANG_MS=${VHOST_BLK_TEST_HANG_MS:-30000} ;;
6.1|7.3) prefix=$pass. ;;
*)	bad_usage "--pass: stock, debug, 6.1 or 7.3, not '$pass'" ;;
esac
if [ -n "$fuzz_requests" ] && ! [[ $fuzz_requests =~ ^[0-9]+$ ]]; then
	bad_usage "--fuzz-requests: '$fuzz_requests' is not a number"
fi
if [ -n "$stress_requests" ] && ! [[ $stress_requests =~ ^[0-9]+$ ]]; then
	bad_usage "--stress-requests: '$stress_requests' is not a number"
fi
[ $# -eq 1 ] || bad_usage "usage: $me [OPTIONS] BINDIR (see --help)"
bindir=$1
out=${VHOST_BLK_VM_OUT:?in_vm.sh runs inside the test VM (vm/run-vm.sh)}
programs=(vhost_blk_io_test vhost_blk_ctl_test vhost_blk_fastpath_test
	vhost_blk_trust_test)
[ "$hostile_only" = 0 ] || programs=()
here=$(cd "$(dirname "$0")" && pwd)
# hostile.sh, perf_check.sh and the NVMe/TCP scripts: with the selftests.
selftests=$(cd "$here/../selftests/vhost_blk" && pwd)
backends=(brd nullb ext4 nvmetcp)
# The debug kernel is built without an IP stack (vm/debug-kernel.config);
# Debian's 6.1 and 7.3 have NVMe/TCP, but their passes keep to the local
# disks.
[ "$pass" = stock ] || backends=(brd nullb ext4)

# check_backends LIST: every name in LIST (spaces or commas) is one of
# the pass's backends; "-" stands for all of them.
check_backends() {
	local n b found

	[ "$1" != - ] || return 0
	for n in ${1//,/ }; do
		found=0
		for b in "${backends[@]}"; do
			[ "$n" != "$b" ] || found=1
		done
		[ "$found" = 1 ] ||
			bad_usage "backend '$n': the $pass pass has ${backends[*]}"
	done
}

# pick_backends LIST...: the pass's backends named in any LIST, in the
# pass's order ("-" names all).
pick_backends() {
	local all=" ${*//,/ } " b picked=

	for b in "${backends[@]}"; do
		[[ $all == *" - "* || $all == *" $b "* ]] && picked+=" $b"
	done
	echo "${picked# }"
}
# NAME:PROG+PROG in the selftests' list: only those programs on NAME.
declare -A only_progs
sel_names=
for n in ${sel_list//,/ }; do
	if [[ $n == *:* ]]; then
		progs=${n#*:}
		for p in ${progs//+/ }; do
			[[ " ${programs[*]} " == *" $p "* ]] ||
				bad_usage "--backends $n: no selftest program '$p' (${programs[*]})"
		done
		only_progs[${n%%:*}]=${n#*:}
		n=${n%%:*}
	fi
	sel_names+=" $n"
done
[ "$sel_list" = - ] || sel_list=${sel_names# }
[ "$hostile_list" != - ] || hostile_list=$sel_list
check_backends "$sel_list"
check_backends "$hostile_list"
read -r -a sel_backends <<<"$(pick_backends "$sel_list")"
read -r -a hostile_names <<<"$(pick_backends "$hostile_list")"
# Set up what either needs; on 6.1 ext4 always, since the scratch files
# go there (below).
setup_list="${sel_backends[*]} ${hostile_names[*]}"
[ "$pass" != 6.1 ] || setup_list+=" ext4"
read -r -a backends <<<"$(pick_backends "$setup_list")"

note() { printf 'in_vm: %s\n' "$*"; }
# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$here/tap.sh"

# The setup_* functions print the backend's path; anything else goes to
# stderr.

setup_brd() {
	[ -b /dev/ram0 ] || { echo "/dev/ram0 does not exist" >&2; return 1; }
	echo /dev/ram0
}

# make_nullb NAME ATTR=VALUE...: a null_blk made through configfs with
# these attributes, then powered on; prints its device node.
make_nullb() {
	local name=$1 nb=/sys/kernel/config/nullb/$1 kv dev

	shift
	modprobe null_blk >&2 && mkdir "$nb" || return
	for kv in "$@" power=1; do
		echo "${kv#*=}" >"$nb/${kv%%=*}" || return
	done
	# Named after the configfs directory since 6.x, nullbN before.
	for _ in $(seq 50); do
		for dev in "/dev/$name" "/dev/nullb$(cat "$nb/index")"; do
			if [ -b "$dev" ]; then
				echo "$dev"
				return 0
			fi
		done
		sleep 0.1
	done
	echo "neither /dev/$name nor /dev/nullb$(cat "$nb/index") appeared" >&2
	return 1
}

# 256 MB kept in memory behind a 16 MB volatile write cache (so that
# flushes and FUA have something to reach), with discard, 512-byte
# blocks, each request completed by a timer 50 us after submission.
setup_nullb() {
	make_nullb nullb-vhost-blk size=256 memory_backed=1 cache_size=16 \
		discard=1 blocksize=512 irqmode=2 completion_nsec=50000
}

# shellcheck source=../selftests/vhost_blk/nvme_tcp.sh
. "$selftests/nvme_tcp.sh"

# 256 MB in memory, with discard, exported over NVMe/TCP; the target
# completes it.
setup_nvmetcp() {
	local dev

	dev=$(make_nullb nullb-nvmet size=256 memory_backed=1 discard=1 \
		blocksize=512) || return
	nvme_tcp_up vhost-blk-tests "$dev"
}

setup_ext4() {
	local img=/tmp/vhost-blk-ext4.img mnt=/tmp/vhost-blk-ext4 loop

	modprobe -a loop ext4 >&2 || return
	truncate -s 384M "$img" || return
	loop=$(losetup --find --show "$img") || return
	mkfs.ext4 -q -F "$loop" >&2 || return
	mkdir -p "$mnt" && mount -t ext4 "$loop" "$mnt" >&2 || return
	truncate -s 128M "$mnt/disk.img" || return
	echo "$mnt/disk.img"
}

run_backend() {
	local name=$1 dev=$2 prog tap totals

	for prog in "${programs[@]}"; do
		if [ -n "${only_progs[$name]:-}" ] &&
		   [[ "+${only_progs[$name]}+" != *"+$prog+"* ]]; then
			continue
		fi
		tap=$out/$prefix$name.$prog.tap
		VHOST_BLK_TEST_DEV=$dev "$bindir/$prog" >"$tap" 2>&1
		totals=$(sed -n 's/^# Totals: //p' "$tap")
		note "$name ($dev) $prog: ${totals:-no totals, see $tap}"
		grep '^not ok ' "$tap" | sed 's/^/in_vm:   /'
	done
}

# vhost_blk_io_test puts a loop device over a scratch file, whatever the
# backend: load loop before the first one.
modprobe loop || note "cannot load loop: its tests will be skipped"

# ---- kmemleak and lockdep (the debug kernel)

kmemleak=/sys/kernel/debug/kmemleak
# kmemleak never reports an object younger than 5 s.
kmemleak_min_age=5

# kmemleak_cmd WORD: write WORD to the kmemleak file.  It refuses (EPERM)
# once kmemleak has turned itself off.
kmemleak_cmd() {
	echo "$1" 2>/dev/null >"$kmemleak"
}

# kmemleak_report: wait past the minimum age and scan twice.  A scan
# reports an unreferenced object only if its contents did not change
# since the scan before (the first scan that sees an object takes its
# checksum), so a leak made since the last scan shows in the second.
kmemleak_report() {
	sleep $((kmemleak_min_age + 1))
	kmemleak_cmd scan && kmemleak_cmd scan
}

# Whatever boot and module loading left behind is not ours: have it
# reported, then mark it as seen ("clear" greys only reported objects).
kmemleak_forget() {
	kmemleak_report && kmemleak_cmd clear
}

# kmemleak_scan WHEN LOG: a result in the TAP stream, "no leak WHEN", and
# any report in LOG and on the console.
kmemleak_scan() {
	local desc="kmemleak: no leak $1" log=$2

	if ! kmemleak_report || ! cat "$kmemleak" >"$log"; then
		tap_not_ok "$desc" "kmemleak refused the scan: it turned itself off (see dmesg.log)"
		note "kmemleak $1: cannot scan (kmemleak off?)"
		return
	fi
	if [ -s "$log" ]; then
		tap_not_ok "$desc: $(grep -c '^unreferenced object' "$log") unreferenced objects (full report: $log)" \
			"$(head -n 400 "$log")"
		note "kmemleak $1: unreferenced objects:"
		sed 's/^/in_vm:   /' "$log"
	else
		tap_ok "$desc"
		note "kmemleak $1: none"
	fi
}

if [ "$pass" = debug ]; then
	if [ ! -e "$kmemleak" ]; then
		kmemleak_ready=0
		note "kmemleak: $kmemleak does not exist (kernel without CONFIG_DEBUG_KMEMLEAK?)"
	elif kmemleak_forget; then
		kmemleak_ready=1
	else
		kmemleak_ready=0
		note "kmemleak: the scan before the tests failed (kmemleak off?)"
	fi
fi

# ---- the selftest programs on each backend


# Every backend is set up before the first test runs.
errs=$(mktemp)
hostile_backends=()
declare -A devs
for name in "${backends[@]}"; do
	if dev=$("setup_$name" 2>"$errs") && [ -n "$dev" ]; then
		devs[$name]=$dev
	else
		# Counted as one failed test.
		reason=$(tr '\n' ' ' <"$errs")
		note "$name: setup failed: ${reason:-no reason given}"
		tap_file "$out/$prefix$name.setup.tap" not_ok "$name.setup" "$reason"
	fi
done
rm -f "$errs"

# The tests' scratch files (a file backend of their own, a loop device's
# image) go to /tmp, a tmpfs, when the backend is a block device.  tmpfs
# has O_DIRECT only since 6.6: on 6.1 they go to the ext4 file system.
if [ "$pass" = 6.1 ] && [ -n "${devs[ext4]:-}" ]; then
	export VHOST_BLK_SCRATCH_DIR=${devs[ext4]%/*}
	note "scratch files in $VHOST_BLK_SCRATCH_DIR (no O_DIRECT on tmpfs before 6.6)"
fi

for name in "${sel_backends[@]}"; do
	[ -z "${devs[$name]:-}" ] || run_backend "$name" "${devs[$name]}"
done
for name in "${hostile_names[@]}"; do
	[ -z "${devs[$name]:-}" ] || hostile_backends+=("$name=${devs[$name]}")
done

# Completion polling brings its own backends (null_blk devices with and
# without poll queues, a scratch file): run once, as cpoll.
if [ "$hostile_only" = 0 ]; then
	tap=$out/${prefix}cpoll.vhost_blk_cpoll_test.tap
	"$bindir/vhost_blk_cpoll_test" >"$tap" 2>&1
	totals=$(sed -n 's/^# Totals: //p' "$tap")
	note "cpoll vhost_blk_cpoll_test: ${totals:-no totals, see $tap}"
	grep '^not ok ' "$tap" | sed 's/^/in_vm:   /'
fi

# The hostile-guest suite: the malformed-request contract, the seeded
# fuzzer (by default 100,000 requests over the backends) and the stress
# test.
if [ "${#hostile_backends[@]}" -gt 0 ]; then
	tap=$out/${prefix}hostile.tap
	bash "$selftests/hostile.sh" --bindir "$bindir" --log "$out" \
		${fuzz_requests:+--requests "$fuzz_requests"} \
		${stress_requests:+--stress-requests "$stress_requests"} \
		"${hostile_backends[@]}" >"$tap" 2>"$out/${prefix}hostile.log"
	note "hostile: $(grep -c '^ok' "$tap") ok, $(grep -c '^not ok' "$tap") not ok"
	grep '^not ok ' "$tap" | sed 's/^/in_vm:   /'
fi

if [ "$pass" = stock ]; then
	# NVMe/TCP path failure: the target's port down for 5 s under a
	# writing guest, then back before ctrl_loss_tmo.
	tap=$out/nvmetcp.pathfail.tap
	bash "$selftests/nvme_tcp_pathfail.sh" "$bindir" >"$tap" 2>"$out/nvmetcp.pathfail.log"
	note "nvmetcp path failure: $(grep -c '^ok' "$tap") ok, $(grep -c '^not ok' "$tap") not ok"
	grep '^not ok ' "$tap" | sed 's/^/in_vm:   /'

	# vhost-blk-bench --smoke: every back-end kind runs and its counts
	# add up.
	bash "$here/../../vhost-blk-bench/bench.sh" --smoke \
		--out "$out/bench-smoke" >"$out/bench.smoke.tap" 2>"$out/bench.smoke.log"
	note "bench smoke: $(grep -c '^ok' "$out/bench.smoke.tap") ok, $(grep -c '^not ok' "$out/bench.smoke.tap") not ok"

	# The tracepoints through perf, on brd.
	bash "$selftests/perf_check.sh" "$bindir" /dev/ram0 >"$out/perf.tap" 2>&1
	note "perf: $(grep -c '^ok' "$out/perf.tap") of 4 ok"
	exit 0
fi

# 6.1 and 7.3: the module unloads after the tests.
if [ "$pass" = 6.1 ] || [ "$pass" = 7.3 ]; then
	if msg=$(rmmod vhost_blk 2>&1); then
		tap_file "$out/${prefix}unload.tap" ok "rmmod vhost_blk"
	else
		tap_file "$out/${prefix}unload.tap" not_ok "rmmod vhost_blk: $msg"
		note "rmmod vhost_blk failed: $msg"
	fi
	exit 0
fi

# The debug kernel: leaks, after the tests and after unloading the module
# (what it allocated and did not free becomes unreferenced then).
tap_start --quiet "$out/${prefix}kmemleak.tap"
tap_plan 3
if [ "$kmemleak_ready" = 1 ]; then
	kmemleak_scan "after the tests" "$out/${prefix}kmemleak.tests.log"
else
	tap_not_ok "kmemleak: no leak after the tests" "kmemleak not available (see in_vm's notes)"
fi
kmemleak_cmd clear
if msg=$(rmmod vhost_blk 2>&1); then
	tap_ok "rmmod vhost_blk"
else
	tap_not_ok "rmmod vhost_blk: $msg"
	note "rmmod vhost_blk failed: $msg"
fi
# The debug kernel's module is built for gcov (make module-debug): its
# counts, for kernel_coverage.sh.  The kernel keeps an unloaded module's
# (gcov_persist), so they include the module's exit.
mkdir -p "$out/gcov"
find /sys/kernel/debug/gcov -name blk.gcda -exec cp {} "$out/gcov/" \; 2>/dev/null
if [ -s "$out/gcov/blk.gcda" ]; then
	note "gcov: blk.gcda copied to $out/gcov"
else
	note "gcov: no blk.gcda under /sys/kernel/debug/gcov (CONFIG_GCOV_KERNEL? make module-debug?)"
fi
if [ "$kmemleak_ready" = 1 ]; then
	kmemleak_scan "after unloading vhost_blk" "$out/${prefix}kmemleak.unload.log"
else
	tap_not_ok "kmemleak: no leak after unloading vhost_blk" "kmemleak not available"
fi
tap_end

# lockdep must not have turned itself off: then lockdep_assert_held() and
# every other lock check stopped running.
tap=$out/${prefix}lockdep.tap
debug_locks=$(awk '$1 == "debug_locks:" { print $2 }' /proc/lockdep_stats 2>/dev/null)
case "$debug_locks" in
1)	tap_file "$tap" ok "lockdep still on at the end (debug_locks 1)" ;;
0)	tap_file "$tap" not_ok "lockdep still on at the end: it turned itself off after a report or a taint (see dmesg.log)" ;;
*)	tap_file "$tap" not_ok "lockdep still on at the end: no debug_locks in /proc/lockdep_stats (kernel without lockdep?)" ;;
esac
note "lockdep: debug_locks ${debug_locks:-unknown}"
# How full lockdep's tables got (CONFIG_LOCKDEP_BITS and friends).
cat /proc/lockdep_stats >"$out/${prefix}lockdep_stats.log" 2>/dev/null
exit 0
