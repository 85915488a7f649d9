#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Markdown summary of a vhost-blk-bench result document (bench.sh's
# result.json, or bench/results/*.json): the headline matrix rows, the
# notification experiment and the polling sweep.  Every number is copied
# from the document; nothing is measured here.
#
#   summary.sh RESULT.json

set -euo pipefail

if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "Usage: ${0##*/} RESULT.json" >&2
	exit 2
fi
[ -r "$1" ] || { echo "${0##*/}: cannot read $1" >&2; exit 1; }

awk '
# The value of "key" in a one-line JSON object (numbers, strings, null).
function get(line, key,    m, v) {
	if (!match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)"))
		return ""
	v = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
	gsub(/"/, "", v)
	return v == "null" ? "" : v
}
function f0(v) { return v == "" ? "-" : sprintf("%.0f", v) }
function f1(v) { return v == "" ? "-" : sprintf("%.1f", v) }
function f2(v) { return v == "" ? "-" : sprintf("%.2f", v) }
function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }

/^\{"meta"/ {
	date = get($0, "date")
	emulated = get($0, "emulated")
	env = get($0, "environment")
	vcpus = get($0, "vcpus")
	wall = get($0, "total_wall_s")
	host_load = get($0, "host_loadavg_before")
	next
}
/^\{"tool"/ {
	n++
	line[n] = $0
	xp = get($0, "experiment"); disk = get($0, "label"); be = get($0, "backend")
	key = xp "|" disk "|" be "|" get($0, "rw") "|" get($0, "iodepth") "|" \
	      get($0, "queues") "|" get($0, "event_idx") "|" get($0, "poll_us") "|" \
	      get($0, "poll_adaptive")
	run[key] = $0
	if (xp == "matrix" && !(disk in seen)) {
		seen[disk] = 1
		disks[++ndisks] = disk
	}
	if (get($0, "queues") > maxq)
		maxq = get($0, "queues")
}
END {
	if (emulated == "true") {
		print "> **Measured under QEMU TCG emulation (" env ", " vcpus " vCPUs), not on hardware.**"
		print "> Absolute IOPS and latencies are those of an emulated CPU on a shared, loaded"
		print "> 2-core host; only ratios and per-request counts carry over, and even those are noisy."
	} else {
		print "Environment: " env ", " vcpus " vCPUs."
	}
	print ""
	print "Run of " date (wall != "" ? ", " wall " s including VM boot" : "") \
		(host_load != "" ? "; host load average before the run: " host_load : "") "."
	print ""
	print "4 KiB random I/O.  vb = vhost-blk, qsd = qemu-storage-daemon vhost-user-blk export, raw = io_uring on the host disk."
	print "CPU = back-end CPU time per request (vhost workers / the daemon / the io_uring submitter)."
	print ""
	print "| disk | workload | vb IOPS | qsd IOPS | raw IOPS | vb/qsd | vb/raw | mean lat us vb / qsd | CPU us/req vb / qsd |"
	print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	split("randread randwrite", rws, " ")
	for (d = 1; d <= ndisks; d++) {
		for (r = 1; r <= 2; r++) {
			for (c = 1; c <= 2; c++) {
				qd = c == 1 ? 1 : 32
				nq = c == 1 ? 1 : maxq
				base = "matrix|" disks[d] "|"
				tail_ = "|" rws[r] "|" qd "|" nq "|"
				vb = run[base "vhost-blk" tail_ "true|0|false"]
				vu = run[base "vhost-user" tail_ "true||"]
				raw = run[base "io_uring" tail_ "||"]
				if (vb == "")
					continue
				printf "| %s | %s qd%d x%dq | %s | %s | %s | %s | %s | %s / %s | %s / %s |\n", \
					disks[d], rws[r], qd, nq, f0(get(vb, "iops")), \
					f0(get(vu, "iops")), f0(get(raw, "iops")), \
					ratio(get(vb, "iops"), get(vu, "iops")), \
					ratio(get(vb, "iops"), get(raw, "iops")), \
					f0(get(vb, "lat_mean_us")), f0(get(vu, "lat_mean_us")), \
					f1(get(vb, "be_cpu_us_per_req")), f1(get(vu, "be_cpu_us_per_req"))
			}
		}
	}

	print ""
	print "Notification policy (null_blk irqmode=2 completion_nsec=280000, randread):"
	print ""
	print "| back-end | workload | EVENT_IDX | mean lat us | p99 us | notifications/req | kicks/req |"
	print "|---|---|---|---:|---:|---:|---:|"
	for (i = 1; i <= n; i++) {
		if (get(line[i], "experiment") != "notify")
			continue
		be = get(line[i], "backend")
		printf "| %s | qd%s x%sq | %s | %s | %s | %s | %s |\n", \
			be == "vhost-user" ? "qsd" : be, get(line[i], "iodepth"), \
			get(line[i], "queues"), get(line[i], "event_idx") == "true" ? "on" : "off", \
			f1(get(line[i], "lat_mean_us")), f1(get(line[i], "lat_p99_us")), \
			f2(get(line[i], "notif_per_req")), f2(get(line[i], "kicks_per_req"))
	}

	print ""
	print "vhost-blk busy polling (randread qd1, 1 queue):"
	print ""
	print "| disk | busyloop timeout | IOPS | mean lat us | kicks/req | CPU us/req | poll hits/polls |"
	print "|---|---|---:|---:|---:|---:|---:|"
	for (i = 1; i <= n; i++) {
		if (get(line[i], "experiment") != "poll")
			continue
		p = get(line[i], "poll_us") " us"
		if (get(line[i], "poll_adaptive") == "true")
			p = "adaptive, max " p
		polls = get(line[i], "polls")
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", get(line[i], "label"), p, \
			f0(get(line[i], "iops")), f1(get(line[i], "lat_mean_us")), \
			f2(get(line[i], "kicks_per_req")), f1(get(line[i], "be_cpu_us_per_req")), \
			polls + 0 ? sprintf("%d/%d", get(line[i], "poll_hits"), polls) : "-"
	}
}' "$1"
