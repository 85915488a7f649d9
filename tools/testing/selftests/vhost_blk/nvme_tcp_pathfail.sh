#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# NVMe/TCP path failure under a writing guest, in the test VM: a null_blk
# exported by the kernel's NVMe target on 127.0.0.1 and connected with
# nvme-tcp (nvme_tcp.sh) is vhost-blk's backend; vhost_blk_pathfail
# writes verified blocks through /dev/vhost-blk while the target's port
# stops serving the subsystem, and again once it serves it before
# ctrl_loss_tmo has run out.  Then no request may be lost or answered
# twice, every sector must hold what the answers say, and the device
# must go on serving.  TAP on stdout.
#
# Usage: nvme_tcp_pathfail.sh [--outage S] [--ctrl-loss-tmo S] BINDIR

set -u
me=nvme_tcp_pathfail.sh
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nvme_tcp.sh
. "$here/nvme_tcp.sh"

usage() {
	cat <<EOF
Usage: $me [OPTIONS] BINDIR

In the test VM, as root: export a null_blk over NVMe/TCP on loopback
(port $port), give its namespace to vhost-blk, and run
BINDIR/vhost_blk_pathfail on it while the target's port goes down for
--outage seconds and comes back.  TAP on stdout.

Options:
  --outage S          how long the port stays down (default $outage)
  --ctrl-loss-tmo S   the host's ctrl_loss_tmo (default $tmo): I/O held
                      longer than this fails; the outage must be shorter
  -h, --help          this text
EOF
}

outage=5
tmo=60
port=4421
name=pathfail
while [ $# -gt 0 ]; do
	case "$1" in
	--outage)	outage=${2:?--outage needs a value}; shift 2 ;;
	--ctrl-loss-tmo) tmo=${2:?--ctrl-loss-tmo needs a value}; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
	*)		break ;;
	esac
done
[ $# -eq 1 ] || { echo "$me: usage: $me [OPTIONS] BINDIR (see --help)" >&2; exit 2; }
bindir=$1
[[ $outage =~ ^[0-9]+$ && $tmo =~ ^[0-9]+$ ]] && [ "$outage" -lt "$tmo" ] || {
	echo "$me: --outage and --ctrl-loss-tmo are seconds, the outage the shorter" >&2
	exit 2
}

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
note() { echo "# $*"; }

work=$(mktemp -d)
nb=/sys/kernel/config/nullb/vbb-pathfail
pid=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null
	nvme_tcp_down "$name" "$port"
	if [ -d "$nb" ]; then
		echo 0 >"$nb/power"
		rmdir "$nb"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "TAP version 13"

# 64 MiB of memory behind the namespace; the window is its first 8 MiB.
setup() {
	modprobe null_blk || return
	mkdir "$nb" && echo 64 >"$nb/size" && echo 1 >"$nb/memory_backed" &&
		echo 512 >"$nb/blocksize" && echo 1 >"$nb/power" || return
	for _ in $(seq 50); do
		[ -b /dev/vbb-pathfail ] && break
		sleep 0.1
	done
	[ -b /dev/vbb-pathfail ] || { echo "no /dev/vbb-pathfail" >&2; return 1; }
	nvme_tcp_up "$name" /dev/vbb-pathfail "$port" "$tmo"
}

# progress_field N: field N of the guest's "ANSWERED INFLIGHT IOERR".
progress_field() {
	awk -v f="$1" '{ print $f }' "$work/progress" 2>/dev/null
}

# wait_for SECONDS CONDITION...: poll every 0.2 s; a bound against a hang,
# not a measurement.
wait_for() {
	local i limit=$(($1 * 5))

	shift
	for ((i = 0; i < limit; i++)); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}
answered_at_least() { [ "$(progress_field 1)" -ge "$1" ] 2>/dev/null; }
state_is() { [ "$(nvme_tcp_state "$name")" = "$1" ]; }
state_is_not() { [ "$(nvme_tcp_state "$name")" != "$1" ]; }
guest_exited() { ! kill -0 "$pid" 2>/dev/null; }

if ! dev=$(setup 2>"$work/setup.err"); then
	not_ok "NVMe/TCP export and connection: $(tr '\n' ' ' <"$work/setup.err")"
	echo "1..$n"
	exit 1
fi
ok "null_blk exported over NVMe/TCP on 127.0.0.1:$port, connected as $dev (ctrl_loss_tmo $tmo s)"

blocks=2048
"$bindir/vhost_blk_pathfail" --backend "$dev" --blocks $blocks --depth 16 \
	--stop-file "$work/stop" --progress-file "$work/progress" \
	--drain-timeout $((tmo + 60)) >"$work/guest.tap" 2>"$work/guest.err" &
pid=$!

# The window written once, then 200 answers of the random writes.
if wait_for 600 answered_at_least $((blocks + 200)); then
	ok "the guest writes through vhost-blk ($(progress_field 1) answers)"
else
	not_ok "the guest writes through vhost-blk: $(progress_field 1) answers after 600 s"
fi

before=$(progress_field 1)
if nvme_tcp_port_down "$name" "$port" &&
   wait_for 30 state_is_not live; then
	inflight=$(progress_field 2)
	state=$(nvme_tcp_state "$name")
	ok "port down: the host lost the path (controller $state, $inflight writes in flight)"
else
	not_ok "port down: the controller is still $(nvme_tcp_state "$name") after 30 s"
fi
sleep "$outage"
during=$(( $(progress_field 1) - before ))
note "answers while the port was down: $during (requests queued by the host until it reconnects)"

if nvme_tcp_port_up "$name" "$port" && wait_for "$tmo" state_is live; then
	ok "port up again: the controller is live (before ctrl_loss_tmo)"
else
	not_ok "port up again: the controller is $(nvme_tcp_state "$name"), not live"
fi

resumed=$(progress_field 1)
if wait_for 120 answered_at_least $((resumed + 64)); then
	ok "writes go on after the reconnection ($(( $(progress_field 1) - resumed )) more answers)"
else
	answers=$(( $(progress_field 1) - resumed ))
	not_ok "writes go on after the reconnection: $answers answers in 120 s"
fi

touch "$work/stop"
if ! wait_for $((tmo + 600)) guest_exited; then
	not_ok "the guest finishes"
	kill "$pid"
fi
wait "$pid"
rc=$?
pid=
# The guest's own results, numbered after ours.
while IFS= read -r line; do
	case "$line" in
	"ok "*|"not ok "*)
		res=${line%% [0-9]*}
		desc=${line#* - }
		[ "$res" = ok ] || failed=1
		n=$((n + 1))
		echo "$res $n - guest: $desc"
		;;
	"#"*)	echo "$line" ;;
	esac
done <"$work/guest.tap"
sed 's/^/# guest: /' "$work/guest.err"
if [ "$rc" -ne 0 ]; then
	not_ok "vhost_blk_pathfail exited with status $rc"
fi
echo "1..$n"
exit $failed
