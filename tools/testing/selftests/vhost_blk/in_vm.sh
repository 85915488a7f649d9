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
#
# leaving one TAP file per program and backend, BACKEND.PROGRAM.tap, in
# $VHOST_BLK_VM_OUT.  A backend that cannot be set up leaves
# BACKEND.setup.tap with one failed test instead.
#
# Usage: in_vm.sh BINDIR

set -u
# A program that would skip for want of /dev/vhost-blk or of its backend
# fails instead (vblk_test.h, hostile.sh).
export VHOST_BLK_TEST_STRICT=${VHOST_BLK_TEST_STRICT:-1}

bindir=${1:?usage: in_vm.sh BINDIR}
out=${VHOST_BLK_VM_OUT:?in_vm.sh runs inside the test VM (vm/run-vm.sh)}
programs=(vhost_blk_io_test vhost_blk_ctl_test vhost_blk_fastpath_test
	vhost_blk_trust_test)

note() { printf 'in_vm: %s\n' "$*"; }

# The setup_* functions print the backend's path; anything else goes to
# stderr.

setup_brd() {
	[ -b /dev/ram0 ] || { echo "/dev/ram0 does not exist" >&2; return 1; }
	echo /dev/ram0
}

setup_nullb() {
	local name=nullb-vhost-blk nb dev i

	nb=/sys/kernel/config/nullb/$name
	modprobe null_blk >&2 || return
	mkdir "$nb" || return
	# 256 MB kept in memory behind a 16 MB volatile write cache (so
	# that flushes and FUA have something to reach), with discard,
	# 512-byte blocks, each request completed by a timer 50 us after
	# submission.
	echo 256 >"$nb/size" &&
		echo 1 >"$nb/memory_backed" &&
		echo 16 >"$nb/cache_size" &&
		echo 1 >"$nb/discard" &&
		echo 512 >"$nb/blocksize" &&
		echo 2 >"$nb/irqmode" &&
		echo 50000 >"$nb/completion_nsec" &&
		echo 1 >"$nb/power" || return
	# Named after the configfs directory since 6.x, nullbN before.
	for i in $(seq 50); do
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
		tap=$out/$name.$prog.tap
		VHOST_BLK_TEST_DEV=$dev "$bindir/$prog" >"$tap" 2>&1
		totals=$(sed -n 's/^# Totals: //p' "$tap")
		note "$name ($dev) $prog: ${totals:-no totals, see $tap}"
		grep '^not ok ' "$tap" | sed 's/^/in_vm:   /'
	done
}

# vhost_blk_io_test puts a loop device over a scratch file, whatever the
# backend: load loop before the first one.
modprobe loop || note "cannot load loop: its tests will be skipped"

errs=$(mktemp)
hostile_backends=()
for name in brd nullb ext4; do
	if dev=$("setup_$name" 2>"$errs") && [ -n "$dev" ]; then
		run_backend "$name" "$dev"
		hostile_backends+=("$name=$dev")
	else
		# Counted as one failed test.
		reason=$(tr '\n' ' ' <"$errs")
		note "$name: setup failed: ${reason:-no reason given}"
		printf 'TAP version 13\n1..1\nnot ok 1 %s.setup # %s\n' \
			"$name" "$reason" >"$out/$name.setup.tap"
	fi
done
rm -f "$errs"

# The hostile-guest suite: the malformed-request contract, the seeded
# fuzzer (100,000 requests over the backends) and the stress test.
if [ "${#hostile_backends[@]}" -gt 0 ]; then
	bash "$(dirname "$0")/hostile.sh" --bindir "$bindir" --log "$out" \
		"${hostile_backends[@]}" >"$out/hostile.tap" 2>"$out/hostile.log"
	note "hostile: $(grep -c '^ok' "$out/hostile.tap") ok, $(grep -c '^not ok' "$out/hostile.tap") not ok"
	grep '^not ok ' "$out/hostile.tap" | sed 's/^/in_vm:   /'
fi

# vhost-blk-bench --smoke: every back-end kind runs and its counts add up.
bash "$(dirname "$0")/../../../vhost-blk-bench/bench.sh" --smoke \
	--out "$out/bench-smoke" >"$out/bench.smoke.tap" 2>"$out/bench.smoke.log"
note "bench smoke: $(grep -c '^ok' "$out/bench.smoke.tap") ok, $(grep -c '^not ok' "$out/bench.smoke.tap") not ok"

# The tracepoints through perf, on brd.
bash "$(dirname "$0")/perf_check.sh" "$bindir" /dev/ram0 >"$out/perf.tap" 2>&1
note "perf: $(grep -c '^ok' "$out/perf.tap") of 4 ok"
exit 0
