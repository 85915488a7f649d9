#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Stage 2 of the vhost-blk test VM, run by the initramfs /init in a chroot
# whose root is the host root (read-only 9p) under a tmpfs overlay.
# run-vm.sh copies this file into the per-run share, mounted at
# /.vhost-blk-vm, next to "config" (written by run-vm.sh).
#
# Loads the modules (and mounts configfs), runs the command in the caller's
# directory with the console as stdout and stderr, saves the kernel log to
# the output directory and reports the command's exit status both in
# /.vhost-blk-vm/status and as a marker line on the console.  Status 125
# means the VM itself could not be set up.

set -u

run_dir=/.vhost-blk-vm
VM_NONCE=none

note() { printf 'run-vm: VM: %s\n' "$*"; }

out_mounted=0
finish() {
	local rc=$1

	sync
	if [ "$out_mounted" = 1 ]; then
		dmesg >"$VM_OUT/dmesg.log" 2>&1 ||
			note "could not save the kernel log to $VM_OUT/dmesg.log"
	fi
	echo "$rc" >"$run_dir/status.tmp" && mv "$run_dir/status.tmp" "$run_dir/status"
	sync
	printf 'VHOST-BLK-VM-STATUS-%s=%d\n' "$VM_NONCE" "$rc"
	exit 0
}

fail() {
	note "$*"
	finish 125
}

# shellcheck source=/dev/null
. "$run_dir/config" || fail "cannot read $run_dir/config"

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Stage 1 mounted /proc, /sys, /dev, debugfs, tracefs, the tmpfs dirs and
# the output directory.
out_mounted=1

krel=
read -r krel </proc/sys/kernel/osrelease
[ "$krel" = "$VM_KREL" ] || fail "running kernel '$krel', expected $VM_KREL"
# A kernel whose modules are not under the host's /lib/modules (the debug
# kernel, in its cache): link them in, on the overlay.
if [ -n "${VM_MODDIR:-}" ]; then
	ln -sfn "$VM_MODDIR" "/lib/modules/$VM_KREL" ||
		fail "cannot link /lib/modules/$VM_KREL to $VM_MODDIR"
fi
[ -d "/lib/modules/$VM_KREL" ] ||
	fail "/lib/modules/$VM_KREL is not visible in the VM"

# One modprobe for all (each exec of a dynamically linked tool costs
# 0.1 to 0.4 s under TCG), including whatever vhost_blk.ko depends on
# (modules.dep does not know it).  brd takes rd_nr and rd_size from the
# kernel command line (brd.rd_nr=1 brd.rd_size=KiB).
mods="configfs vhost_iotlb vhost null_blk brd"
if [ "$VM_NO_MODULE" = 0 ]; then
	[ -f "$VM_KO" ] ||
		fail "$VM_KO does not exist (build it with 'make module' or use --no-module)"
	# The host's static busybox starts much faster than kmod's modinfo.
	deps=$(busybox modinfo -F depends "$VM_KO" 2>/dev/null ||
	       modinfo -F depends "$VM_KO" 2>/dev/null)
	mods="$mods ${deps//,/ }"
fi
# shellcheck disable=SC2086
msg=$(modprobe -a $mods 2>&1) || fail "modprobe -a $mods failed: $msg"
mount -t configfs configfs /sys/kernel/config ||
	fail "mounting configfs on /sys/kernel/config failed"
if [ "$VM_NO_MODULE" = 0 ]; then
	msg=$(insmod "$VM_KO" 2>&1) || fail "insmod $VM_KO failed: $msg"
fi

cd "$VM_CWD" || fail "cannot change to the working directory $VM_CWD"

up='?'
read -r up _ </proc/uptime
printf 'VHOST-BLK-VM-BEGIN-%s uptime=%s\n' "$VM_NONCE" "$up"
env -i "${VM_ENV[@]}" "${VM_CMD[@]}" </dev/null
rc=$?
finish "$rc"
