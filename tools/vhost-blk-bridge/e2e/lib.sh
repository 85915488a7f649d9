# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# shellcheck disable=SC2154  # the callers' globals, listed below
#
# What the bridge's end-to-end tests share, sourced by in-vm.sh (one test
# VM) and two-host-vm.sh (two of them): results, waiting for a guest's
# console, the nested guest's QEMU, its monitor.
#
# They use the caller's globals: summary (an array), failures and results
# (record, timing); kernel, tools, smp, queues, guest_mem, boot_timeout,
# loglevel, serial, resize, qd1, qd16, demo, clock_args, qemu_as,
# mem_opts and hotplug_mem (guest_qemu).

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# record NAME pass|fail [detail]; timing NAME SECONDS: into the summary and
# the results file.
record() {	# record NAME pass|fail [detail]
	summary+=("$(printf '%-28s %s %s' "$1" "$2" "${3:-}")")
	[ "$2" = pass ] || failures=$((failures + 1))
	echo "$2 $1 ${3:-}" >>"$results"
}
timing() {
	summary+=("$(printf '%-28s %ss' "time:$1" "$2")")
	echo "time $1 $2" >>"$results"
}

# e2e_clock_args: sets clock_args.  The nested guest cannot calibrate its
# TSC (the PIT is too slow under TCG in TCG) and has no ACPI, so no HPET or
# PM timer: its clock would be jiffies, and fio's latencies multiples of
# 10 ms.  But TCG's RDTSC reads the TSC of the machine QEMU runs on, this
# VM, whose rate the kernel here knows ("cpu MHz"): tell it.
e2e_clock_args() {
	local tsc_khz

	tsc_khz=$(awk '/^cpu MHz/ { printf "%d", $4 * 1000; exit }' /proc/cpuinfo)
	clock_args=
	[ "${tsc_khz:-0}" -gt 0 ] && clock_args="tsc_early_khz=$tsc_khz tsc=reliable"
	return 0
}

# wait_line FILE REGEX PID: until FILE has a line matching REGEX (status 0),
# or PID has gone without one appearing (status 1).
wait_line() {
	while ! grep -q "$2" "$1" 2>/dev/null; do
		if ! kill -0 "$3" 2>/dev/null; then
			grep -q "$2" "$1" 2>/dev/null
			return
		fi
		sleep 0.2
	done
}

# guest_qemu MODE SOCKET [QEMU options] &: the nested guest's QEMU, its
# disk on the bridge at SOCKET.  A socket per CPU: the guest kernel has no
# ACPI, and SeaBIOS's MP table lists only a socket's first CPU.  Run it in the background only: it execs,
# so that the job's pid is the QEMU's own timeout, which a kill reaches.
# mitigations=off: the guest runs under TCG (see vm/run-vm.sh).
guest_qemu() {
	local mode=$1 s=$2 accel=tcg

	shift 2
	[ "$smp" -gt 1 ] && accel=tcg,thread=multi
	exec timeout -k 10 "$boot_timeout" "${qemu_as[@]}" qemu-system-x86_64 \
		-nodefaults -no-user-config -display none -no-reboot -nic none \
		-machine pc -accel "$accel" -cpu max -smp "$smp,sockets=$smp,cores=1,threads=1" \
		-m "$guest_mem${hotplug_mem:+,slots=2,maxmem=$((guest_mem + hotplug_mem))M}" \
		-object "memory-backend-memfd,id=mem,size=${guest_mem}M,share=on${mem_opts:+,$mem_opts}" \
		-numa node,memdev=mem \
		-kernel "$kernel" \
		-append "console=ttyS0 root=/dev/vdb ro rootfstype=ext4 init=/init panic=-1 loglevel=$loglevel vbb.mode=$mode vbb.serial=$serial vbb.resize=$resize vbb.hotplug=${hotplug_mem:+1} vbb.qd1=$qd1 vbb.qd16=$qd16 vbb.runtime=${demo:-0} mitigations=off $clock_args" \
		-serial stdio \
		-chardev "socket,id=vbb,path=$s" \
		-device "vhost-user-blk-pci,chardev=vbb,num-queues=$queues,addr=0x4" \
		-drive "file=$tools,if=none,id=tools,format=raw,readonly=on" \
		-device virtio-blk-pci,drive=tools,addr=0x5 \
		"$@"
}

# guest_results MODE LOG: the results and timings the guest printed.
guest_results() {
	local mode=$1 log=$2 name res detail secs

	while read -r _ name res detail; do
		[ -n "$name" ] || continue
		record "$mode:$name" "$res" "$detail"
	done <<<"$(tr -d '\r' <"$log" | grep '^VBB-E2E-RESULT')"
	while read -r _ name secs; do
		[ -n "$name" ] || continue
		timing "$mode:$name" "$secs"
	done <<<"$(tr -d '\r' <"$log" | grep '^VBB-E2E-TIME')"
	grep -E '^  fio: ' "$log" | sed "s/^  fio: /  $mode fio: /"
}

# disconnect_reads LOG: reads the bridge counted on queue 0 until its
# frontend last disconnected (0 if it never reported).
disconnect_reads() {
	local n

	n=$(sed -n 's/.*stats disconnect queue=0 in=\([0-9]*\).*/\1/p' "$1" |
		tail -n 1)
	echo "${n:-0}"
}

# hmp SOCKET COMMAND: one command on a QEMU human monitor, its output.
hmp() {
	printf '%s\n' "$2" | socat -t 5 - "UNIX-CONNECT:$1" 2>/dev/null | tr -d '\r'
}

migrate_status=
# migrate_wait MON URI QEMU_PID: migrate the guest of the QEMU whose
# monitor is MON to URI, and wait until the migration completed, failed
# or was cancelled, or that QEMU is gone (bounded: 15 min).  Sets
# migrate_status to the last status; the monitor's answers go to
# $out/migrate-hmp.log, the time to the timing "migration".
migrate_wait() {
	local mon=$1 uri=$2 pid=$3 t1 st=

	t1=$(now)
	hmp "$mon" "migrate_set_parameter max-bandwidth 1G" >/dev/null
	hmp "$mon" "migrate -d $uri" >"$out/migrate-hmp.log"
	for _ in $(seq 900); do
		st=$(hmp "$mon" "info migrate" | sed -n 's/^Migration status: *//p')
		case "$st" in completed|failed|cancelled) break ;; esac
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	hmp "$mon" "info migrate" >>"$out/migrate-hmp.log"
	timing migration "$(elapsed "$t1")"
	migrate_status=$st
}
