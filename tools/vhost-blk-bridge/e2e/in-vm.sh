#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The end-to-end test of vhost-blk-bridge, run INSIDE the test VM (see
# run.sh): /dev/vhost-blk is there, and so are the host's QEMU and fio.
#
#   1. vhost-blk-bridge serves a 256 MiB disk (a file on tmpfs, or /dev/ram0);
#      a second bridge on the same disk fails to start (its lock)
#   2. boot 1 (rw): a nested QEMU guest with -device vhost-user-blk-pci
#      checks the serial, runs fio write+verify at iodepth 1 and 16,
#      switches its write cache to writethrough and back (cache_type:
#      QEMU's SET_CONFIG, which the bridge log shows), mkfs, files, fsck,
#      remount and checksums
#   3. the image is checked from outside: e2fsck, the files' checksums,
#      fio --verify_only of both regions
#   4. boot 2 (reconnect): a new QEMU on the same bridge re-reads all of
#      it, its guest memory on 2 MiB huge pages (memfd hugetlb=on), with a
#      128 MiB DIMM hot-plugged while its fio reads (the bridge gets one
#      more ADD_MEM_REG, the reads go on and verify; before it,
#      exits-per-io.sh counts what each read costs, for 5 s); with a
#      file backend the image then grows by 64 MiB under the running
#      guest (SIGHUP to the bridge): the guest sees the new size and
#      writes and verifies the new area
#   5. boot 3 (migrate): live migration, with reads running, to a second
#      QEMU on a second bridge on the same disk (both --shared); the data
#      read during and after it verifies, and the destination takes new
#      writes.  Not with --no-migrate (make check leaves it to make
#      check-long: about 6 min of the run under TCG)
#   6. boot 4 (ro): the bridge again with --read-only, started as systemd
#      starts it for vhost-blk-bridge@.socket (systemd-socket-activate: the
#      socket is passed in LISTEN_FDS, group 4242, mode 0660) with
#      --allow-uid 4242: a connection from root is refused and logged, and
#      the guest's QEMU runs as uid 4242, unprivileged.  The guest sees a
#      read-only disk, a write is refused, reads verify; the image does not
#      change
#   7. boot 5 (libvirt): Debian's libvirtd, started here, boots the domain
#      of Documentation/virt/vhost-blk/vhost-blk-bridge-domain.xml as it is,
#      its QEMU as user libvirt-qemu (group kvm among its groups), on a
#      bridge started as the shipped systemd units and instance.conf start
#      it: as user vhost-blk-bridge (the shipped sysusers.d file), in group
#      kvm, with no capability; the guest finds boot 1's
#      files, and writes and verifies a new region, which the host then
#      verifies too; with a file backend it then asks for more room (the
#      file GROW on its disk), and the image grows under it (SIGHUP, as
#      systemctl reload sends).  Not with --no-libvirt (make check leaves
#      it to make check-long and to the Debian 13 machine, whose real
#      systemd and libvirt boot the same guest from the same domain XML)
#
# Prints a summary with the time of every phase; exit status 0 if all
# passed.  Every result also goes to $out/results as it comes ("pass NAME
# [detail]", "fail NAME [detail]", "time NAME SECONDS"; "complete" last),
# for run.sh's TAP file.
#
# With --demo SECONDS (make demo, demo.sh): start the bridge, boot the guest
# once to run fio-demo.job, SECONDS per job, stop the bridge.
set -uo pipefail

me=vbb-e2e
e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$e2e_dir/../../.." && pwd)
kernel= tools= bridge= out= ko= backend=file queues=1 smp=1 guest_mem=256
qd1=2m qd16=8m boot_timeout=600 poll_us=0 probe=0 loglevel=4 demo=
migrate=1 libvirt=1

while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--tools) tools=$2; shift 2 ;;
	--bridge) bridge=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--ko) ko=$2; shift 2 ;;
	--backend) backend=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--qd1-size) qd1=$2; shift 2 ;;
	--qd16-size) qd16=$2; shift 2 ;;
	--boot-timeout) boot_timeout=$2; shift 2 ;;
	--poll-us) poll_us=$2; shift 2 ;;
	--probe) probe=1; loglevel=7; shift ;;
	--demo) demo=$2; shift 2 ;;
	--no-migrate) migrate=0; shift ;;
	--no-libvirt) libvirt=0; shift ;;
	*) echo "$me: unknown argument $1" >&2; exit 2 ;;
	esac
done

msg() { printf '%s: %s\n' "$me" "$*"; }
die() { msg "error: $*"; exit 1; }
# shellcheck source=lib.sh
. "$e2e_dir/lib.sh"

for f in "$kernel" "$tools" "$bridge"; do
	[ -e "$f" ] || die "$f not found"
done
mkdir -p "$out" || die "cannot create $out"

failures=0
results=$out/results
: >"$results" || die "cannot write $results"
declare -a summary
t_all=$(now)
if [ -n "$ko" ]; then
	modprobe vhost || die "modprobe vhost failed"
	grep -q '^vhost_blk ' /proc/modules && rmmod vhost_blk
	insmod "$ko" || die "insmod $ko failed"
fi
[ -c /dev/vhost-blk ] || die "/dev/vhost-blk does not exist (is vhost_blk.ko loaded?)"

work=$(mktemp -d /tmp/vbb-e2e.XXXXXX)
sock=$work/vbb.sock
serial=vbb-e2e-$$
case "$backend" in
file)
	disk=$work/disk.img
	truncate -s 256M "$disk" || die "cannot create $disk"
	;;
brd)
	disk=/dev/ram0
	[ -b "$disk" ] || die "$disk does not exist"
	dd if=/dev/zero of="$disk" bs=1M count=256 status=none oflag=direct ||
		die "cannot clear $disk"
	;;
nullb)
	# 256 MiB of null_blk kept in memory (configfs), completed from a
	# softirq: a block device with next to no cost of its own.
	nb=/sys/kernel/config/nullb/vbb-e2e
	{ [ -d "$nb" ] || mkdir "$nb"; } &&
		echo 256 >"$nb/size" && echo 1 >"$nb/memory_backed" &&
		echo 1 >"$nb/power" || die "cannot make a null_blk device in $nb"
	disk=
	for i in $(seq 50); do
		for dev in /dev/vbb-e2e "/dev/nullb$(cat "$nb/index")"; do
			[ -b "$dev" ] && disk=$dev && break 2
		done
		sleep 0.1
	done
	[ -n "$disk" ] || die "no block device for $nb"
	;;
*)	die "--backend: file, brd or nullb, not $backend" ;;
esac

bridge_pid=
lv_pids=()	# libvirt's daemons (boot 5)
start_bridge() {	# start_bridge LOG [options]; on $BRIDGE_SOCK if set
	local log=$1 s=${BRIDGE_SOCK:-$sock} i

	shift
	rm -f "$s"
	"$bridge" --socket "$s" --backend "$disk" --serial "$serial" \
		--num-queues "$queues" --poll-us "$poll_us" "$@" >"$log" 2>&1 &
	bridge_pid=$!
	for i in $(seq 100); do
		[ -S "$s" ] && return 0
		kill -0 "$bridge_pid" 2>/dev/null || break
		sleep 0.1
	done
	sed 's/^/  bridge: /' "$log"
	die "the bridge did not start (log: $log)"
}

# The frontend user of boot 4, as libvirt-qemu would be: no privilege, no
# group of the socket's but its own.
vm_uid=4242

# start_bridge_activated LOG [options]: as systemd starts the bridge of
# vhost-blk-bridge@.socket.  systemd-socket-activate listens on $sock and,
# at the first connection, execs the bridge with the socket in LISTEN_FDS
# (bridge_pid becomes the bridge's).  The socket gets what SocketGroup=
# and SocketMode= would give it: the frontend user's group, 0660.
start_bridge_activated() {
	local log=$1 i

	shift
	rm -f "$sock"
	systemd-socket-activate -l "$sock" "$bridge" --backend "$disk" \
		--serial "$serial" --num-queues "$queues" --poll-us "$poll_us" \
		"$@" >"$log" 2>&1 &
	bridge_pid=$!
	for i in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "$bridge_pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -S "$sock" ] && chgrp "$vm_uid" "$sock" && chmod 0660 "$sock" && return 0
	sed 's/^/  bridge: /' "$log"
	die "systemd-socket-activate did not listen on $sock (log: $log)"
}

stop_bridge() {	# stop_bridge NAME: SIGTERM, expect exit status 0
	local rc

	kill -TERM "$bridge_pid" 2>/dev/null
	wait "$bridge_pid"
	rc=$?
	bridge_pid=
	if [ "$rc" = 0 ]; then record "$1" pass; else record "$1" fail "exit status $rc"; fi
}

cleanup() {
	[ -z "$bridge_pid" ] || kill -TERM "$bridge_pid" 2>/dev/null
	[ "${#lv_pids[@]}" = 0 ] || kill -TERM "${lv_pids[@]}" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

e2e_clock_args

# The guest's console input: a FIFO that this shell keeps open for writing,
# so that QEMU never reads end-of-file from it and we can answer the guest.
console_in=$work/console.in
mkfifo "$console_in" || die "cannot create $console_in"
exec {console_fd}<>"$console_in"

# serve_stats_request LOG: when the guest asks (VBB-E2E-STATS-REQUEST, while
# its disk is open and has served I/O), SIGUSR1 the bridge, wait until the
# bridge has printed the counters, then let the guest go on.  The guest
# waits for the answer, so this does not depend on how fast anything runs.
serve_stats_request() {
	local log=$1 qemu_pid=$2

	wait_line "$log" '^VBB-E2E-STATS-REQUEST' "$qemu_pid" || return
	kill -USR1 "$bridge_pid"
	wait_line "$out/bridge-rw.log" 'stats signal' "$bridge_pid"
	# The bridge's locked memory (--pin-memory), while the guest runs.
	awk '/^VmLck:/ { print $2 }' "/proc/$bridge_pid/status" \
		>"$out/bridge-vmlck" 2>/dev/null
	echo VBB-E2E-GO >&"$console_fd"
}

# What runs QEMU: nothing (root), or setpriv to run it as another user.
qemu_as=()
# Further options of the guest's memory backend (hugetlb=on for boot 2).
mem_opts=

# Online resize (boot 2, a file backend: it can grow): when the guest asks
# (VBB-E2E-RESIZE-REQUEST), grow the image by 64 MiB, SIGHUP the bridge,
# wait for its "config change sent" line, then let the guest go on.
resize=0
[ "$backend" = file ] && resize=1
serve_resize_request() {
	local log=$1 qemu_pid=$2 blog=$3

	wait_line "$log" '^VBB-E2E-RESIZE-REQUEST' "$qemu_pid" || return
	truncate -s +64M "$disk"
	kill -HUP "$bridge_pid"
	wait_line "$blog" 'config change sent to the frontend' "$bridge_pid"
	echo VBB-E2E-GO >&"$console_fd"
}

# Memory hot-plug (boot 2): QEMU starts with room for one 128 MiB DIMM and
# a monitor; when the guest asks (VBB-E2E-HOTPLUG-REQUEST, while its fio
# runs), plug one in (object_add + device_add pc-dimm), wait until the
# bridge has had one more ADD_MEM_REG (its --verbose log), and let the
# guest go on.  The guest has no ACPI and does not online the memory, but
# QEMU maps the DIMM for vhost at once.
hotplug_mem=
qemu_extra=()
hotplug_mon=$work/hmp-hotplug.sock
serve_hotplug_request() {
	local log=$1 qemu_pid=$2 blog=$3 before n i

	wait_line "$log" '^VBB-E2E-HOTPLUG-REQUEST' "$qemu_pid" || return
	# The guest reads now, one 64 KiB read at a time: what each costs
	# it, counted for 5 s (no KVM here: the proxy counts).
	exits_per_io "$(pgrep -P "$qemu_pid" -x qemu-system-x86 | head -n 1)"
	before=$(grep -c '<- ADD_MEM_REG' "$blog")
	hmp "$hotplug_mon" "object_add memory-backend-memfd,id=hp1,size=${hotplug_mem}M,share=on" \
		>"$out/hotplug-hmp.log"
	hmp "$hotplug_mon" "device_add pc-dimm,id=dimm1,memdev=hp1" >>"$out/hotplug-hmp.log"
	n=$before
	for i in $(seq 600); do
		n=$(grep -c '<- ADD_MEM_REG' "$blog")
		[ "$n" -gt "$before" ] && break
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.1
	done
	hmp "$hotplug_mon" "info memory-devices" >>"$out/hotplug-hmp.log"
	echo "hotplug ADD_MEM_REG $before $n" >"$out/hotplug.result"
	echo VBB-E2E-GO >&"$console_fd"
}

# exits_per_io QEMU_PID: tools/vhost-blk-bench/exits-per-io.sh on the
# guest reading at iodepth 1, for 5 s (in serve_hotplug_request's
# subshell: exits_per_io_check records what it saw).
exits_per_io() {
	rm -f "$out/exits-per-io.json"
	[ -n "$1" ] || { echo "no QEMU process under the boot's timeout" >"$out/exits-per-io.log"; return; }
	bash "$repo/tools/vhost-blk-bench/exits-per-io.sh" --pid "$1" \
		--owner "$bridge_pid" --seconds 5 --json "$out/exits-per-io.json" \
		>"$out/exits-per-io.log" 2>&1
}

# exits_per_io_check: without KVM it counted the module's tracepoints only,
# and said so.  Each 64 KiB read is a request, a guest kick and a
# notification: both ratios must be 1, or near it (a window may cut a
# request between its kick and its completion).
exits_per_io_check() {
	local j=$out/exits-per-io.json

	if [ ! -s "$j" ]; then
		record exits-per-io:ran fail "$(tail -n 1 "$out/exits-per-io.log" 2>/dev/null)"
		return
	fi
	sed 's/^/  /' "$out/exits-per-io.log"
	record exits-per-io:ran pass "$(jq -c .counts "$j")"
	if [ "$(jq -r '.mode' "$j")" = proxy ] &&
	   grep -q 'cannot be counted' "$out/exits-per-io.log"; then
		record exits-per-io:says-proxy-without-kvm pass
	else
		record exits-per-io:says-proxy-without-kvm fail "mode $(jq -r .mode "$j")"
	fi
	if jq -e '.counts.completed >= 20 and
		(.per_request.kicks | . >= 0.8 and . <= 1.2) and
		(.per_request.sent | . >= 0.8 and . <= 1.2)' "$j" >/dev/null; then
		record exits-per-io:one-kick-one-irq-per-read pass "$(jq -c .per_request "$j")"
	else
		record exits-per-io:one-kick-one-irq-per-read fail "$(jq -c '[.counts, .per_request]' "$j")"
	fi
}

# boot MODE: one nested guest against the running bridge.
boot() {
	local mode=$1 log=$out/guest-$1.log t0 rc qemu_pid helper=

	t0=$(now)
	: >"$log"
	guest_qemu "$mode" "$sock" "${qemu_extra[@]}" <"$console_in" >"$log" 2>&1 &
	qemu_pid=$!
	if [ "$mode" = rw ]; then
		serve_stats_request "$log" "$qemu_pid" &
		helper=$!
	elif [ "$mode" = reconnect ]; then
		{
			serve_hotplug_request "$log" "$qemu_pid" "$out/bridge-rw.log"
			[ "$resize" = 0 ] ||
				serve_resize_request "$log" "$qemu_pid" "$out/bridge-rw.log"
		} &
		helper=$!
	fi
	wait "$qemu_pid"
	rc=$?
	[ -z "$helper" ] || { kill "$helper" 2>/dev/null; wait "$helper" 2>/dev/null; }
	timing "boot-$mode(total)" "$(elapsed "$t0")"
	[ "$rc" = 124 ] && record "boot-$mode" fail "timed out after $boot_timeout s"
	guest_done "$mode" "$log" "QEMU status $rc"
}

# guest_done MODE LOG WHAT: the boot passed if the guest got to its end
# (VBB-E2E-DONE); then its results.  WHAT says how its QEMU ended.
guest_done() {
	local mode=$1 log=$2

	if ! grep -q '^VBB-E2E-DONE' "$log"; then
		record "boot-$mode" fail "no VBB-E2E-DONE ($3, log $log)"
		tail -n 30 "$log" | sed 's/^/  guest: /'
		return
	fi
	record "boot-$mode" pass "$(tr -d '\r' <"$log" |
		awk '/^VBB-E2E-BOOTED/ { printf "kernel+init %.1fs", $2 }')"
	guest_results "$mode" "$log"
}

# The migration boot: the guest starts on QEMU A (bridge A) and, when it
# has written its pattern and is re-reading it, moves to QEMU B (bridge B,
# same disk, -incoming).  The guest reads on until B's console says the
# migration is done, so the I/O spans all of it whatever the speed.
migrate_boot() {
	local src_log=$out/guest-migrate-src.log dst_log=$out/guest-migrate-dst.log
	local mon=$work/mon.sock mig=$work/mig.sock dst_in=$work/console-dst.in
	local dst_sock=$work/vbb-dst.sock src_pid dst_pid src_bridge dst_bridge
	local t0 st= i dst_fd src_reads dst_reads

	# Both on the disk at once: --shared, or the second one finds the
	# first one's lock.
	start_bridge "$out/bridge-migrate-src.log" --verbose --shared
	src_bridge=$bridge_pid
	BRIDGE_SOCK=$dst_sock start_bridge "$out/bridge-migrate-dst.log" \
		--verbose --shared
	dst_bridge=$bridge_pid
	mkfifo "$dst_in" || die "cannot create $dst_in"
	exec {dst_fd}<>"$dst_in"

	t0=$(now)
	: >"$src_log"
	: >"$dst_log"
	guest_qemu migrate "$dst_sock" -incoming "unix:$mig" \
		<"$dst_in" >"$dst_log" 2>&1 &
	dst_pid=$!
	for i in $(seq 300); do
		[ -S "$mig" ] && break
		kill -0 "$dst_pid" 2>/dev/null || break
		sleep 0.1
	done
	guest_qemu migrate "$sock" -monitor "unix:$mon,server,nowait" \
		</dev/null >"$src_log" 2>&1 &
	src_pid=$!

	# The guest asks once its I/O runs; then migrate and wait for the end.
	if wait_line "$src_log" '^VBB-E2E-MIGRATE-NOW' "$src_pid"; then
		migrate_wait "$mon" "unix:$mig" "$src_pid"
		st=$migrate_status
	fi
	if [ "$st" = completed ]; then
		record migrate:status pass
	else
		record migrate:status fail "migration status '${st:-none}', see $out/migrate-hmp.log"
		# Nothing will come in: do not wait for the destination.
		kill -TERM "$dst_pid" 2>/dev/null
	fi
	hmp "$mon" quit >/dev/null
	wait "$src_pid"
	# On the destination now: tell the guest to stop reading and finish.
	echo VBB-E2E-GO >&"$dst_fd"
	wait "$dst_pid"
	exec {dst_fd}>&-
	timing "boot-migrate(total)" "$(elapsed "$t0")"

	guest_results migrate "$src_log"
	if grep -q '^VBB-E2E-DONE' "$dst_log"; then
		record boot-migrate pass "the guest finished on the destination"
		guest_results migrate "$dst_log"
	else
		record boot-migrate fail "no VBB-E2E-DONE on the destination (log $dst_log)"
		tail -n 30 "$dst_log" | sed 's/^/  guest: /'
	fi

	bridge_pid=$src_bridge
	stop_bridge bridge-migrate-src-exit
	bridge_pid=$dst_bridge
	stop_bridge bridge-migrate-dst-exit
	show_stats "$out/bridge-migrate-src.log"
	show_stats "$out/bridge-migrate-dst.log"
	# The guest asked once 64 reads were done on the source; the rest of
	# its reads, during and after the migration, on the destination.
	src_reads=$(disconnect_reads "$out/bridge-migrate-src.log")
	dst_reads=$(disconnect_reads "$out/bridge-migrate-dst.log")
	if [ "$src_reads" -ge 64 ]; then
		record migrate:source-read-before pass "$src_reads reads"
	else
		record migrate:source-read-before fail "the source bridge served $src_reads reads"
	fi
	if [ "$dst_reads" -ge 1 ]; then
		record migrate:destination-served pass "$dst_reads reads"
	else
		record migrate:destination-served fail "the destination bridge served no reads"
	fi
}

# What the module counted, from the bridge's log.
show_stats() {
	grep ' stats ' "$1" | sed 's/^vhost-blk-bridge: /  /'
}

host_fio_verify() {
	VBB_DEV=$disk VBB_QD1_SIZE=$qd1 VBB_QD16_SIZE=$qd16 \
		fio --verify_only "$e2e_dir/fio.job" >"$out/host-fio.log" 2>&1
}

# ------------------------------------------------------------ libvirt

# Boot 5, through libvirt as on a Debian host.  The bridge is started as
# systemd starts vhost-blk-bridge@vbb-e2e.socket and its service: the
# socket's path, group and mode, and the service's command line, are read
# from the shipped units, BACKEND and OPTIONS from a copy of the shipped
# instance.conf.  libvirtd (Debian's libvirt-daemon, started here) defines
# and starts the domain of Documentation/virt/vhost-blk/
# vhost-blk-bridge-domain.xml, unchanged, and runs its QEMU as user
# libvirt-qemu, a member of group kvm, as Debian's libvirt does.
lv_name=vbb-e2e
lv_bridge_cg=/sys/fs/cgroup/vbb-e2e-bridge
lv_units=$(cd "$e2e_dir/../systemd" && pwd)
lv_xml=$repo/Documentation/virt/vhost-blk/vhost-blk-bridge-domain.xml
lv_console=/var/log/libvirt/qemu/$lv_name-console.log
lv_grow=0	# 1: the disk may grow under the guest, 2: it was grown
virsh_() { virsh -q -c qemu:///system "$@"; }

# unit_key FILE KEY: the value of KEY= in a unit file, %i the instance.
unit_key() {
	sed -n "s/^$2=//p" "$1" | tail -n 1 | sed "s/%i/$lv_name/g"
}

# lv_users: the users and groups libvirt-daemon-system's postinst makes
# (this VM has only libvirt-daemon, which has none of its own).
lv_users() {
	getent group kvm >/dev/null || groupadd -r kvm || return
	getent passwd libvirt-qemu >/dev/null ||
		useradd -r -g kvm -d /var/lib/libvirt -M -s /usr/sbin/nologin \
			libvirt-qemu 2>/dev/null || return
	getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu ||
		return
	usermod -a -G libvirt-qemu libvirt-qemu
}

# lv_start_daemons: virtlogd and libvirtd, until their socket is there.
# qemu.conf: Debian's defaults but for the mount namespace libvirt gives
# each QEMU, which cannot be built here: this VM's root is a chroot into
# an overlay on 9p, where QEMU's private /dev comes up without /dev/null.
lv_start_daemons() {
	local i

	mkdir -p /etc/libvirt /var/lib/libvirt/boot /var/lib/libvirt/images \
		/var/log/libvirt/qemu || return
	printf 'namespaces = [ ]\n' >/etc/libvirt/qemu.conf
	# The daemon's own socket, root's only: no polkit in this VM.
	printf '%s\n' 'auth_unix_rw = "none"' 'unix_sock_rw_perms = "0700"' \
		'log_outputs = "3:stderr"' >"$work/libvirtd.conf"
	virtlogd >"$out/virtlogd.log" 2>&1 &
	lv_pids+=($!)
	libvirtd -f "$work/libvirtd.conf" >"$out/libvirtd.log" 2>&1 &
	lv_pids+=($!)
	for i in $(seq 300); do
		[ -S /run/libvirt/libvirt-sock ] && virsh_ version >/dev/null 2>&1 &&
			return 0
		kill -0 "${lv_pids[1]}" 2>/dev/null || break
		sleep 0.2
	done
	return 1
}

lv_stop_daemons() {
	local p

	for p in "${lv_pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	lv_pids=()
}

# lv_bridge_user: what the package and the administrator do before the
# service can run as its own user: the user, made as the postinst makes it
# (systemd-sysusers with the shipped sysusers.d file); /dev/vhost-blk as
# the package's udev rule leaves it; the disk given to the user's group,
# as bridge.rst says (and this test's own directory opened on the way to
# an image file).
lv_bridge_user() {
	local rule=$repo/debian/vhost-blk-tools.vhost-blk.udev g m

	systemd-sysusers "$lv_units/vhost-blk-bridge.sysusers" || return
	g=$(sed -n 's/^KERNEL=="vhost-blk".*GROUP="\([^"]*\)".*/\1/p' "$rule")
	m=$(sed -n 's/^KERNEL=="vhost-blk".*MODE="\([0-7]*\)".*/\1/p' "$rule")
	chgrp "$g" /dev/vhost-blk && chmod "$m" /dev/vhost-blk &&
		chgrp "$1" "$disk" && chmod g+rw "$disk" || return
	[ -b "$disk" ] || chmod o+x "$(dirname "$disk")"
}

# lv_start_bridge: as vhost-blk-bridge@vbb-e2e.socket and .service would,
# with systemd-socket-activate in systemd's place, and setpriv doing what
# the service's User=, Group=, SupplementaryGroups=, the empty
# CapabilityBoundingSet= and NoNewPrivileges= tell systemd to.
lv_start_bridge() {
	local sock_unit=$lv_units/vhost-blk-bridge@.socket conf word i
	local svc_unit=$lv_units/vhost-blk-bridge@.service BACKEND OPTIONS
	local -a exec_words argv opts priv
	local user group supp

	lv_sock=$(unit_key "$sock_unit" ListenStream)
	lv_group=$(unit_key "$sock_unit" SocketGroup)
	lv_mode=$(unit_key "$sock_unit" SocketMode)
	conf=/etc/vhost-blk-bridge/$lv_name.conf
	mkdir -p /etc/vhost-blk-bridge "$(dirname "$lv_sock")" || return
	chmod "$(unit_key "$sock_unit" DirectoryMode)" "$(dirname "$lv_sock")"
	# The example configuration, with this disk, its serial, and the
	# messages that show what it did.
	sed -e "s|^BACKEND=.*|BACKEND=$disk|" \
		-e "s|^OPTIONS=.*|& --serial $lv_name --verbose|" \
		"$lv_units/instance.conf" >"$conf" || return
	BACKEND=$(sed -n 's/^BACKEND=//p' "$conf")
	OPTIONS=$(sed -n 's/^OPTIONS=//p' "$conf")
	# ExecStart: ${BACKEND} is one word, $OPTIONS split on spaces.
	read -ra exec_words <<<"$(unit_key "$svc_unit" ExecStart)"
	read -ra opts <<<"$OPTIONS"
	argv=("$bridge")
	for word in "${exec_words[@]:1}"; do
		case "$word" in
		'${BACKEND}') argv+=("$BACKEND") ;;
		'$OPTIONS') argv+=("${opts[@]}") ;;
		*) argv+=("$word") ;;
		esac
	done
	user=$(unit_key "$svc_unit" User)
	group=$(unit_key "$svc_unit" Group)
	supp=$(unit_key "$svc_unit" SupplementaryGroups)
	if [ -z "$user" ] || [ -z "$group" ] ||
	   ! grep -qx 'CapabilityBoundingSet=' "$svc_unit" ||
	   ! grep -qx 'NoNewPrivileges=yes' "$svc_unit"; then
		echo "$svc_unit: no User=, Group=, empty CapabilityBoundingSet= or NoNewPrivileges=yes" \
			>"$out/bridge-libvirt.log"
		return 1
	fi
	lv_bridge_user "$group" >"$out/bridge-libvirt.log" 2>&1 || return
	priv=(setpriv --reuid="$user" --regid="$group" --groups="${supp// /,}"
	      --bounding-set=-all --inh-caps=-all --no-new-privs --)
	echo "  libvirt: bridge ${priv[*]} ${argv[*]}"
	# In a cgroup of its own, as systemd runs the service in its unit's.
	mkdir -p "$lv_bridge_cg" || return
	(echo "$BASHPID" >"$lv_bridge_cg/cgroup.procs" &&
		exec systemd-socket-activate -l "$lv_sock" "${priv[@]}" \
			"${argv[@]}") >>"$out/bridge-libvirt.log" 2>&1 &
	bridge_pid=$!
	for i in $(seq 100); do
		[ -S "$lv_sock" ] && break
		kill -0 "$bridge_pid" 2>/dev/null || return 1
		sleep 0.1
	done
	chown "root:$lv_group" "$lv_sock" && chmod "$lv_mode" "$lv_sock"
}

# lv_bridge_cred: "uid USER, groups G1 G2... caps EFF PRM BND nnp N" of the
# bridge process, nothing if $bridge_pid is not the bridge (yet).
lv_bridge_cred() {
	local st=/proc/$bridge_pid/status u gids g names=

	[ "$(cat "/proc/$bridge_pid/comm" 2>/dev/null)" = vhost-blk-bridg ] &&
		[ -r "$st" ] || return 0
	u=$(getent passwd "$(awk '/^Uid:/ { print $2 }' "$st")" | cut -d: -f1)
	gids=$(sed -n 's/^Groups:[[:space:]]*//p' "$st")
	for g in $gids; do
		names+=" $(getent group "$g" | cut -d: -f1)"
	done
	# The capability sets in hex; all zeroes printed as 0.
	awk -v u="$u" -v g="${names# }" '
		function z(x) { return x ~ /^0+$/ ? "0" : x }
		/^CapEff:/ { e = z($2) } /^CapPrm:/ { p = z($2) }
		/^CapBnd:/ { b = z($2) } /^NoNewPrivs:/ { n = $2 }
		END { printf "uid %s, groups %s caps %s %s %s nnp %s", u, g, e, p, b, n }' "$st"
}

# lv_charge_sample QEMU_PID: "QEMU_CGROUP BRIDGE_CGROUP N IN_QEMU
# IN_BRIDGE": the cgroups of QEMU and of the bridge, and how many of the
# kthreads that work for the guest (the vhost worker vhost-PID and the
# sync task vhost-blk-PID, PID the bridge's) there are, and are in each.
lv_charge_sample() {
	local qcg bcg p comm cg n=0 inq=0 inb=0

	qcg=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)
	bcg=$(sed -n 's/^0:://p' "/proc/$bridge_pid/cgroup" 2>/dev/null)
	[ -n "$qcg" ] && [ -n "$bcg" ] || return 0
	for p in /proc/[0-9]*; do
		comm=$(cat "$p/comm" 2>/dev/null) || continue
		case "$comm" in
		"vhost-$bridge_pid" | "vhost-blk-$bridge_pid"*) ;;
		*) continue ;;
		esac
		cg=$(sed -n 's/^0:://p' "$p/cgroup" 2>/dev/null)
		n=$((n + 1))
		[ "$cg" = "$qcg" ] && inq=$((inq + 1))
		[ "$cg" = "$bcg" ] && inb=$((inb + 1))
	done
	echo "$qcg $bcg $n $inq $inb"
}

# lv_wait: until the guest is done or its domain has stopped; meanwhile,
# who its QEMU runs as (lv_qemu_cred), where the kthreads that work for
# its guest are (lv_charge, the last lv_charge_sample that found both),
# and, with lv_grow=1, the disk grown when the guest asks (lv_grow=2).
lv_wait() {
	local i st qpid= sample n

	lv_qemu_cred=
	lv_charge=
	for i in $(seq $((boot_timeout * 2))); do
		[ -n "$lv_qemu_cred" ] ||
			lv_qemu_cred=$(ps -eo user:32=,group:32=,supgrp:64=,comm= |
				awk '$4 ~ /^qemu-system/ { print $1, $2, $3; exit }')
		[ -n "$qpid" ] || qpid=$(pgrep -o '^qemu-system')
		if [ -n "$qpid" ]; then
			sample=$(lv_charge_sample "$qpid")
			read -r _ _ n _ <<<"$sample"
			[ "${n:-0}" -ge 2 ] && lv_charge=$sample
		fi
		grep -q '^VBB-E2E-DONE' "$lv_console" 2>/dev/null && break
		if [ "$lv_grow" = 1 ] &&
		   grep -q '^VBB-E2E-RESIZE-REQUEST' "$lv_console" 2>/dev/null; then
			# As systemctl reload of the instance does.
			lv_grow=2
			truncate -s +64M "$disk" && kill -HUP "$bridge_pid"
		fi
		st=$(virsh_ domstate "$lv_name" 2>/dev/null)
		[ "$st" = running ] || [ "$st" = paused ] || break
		sleep 0.5
	done
	# The guest reboots when done, which <on_reboot>destroy ends.
	for i in $(seq 60); do
		[ "$(virsh_ domstate "$lv_name" 2>/dev/null)" = "shut off" ] && return 0
		sleep 0.5
	done
	return 1
}

# The guest's kthreads ran in QEMU's cgroup, not in the bridge's: the
# VM's io.max, memory.max and cpu.max bound its disk (--charge, the
# default auto; VHOST_BLK_CHARGE_PEER).
lv_charge_check() {
	local qcg bcg n inq inb

	read -r qcg bcg n inq inb <<<"$lv_charge"
	if ! grep -q "charged to the frontend's cgroups" "$out/bridge-libvirt.log"; then
		record libvirt:guest-charged-to-the-vm fail "the bridge did not charge the frontend (see $out/bridge-libvirt.log)"
	elif [ -z "$lv_charge" ] || [ "$qcg" = "$bcg" ] || [ "$inq" != "$n" ] ||
	     [ "$inb" != 0 ]; then
		record libvirt:guest-charged-to-the-vm fail "kthreads of the guest: ${n:-none found}, ${inq:-0} in QEMU's cgroup ${qcg:-?}, ${inb:-0} in the bridge's ${bcg:-?}"
	else
		record libvirt:guest-charged-to-the-vm pass "$n kthreads in QEMU's cgroup $qcg, none in the bridge's $bcg"
	fi
}

libvirt_boot() {
	local t0 perms region cred

	t0=$(now)
	if ! command -v libvirtd >/dev/null || ! command -v virsh >/dev/null; then
		record libvirt:installed fail "no libvirtd or virsh (scripts/deps.sh installs them)"
		return
	fi
	if ! lv_users; then
		record libvirt:users fail "cannot add libvirt-qemu and kvm"
		return
	fi
	if ! lv_start_daemons; then
		record libvirt:daemon fail "libvirtd did not start, see $out/libvirtd.log"
		lv_stop_daemons
		return
	fi
	record libvirt:daemon pass "$(virsh_ version | sed -n 's/^Running hypervisor: //p')"
	if ! lv_start_bridge; then
		record libvirt:bridge fail "see $out/bridge-libvirt.log"
		lv_stop_daemons
		return
	fi
	# An image can grow: the file GROW has the guest ask for it.
	lv_grow=0
	if [ "$backend" = file ] &&
	   debugfs -w -R "write /dev/null GROW" "$disk" >"$out/host-debugfs-grow.log" 2>&1; then
		lv_grow=1
	fi
	cp "$kernel" /var/lib/libvirt/boot/$lv_name-bzImage &&
		cp "$tools" /var/lib/libvirt/images/$lv_name-tools.img &&
		rm -f "$lv_console" || die "cannot copy the guest's files"
	if virsh_ define "$lv_xml" >"$out/libvirt-virsh.log" 2>&1; then
		record libvirt:define pass
	else
		record libvirt:define fail "$(tail -n 1 "$out/libvirt-virsh.log")"
	fi
	# The QEMU command line libvirt makes of it, for the documentation.
	virsh_ domxml-to-native qemu-argv --domain "$lv_name" \
		>"$out/libvirt-qemu-argv.txt" 2>&1
	if virsh_ start "$lv_name" >>"$out/libvirt-virsh.log" 2>&1; then
		record libvirt:start pass
		if lv_wait; then
			record libvirt:domain-ended pass
		else
			record libvirt:domain-ended fail "still $(virsh_ domstate "$lv_name")"
			virsh_ destroy "$lv_name" >>"$out/libvirt-virsh.log" 2>&1
		fi
		lv_charge_check
		if [ "$lv_grow" = 0 ]; then
			: # a block device: it cannot grow
		elif [ "$lv_grow" = 2 ] &&
		     wait_line "$out/bridge-libvirt.log" 'config change sent to the frontend' "$bridge_pid"; then
			record libvirt:resize pass "the image grown by 64 MiB, SIGHUP: the bridge sent the config change"
		else
			record libvirt:resize fail "the guest did not ask, or no config change in $out/bridge-libvirt.log"
		fi
		# User libvirt-qemu, and the socket's group among its groups.
		if [ "${lv_qemu_cred%% *}" = libvirt-qemu ] &&
		   [[ ",${lv_qemu_cred##* }," = *",$lv_group,"* ]]; then
			record libvirt:qemu-unprivileged pass "user group groups: $lv_qemu_cred"
		else
			record libvirt:qemu-unprivileged fail "QEMU ran as '${lv_qemu_cred:-?}'"
		fi
	else
		record libvirt:start fail "$(tail -n 1 "$out/libvirt-virsh.log")"
	fi
	cp /var/log/libvirt/qemu/$lv_name.log "$out/libvirt-qemu.log" 2>/dev/null
	cp "$lv_console" "$out/guest-libvirt.log" 2>/dev/null
	timing "boot-libvirt(total)" "$(elapsed "$t0")"
	guest_done libvirt "$out/guest-libvirt.log" "domain $(virsh_ domstate "$lv_name" 2>/dev/null)"
	virsh_ undefine "$lv_name" >>"$out/libvirt-virsh.log" 2>&1
	lv_stop_daemons

	# QEMU reached the bridge through the socket's group, which libvirt
	# left as the unit made it; the bridge let it in by --allow-uid.
	perms=$(stat -c '%U:%G %a' "$lv_sock")
	if [ "$perms" = "root:$lv_group ${lv_mode#0}" ]; then
		record libvirt:socket-as-the-unit-made-it pass "$perms"
	else
		record libvirt:socket-as-the-unit-made-it fail "$lv_sock is $perms"
	fi
	if grep -q 'on the socket systemd passed' "$out/bridge-libvirt.log" &&
	   grep -q 'frontend connected' "$out/bridge-libvirt.log" &&
	   ! grep -q 'refusing a frontend' "$out/bridge-libvirt.log"; then
		record libvirt:bridge-served-libvirt-qemu pass
	else
		record libvirt:bridge-served-libvirt-qemu fail "see $out/bridge-libvirt.log"
	fi
	# The bridge that served the guest ran as the unit's user, with no
	# capability left.  (systemd-socket-activate execs it, through setpriv,
	# only when the first frontend connects.)
	cred=$(lv_bridge_cred)
	if [[ $cred = "uid vhost-blk-bridge,"*" caps 0 0 0 nnp 1" ]] &&
	   [[ $cred = *" groups "*kvm* ]]; then
		record libvirt:bridge-unprivileged pass "$cred"
	else
		record libvirt:bridge-unprivileged fail "${cred:-no bridge process}"
	fi
	stop_bridge bridge-libvirt-exit
	rmdir "$lv_bridge_cg" 2>/dev/null
	show_stats "$out/bridge-libvirt.log"
	# What the guest wrote is on the disk.
	region="--name=libvirt --filename=$disk --direct=1 --ioengine=libaio --bs=16k --iodepth=16 --size=8m --offset=232m --rw=randwrite --verify=crc32c --randrepeat=1"
	# shellcheck disable=SC2086
	if fio $region --verify_only >"$out/host-fio-libvirt.log" 2>&1; then
		record host:libvirt-region-verify pass
	else
		record host:libvirt-region-verify fail "see $out/host-fio-libvirt.log"
	fi
}

# ------------------------------------------------------------------ run

if [ -n "$demo" ]; then
	msg "backend $disk ($backend), $queues queue(s), nested guest smp $smp, fio ${demo}s per job"
	start_bridge "$out/bridge-demo.log"
	msg "booting the nested guest (QEMU -device vhost-user-blk-pci), 1-2 min under TCG"
	boot demo
	stop_bridge bridge-exit
	show_stats "$out/bridge-demo.log"
	printf '  %s\n' "${summary[@]}"
	echo complete >>"$results"
	[ "$failures" = 0 ]
	exit
fi

msg "backend $disk ($backend), $queues queue(s), nested guest smp $smp, fio $qd1 at qd1 and $qd16 at qd16"

if [ "$probe" = 1 ]; then
	# Diagnostics only: one boot with the kernel log, start-up times.
	start_bridge "$out/bridge-probe.log"
	boot probe
	stop_bridge bridge-probe-exit
	printf '  %s\n' "${summary[@]}"
	echo complete >>"$results"
	exit 0
fi

# Boot 1 and 2: one bridge, two frontends one after the other, the guest's
# memory pinned once per table (--pin-memory): a memfd in boot 1, huge
# pages and a hot-plugged DIMM in boot 2.
start_bridge "$out/bridge-rw.log" --verbose --pin-memory
# A second bridge on the same disk, without --shared, does not start: the
# first one's lock.
if "$bridge" --socket "$work/second.sock" --backend "$disk" --once \
	>"$out/bridge-second.log" 2>&1; then
	record bridge-disk-locked fail "a second bridge started on $disk"
elif grep -q 'is locked by another process' "$out/bridge-second.log"; then
	record bridge-disk-locked pass
else
	record bridge-disk-locked fail "no lock message in $out/bridge-second.log"
fi
# SIGUSR1 while the guest has its disk open (serve_stats_request): the
# bridge prints the module's counters, which must show the guest's reads.
boot rw
if grep -q 'stats signal queue=0 in=[1-9]' "$out/bridge-rw.log"; then
	record bridge-sigusr1-stats pass
else
	record bridge-sigusr1-stats fail "no 'stats signal' line with requests in $out/bridge-rw.log"
fi
# --pin-memory: the guest's memory was pinned, as the bridge's locked
# memory, and a block device's reads and writes were built on it (a
# file's go through the VFS, which pins per request).
vmlck=$(cat "$out/bridge-vmlck" 2>/dev/null)
want_pinned='pinned=0$'
[ "$backend" = file ] || want_pinned='pinned=[1-9]'
if [ "${vmlck:-0}" -lt $((guest_mem * 1024)) ]; then
	record bridge-pin-memory fail "the bridge's VmLck was ${vmlck:-unknown} kB, not the guest's $guest_mem MiB"
elif ! grep -q "stats signal queue=0 in=[1-9].* $want_pinned" "$out/bridge-rw.log"; then
	record bridge-pin-memory fail "no '$want_pinned' on a $backend backend in $out/bridge-rw.log"
else
	record bridge-pin-memory pass "VmLck $vmlck kB"
fi
# The guest's cache_type writes went through QEMU's SET_CONFIG and the
# bridge to the module (VHOST_BLK_SET_CONFIG), there and back.
if grep -q 'switched its write cache to writethrough' "$out/bridge-rw.log" &&
	grep -q 'switched its write cache to writeback' "$out/bridge-rw.log"; then
	record bridge-config-wce pass
else
	record bridge-config-wce fail "no write cache switch both ways in $out/bridge-rw.log"
fi
# Boot 2 with the guest's memory on 2 MiB huge pages (memfd hugetlb=on),
# which the bridge maps from hugetlbfs.
huge_need=$(( (guest_mem + 1) / 2 ))
echo $((huge_need + 8)) >/proc/sys/vm/nr_hugepages
huge_free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
if [ "${huge_free:-0}" -ge "$huge_need" ]; then
	record hugepages-reserved pass "$huge_free free"
	mem_opts=hugetlb=on,hugetlbsize=2M
else
	record hugepages-reserved fail "only ${huge_free:-0} of $huge_need huge pages"
fi
hotplug_mem=128
qemu_extra=(-monitor "unix:$hotplug_mon,server,nowait")
boot reconnect
exits_per_io_check
read -r _ _ hp_before hp_after <"$out/hotplug.result" 2>/dev/null
if [ "${hp_after:-0}" -gt "${hp_before:-0}" ]; then
	record hotplug:add-mem-reg pass "ADD_MEM_REG $hp_before -> $hp_after"
else
	record hotplug:add-mem-reg fail "no ADD_MEM_REG after device_add (see $out/hotplug-hmp.log)"
fi
hotplug_mem=
qemu_extra=()
mem_opts=
echo 0 >/proc/sys/vm/nr_hugepages
stop_bridge bridge-rw-exit
show_stats "$out/bridge-rw.log"
# Its error lines (vbb_err()), not a counter that has 'error' in its name.
grep -q '^vhost-blk-bridge: error: ' "$out/bridge-rw.log" &&
	record bridge-rw-log fail "errors in $out/bridge-rw.log" ||
	record bridge-rw-log pass

# The image, from outside the guest.
t0=$(now)
if e2fsck -fn "$disk" >"$out/host-fsck.log" 2>&1; then
	record host:fsck pass
else
	record host:fsck fail "see $out/host-fsck.log"
fi
mkdir -p "$work/files"
if debugfs -R "rdump / $work/files" "$disk" >"$out/host-debugfs.log" 2>&1 &&
   (cd "$work/files" && sha256sum -c --quiet SUMS) >>"$out/host-debugfs.log" 2>&1; then
	record host:files-checksums pass "$(wc -l <"$work/files/SUMS") files"
else
	record host:files-checksums fail "see $out/host-debugfs.log"
fi
if host_fio_verify; then
	record host:fio-verify pass
else
	record host:fio-verify fail "see $out/host-fio.log"
fi
timing host-checks "$(elapsed "$t0")"

# Boot 3: live migration (its writes go to 200 MiB on, which no later
# boot reads).
if [ "$migrate" = 1 ]; then
	migrate_boot
else
	msg "boot 3 (migrate) left out (--no-migrate)"
fi

# Boot 4: read-only, the bridge socket-activated in front of an
# unprivileged QEMU, which may reach the socket in $work and nothing else
# there.
sum_before=$(sha256sum <"$disk")
chmod 0711 "$work"
start_bridge_activated "$out/bridge-ro.log" --read-only --allow-uid "$vm_uid"
# root is not on the allow-list: its connection starts the bridge, which
# refuses it.
socat -u OPEN:/dev/null "UNIX-CONNECT:$sock" 2>>"$out/bridge-ro.log"
if wait_line "$out/bridge-ro.log" "refusing a frontend: uid 0 " "$bridge_pid"; then
	record bridge-refuses-uid-0 pass
else
	record bridge-refuses-uid-0 fail "no refusal in $out/bridge-ro.log"
fi
qemu_as=(setpriv --reuid="$vm_uid" --regid="$vm_uid" --clear-groups)
boot ro
qemu_as=()
if grep -q 'on the socket systemd passed' "$out/bridge-ro.log"; then
	record bridge-socket-activation pass
else
	record bridge-socket-activation fail "not serving the LISTEN_FDS socket (log $out/bridge-ro.log)"
fi
stop_bridge bridge-ro-exit
show_stats "$out/bridge-ro.log"
if [ "$(sha256sum <"$disk")" = "$sum_before" ]; then
	record host:ro-image-unchanged pass
else
	record host:ro-image-unchanged fail "the image changed under --read-only"
fi

# Boot 5: through libvirt.
if [ "$libvirt" = 1 ]; then
	libvirt_boot
else
	msg "boot 5 (libvirt) left out (--no-libvirt)"
fi

timing total "$(elapsed "$t_all")"
echo complete >>"$results"
echo
msg "summary"
printf '  %s\n' "${summary[@]}"
if [ "$failures" = 0 ]; then
	msg "all passed"
	exit 0
fi
msg "$failures check(s) failed"
exit 1
