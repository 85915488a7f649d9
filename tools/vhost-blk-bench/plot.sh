#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Draw a vhost-blk-bench result document (bench.sh's result.json) as one
# PNG with gnuplot: the headline medians with their spread (IOPS, CPU per
# request), the goals, scaling, the matrix ratios, completion polling, the
# notification experiment and the polling sweep.  The document is read
# with jq (bench.jq); each panel's table is written by jq, never parsed
# from text.
#
#   plot.sh RESULT.json OUT.png

# The jq programs are in single quotes on purpose: $x is jq's, not the shell's.
# shellcheck disable=SC2016
set -euo pipefail

me=${0##*/}
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ne 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "Usage: $me RESULT.json OUT.png" >&2
	exit 2
fi
in=$1
png=$2
[ -r "$in" ] || { echo "$me: cannot read $in" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "$me: gnuplot not found (Debian: gnuplot-nox)" >&2; exit 1; }
command -v jq >/dev/null || { echo "$me: jq not found (Debian: jq)" >&2; exit 1; }

tmp=$(mktemp -d)
trap '[ -n "${VBB_PLOT_KEEP:-}" ] || rm -rf "$tmp"' EXIT

jq -L "$dir" 'include "bench"; if has("medians") then . else with_summary end' \
	"$in" >"$tmp/doc.json"

# q EXPR >FILE: one table for gnuplot, from the document.
q() { jq -r -L "$dir" "include \"bench\"; $1" "$tmp/doc.json"; }

# Shared helpers: a label for gnuplot, a number or NaN.
h='def gq: "\"" + (tostring | gsub("\""; "")) + "\"";
   def n: if type == "number" then tostring else "NaN" end;
   def be: if .backend == "vhost-user" then (.peer // "qsd")
	   elif .backend == "io_uring" then "io_uring " + (.uring_mode // "plain")
	   else "vhost-blk" end;
   def cfg: be + (if .backend == "io_uring" then "" else " " + (.polling // "off") end);'

# Headline: one line per configuration, qd1 x1q and qd32 x2q side by side,
# median min max of IOPS and of CPU per request.
q "$h"' [.medians[] | select(.experiment == "headline" and .status == "ok")] |
   group_by(cfg)[] | . as $g |
   def at($qd): [$g[] | select(.iodepth == $qd)] | first // null;
   def s($x; f): if $x == null then "NaN NaN NaN" else
	"\($x | f | .median | n) \($x | f | .min | n) \($x | f | .max | n)" end;
   "\($g[0] | cfg | gq) \(s(at(1); .iops)) \(s(at(32); .iops)) \(s(at(1); .cpu_us_per_req)) \(s(at(32); .cpu_us_per_req))"' \
	>"$tmp/headline"
q "$h"' .goals[] | "\(.goal | gsub(", "; "\\n") | gq) \(.ratio | n) \(.target) \(.ratio_min | n) \(.ratio_max | n)"' \
	>"$tmp/goals"
# The scaling line and the matrix ratios of qsd: its newest peer's (the
# last in sort order), where there are several.
vs=$(q '[.medians[] | select(.backend == "vhost-user")] |
	sort_by(peer_rank) | last | .peer // "qsd"')
for s in "vhost-blk shared" "vhost-blk per-queue" "vhost-user " "io_uring "; do
	read -r b w <<<"$s"
	q "$h"' .medians[] | select(.experiment == "scaling" and .status == "ok" and
	   .backend == "'"$b"'" and ("'"$w"'" == "" or .workers == "'"$w"'") and
	   (.backend != "vhost-user" or (.peer // "qsd") == "'"$vs"'")) |
	   "\(.queues) \(.iops.median | n) \(.cpu_us_per_req.median | n)"' | sort -n \
		>"$tmp/scale_${b}_${w:-all}"
done
q "$h"' [.medians[] | select(.experiment == "matrix" and .status == "ok")] |
   group_by([.label, .rw, .iodepth]) [] | . as $g |
   def r($p): ([$g[] | select(.backend == "vhost-blk" and .polling == $p)] | first) as $a |
	      ([$g[] | select(.backend == "vhost-user" and .polling == $p and
			      (.peer // "qsd") == "'"$vs"'")] | first) as $b |
	      if $a and $b and $b.iops.median > 0 then $a.iops.median / $b.iops.median else null end;
   ([$g[] | select(.backend == "vhost-blk" and .polling != "off")] | first | .polling) as $ap |
   "\("\($g[0].label)\\n\($g[0].rw) qd\($g[0].iodepth)" | gq) \(r("off") | n) \(r($ap) | n)"' \
	>"$tmp/matrix"
q "$h"' [.medians[] | select(.experiment == "cpoll" and .status == "ok")] | .[] |
   "\("\(be)\(if .poll_completions then " +cpoll" else "" end)\\nqd\(.iodepth)" | gq) \(.iops.median | n) \(.iops.min | n) \(.iops.max | n)"' \
	>"$tmp/cpoll"
q "$h"' [.medians[] | select(.experiment == "notify")] | group_by([.backend, .peer // "", .iodepth, .queues])[] |
   . as $g | def e($on): [$g[] | select(.event_idx == $on)] | first // {};
   "\("\($g[0] | be)\\nqd\($g[0].iodepth) x\($g[0].queues)q" | gq) \(e(true).notif_per_req.median | n) \(e(false).notif_per_req.median | n)"' \
	>"$tmp/notify"
for d in "null_blk 0us" brd; do
	q "$h"' [.medians[] | select(.experiment == "poll" and .label == "'"$d"'" and .status == "ok")] |
	   to_entries[] | "\(.key) \(.value.polling | gq) \(.value.iops.median | n) \(.value.cpu_us_per_req.median | n)"' \
		>"$tmp/poll_${d// /_}"
done

# gnuplot refuses a histogram series with no valid point: a missing
# figure is drawn as a bar of 0 there (the summary says "-" or why).
sed -i 's/NaN/0/g' "$tmp/headline" "$tmp/goals" "$tmp/matrix" "$tmp/cpoll" "$tmp/notify"

title=$(jq -r '.meta | "vhost-blk-bench \(.date) -- " +
	(if .emulated then "UNDER QEMU TCG EMULATION (\(.vm // "\(.vcpus) vCPUs")): not hardware figures; compare ratios and per-request counts only"
	 else "\(.vm // "\(.vcpus) vCPUs")" end)' "$tmp/doc.json")
rounds=$(jq -r '.meta.rounds // 1' "$tmp/doc.json")

# plot_or_empty FILE PLOT-COMMAND: an empty panel when FILE has no number
# to plot (gnuplot refuses a histogram of NaNs).
plot_or_empty() {
	if grep -qE ' [0-9]' "$1"; then echo "$2"; else echo "plot 0 notitle"; fi
}

{
	cat <<EOF
set terminal pngcairo size 2200,1100 font 'sans,9' noenhanced
set output '$png'
set multiplot layout 2,4 title "$title" font 'sans,12'
set grid ytics
set key top left font 'sans,8'
set style data histograms
set style fill solid 0.6 border -1
set boxwidth 0.9
set xtics rotate by -30 font 'sans,7'
set bmargin 6
set style histogram errorbars gap 1 lw 1
set title 'headline (null_blk 0us randread): IOPS, median of $rounds, bars min-max (log)'
set ylabel 'IOPS'
set logscale y
set yrange [*:*]
EOF
	plot_or_empty "$tmp/headline" "plot '$tmp/headline' using 2:3:4:xtic(1) title 'qd1 x1q', '' using 5:6:7 title 'qd32 x2q'"
	echo "set title 'headline: CPU us per request (back-end threads + irq/softirq; log)'"
	echo "set ylabel 'us / request'"
	plot_or_empty "$tmp/headline" "plot '$tmp/headline' using 8:9:10:xtic(1) title 'qd1 x1q', '' using 11:12:13 title 'qd32 x2q'"
	cat <<EOF
set title 'goals: measured ratio of medians (bars: range) and target'
set ylabel 'ratio'
unset logscale y
set yrange [0:*]
set xtics rotate by -20 font 'sans,7'
EOF
	plot_or_empty "$tmp/goals" "plot '$tmp/goals' using 2:4:5:xtic(1) title 'measured', '' using 3:3:3 title 'target'"
	cat <<EOF
set style data linespoints
set xtics norotate font 'sans,8'
unset bmargin
set title 'scaling: randread qd32 per queue, polling off'
set xlabel 'queues'
set ylabel 'IOPS'
set xrange [0.5:4.5]
set xtics (1, 2, 4)
EOF
	p=
	for f in "vhost-blk_shared|vhost-blk, one worker" "vhost-blk_per-queue|vhost-blk, a worker per queue" \
		 "vhost-user_all|$vs, one iothread" "io_uring_all|io_uring plain"; do
		IFS='|' read -r n t <<<"$f"
		[ -s "$tmp/scale_$n" ] && p+="'$tmp/scale_$n' using 1:2 title '$t', "
	done
	[ -n "$p" ] && echo "plot ${p%, }" || echo "plot 0 notitle"
	cat <<EOF
unset xlabel
set autoscale x
set xtics auto rotate by -30 font 'sans,7'
set bmargin 6
set style data histograms
set style histogram clustered gap 1
set title 'matrix: vhost-blk IOPS / $vs IOPS (one round)'
set ylabel 'ratio'
EOF
	plot_or_empty "$tmp/matrix" "plot '$tmp/matrix' using 2:xtic(1) title 'both polling off', '' using 3 title 'both adaptive', 1 with lines lc 'black' notitle"
	echo "set style histogram errorbars gap 1 lw 1"
	echo "set title 'completion polling (null_blk 0us, poll queues): IOPS, median, min-max'"
	echo "set ylabel 'IOPS'"
	plot_or_empty "$tmp/cpoll" "plot '$tmp/cpoll' using 2:3:4:xtic(1) notitle"
	echo "set style histogram clustered gap 1"
	echo "set title 'notifications per request (null_blk 280us, polling off)'"
	echo "set ylabel 'notifications / request'"
	plot_or_empty "$tmp/notify" "plot '$tmp/notify' using 2:xtic(1) title 'EVENT_IDX on', '' using 3 title 'EVENT_IDX off'"
	cat <<EOF
set style data linespoints
set xtics norotate font 'sans,7'
set title 'vhost-blk busy polling, randread qd1: IOPS (solid), CPU us/req (dashed)'
set ylabel 'IOPS'
set y2label 'CPU us / request'
set y2tics
set y2range [0:*]
EOF
	p=
	n=1
	for d in null_blk_0us brd; do
		f=$tmp/poll_$d
		[ -s "$f" ] || continue
		p+="'$f' using 1:3:xtic(2) lc $n pt 7 title '${d//_/ } IOPS', "
		p+="'$f' using 1:4 axes x1y2 lc $n dt 2 pt 5 title '${d//_/ } CPU', "
		n=$((n + 1))
	done
	[ -n "$p" ] && echo "plot ${p%, }" || echo "plot 0 notitle"
	echo "unset multiplot"
} >"$tmp/plot.gp"

gnuplot "$tmp/plot.gp" 2>"$tmp/gnuplot.err" || {
	sed 's/^/  /' "$tmp/gnuplot.err" >&2
	echo "$me: gnuplot failed" >&2
	exit 1
}
