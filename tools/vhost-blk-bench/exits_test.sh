#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# exits-per-io.sh's counting, on saved 'perf script' output in the
# tracepoints' own formats (drivers/vhost/blk_trace.h; kvm_exit,
# kvm_fast_mmio and kvm_msi_set_irq as 6.12 prints them): no perf, no
# KVM needed.  TAP on stdout.
set -uo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool=$dir/exits-per-io.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$dir/../testing/vhost-blk-ci/tap.sh"

# jqt FILE FILTER: the filter holds (true) on FILE.
jqt() { [ "$(jq -r "$2" "$1" 2>/dev/null)" = true ]; }

tap_start

# A KVM guest: 4 requests, 3 guest kicks and a requeued run, 2
# notifications sent and 2 suppressed, 6 exits of 3 reasons.
{
	for i in 1 2 3; do
		echo " vhost_blk:vhost_blk_kick: vq=0 guest kick"
	done
	echo " vhost_blk:vhost_blk_kick: vq=0 requeued"
	for i in 1 2 3 4; do
		echo " vhost_blk:vhost_blk_req_submit: vq=0 desc=$i type=0 sector=$((i * 8)) len=4096 status=0"
		echo " vhost_blk:vhost_blk_req_complete: vq=0 desc=$i type=0 sector=$((i * 8)) len=4096 status=0"
	done
	echo " vhost_blk:vhost_blk_notify: vq=0 used_idx=2 sent"
	echo " vhost_blk:vhost_blk_notify: vq=0 used_idx=3 suppressed"
	echo " vhost_blk:vhost_blk_notify: vq=0 used_idx=4 suppressed"
	echo " vhost_blk:vhost_blk_notify: vq=0 used_idx=4 sent"
	for r in EPT_MISCONFIG EPT_MISCONFIG EPT_MISCONFIG HLT HLT MSR_WRITE; do
		echo " kvm:kvm_exit: vcpu 0 reason $r rip 0xffffffff8112a0b4 info1 0x0000000000000000 info2 0x0000000000000000 intr_info 0x00000000 error_code 0x00000000"
	done
	echo " kvm:kvm_nested_vmexit: vcpu 0 reason HLT rip 0x0 info1 0x0 info2 0x0 intr_info 0x0 error_code 0x0"
	for i in 1 2 3; do
		echo " kvm:kvm_fast_mmio: fast mmio at gpa 0xfe003000"
	done
	echo " kvm:kvm_msi_set_irq: dst 0 vec 34 (Fixed|physical|edge)"
	echo " kvm:kvm_msi_set_irq: dst 0 vec 34 (Fixed|physical|edge)"
} >"$tmp/kvm.txt"
bash "$tool" --parse "$tmp/kvm.txt" --json "$tmp/kvm.json" >"$tmp/kvm.out" 2>&1
tap_result $? kvm_parse_runs "$(tail -n 1 "$tmp/kvm.out")"
jqt "$tmp/kvm.json" '.mode == "kvm"'
tap_result $? kvm_mode_detected
jqt "$tmp/kvm.json" '.counts | .completed == 4 and .kicks == 3 and .requeued == 1 and .sent == 2 and .suppressed == 2'
tap_result $? vhost_blk_events_counted "$(jq -c .counts "$tmp/kvm.json" 2>&1)"
jqt "$tmp/kvm.json" '.counts.exits == 6 and .exit_reasons == {"EPT_MISCONFIG": 3, "HLT": 2, "MSR_WRITE": 1}'
tap_result $? exits_by_reason_not_nested "$(jq -c .exit_reasons "$tmp/kvm.json" 2>&1)"
jqt "$tmp/kvm.json" '.counts.fast_mmio == 3 and .counts.msi == 2'
tap_result $? kicks_and_msis_counted
jqt "$tmp/kvm.json" '.per_request | .exits == 1.5 and .fast_mmio == 0.75 and .msi == 0.5 and .sent == 0.5 and .kicks == 0.75'
tap_result $? per_request_is_count_over_completed "$(jq -c .per_request "$tmp/kvm.json" 2>&1)"
grep -q 'exit reason EPT_MISCONFIG  *3  *0.750' "$tmp/kvm.out"
tap_result $? table_shows_reasons_per_io

# A TCG guest: the vhost_blk events only; the report says it is the proxy.
grep vhost_blk "$tmp/kvm.txt" >"$tmp/tcg.txt"
bash "$tool" --parse "$tmp/tcg.txt" --json "$tmp/tcg.json" >"$tmp/tcg.out" 2>&1
tap_result $? proxy_parse_runs
jqt "$tmp/tcg.json" '.mode == "proxy" and .exit_reasons == {} and .counts.completed == 4'
tap_result $? proxy_mode_without_kvm_events
grep -q 'cannot be counted' "$tmp/tcg.out"
tap_result $? proxy_report_says_so

# Nothing completed: no division by zero, a warning.
echo " vhost_blk:vhost_blk_kick: vq=0 guest kick" >"$tmp/idle.txt"
bash "$tool" --parse "$tmp/idle.txt" --json "$tmp/idle.json" >"$tmp/idle.out" 2>&1
tap_result $? idle_parse_runs
jqt "$tmp/idle.json" '.per_request == null'
tap_result $? idle_has_no_per_request
grep -q 'no request completed' "$tmp/idle.out"
tap_result $? idle_warns

# Usage errors.
bash "$tool" --seconds 0 --parse "$tmp/idle.txt" >/dev/null 2>&1
[ $? = 1 ]
tap_result $? seconds_zero_refused
bash "$tool" >/dev/null 2>&1
[ $? = 1 ]
tap_result $? pid_required
bash "$tool" --pid 999999999 >"$tmp/nopid.out" 2>&1
grep -q 'no process 999999999' "$tmp/nopid.out"
tap_result $? unknown_pid_named
bash "$tool" --help | grep -q -- '--pid PID'
tap_result $? help

tap_end
