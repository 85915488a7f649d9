#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The real-guest benchmark's run inside the test VM (guest-bench.sh boots
# it with vm/run-vm.sh, which loads vhost_blk.ko): for each peer and each
# queue count, start the peer's back-end, boot the small Linux guest of the
# bridge's end-to-end test with QEMU 10 on one null_blk disk, and let it
# run fio-bench.job's jobs one by one.  Around each job the guest waits
# for us (VBB-BENCH-READY, VBB-BENCH-END), and we count what the host
# spent on it: CPU time of every thread of the guest's QEMU (vCPUs,
# IOThreads) and of the back-end's process (qemu-storage-daemon, or the
# bridge with its vhost workers), and with perf their system calls,
# context switches and, with KVM, VM exits and injected interrupts.  One
# JSON object per job goes to OUT/rows.jsonl.  See guest-bench.sh.
set -uo pipefail

me=guest-bench-vm
msg() { printf '%s: %s\n' "$me" "$*"; }
die() { msg "error: $*"; exit 1; }

kernel= tools= bridge= qemu= qsd= out= runtime=10 queues="1" peers=
jobs=randread-qd1,randwrite-qd1,randread-qd32,randwrite-qd32
boot_timeout=900 guest_mem=256
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--tools) tools=$2; shift 2 ;;
	--bridge) bridge=$2; shift 2 ;;
	--qemu) qemu=$2; shift 2 ;;
	--qsd) qsd=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	--queues) queues=${2//,/ }; shift 2 ;;
	--peers) peers=${2//,/ }; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--boot-timeout) boot_timeout=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
for f in "$kernel" "$tools" "$bridge" "$qemu" "$qsd"; do
	[ -e "$f" ] || die "${f:-an argument} not found"
done
[ -n "$out" ] && mkdir -p "$out" || die "--out missing or not writable"
[ -c /dev/vhost-blk ] || die "/dev/vhost-blk does not exist (is vhost_blk.ko loaded?)"
command -v jq >/dev/null || die "jq not found"

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../vhost-blk-bridge/e2e" && pwd)
# shellcheck source=tools/vhost-blk-bridge/e2e/lib.sh
. "$e2e_dir/lib.sh"
e2e_clock_args

accel=tcg
[ -w /dev/kvm ] && accel=kvm
work=$(mktemp -d /tmp/vbb-bench.XXXXXX)
backend_pid=
cleanup() {
	[ -z "$backend_pid" ] || kill -TERM "$backend_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# The disk: null_blk without memory, so that only the path to it is
# measured, with one poll queue for completion polling; the same disk
# for every peer.
nb=/sys/kernel/config/nullb/vbb-bench
{ [ -d "$nb" ] || mkdir "$nb"; } &&
	echo 1024 >"$nb/size" && echo 0 >"$nb/memory_backed" &&
	{ [ ! -e "$nb/poll_queues" ] || echo 1 >"$nb/poll_queues"; } &&
	echo 1 >"$nb/power" || die "cannot make a null_blk device in $nb"
disk=
for _ in $(seq 50); do
	for dev in /dev/vbb-bench "/dev/nullb$(cat "$nb/index")"; do
		[ -b "$dev" ] && disk=$dev && break 2
	done
	sleep 0.1
done
[ -n "$disk" ] || die "no block device for $nb"
msg "disk $disk (null_blk), guest on QEMU $("$qemu" --version | sed -n '1s/.*version \([^ ]*\).*/\1/p') with $accel"

console_in=$work/console.in
mkfifo "$console_in" || die "cannot create $console_in"
exec {console_fd}<>"$console_in"
# perf stat's control and acknowledgement FIFOs (--control), kept open.
mkfifo "$work/perf.ctl" "$work/perf.ack" || die "cannot create perf's FIFOs"
exec {perf_ctl_fd}<>"$work/perf.ctl" {perf_ack_fd}<>"$work/perf.ack"

# cpu_ticks PID...: user + system time of every thread of the processes,
# and of it the time vCPUs spent running the guest (KVM only), in clock
# ticks (the process's /proc/PID/stat counts its dead threads too).
cpu_ticks() {
	local p t=0 g=0 f

	for p in "$@"; do
		# Fields after the command's closing parenthesis: utime is the
		# 12th, stime the 13th, guest_time the 41st.
		f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
		# shellcheck disable=SC2086
		set -- $f
		t=$((t + ${12} + ${13}))
		g=$((g + ${41}))
	done
	echo "$t $g"
}
hz=$(getconf CLK_TCK)

# The perf events: system calls and context switches, and with KVM the
# exits and the interrupts injected into the guest.
events=raw_syscalls:sys_enter,context-switches
[ "$accel" = kvm ] && events=$events,kvm:kvm_exit,kvm:kvm_msi_set_irq
perf_ok=1
perf stat --delay=-1 -e "$events" -- true >/dev/null 2>"$work/perf-probe" ||
	{ perf_ok=0; msg "perf cannot count $events: $(tail -n 1 "$work/perf-probe")"; }

# start_backend PEER NQ: the peer's back-end, if it has one; sets
# backend_pid and the QEMU options of the disk (disk_opts).
start_backend() {
	local peer=$1 nq=$2 sock=$work/vu.sock i iothreads= map= poll= aio

	backend_pid= disk_opts=()
	rm -f "$sock"
	case "$peer" in
	virtio-blk-*)
		aio=${peer#virtio-blk-}
		aio=${aio%-nopoll}
		case "$peer" in *-nopoll) poll=,poll-max-ns=0 ;; esac
		for i in $(seq 0 $((nq - 1))); do
			iothreads="$iothreads -object iothread,id=iot$i$poll"
			map="$map${map:+,}{\"iothread\":\"iot$i\"}"
		done
		# shellcheck disable=SC2206
		disk_opts=($iothreads
			-blockdev "{\"driver\":\"host_device\",\"node-name\":\"disk\",\"filename\":\"$disk\",\"aio\":\"$aio\",\"cache\":{\"direct\":true}}"
			-device "{\"driver\":\"virtio-blk-pci\",\"drive\":\"disk\",\"addr\":\"0x4\",\"num-queues\":$nq,\"iothread-vq-mapping\":[$map]}")
		return 0
		;;
	qsd)
		"$qsd" --object iothread,id=iot0 \
			--blockdev "{\"driver\":\"host_device\",\"node-name\":\"disk\",\"filename\":\"$disk\",\"aio\":\"io_uring\",\"cache\":{\"direct\":true}}" \
			--export "{\"type\":\"vhost-user-blk\",\"id\":\"exp\",\"node-name\":\"disk\",\"writable\":true,\"num-queues\":$nq,\"iothread\":\"iot0\",\"addr\":{\"type\":\"unix\",\"path\":\"$sock\"}}" \
			>"$out/backend-$peer-$nq.log" 2>&1 &
		backend_pid=$!
		;;
	vhost-blk*)
		local opts=(--charge bridge)
		case "$peer" in
		vhost-blk) ;;
		vhost-blk-wpq) opts+=(--worker-per-queue) ;;
		vhost-blk-qpoll) opts+=(--worker-per-queue --poll-us 32 --poll-adaptive) ;;
		# Completions are polled only while the ring is: a fixed
		# window, which an adaptive one at 0 would never open.
		vhost-blk-cpoll) opts+=(--worker-per-queue --poll-us 32 --poll-completions) ;;
		*) die "unknown peer $peer" ;;
		esac
		"$bridge" --socket "$sock" --backend "$disk" --num-queues "$nq" \
			"${opts[@]}" >"$out/backend-$peer-$nq.log" 2>&1 &
		backend_pid=$!
		;;
	*) die "unknown peer $peer" ;;
	esac
	for _ in $(seq 300); do
		[ -S "$sock" ] && break
		kill -0 "$backend_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -S "$sock" ]; then
		sed 's/^/  | /' "$out/backend-$peer-$nq.log"
		kill -TERM "$backend_pid" 2>/dev/null
		wait "$backend_pid" 2>/dev/null
		backend_pid=
		return 1
	fi
	disk_opts=(-chardev "socket,id=vu,path=$sock"
		-device "vhost-user-blk-pci,chardev=vu,num-queues=$nq,addr=0x4")
}

# perf_ctl WORD: enable or disable the running perf stat's counting, and
# wait until it says it did.
perf_ctl() {
	local ack=

	echo "$1" >&"$perf_ctl_fd"
	read -r -t 30 ack <&"$perf_ack_fd"
	[ "$ack" = ack ]
}

# measure PEER NQ JOB QEMU_PID LOG: from the guest's READY for JOB to its
# END, the CPU time and perf counts of QEMU and the back-end; a row.
# perf attaches with its counters off, and is switched on before the
# guest is let go, so that what it attached late does not go uncounted.
measure() {
	local peer=$1 nq=$2 job=$3 qpid=$4 log=$5 pids c0 c1 g0 g1 t0 t1 rc
	local pst=$work/perf-$job.csv ppid= ok=1

	wait_line "$log" "^VBB-BENCH-READY $job[[:space:]]*\$" "$qpid" || return 1
	pids=$qpid${backend_pid:+ $backend_pid}
	rm -f "$pst"
	if [ "$perf_ok" = 1 ]; then
		perf stat --delay=-1 --control "fifo:$work/perf.ctl,$work/perf.ack" \
			-x, -e "$events" -p "${pids// /,}" -o "$pst" \
			2>>"$out/perf.log" &
		ppid=$!
		perf_ctl enable || msg "$peer q$nq $job: perf did not start counting"
	fi
	# shellcheck disable=SC2086
	read -r c0 g0 <<<"$(cpu_ticks $pids)"
	t0=$(now)
	echo VBB-E2E-GO >&"$console_fd"
	wait_line "$log" "^VBB-BENCH-END $job [0-9][0-9]*[[:space:]]*\$" "$qpid" || ok=0
	# shellcheck disable=SC2086
	read -r c1 g1 <<<"$(cpu_ticks $pids)"
	t1=$(now)
	if [ -n "$ppid" ]; then
		perf_ctl disable || true
		kill -INT "$ppid" 2>/dev/null
		wait "$ppid"
	fi
	[ "$ok" = 1 ] || return 1
	echo VBB-E2E-GO >&"$console_fd"
	rc=$(tr -d '\r' <"$log" | awk -v j="$job" '$1 == "VBB-BENCH-END" && $2 == j { print $3 }')
	echo "$peer $nq $job $rc $(( c1 - c0 )) $(( g1 - g0 )) $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		>"$work/measure-$job"
	# perf -x, lines: value,unit,event,...
	awk -F, '$3 != "" { gsub(/:/, "_", $3); printf "%s %s\n", $3, $1 }' "$pst" 2>/dev/null \
		>>"$work/measure-$job"
}

# row PEER NQ JOB LOG: the JSON row of a measured job.  fio's terse
# version 3 line, fields from 1: 6-9 read kB, bandwidth, IOPS, runtime;
# 18-20 its latency percentiles (50, 99, 99.9: "P%=usec"); 40 its mean
# latency (usec); 47-50, 59-61 and 81 the same for writes.
row() {
	local peer=$1 nq=$2 job=$3 log=$4 m=$work/measure-$3 terse

	terse=$(tr -d '\r' <"$log" | awk -v j="$job" '$1 == "VBB-BENCH-TERSE" && $2 == j {
		sub(/^VBB-BENCH-TERSE [^ ]* /, ""); print; exit }')
	[ -s "$m" ] && [ -n "$terse" ] || return 1
	read -r _ _ _ rc ticks gticks secs <"$m"
	jq -c -n --arg peer "$peer" --argjson nq "$nq" --arg job "$job" \
		--argjson rc "${rc:-1}" --argjson ticks "$ticks" --argjson hz "$hz" \
		--argjson gticks "$gticks" --argjson secs "$secs" --arg accel "$accel" \
		--arg terse "$terse" \
		--argjson perf "$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ { printf "%s\"%s\":%s", n++ ? "," : "{", $1, $2 }
			END { print n ? "}" : "{}" }' "$m")" '
		($terse | split(";")) as $f
		| (if $job | test("^randread") then 0 else 41 end) as $o
		| def num(i): $f[i - 1] | tonumber;
		def pct(i): $f[i - 1] | sub(".*="; "") | tonumber;
		((num(6) + num(47)) / 4) as $ios
		| def per(x): if x != null and $ios > 0 then x / $ios else null end;
		{peer: $peer, queues: $nq, job: $job,
		 rw: ($job | sub("-qd.*"; "")), qd: ($job | sub(".*-qd"; "") | tonumber),
		 accel: $accel, fio_status: $rc, fio_error: num(5),
		 window_s: $secs, fio_runtime_s: ((num(9) + num(50)) / 1000),
		 ios: $ios, iops: (num(8) + num(49)),
		 lat_us: {p50: pct(18 + $o), p99: pct(19 + $o), p99_9: pct(20 + $o),
			  mean: num(40 + $o)},
		 cpu_s: ($ticks / $hz), cpu_us_per_io: per($ticks / $hz * 1e6),
		 guest_cpu_us_per_io: per($gticks / $hz * 1e6),
		 syscalls_per_io: per($perf["raw_syscalls_sys_enter"]),
		 cs_per_io: per($perf["context-switches"]),
		 exits_per_io: per($perf["kvm_kvm_exit"]),
		 irqs_per_io: per($perf["kvm_kvm_msi_set_irq"])}' 2>"$work/jq.err" ||
		{ cat "$work/jq.err" >&2; return 1; }
}

# boot PEER NQ: one guest, all of the jobs.  A socket per CPU: the
# guest kernel has no ACPI, and SeaBIOS's MP table lists only a socket's
# first CPU (QEMU 10 makes -smp N one socket of N cores).  Under TCG its
# vCPUs take turns on one thread: multi-threaded TCG in the TCG test VM
# hit QEMU's iotlb_to_section() assertion once in a guest's boot.
boot() {
	local peer=$1 nq=$2 log=$out/guest-$1-$2.log tpid qpid job t0 ok=1

	t0=$(now)
	if ! start_backend "$peer" "$nq"; then
		record "$peer-q$nq:backend" fail "did not start (log $out/backend-$peer-$nq.log)"
		return
	fi
	: >"$log"
	# shellcheck disable=SC2086
	timeout -k 10 "$boot_timeout" "$qemu" \
		-nodefaults -no-user-config -display none -no-reboot -nic none \
		-machine pc -accel "$accel$([ "$accel" = tcg ] && echo ,thread=single)" \
		-cpu max -smp "$nq,sockets=$nq,cores=1,threads=1" -m "$guest_mem" \
		-object "memory-backend-memfd,id=mem,size=${guest_mem}M,share=on" \
		-numa node,memdev=mem -kernel "$kernel" \
		-append "console=ttyS0 root=/dev/vdb ro rootfstype=ext4 init=/init panic=-1 loglevel=1 vbb.mode=bench vbb.runtime=$runtime vbb.njobs=$nq vbb.jobs=$jobs $clock_args" \
		-serial stdio \
		"${disk_opts[@]}" \
		-drive "file=$tools,if=none,id=tools,format=raw,readonly=on" \
		-device virtio-blk-pci,drive=tools,addr=0x5 \
		<"$console_in" >"$log" 2>&1 &
	tpid=$!
	# QEMU is timeout's child: its threads are the ones to count.
	qpid=
	for _ in $(seq 100); do
		qpid=$(pgrep -P "$tpid" | head -n 1)
		[ -z "$qpid" ] || break
		sleep 0.1
	done
	for job in ${jobs//,/ }; do
		if [ -z "$qpid" ] || ! measure "$peer" "$nq" "$job" "$qpid" "$log"; then
			ok=0
			break
		fi
	done
	wait "$tpid"
	if [ -n "$backend_pid" ]; then
		kill -TERM "$backend_pid" 2>/dev/null
		wait "$backend_pid" 2>/dev/null
		backend_pid=
	fi
	if [ "$ok" = 1 ] && grep -q '^VBB-E2E-DONE' "$log"; then
		for job in ${jobs//,/ }; do
			if row "$peer" "$nq" "$job" "$log" >>"$out/rows.jsonl"; then
				record "$peer-q$nq:$job" pass
			else
				record "$peer-q$nq:$job" fail "no figures (log $log)"
			fi
		done
	else
		record "$peer-q$nq:boot" fail "the guest did not finish (log $log)"
		tail -n 20 "$log" | sed 's/^/  guest: /'
	fi
	timing "$peer-q$nq" "$(elapsed "$t0")"
}

declare -a summary
failures=0
results=$out/results
: >"$results"
: >"$out/rows.jsonl"
for nq in $queues; do
	for peer in $peers; do
		msg "$peer, $nq queue(s)"
		boot "$peer" "$nq"
	done
done
printf '%s\n' "${summary[@]}"
echo complete >>"$results"
[ "$failures" = 0 ]
