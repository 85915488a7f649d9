#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# exits-per-io.sh: what a running guest's virtual disk costs it, per
# completed request: VM exits by reason, ioeventfd kicks and irqfd
# interrupts (KVM's tracepoints), beside vhost-blk's own tracepoints.
# Without KVM (a TCG guest) only the vhost_blk events can be counted, and
# the module's kicks and notifications stand in for the exits and the
# interrupts; the report says which it is.
set -euo pipefail

me=exits-per-io

usage() {
	cat <<EOF
Usage: $me --pid QEMU_PID [OPTIONS]

Count, over SECONDS, with 'perf record' on the guest's QEMU and on the
process that holds /dev/vhost-blk for it (QEMU itself, or
vhost-blk-bridge):

  kvm:kvm_exit           by exit reason (KVM only)
  kvm:kvm_fast_mmio      ioeventfd kicks that exited (KVM only)
  kvm:kvm_msi_set_irq    MSIs injected, irqfd's among them (KVM only)
  vhost_blk:*            requests completed, guest kicks handled,
                         notifications sent and suppressed

and report each per completed request (vhost_blk_req_complete).

Options:
  --pid PID        the guest's QEMU (required)
  --owner PID      the process holding /dev/vhost-blk (default: found in
                   /proc; several are an error)
  --seconds N      how long to count (default 10)
  --json FILE      also write the figures as JSON (jq)
  --parse FILE     report on a saved 'perf script' output instead of
                   recording (for tests)
  -h, --help       this text

Needs root, perf (Debian: linux-perf) and jq for --json; the vhost_blk
module must be loaded for its tracepoints.  See
Documentation/virt/vhost-blk/benchmark.rst, "Exits per I/O".
EOF
}

die() { echo "$me: error: $*" >&2; exit 1; }

pid= owner= secs=10 json= parse=
while [ $# -gt 0 ]; do
	case "$1" in
	--pid) pid=${2:?}; shift 2 ;;
	--owner) owner=${2:?}; shift 2 ;;
	--seconds) secs=${2:?}; shift 2 ;;
	--json) json=${2:?}; shift 2 ;;
	--parse) parse=${2:?}; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || die "--seconds: a whole number of seconds, not '$secs'"
[ -z "$json" ] || command -v jq >/dev/null || die "--json needs jq (apt-get install jq)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# owner_kthreads PID: the kthreads that work for PID's vhost devices
# (vhost-PID, and vhost-blk-PID, the sync task): not threads of PID.
owner_kthreads() {
	local p comm

	for p in /proc/[0-9]*; do
		comm=$(cat "$p/comm" 2>/dev/null) || continue
		case "$comm" in
		"vhost-$1" | "vhost-blk-$1"*)
			[ -d "/proc/$1/task/${p##*/}" ] || echo "${p##*/}" ;;
		esac
	done
}

# owners: every process with /dev/vhost-blk open.
owners() {
	local fd

	for fd in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = /dev/vhost-blk ] &&
			echo "${fd%/fd/*}"
	done 2>/dev/null | sed 's|^/proc/||' | sort -un
}

kvm=0
if [ -n "$parse" ]; then
	[ -r "$parse" ] || die "cannot read $parse"
	cp "$parse" "$tmp/script"
	grep -q 'kvm:kvm_exit:' "$tmp/script" && kvm=1
	pid=${pid:-0} owner=${owner:-0}
else
	[ -n "$pid" ] || die "--pid is required (see --help)"
	[ -d "/proc/$pid" ] || die "no process $pid"
	command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
	if [ -z "$owner" ]; then
		mapfile -t found < <(owners)
		[ "${#found[@]}" -gt 0 ] || die "no process has /dev/vhost-blk open"
		[ "${#found[@]}" = 1 ] ||
			die "${#found[@]} processes have /dev/vhost-blk open (${found[*]}): say which with --owner"
		owner=${found[0]}
	fi
	[ -d "/proc/$owner" ] || die "no process $owner"
	perf list 'vhost_blk:*' 2>/dev/null | grep -q vhost_blk_req_complete ||
		die "no vhost_blk tracepoints (is vhost_blk loaded? run as root)"
	events=(-e vhost_blk:vhost_blk_req_complete -e vhost_blk:vhost_blk_kick
		-e vhost_blk:vhost_blk_notify)
	# KVM: the guest's QEMU has a VM (an anon inode kvm-vm), and the
	# kvm tracepoints exist.
	if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q 'anon_inode:kvm-vm' &&
	   perf list 'kvm:kvm_exit' 2>/dev/null | grep -q kvm_exit; then
		kvm=1
		events+=(-e kvm:kvm_exit -e kvm:kvm_fast_mmio -e kvm:kvm_msi_set_irq)
	fi
	# The vCPUs exit in QEMU's threads; the vhost worker kicks,
	# completes and signals the irqfd, whose MSI is injected in its
	# context.  The worker is a thread of the device's owner (a
	# vhost_task, since 6.4), or a kthread named vhost-OWNER (6.1, or
	# kthread workers: VHOST_SET_FORK_FROM_OWNER, as vhost-blk-bridge
	# asks for to charge its frontend), which -p OWNER does not cover.
	pids=$pid
	[ "$owner" = "$pid" ] || pids="$pid,$owner"
	for w in $(owner_kthreads "$owner"); do
		pids+=",$w"
	done
	# Counts only: no build-ID pass over the samples at the end and no
	# build-ID cache (-B -N), 4 of perf's 10 s of overhead under TCG.
	perf record -q -B -N -o "$tmp/perf.data" -p "$pids" "${events[@]}" \
		-- sleep "$secs" >"$tmp/record.log" 2>&1 ||
		die "perf record -p $pids failed: $(tail -n 1 "$tmp/record.log")"
	perf script -i "$tmp/perf.data" -F event,trace >"$tmp/script" 2>"$tmp/script.log" ||
		die "perf script failed: $(tail -n 1 "$tmp/script.log")"
fi

# One pass over 'perf script -F event,trace' (or its default fields):
# name=value lines.
awk '
/vhost_blk:vhost_blk_req_complete:/	{ done++ }
/vhost_blk:vhost_blk_kick:/		{ if (/guest kick/) kicks++; else requeued++ }
/vhost_blk:vhost_blk_notify:/		{ if (/ sent/) sent++; else suppressed++ }
/kvm:kvm_fast_mmio:/			{ mmio++ }
/kvm:kvm_msi_set_irq:/			{ msi++ }
/kvm:kvm_exit:/ {
	exits++
	if (match($0, /reason [A-Za-z_0-9]+/))
		reason[substr($0, RSTART + 7, RLENGTH - 7)]++
}
END {
	printf "completed=%d\nkicks=%d\nrequeued=%d\nsent=%d\nsuppressed=%d\n",
		done, kicks, requeued, sent, suppressed
	printf "exits=%d\nfast_mmio=%d\nmsi=%d\n", exits, mmio, msi
	for (r in reason)
		printf "reason_%s=%d\n", r, reason[r]
}' "$tmp/script" >"$tmp/counts"

get() { sed -n "s/^$1=//p" "$tmp/counts"; }
per() {	# per COUNT: COUNT per completed request, 3 decimals
	awk -v n="$1" -v d="$(get completed)" \
		'BEGIN { if (d > 0) printf "%.3f", n / d; else printf "-" }'
}

completed=$(get completed)
if [ "$kvm" = 1 ]; then
	mode=kvm
	what="KVM: exits, ioeventfd kicks and injected MSIs counted"
else
	mode=proxy
	what="no KVM (TCG or another accelerator): VM exits and injected interrupts cannot be counted; vhost-blk's guest kicks stand in for the ioeventfd exits and its notifications sent for the irqfd interrupts"
fi

echo "$me: QEMU pid $pid, vhost-blk owner pid $owner, ${secs} s"
echo "mode: $mode, $what"
printf '  %-34s %10s %10s\n' "event" "count" "per I/O"
row() { printf '  %-34s %10s %10s\n' "$1" "$2" "$(per "$2")"; }
row "requests completed" "$completed"
row "guest kicks (vhost_blk_kick)" "$(get kicks)"
row "notifications sent" "$(get sent)"
row "notifications suppressed" "$(get suppressed)"
if [ "$mode" = kvm ]; then
	row "VM exits (kvm_exit)" "$(get exits)"
	while IFS='=' read -r k v; do
		row "  exit reason ${k#reason_}" "$v"
	done < <(grep '^reason_' "$tmp/counts" | sort -t= -k2,2nr)
	row "ioeventfd kicks (kvm_fast_mmio)" "$(get fast_mmio)"
	row "MSIs injected (kvm_msi_set_irq)" "$(get msi)"
fi
[ "$completed" -gt 0 ] ||
	echo "$me: warning: no request completed in the window: is the guest doing I/O?" >&2

if [ -n "$json" ]; then
	# Every counter as a number, and per request where it applies.
	jq -n --arg mode "$mode" --argjson pid "$pid" --argjson owner "$owner" \
		--argjson seconds "$secs" --rawfile counts "$tmp/counts" '
		($counts | split("\n") | map(select(length > 0) | split("=")
			| {key: .[0], value: (.[1] | tonumber)}) | from_entries) as $c
		| {
			tool: "exits-per-io", mode: $mode, qemu_pid: $pid,
			owner_pid: $owner, seconds: $seconds,
			counts: ($c | with_entries(select(.key | startswith("reason_") | not))),
			exit_reasons: ($c | with_entries(select(.key | startswith("reason_"))
				| .key |= ltrimstr("reason_"))),
			per_request: (if $c.completed > 0 then
				($c | with_entries(select(.key != "completed"
					and (.key | startswith("reason_") | not))
					| .value = (.value / $c.completed)))
				else null end)
		}' >"$json" || die "cannot write $json"
fi
