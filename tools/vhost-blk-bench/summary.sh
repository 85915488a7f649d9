#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Markdown summary of a vhost-blk-bench result document (bench.sh's
# result.json, or bench/results/*.json), read with jq (bench.jq): the
# goals, the headline medians with their spread, the matrix, scaling,
# completion polling, NVMe/TCP, Ceph RBD, the notification experiment and
# the polling sweep.
# Every number is copied from the document; nothing is measured here.
#
#   summary.sh RESULT.json

set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "Usage: $me RESULT.json" >&2
	exit 2
fi
[ -r "$1" ] || { echo "$me: cannot read $1" >&2; exit 1; }
command -v jq >/dev/null || { echo "$me: jq not found (Debian: jq)" >&2; exit 1; }

jq -r -L "$dir" 'include "bench";
def f0: if type == "number" then (. + 0.5 | floor | tostring) else "-" end;
def f1: if type == "number" then ((. * 10 + 0.5 | floor) / 10 | tostring) else "-" end;
def f2: if type == "number" then ((. * 100 + 0.5 | floor) / 100 | tostring) else "-" end;
# "median (min-max)" of a spread, or "-".
def ms(f): if .n == null or .n == 0 then "-"
	   elif .n == 1 then (.median | f)
	   else "\(.median | f) (\(.min | f)-\(.max | f))" end;
def be: if .backend == "vhost-user" then (.peer // "qsd")
	elif .backend == "io_uring" then "io_uring " + (.uring_mode // "plain")
	else "vhost-blk" end;
def wl: "\(.rw) qd\(.iodepth) x\(.queues)q";
def cell: if .status == "unsupported" then "unsupported"
	  elif .status != "ok" then "failed" else (.iops | ms(f0)) end;

(if has("medians") then . else with_summary end) as $d |
$d.meta as $meta | $d.medians as $m |
(if $meta.emulated then
	"> **Measured under QEMU TCG emulation (\($meta.environment // "?")), not on hardware.**",
	"> Absolute IOPS and latencies are those of an emulated CPU on a shared 2-core host;",
	"> only ratios and per-request counts carry over, and even those are noisy."
 else "Environment: \($meta.environment // "?")." end),
"",
"VM: \($meta.vm // "\($meta.vcpus) vCPUs").  Run of \($meta.date)" +
 (if $meta.total_wall_s then ", \($meta.total_wall_s) s including VM boot" else "" end) +
 (if $meta.host_loadavg_before then "; host load average before the run: \($meta.host_loadavg_before)" else "" end) + ".",
"",
"4 KiB random I/O.  qsd = " +
 (if $meta.qsd_peers then ([$meta.qsd_peers[] | "\(.peer): \(.version)"] | join("; "))
  else $meta.qemu_storage_daemon // "qemu-storage-daemon" end) +
 "; its vhost-user-blk export (one iothread, aio=io_uring, cache.direct=on).",
"Polling: \($meta.polling_rows // "see the runs")." ,
"CPU/req: \($meta.cpu_counted // "back-end CPU time per request").",
"Medians of \($meta.rounds // 1) rounds, (min-max) over the rounds, where a figure has more than one.",
"",
"### Goals (one run, medians)",
"",
"| goal | target | measured | range | | compared |",
"|---|---:|---:|---:|---|---|",
($d.goals[] |
 "| \(.goal) | \(.op) \(.target) | \(if .status == "ok" then (.ratio | f2) + "x" else .status end) | " +
 "\(if .ratio_min then "\(.ratio_min | f2)-\(.ratio_max | f2)" else "-" end) | " +
 "\(if .met == true then "met" elif .met == false then "**missed**" else "-" end) | " +
 "\(.numerator // "-") / \(.denominator // "-") |"),
"",
"### Headline: \([$m[] | select(.experiment == "headline") | .label] | first // "-")",
"",
"| workload | back-end | polling | workers | IOPS | mean lat us | CPU us/req | of which irq+softirq | context switches/req | syscalls/req | runs |",
"|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
($m[] | select(.experiment == "headline") |
 "| \(wl) | \(be) | \(.polling) | \(.workers // "") | \(cell) | \(.lat_mean_us | ms(f0)) | " +
 "\(.cpu_us_per_req | ms(f1)) | \(.irq_cpu_us_per_req | ms(f1)) | " +
 "\(.be_ctxsw_per_req | ms(f2)) | \(.be_syscalls_per_req | ms(f2)) | \(.ok_runs)/\(.runs) |"),
"",
"### Matrix (one round): IOPS, and vhost-blk / qsd at the same polling",
"",
"| disk | workload | qsd | vb off | qsd off | vb/qsd off | vb adaptive | qsd adaptive | vb/qsd adaptive | io_uring plain | io_uring sqpoll | io_uring iopoll | CPU us/req vb / qsd / io_uring (off) | context switches/req vb / qsd / io_uring (off) | syscalls/req vb / qsd / io_uring (off) |",
"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
([$m[] | select(.experiment == "matrix")] | group_by([.label, .rw, .iodepth, .queues])[] |
 . as $grp |
 # A row per qsd peer, vhost-blk and io_uring repeated in each.
 ([$grp[] | select(.backend == "vhost-user")] | unique_by(peer_rank) | map(.peer) |
  if length == 0 then [null] else . end)[] as $peer |
 [$grp[] | select(.backend != "vhost-user" or .peer == $peer)] as $g |
 def at($b; $p): [$g[] | select(.backend == $b and .polling == $p)] | first // null;
 def u($mode): [$g[] | select(.backend == "io_uring" and .uring_mode == $mode)] | first // null;
 def iops: if . == null then null else .iops.median end;
 def ra($a; $b): if ($a | iops) and ($b | iops) and ($b | iops) > 0 then ($a | iops) / ($b | iops) | f2 else "-" end;
 ([$g[] | select(.backend == "vhost-blk" and .polling != "off")] | first | .polling // "adaptive") as $ap |
 "| \($g[0].label) | \($g[0] | wl) | \($peer // "qsd") | \(at("vhost-blk"; "off") | iops | f0) | \(at("vhost-user"; "off") | iops | f0) | " +
 "\(ra(at("vhost-blk"; "off"); at("vhost-user"; "off"))) | \(at("vhost-blk"; $ap) | iops | f0) | " +
 "\(at("vhost-user"; $ap) | iops | f0) | \(ra(at("vhost-blk"; $ap); at("vhost-user"; $ap))) | " +
 "\(u("plain") | iops | f0) | \(u("sqpoll") | iops | f0) | \(u("iopoll") | iops | f0) | " +
 "\(at("vhost-blk"; "off").cpu_us_per_req.median | f1) / \(at("vhost-user"; "off").cpu_us_per_req.median | f1) / \(u("plain").cpu_us_per_req.median | f1) | " +
 "\(at("vhost-blk"; "off").be_ctxsw_per_req.median | f2) / \(at("vhost-user"; "off").be_ctxsw_per_req.median | f2) / \(u("plain").be_ctxsw_per_req.median | f2) | " +
 "\(at("vhost-blk"; "off").be_syscalls_per_req.median | f2) / \(at("vhost-user"; "off").be_syscalls_per_req.median | f2) / \(u("plain").be_syscalls_per_req.median | f2) |"),
"",
"### Scaling (null_blk 0us, randread qd32 per queue, polling off, one round)",
"",
"qsd: one iothread at every queue count; one export on several iothreads: \($meta.qsd_multi_iothread // "not probed").",
"",
"| back-end | workers | queues | IOPS | CPU us/req |",
"|---|---|---:|---:|---:|",
([$m[] | select(.experiment == "scaling")] | sort_by([({"vhost-blk": 0, "vhost-user": 1}[.backend] // 2), peer_rank, .workers == "per-queue", .queues])[] |
 "| \(be) | \(.workers // "") | \(.queues) | \(cell) | \(.cpu_us_per_req | ms(f1)) |"),
"",
"### Completion polling (null_blk 0us, poll queues; randread, one queue)",
"",
"| workload | back-end | polling | IOPS | mean lat us | CPU us/req | runs |",
"|---|---|---|---:|---:|---:|---:|",
($m[] | select(.experiment == "cpoll") |
 "| \(wl) | \(be)\(if .poll_completions then " + VHOST_BLK_POLL_COMPLETIONS" else "" end) | \(.polling) | \(cell) | " +
 "\(.lat_mean_us | ms(f0)) | \(.cpu_us_per_req | ms(f1)) | \(.ok_runs)/\(.runs) |"),
"",
"### Network storage: NVMe/TCP on loopback (randread, polling off)",
"",
"\([$d.meta.disks[]? | select(.label == "nvme-tcp") | .setup] | first // "not run")",
"",
"| workload | back-end | IOPS | mean lat us | CPU us/req | IOPS / qsd | runs |",
"|---|---|---:|---:|---:|---:|---:|",
([$m[] | select(.experiment == "nvmetcp")] | group_by([.iodepth, .queues])[] | . as $g |
 ([$g[] | select(.backend == "vhost-user")] | first | .iops.median // null) as $q |
 $g[] |
 "| \(wl) | \(be) | \(cell) | \(.lat_mean_us | ms(f0)) | \(.cpu_us_per_req | ms(f1)) | " +
 "\(if $q and $q > 0 and .iops.median then .iops.median / $q | f2 else "-" end) | \(.ok_runs)/\(.runs) |"),
"",
"### Ceph RBD: krbd under vhost-blk or qsd, librbd in qsd (randread, polling off)",
"",
"Cluster: \([$d.meta.disks[]? | select(.label == "krbd") | .setup] | first // ($meta.rbd // "not run")).",
"",
"| workload | back-end | client | IOPS | mean lat us | CPU us/req | IOPS / qsd librbd | runs |",
"|---|---|---|---:|---:|---:|---:|---:|",
([$m[] | select(.experiment == "rbd")] | group_by([.iodepth, .queues])[] | . as $g |
 ([$g[] | select(.label == "librbd")] | first | .iops.median // null) as $q |
 $g[] |
 "| \(wl) | \(be) | \(.label) | \(cell) | \(.lat_mean_us | ms(f0)) | \(.cpu_us_per_req | ms(f1)) | " +
 "\(if $q and $q > 0 and .iops.median then .iops.median / $q | f2 else "-" end) | \(.ok_runs)/\(.runs) |"),
"",
"### Notification policy (null_blk 280us, randread, polling off)",
"",
"| back-end | workload | EVENT_IDX | mean lat us | notifications/req | kicks/req |",
"|---|---|---|---:|---:|---:|",
($m[] | select(.experiment == "notify") |
 "| \(be) | \(wl) | \(if .event_idx then "on" else "off" end) | \(.lat_mean_us.median | f1) | " +
 "\(.notif_per_req.median | f2) | \(.kicks_per_req.median | f2) |"),
"",
"### vhost-blk busy polling (randread qd1, one queue)",
"",
"| disk | polling | IOPS | mean lat us | kicks/req | CPU us/req | poll hits/polls |",
"|---|---|---:|---:|---:|---:|---:|",
([$m[] | select(.experiment == "poll")] | sort_by([.label, poll_rank])[] |
 "| \(.label) | \(.polling) | \(.iops.median | f0) | \(.lat_mean_us.median | f1) | \(.kicks_per_req.median | f2) | " +
 "\(.cpu_us_per_req.median | f1) | \(if (.polls.median // 0) > 0 then "\(.poll_hits.median | f0)/\(.polls.median | f0)" else "-" end) |")
' "$1"
