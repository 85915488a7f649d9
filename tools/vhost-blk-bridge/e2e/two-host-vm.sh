#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Live migration between two hosts sharing an NVMe/TCP disk: run INSIDE
# each of two test VMs (two-host.sh starts them, joined by a QEMU socket
# network), one as host A, one as host B.
#
#   A  10.77.0.1: exports a memory-backed null_blk with the kernel's NVMe
#      target on 10.77.0.1:4420, connects to it itself with nvme-tcp, and
#      serves the namespace with vhost-blk-bridge --shared to the nested
#      guest's QEMU, the source;
#   B  10.77.0.2: connects to A's namespace with nvme-tcp, serves it with
#      its own vhost-blk-bridge --shared to a QEMU started with -incoming.
#
# The guest (guest-init.sh, vbb.mode=migrate) writes 8 MiB with crc32c
# headers, re-verifies it in a loop, and asks for the migration on its
# console.  A migrates it to B over the link (migrate -d tcp:10.77.0.2:4444)
# while it reads; B tells it, on its console there, that it has arrived.
# The guest checks its data during and after the move and writes anew on
# B.  The two scripts speak over TCP port 5000 on the link: one line per
# step (target-up, b-ready, migrated STATUS, b-done).
#
# Results go to OUT/results as in-vm.sh writes them ("pass NAME [detail]",
# "fail NAME [detail]", "time NAME SECONDS", "complete" last).
#
# Usage: two-host-vm.sh --role a|b --kernel BZIMAGE --tools TOOLS.IMG
#                       --bridge BRIDGE --out DIR [--boot-timeout S]
set -uo pipefail

me=vbb-2host
e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$e2e_dir/../../.." && pwd)
role= kernel= tools= bridge= out= boot_timeout=900

usage() {
	sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case "$1" in
	--role) role=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--tools) tools=$2; shift 2 ;;
	--bridge) bridge=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--boot-timeout) boot_timeout=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "$me: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

msg() { printf '%s %s: %s\n' "$me" "$role" "$*"; }
die() { msg "error: $*"; echo "fail $role:setup $*" >>"$out/results"; exit 1; }
# shellcheck source=lib.sh
. "$e2e_dir/lib.sh"
# shellcheck source=../../testing/selftests/vhost_blk/nvme_tcp.sh
. "$repo/tools/testing/selftests/vhost_blk/nvme_tcp.sh"

case "$role" in
a) addr=10.77.0.1 peer=10.77.0.2 ;;
b) addr=10.77.0.2 peer=10.77.0.1 ;;
*) echo "$me: --role a or b (see --help)" >&2; exit 2 ;;
esac
[ -n "$out" ] || { echo "$me: no --out" >&2; exit 2; }
mkdir -p "$out" || exit 1
results=$out/results
: >"$results"
failures=0
declare -a summary
for f in "$kernel" "$tools" "$bridge"; do
	[ -e "$f" ] || die "$f not found"
done
[ -c /dev/vhost-blk ] || die "/dev/vhost-blk does not exist (is vhost_blk.ko loaded?)"

# What guest_qemu (lib.sh) uses: one vCPU, one queue, 256 MiB, the
# migrate mode of guest-init.sh.
smp=1 queues=1 guest_mem=256 loglevel=4 serial=vbb-2host resize=0
qd1=2m qd16=8m demo= mem_opts= hotplug_mem=
qemu_as=()
e2e_clock_args

work=$(mktemp -d /tmp/vbb-2host.XXXXXX)
sock=$work/vbb.sock
ctl=$work/ctl
bridge_pid= ctl_pid= qemu_pid=
cleanup() {
	[ -z "$qemu_pid" ] || kill -TERM "$qemu_pid" 2>/dev/null
	[ -z "$bridge_pid" ] || kill -TERM "$bridge_pid" 2>/dev/null
	[ -z "$ctl_pid" ] || kill "$ctl_pid" 2>/dev/null
	nvme_tcp_down 2host 4420 >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# ---- the link and the control channel

net_up() {
	local ifc n

	modprobe virtio_net || return
	ip link set lo up || return
	ifc=
	for _ in $(seq 50); do
		for n in /sys/class/net/*; do
			[ "${n##*/}" = lo ] || { ifc=${n##*/}; break 2; }
		done
		sleep 0.1
	done
	[ -n "$ifc" ] || { msg "no network interface"; return 1; }
	ip addr add "$addr/24" dev "$ifc" && ip link set "$ifc" up
}

# Lines from the peer, appended to $ctl as they come.
ctl_listen() {
	: >"$ctl"
	socat -u TCP-LISTEN:5000,bind="$addr",reuseaddr,fork \
		"OPEN:$ctl,creat,append" 2>>"$out/ctl.log" &
	ctl_pid=$!
}

# ctl_send LINE: to the peer, retried while it does not listen yet (bounded).
ctl_send() {
	for _ in $(seq 600); do
		echo "$1" | socat -u - "TCP:$peer:5000,connect-timeout=2" \
			2>>"$out/ctl.log" && return 0
		sleep 1
	done
	msg "cannot tell $peer '$1'"
	return 1
}

# ctl_wait REGEX SECONDS: until the peer has sent a line matching REGEX.
ctl_wait() {
	local i

	for ((i = 0; i < $2 * 5; i++)); do
		grep -q "$1" "$ctl" 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

start_bridge() {	# start_bridge DISK LOG
	"$bridge" --socket "$sock" --backend "$1" --serial "$serial" \
		--num-queues "$queues" --shared --verbose >"$2" 2>&1 &
	bridge_pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		kill -0 "$bridge_pid" 2>/dev/null || break
		sleep 0.1
	done
	sed 's/^/  bridge: /' "$2"
	return 1
}

stop_bridge() {	# stop_bridge NAME
	local rc

	kill -TERM "$bridge_pid" 2>/dev/null
	wait "$bridge_pid"
	rc=$?
	bridge_pid=
	if [ "$rc" = 0 ]; then record "$1" pass; else record "$1" fail "exit status $rc"; fi
}

net_up || die "the link did not come up"
ctl_listen
t0=$(now)

if [ "$role" = a ]; then
	# ---- host A: the target, the bridge of the source, the source QEMU
	nb=/sys/kernel/config/nullb/vbb-2host
	modprobe null_blk && mkdir "$nb" && echo 256 >"$nb/size" &&
		echo 1 >"$nb/memory_backed" && echo 1 >"$nb/power" ||
		die "cannot make the null_blk to export"
	for _ in $(seq 50); do [ -b /dev/vbb-2host ] && break; sleep 0.1; done
	nvme_tcp_export 2host /dev/vbb-2host 4420 "$addr" 2>"$work/err" ||
		die "NVMe/TCP export: $(cat "$work/err")"
	dev=$(nvme_tcp_connect 2host "$addr" 4420 60 2>"$work/err") ||
		die "NVMe/TCP connect: $(cat "$work/err")"
	record a:nvme-tcp "pass" "$dev, the namespace exported on $addr:4420"
	ctl_send target-up || die "B never listened"
	start_bridge "$dev" "$out/bridge-a.log" || die "the bridge did not start"
	ctl_wait '^b-ready' 900 || die "B never got ready"

	mon=$work/mon.sock
	log=$out/guest-src.log
	guest_qemu migrate "$sock" -monitor "unix:$mon,server,nowait" \
		</dev/null >"$log" 2>&1 &
	qemu_pid=$!
	st=
	if wait_line "$log" '^VBB-E2E-MIGRATE-NOW' "$qemu_pid"; then
		migrate_wait "$mon" "tcp:$peer:4444" "$qemu_pid"
		st=$migrate_status
	fi
	if [ "$st" = completed ]; then
		record a:migrate-to-b pass "over the link to $peer:4444"
	else
		record a:migrate-to-b fail "status '${st:-none}', see $out/migrate-hmp.log"
	fi
	ctl_send "migrated ${st:-none}"
	hmp "$mon" quit >/dev/null
	wait "$qemu_pid"
	qemu_pid=
	guest_results a:migrate "$log"
	# B needs the target until its guest is done.
	ctl_wait '^b-done' "$((boot_timeout + 120))" ||
		record a:b-finished fail "B never said it was done"
	stop_bridge a:bridge-exit
	n=$(disconnect_reads "$out/bridge-a.log")
	if [ "$n" -ge 64 ]; then
		record a:source-read-before pass "$n reads served on A"
	else
		record a:source-read-before fail "A's bridge served $n reads"
	fi
else
	# ---- host B: a host of A's namespace, the destination QEMU
	ctl_wait '^target-up' 900 || die "A's target never came up"
	dev=$(nvme_tcp_connect 2host "$peer" 4420 60 2>"$work/err") ||
		die "NVMe/TCP connect to $peer: $(cat "$work/err")"
	record b:nvme-tcp pass "$dev, A's namespace over the link"
	start_bridge "$dev" "$out/bridge-b.log" || die "the bridge did not start"

	log=$out/guest-dst.log
	dst_in=$work/console.in
	mkfifo "$dst_in" && exec {dst_fd}<>"$dst_in" || die "no console FIFO"
	guest_qemu migrate "$sock" -incoming "tcp:$addr:4444" \
		<"$dst_in" >"$log" 2>&1 &
	qemu_pid=$!
	for _ in $(seq 300); do
		ss -ltn 2>/dev/null | grep -q "$addr:4444" && break
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.2
	done
	ctl_send b-ready || die "A never listened"
	if ctl_wait '^migrated' "$boot_timeout" &&
	   grep -q '^migrated completed' "$ctl"; then
		record b:incoming pass
		# The guest reads on until it is told it has arrived.
		echo VBB-E2E-GO >&"$dst_fd"
	else
		record b:incoming fail "$(grep '^migrated' "$ctl" || echo 'no word from A')"
		kill -TERM "$qemu_pid" 2>/dev/null
	fi
	wait "$qemu_pid"
	qemu_pid=
	exec {dst_fd}>&-
	if grep -q '^VBB-E2E-DONE' "$log"; then
		record b:guest-finished-on-b pass
		guest_results b:migrate "$log"
	else
		record b:guest-finished-on-b fail "no VBB-E2E-DONE (log $log)"
		tail -n 30 "$log" | sed 's/^/  guest: /'
	fi
	stop_bridge b:bridge-exit
	n=$(disconnect_reads "$out/bridge-b.log")
	if [ "$n" -ge 1 ]; then
		record b:destination-served pass "$n reads served on B"
	else
		record b:destination-served fail "B's bridge served no reads"
	fi
	ctl_send b-done
fi

timing "$role:total" "$(elapsed "$t0")"
echo complete >>"$results"
printf '  %s\n' "${summary[@]}"
[ "$failures" = 0 ]
