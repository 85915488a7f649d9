#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The vhost-blk benchmark matrix, run inside the vhost-blk test VM (see
# tools/testing/vhost-blk-ci/vm/run-vm.sh): sets up the null_blk and
# brd disks, starts and stops a qemu-storage-daemon vhost-user-blk export
# per disk, runs vhost-blk-bench over every disk and back-end, and writes
# one JSON document (plus the tables and a Markdown summary) to --out.
# run-bench.sh runs it from the host and draws the chart.

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$dir/../.." && pwd)
BUILD=${BUILD:-$repo/build}
bin=${VHOST_BLK_BENCH_BIN:-$BUILD/vhost-blk-bench/vhost-blk-bench}
# shellcheck source=../testing/selftests/vhost_blk/nvme_tcp.sh
. "$repo/tools/testing/selftests/vhost_blk/nvme_tcp.sh"
# shellcheck source=../testing/vhost-blk-ci/ceph_rbd.sh
. "$repo/tools/testing/vhost-blk-ci/ceph_rbd.sh"
qsd_bin=${VHOST_BLK_BENCH_QSD:-qemu-storage-daemon}
# QEMU 10's, beside the system's 7.2: scripts/qemu10.sh (make bench) puts
# it there.  "none" leaves it out.
qsd10_bin=${VHOST_BLK_BENCH_QSD10:-$BUILD/qemu-10/usr/bin/qemu-storage-daemon}

usage() {
	cat <<EOF
Usage: $me [OPTIONS]

Run inside the vhost-blk test VM (or any machine with /dev/vhost-blk, the
null_blk and brd modules, and qemu-storage-daemon):

  run-vm.sh --out DIR -- bash $me --out DIR

Disks: null_blk irqmode=2 completion_nsec=0 ("null_blk 0us"), null_blk
irqmode=2 completion_nsec=280000 ("null_blk 280us", the setup of QEMU's
notification work) and brd (/dev/ram0, created by the VM's runner).
Back-ends: /dev/vhost-blk, qemu-storage-daemon's vhost-user-blk export
(an iothread, aio=io_uring, cache.direct=on) and io_uring on the raw disk.
Two qemu-storage-daemons are peers, each in rows of its own ("peer"):
the system's (\$VHOST_BLK_BENCH_QSD, Debian 12's 7.2) and QEMU 10's
(\$VHOST_BLK_BENCH_QSD10, default \$BUILD/qemu-10/usr/bin/qemu-storage-daemon
from scripts/qemu10.sh; "none": without it).  Both serve the headline,
matrix, scaling and notify rows; the NVMe/TCP and Ceph rows use the first.

Experiments:
  matrix  4k randread and randwrite, iodepth 1 8 32 128, 1 queue and one
          queue per vCPU, every disk and back-end
  notify  (null_blk 280us) iodepth 1 on 1 queue and iodepth 64 on every
          queue, VIRTIO_RING_F_EVENT_IDX negotiated or not; vhost-blk and
          qemu-storage-daemon
  poll    (null_blk 0us, a blk-mq disk, and brd, a bio-based one)
          iodepth 1, vhost-blk busy-poll timeout 0 1 2 4 8 16 32 64 128
          us, 256 and 1024 us (an emulated guest answers slower than
          128 us), and adaptive (ceilings 32 and 128 us)
  nvmetcp (NVMe/TCP: a null_blk 0us exported by the kernel's NVMe target
          on 127.0.0.1:$nvme_port, connected with nvme-tcp) randread,
          iodepth 1 on 1 queue and 32 on 2, polling off: vhost-blk and
          qemu-storage-daemon on the same namespace, and io_uring on it
  rbd     (Ceph RBD: a one-node cluster, one OSD in memory, on 127.0.0.1)
          randread, iodepth 1 on 1 queue and 32 on 2, polling off:
          vhost-blk on the image mapped by the kernel client (krbd),
          qemu-storage-daemon with QEMU's librbd driver (driver=rbd), and
          qemu-storage-daemon on the same /dev/rbdN with io_uring

Options:
  --out DIR        where results go (default \$VHOST_BLK_VM_OUT)
  --runtime SEC    measured seconds per point (default 2.5)
  --ramp SEC       warm-up seconds per point (default 0.5)
  --only LIST      experiments to run: matrix,notify,poll (default all)
  --smoke          instead: a few requests on every back-end (brd, then
                   the NVMe/TCP namespace), checking only that the counts
                   add up; seconds, for 'make check'.
                   Prints TAP on stdout (one test per run, or one failed
                   test if the setup failed); details on stderr
  -h, --help       this text

Files in DIR: result.json (one document: meta + runs), runs.jsonl,
tables.txt, summary.md, bench.log.  Exit status: 0, 1 if a run failed.
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
# With --smoke stdout is TAP, so a failure before the tool runs is a test.
die() {
	msg "$*"
	[ "$smoke" = 1 ] && printf '1..1\nnot ok 1 - vhost-blk-bench smoke setup\n# %s\n' "$*"
	exit 1
}

smoke=0
out=${VHOST_BLK_VM_OUT:-}
runtime=2.5
ramp=0.5
rounds=
quick=0
# QEMU's default iothread poll-max-ns (32768 ns), in us: the ceiling both
# back-ends poll under in the "both polling" rows.
poll_max_us=32
poll_sweep=0,8,32,128,256,1024,adaptive:32,adaptive:256
only=headline,matrix,scaling,notify,poll,cpoll,nvmetcp,rbd
# The NVMe/TCP export's name and port (nvme_tcp.sh); the name is set once
# it exists, for cleanup.
nvme_port=4422
nvme_name=
while [ $# -gt 0 ]; do
	case "$1" in
	--out)		out=${2:?--out needs a directory}; shift 2 ;;
	--out=*)	out=${1#*=}; shift ;;
	--runtime)	runtime=${2:?--runtime needs seconds}; shift 2 ;;
	--runtime=*)	runtime=${1#*=}; shift ;;
	--ramp)		ramp=${2:?--ramp needs seconds}; shift 2 ;;
	--ramp=*)	ramp=${1#*=}; shift ;;
	--only)		only=${2:?--only needs a list}; shift 2 ;;
	--only=*)	only=${1#*=}; shift ;;
	--rounds)	rounds=${2:?--rounds needs a number}; shift 2 ;;
	--rounds=*)	rounds=${1#*=}; shift ;;
	--quick)	quick=1; shift ;;
	--smoke)	smoke=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		msg "unknown argument $1 (see --help)"; exit 2 ;;
	esac
done

ncpu=$(nproc)
if [ "$quick" = 1 ]; then
	runtime=1
	ramp=0.2
	rounds=${rounds:-2}
	poll_sweep=0,128,adaptive:32
fi
rounds=${rounds:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { msg "--rounds: '$rounds' is not a number above 0"; exit 2; }
qsd_queues=$((ncpu > 4 ? ncpu : 4))

[ -x "$bin" ] || die "$bin not found: build it with 'make -C tools/vhost-blk-bench'"
[ -c /dev/vhost-blk ] || die "/dev/vhost-blk does not exist: is vhost_blk.ko loaded? (run this inside run-vm.sh)"
command -v "$qsd_bin" >/dev/null ||
	die "$qsd_bin not found: install qemu-system-common (Debian), or set VHOST_BLK_BENCH_QSD"
# qsd_version BIN: "10.0" of "qemu-storage-daemon version 10.0.2 (...)".
qsd_version() {
	"$1" --version | sed -n '1s/^.* version \([0-9]*\.[0-9]*\).*/\1/p'
}
# The peers: "NAME|BINARY|MODULE DIR" ("" for the system's own).
peers=("qsd $(qsd_version "$qsd_bin")|$(command -v "$qsd_bin")|")
if [ "$qsd10_bin" != none ] && [ "$smoke" = 0 ]; then
	[ -x "$qsd10_bin" ] ||
		die "$qsd10_bin not found: run scripts/qemu10.sh (make bench does), or set VHOST_BLK_BENCH_QSD10=none"
	peers+=("qsd $(qsd_version "$qsd10_bin")|$qsd10_bin|${qsd10_bin%/bin/*}/lib/x86_64-linux-gnu/qemu")
fi
# The peer start_qsd starts: the first unless use_peer chose another.
peer_name='' peer_bin='' peer_mods=''
use_peer() { IFS='|' read -r peer_name peer_bin peer_mods <<<"$1"; }
use_peer "${peers[0]}"
command -v jq >/dev/null || die "jq not found: install jq (scripts/deps.sh does)"
[ "$(id -u)" = 0 ] || die "must run as root (null_blk configfs, block devices)"

run_dir=$(mktemp -d /tmp/vhost-blk-bench.XXXXXX)
qsd_pid=
nullbs=()

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	stop_qsd
	local n
	[ -z "$nvme_name" ] || nvme_tcp_down "$nvme_name" "$nvme_port"
	ceph_rbd_down "$run_dir/ceph"
	for n in "${nullbs[@]}"; do
		echo 0 >"/sys/kernel/config/nullb/$n/power" 2>/dev/null || true
		rmdir "/sys/kernel/config/nullb/$n" 2>/dev/null || true
	done
	rm -rf "$run_dir"
}
trap cleanup EXIT

# A null_blk disk through configfs: name irqmode completion_nsec
# [poll_queues].  Prints its device node.  Queues and tags enough for every
# queue at iodepth 128; poll queues (for IOPOLL and completion polling) on
# top of the submit queues when asked.  Runs in a command substitution: the
# caller records the name for cleanup.
setup_nullb() {
	local name=$1 irqmode=$2 nsec=$3 pollq=${4:-0} cfg=/sys/kernel/config/nullb/$1 idx

	[ -d /sys/kernel/config/nullb ] ||
		die "/sys/kernel/config/nullb missing: null_blk not loaded or configfs not mounted"
	mkdir "$cfg" || die "mkdir $cfg failed"
	echo 2 >"$cfg/queue_mode"		# blk-mq
	echo 4096 >"$cfg/size"			# MiB, not memory backed
	echo "$irqmode" >"$cfg/irqmode"
	echo "$nsec" >"$cfg/completion_nsec"
	echo "$ncpu" >"$cfg/submit_queues"
	if [ "$pollq" -gt 0 ]; then
		[ -e "$cfg/poll_queues" ] || die "null_blk $name: no poll_queues in configfs (kernel too old)"
		echo "$pollq" >"$cfg/poll_queues" || die "null_blk $name: poll_queues=$pollq refused"
	fi
	echo 256 >"$cfg/hw_queue_depth"
	echo 1 >"$cfg/power" || die "powering on null_blk $name failed"
	idx=$(cat "$cfg/index")
	# The disk takes the configfs name on recent kernels, nullb<index> before.
	local dev
	for dev in "/dev/$name" "/dev/nullb$idx"; do
		if [ -b "$dev" ]; then
			echo "$dev"
			return 0
		fi
	done
	die "null_blk $name: no /dev/$name or /dev/nullb$idx"
}

# setup_nvme_tcp: a null_blk 0us (not memory backed, no poll queues)
# exported over NVMe/TCP and connected; sets nvme_dev to the namespace.
setup_nvme_tcp() {
	local nb err

	nullbs+=(vbb_nullb_nvmet)
	nb=$(setup_nullb vbb_nullb_nvmet 2 0)
	nvme_name=vbb-bench
	nvme_dev=$(nvme_tcp_up "$nvme_name" "$nb" "$nvme_port" 2>"$run_dir/nvme.err") ||
		{ err=$(tr '\n' ' ' <"$run_dir/nvme.err"); die "NVMe/TCP: $err"; }
	nvme_setup="null_blk queue_mode=2 irqmode=2 (timer) completion_nsec=0 submit_queues=$ncpu, exported by nvmet-tcp on 127.0.0.1:$nvme_port, connected with nvme-tcp as $nvme_dev (loopback, no network emulated)"
}

# wait_sock PID SOCK TENTHS: whether process PID creates SOCK within
# TENTHS tenths of a second (false as soon as it exits).
wait_sock() {
	local i
	for ((i = 0; i < $3; i++)); do
		[ -S "$2" ] && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	[ -S "$2" ]
}

# start_qsd DEV SOCK POLL_MAX_NS: one iothread (qsd 7.2 exports run in
# one), polling adaptively up to POLL_MAX_NS (0: not at all), on DEV with
# io_uring.
start_qsd() {
	start_qsd_on "driver=host_device,filename=$1,node-name=disk,cache.direct=on,aio=io_uring" "$2" "$3"
}

# start_qsd_on BLOCKDEV SOCK POLL_MAX_NS: the same on any --blockdev whose
# node is "disk".
start_qsd_on() {
	local blockdev=$1 sock=$2 pollns=$3 dev=${1#*filename=}

	dev=${dev%%,*}
	rm -f "$sock"
	# Its own block modules (rbd), not the system's older ones.
	QEMU_MODULE_DIR=${peer_mods:-${QEMU_MODULE_DIR:-}} "$peer_bin" \
		--object "iothread,id=io0,poll-max-ns=$pollns" \
		--blockdev "$blockdev" \
		--export "type=vhost-user-blk,id=exp,node-name=disk,iothread=io0,addr.type=unix,addr.path=$sock,writable=on,num-queues=$qsd_queues" \
		>>"$run_dir/qsd.log" 2>&1 &
	qsd_pid=$!
	wait_sock "$qsd_pid" "$sock" 300 && return 0
	sed 's/^/  /' "$run_dir/qsd.log" >&2
	die "$peer_name ($peer_bin) for $dev did not create $sock"
}

# Whether this qemu-storage-daemon serves one export from several
# iothreads (a list, iothread.N=); prints its answer.
probe_qsd_iothreads() {
	local sock=$run_dir/probe.sock pid msg

	timeout 20 "$peer_bin" --object iothread,id=io0 --object iothread,id=io1 \
		--blockdev "driver=host_device,filename=/dev/ram0,node-name=disk,cache.direct=on,aio=io_uring" \
		--export "type=vhost-user-blk,id=exp,node-name=disk,iothread.0=io0,iothread.1=io1,addr.type=unix,addr.path=$sock,writable=on,num-queues=2" \
		>"$run_dir/probe.log" 2>&1 &
	pid=$!
	if wait_sock "$pid" "$sock" 100; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		echo "supported (iothread.N= accepted), not used here: the scaling rows run qsd with one iothread"
	else
		wait "$pid" 2>/dev/null || true
		msg=$(head -n 1 "$run_dir/probe.log" | sed 's/.*: //')
		echo "not supported by this version: one iothread per export (iothread.0=,iothread.1= answered: $msg)"
	fi
	rm -f "$sock"
}

stop_qsd() {
	[ -n "$qsd_pid" ] || return 0
	kill "$qsd_pid" 2>/dev/null || true
	wait "$qsd_pid" 2>/dev/null || true
	qsd_pid=
}

failed=0

# bench LABEL TAG ARGS...: one invocation of the tool; appends its JSON
# lines and its table.
bench() {
	local label=$1 tag=$2

	shift 2
	if ! "$bin" --quiet --label "$label" --tag "$tag" \
	     --json "$out/runs.jsonl" "$@" >>"$out/tables.txt" 2>>"$out/bench.log"; then
		msg "$tag on $label: a run failed (see $out/bench.log)"
		failed=1
	fi
}

[ -n "$out" ] || die "no --out directory (and VHOST_BLK_VM_OUT is not set)"
mkdir -p "$out"

if [ "$smoke" = 1 ]; then
	[ -b /dev/ram0 ] || die "/dev/ram0 does not exist (brd not loaded?)"
	sock=$run_dir/smoke.sock
	rc1=0 rc2=0 rc3=0
	start_qsd /dev/ram0 "$sock" 0
	"$bin" --smoke --quiet --cpus split --label "brd" -d /dev/ram0 \
		-s "$sock" -u plain,sqpoll --json "$out/smoke.jsonl" \
		>"$run_dir/smoke1.tap" || rc1=$?
	stop_qsd
	# Completion polling: a kernel without it skips (TAP SKIP).
	"$bin" --smoke --quiet --cpus split --label "brd" -d /dev/ram0 \
		-b vhost-blk -r randread -n 1 -p 8 --poll-completions on \
		--json "$out/smoke.jsonl" >"$run_dir/smoke2.tap" || rc2=$?
	# Network storage: the three back-ends on an NVMe/TCP namespace.
	setup_nvme_tcp
	start_qsd "$nvme_dev" "$sock" 0
	"$bin" --smoke --quiet --cpus split --label "nvme-tcp" -d "$nvme_dev" \
		-s "$sock" -u plain --json "$out/smoke.jsonl" \
		>"$run_dir/smoke3.raw" || rc3=$?
	sed -E 's/^((not )?ok [0-9]+ - )/\1nvme-tcp: /' "$run_dir/smoke3.raw" \
		>"$run_dir/smoke3.tap"
	stop_qsd
	# One TAP stream: the tests of all, numbered on, under the plans the
	# runs declared before they ran (one that died early misses results,
	# which count as failures), and each run's exit status as a test.
	n=0
	for k in 1 2 3; do
		p=$(sed -n '/^1\.\.[0-9][0-9]*$/ { s/^1\.\.//p; q }' \
		    "$run_dir/smoke$k.tap")
		n=$((n + ${p:-0} + 1))
	done
	printf 'TAP version 13\n1..%d\n' "$n"
	i=0
	for k in 1 2 3; do
		eval "rc=\$rc$k"
		awk -v i="$i" '/^(TAP version|1\.\.[0-9]+$)/ { next }
			/^(not )?ok [0-9]+/ { sub(/ok [0-9]+/, "ok " ++i) }
			{ print } END { print i >"/dev/stderr" }' \
			"$run_dir/smoke$k.tap" 2>"$run_dir/smoke.count"
		i=$(( $(cat "$run_dir/smoke.count") + 1 ))
		if [ "$rc" = 0 ]; then
			echo "ok $i - smoke run $k exited 0"
		else
			echo "not ok $i - smoke run $k exited $rc"
			failed=1
		fi
	done
	exit "$failed"
fi

rm -f "$out/tables.txt" "$out/bench.log" "$out/result.json" "$out/summary.md"
: >"$out/runs.jsonl"
start=$(date +%s)
# Guest-model queue i on vCPU i, the back-end's threads on the last vCPU,
# for every back-end alike (see benchmark.rst: placement dominates TCG).
common=(--cpus split --runtime "$runtime" --ramp "$ramp")
want() { [[ ,$only, == *,$1,* ]]; }

# label, device node, description (for the JSON meta)
declare -a disks=()
nullbs=(vbb_nullb0 vbb_nullb280)
nb0=$(setup_nullb vbb_nullb0 2 0 1)
nb280=$(setup_nullb vbb_nullb280 2 280000)
disks+=("null_blk 0us|$nb0|null_blk queue_mode=2 irqmode=2 (timer) completion_nsec=0 submit_queues=$ncpu poll_queues=1 hw_queue_depth=256")
disks+=("null_blk 280us|$nb280|null_blk queue_mode=2 irqmode=2 (timer) completion_nsec=280000 submit_queues=$ncpu hw_queue_depth=256")
disks+=("brd|/dev/ram0|brd ramdisk (completes at submission), $(($(blockdev --getsize64 /dev/ram0) >> 20)) MiB")
# IOPOLL only where the disk polls.
uring_all=plain,sqpoll
[ "$(cat "/sys/block/${nb0#/dev/}/queue/io_poll" 2>/dev/null)" = 1 ] &&
	uring_all=plain,sqpoll,iopoll
sock=$run_dir/qsd.sock
qsd_multi=
for p in "${peers[@]}"; do
	use_peer "$p"
	qsd_multi+="${qsd_multi:+; }$peer_name: $(probe_qsd_iothreads)"
done
use_peer "${peers[0]}"
msg "qemu-storage-daemon, one export on several iothreads: $qsd_multi"

# Both polling settings of the parity rows: off (vhost-blk busyloop 0, qsd
# poll-max-ns=0) and adaptive under one ceiling (qsd's default
# poll-max-ns, vhost-blk's adaptive mode with the same value).
poll_modes=("off|0|0|0" "adaptive|adaptive:$poll_max_us|adaptive:$poll_max_us|$((poll_max_us * 1000))")

# parity LABEL DEV TAG ROUND ARGS...: vhost-blk and every qsd with both
# polling settings (qsd restarted for each), then io_uring in its set-ups.
parity() {
	local label=$1 dev=$2 tag=$3 round=$4 pm vbp vup ns uring p be
	shift 4
	uring=plain,sqpoll
	[ "$dev" = "$nb0" ] && uring=$uring_all
	for pm in "${poll_modes[@]}"; do
		IFS='|' read -r _ vbp vup ns <<<"$pm"
		be=vhost-blk,vhost-user
		for p in "${peers[@]}"; do
			use_peer "$p"
			start_qsd "$dev" "$sock" "$ns"
			bench "$label" "$tag" -d "$dev" -s "$sock" "${common[@]}" \
				-b "$be" -p "$vbp" --vu-poll "$vup" \
				--vu-peer "$peer_name" --round "$round" "$@"
			stop_qsd
			be=vhost-user
		done
	done
	use_peer "${peers[0]}"
	bench "$label" "$tag" -d "$dev" "${common[@]}" -b io_uring \
		-u "$uring" --round "$round" "$@"
}

# Headline: null_blk 0us randread, iodepth 1 on one queue and iodepth 32
# on two (a worker each), $rounds rounds, medians.
if want headline; then
	for r in $(seq "$rounds"); do
		msg "headline round $r of $rounds"
		parity "null_blk 0us" "$nb0" headline "$r" -r randread -q 1 -n 1 -w per-queue
		parity "null_blk 0us" "$nb0" headline "$r" -r randread -q 32 -n 2 -w per-queue
	done
fi

# The matrix: every disk, reads and writes, the same two shapes, one round.
if want matrix; then
	for d in "${disks[@]}"; do
		IFS='|' read -r label dev _ <<<"$d"
		msg "matrix: $label ($dev)"
		parity "$label" "$dev" matrix 1 -r randread,randwrite -q 1 -n 1 -w per-queue
		parity "$label" "$dev" matrix 1 -r randread,randwrite -q 32 -n 2 -w per-queue
	done
fi

# Scaling: 1, 2 and 4 queues at iodepth 32 each; vhost-blk with one shared
# worker and with a worker per queue; qsd with its one iothread; io_uring.
if want scaling; then
	msg "scaling: null_blk 0us"
	be=vhost-blk,vhost-user
	for p in "${peers[@]}"; do
		use_peer "$p"
		start_qsd "$nb0" "$sock" 0
		bench "null_blk 0us" scaling -d "$nb0" -s "$sock" "${common[@]}" \
			-b "$be" -r randread -q 32 -n 1,2,4 -w shared -p 0 \
			--vu-poll 0 --vu-peer "$peer_name"
		stop_qsd
		be=vhost-user
	done
	use_peer "${peers[0]}"
	bench "null_blk 0us" scaling -d "$nb0" "${common[@]}" -b vhost-blk \
		-r randread -q 32 -n 2,4 -w per-queue
fi

# Notification policy: polling off on both sides.
if want notify; then
	msg "notify: null_blk 280us"
	be=vhost-blk,vhost-user
	for p in "${peers[@]}"; do
		use_peer "$p"
		start_qsd "$nb280" "$sock" 0
		bench "null_blk 280us" notify -d "$nb280" -s "$sock" "${common[@]}" \
			-b "$be" -q 1 -n 1 -e on,off --vu-poll 0 --vu-peer "$peer_name"
		bench "null_blk 280us" notify -d "$nb280" -s "$sock" "${common[@]}" \
			-b "$be" -q 64 -n all -e on,off --vu-poll 0 --vu-peer "$peer_name"
		stop_qsd
		be=vhost-user
	done
	use_peer "${peers[0]}"
fi

# vhost-blk's busy-poll sweep, on a blk-mq disk and a bio-based one.
if want poll; then
	for d in "null_blk 0us|$nb0" "brd|/dev/ram0"; do
		IFS='|' read -r label dev <<<"$d"
		msg "poll: $label"
		bench "$label" poll -d "$dev" "${common[@]}" -b vhost-blk -q 1 -n 1 \
			-p "$poll_sweep"
	done
fi

# Completion polling (VHOST_BLK_POLL_COMPLETIONS) on the poll-queue
# null_blk, with and without, next to io_uring with and without IOPOLL;
# $rounds rounds.  Both vhost-blk rows busy-poll a fixed window of the
# ceiling ($poll_max_us us): it takes a busy-polled ring for the worker to
# reap, and under TCG the adaptive window never opens (see the poll
# sweep).  A kernel without the flag: "unsupported" rows.
if want cpoll; then
	for r in $(seq "$rounds"); do
		msg "cpoll round $r of $rounds"
		bench "null_blk 0us" cpoll -d "$nb0" "${common[@]}" -b vhost-blk \
			-r randread -q 1,32 -n 1 -p "$poll_max_us" \
			--poll-completions off,on --round "$r"
		bench "null_blk 0us" cpoll -d "$nb0" "${common[@]}" -b io_uring \
			-r randread -q 1,32 -n 1 -u "${uring_all/sqpoll,/}" --round "$r"
	done
fi
# Network storage: the same null_blk kind behind NVMe/TCP on loopback;
# both vhost back-ends with polling off, io_uring beside; $rounds rounds.
if want nvmetcp; then
	setup_nvme_tcp
	disks+=("nvme-tcp|$nvme_dev|$nvme_setup")
	for r in $(seq "$rounds"); do
		msg "nvmetcp round $r of $rounds ($nvme_dev)"
		start_qsd "$nvme_dev" "$sock" 0
		for shape in "-q 1 -n 1" "-q 32 -n 2"; do
			# shellcheck disable=SC2086  # two options in each
			bench "nvme-tcp" nvmetcp -d "$nvme_dev" -s "$sock" "${common[@]}" \
				-b vhost-blk,vhost-user -p 0 --vu-poll 0 -r randread \
				$shape -w per-queue --vu-peer "$peer_name" --round "$r"
		done
		stop_qsd
		for shape in "-q 1 -n 1" "-q 32 -n 2"; do
			# shellcheck disable=SC2086
			bench "nvme-tcp" nvmetcp -d "$nvme_dev" "${common[@]}" \
				-b io_uring -u plain -r randread $shape --round "$r"
		done
	done
fi
# Ceph: krbd under vhost-blk against librbd in qemu-storage-daemon, and
# qsd on krbd with io_uring; $rounds rounds.  Without Ceph installed
# (scripts/deps.sh --ceph) the experiment is recorded as not run.
rbd_status="not run"
if want rbd; then
	if ! command -v ceph-mon >/dev/null || ! command -v rbd >/dev/null; then
		rbd_status="not run: Ceph is not installed (scripts/deps.sh --ceph)"
		msg "rbd: $rbd_status"
	elif ! rbd_dev=$(ceph_rbd_up "$run_dir/ceph" vbb 256 2>"$run_dir/ceph.err"); then
		rbd_status="not run: the cluster did not come up: $(tr '\n' ' ' <"$run_dir/ceph.err")"
		msg "rbd: $rbd_status"
		failed=1
	else
		rbd_status="run"
		export CEPH_CONF=$run_dir/ceph/ceph.conf
		disks+=("krbd|$rbd_dev|Ceph 16 one-node cluster on 127.0.0.1 (1 mon, 1 mgr, 1 OSD on memstore, pool size 1, no auth), 256 MiB image rbd/vbb mapped by the kernel client as $rbd_dev")
		disks+=("librbd|rbd/vbb|the same image through QEMU's rbd driver (librbd) in qemu-storage-daemon")
		# Every read finds data: a read of an object never written costs
		# less in both clients.
		dd if=/dev/zero of="$rbd_dev" bs=4M oflag=direct 2>/dev/null || true
		for r in $(seq "$rounds"); do
			msg "rbd round $r of $rounds ($rbd_dev)"
			start_qsd "$rbd_dev" "$sock" 0
			for shape in "-q 1 -n 1" "-q 32 -n 2"; do
				# shellcheck disable=SC2086  # two options in each
				bench "krbd" rbd -d "$rbd_dev" -s "$sock" "${common[@]}" \
					-b vhost-blk,vhost-user -p 0 --vu-poll 0 -r randread \
					$shape -w per-queue --vu-peer "$peer_name" --round "$r"
			done
			stop_qsd
			start_qsd_on "driver=rbd,pool=rbd,image=vbb,conf=$CEPH_CONF,node-name=disk,cache.direct=on" "$sock" 0
			for shape in "-q 1 -n 1" "-q 32 -n 2"; do
				# shellcheck disable=SC2086
				bench "librbd" rbd -d "$rbd_dev" -s "$sock" "${common[@]}" \
					-b vhost-user --vu-poll 0 -r randread $shape \
					--vu-peer "$peer_name" --round "$r"
			done
			stop_qsd
		done
	fi
fi
end=$(date +%s)

# One document: what ran where, then every run.  Written by jq, read by jq
# (summary.sh, plot.sh): a field added to the runs cannot break a reader.
disks_json=$(for d in "${disks[@]}"; do
	IFS='|' read -r label dev desc <<<"$d"
	jq -cn --arg lbl "$label" --arg device "$dev" --arg setup "$desc" \
		'{"label": $lbl, device: $device, setup: $setup}'
done | jq -cs .)
peers_json=$(for p in "${peers[@]}"; do
	use_peer "$p"
	jq -cn --arg peer "$peer_name" --arg binary "$peer_bin" \
		--arg version "$("$peer_bin" --version | head -n 1)" \
		'{peer: $peer, version: $version, binary: $binary}'
done | jq -cs .)
emulated=false
grep -q 'QEMU TCG' /proc/cpuinfo && emulated=true
jq -n --slurpfile runs "$out/runs.jsonl" --argjson disks "$disks_json" \
	--arg date "${VHOST_BLK_BENCH_DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}" \
	--arg env "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
	--argjson emulated "$emulated" \
	--argjson vcpus "$ncpu" \
	--argjson mem_mib "$(($(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))" \
	--arg kernel "$(uname -r)" \
	--arg qsd "$("$qsd_bin" --version | head -n 1)" \
	--argjson peers "$peers_json" \
	--arg qsd_export "--object iothread,id=io0,poll-max-ns=N --blockdev driver=host_device,cache.direct=on,aio=io_uring --export type=vhost-user-blk,iothread=io0,num-queues=$qsd_queues" \
	--arg qsd_multi "$qsd_multi" --arg rbd_status "$rbd_status" \
	--argjson poll_max_us "$poll_max_us" --argjson rounds "$rounds" \
	--arg uring_modes "$uring_all" --arg only "$only" \
	--arg commit "${VHOST_BLK_BENCH_COMMIT:-unknown}" \
	--arg host_cpus "${VHOST_BLK_BENCH_HOST_CPUS:-unknown}" \
	--arg host_load "${VHOST_BLK_BENCH_HOST_LOAD:-unknown}" \
	--argjson runtime "$runtime" --argjson ramp "$ramp" \
	--argjson wall "$((end - start))" '
{
	meta: ({
		tool: "vhost-blk-bench", format: 2, date: $date,
		environment: $env, emulated: $emulated,
		vcpus: $vcpus, guest_mem_mib: $mem_mib, guest_kernel: $kernel,
		vm: "\($vcpus) vCPUs, \($mem_mib) MiB usable (the test VM\u0027s default size), on a \($host_cpus)-CPU host",
		qemu_storage_daemon: $qsd, qsd_export: $qsd_export,
		qsd_peers: $peers,
		qsd_multi_iothread: $qsd_multi, rbd: $rbd_status,
		poll_max_us: $poll_max_us,
		polling_rows: "off: vhost-blk busyloop 0, qsd iothread poll-max-ns=0; adaptive: vhost-blk VHOST_BLK_POLL_ADAPTIVE and qsd poll-max-ns, both with a ceiling of \($poll_max_us) us (QEMU\u0027s default)",
		uring_modes: $uring_modes,
		rounds: $rounds, experiments: $only,
		cpu_counted: "cpu_us_per_req = back-end threads (schedstat run time: vhost-PID workers; every qsd thread; every thread of the tool for io_uring, SQPOLL thread included) + all CPUs\u0027 irq + softirq time from /proc/stat, over the measured window, per request",
		commit: $commit, host_cpus: $host_cpus,
		host_loadavg_before: $host_load,
		runtime_s: $runtime, ramp_s: $ramp,
		matrix_wall_s: $wall, total_wall_s: null,
		disks: $disks
	} + if $emulated then {note: "Measured under QEMU TCG emulation (software CPU): not hardware figures. Compare ratios and per-request counts only."} else {} end),
	runs: $runs
}' | jq -L "$dir" 'include "bench"; with_summary' >"$out/result.json"

bash "$dir/summary.sh" "$out/result.json" >"$out/summary.md" ||
	msg "summary.sh failed"
msg "matrix done in $((end - start)) s: $out/result.json"
exit "$failed"
