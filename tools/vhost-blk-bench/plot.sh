#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Draw a vhost-blk-bench result document (bench.sh's result.json) as one
# PNG with gnuplot: IOPS against iodepth, the vhost-blk ratios, the
# notification experiment and the polling sweep.
#
#   plot.sh RESULT.json OUT.png

set -euo pipefail

me=${0##*/}
if [ $# -ne 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "Usage: $me RESULT.json OUT.png" >&2
	exit 2
fi
in=$1
png=$2
[ -r "$in" ] || { echo "$me: cannot read $in" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "$me: gnuplot not found (Debian: gnuplot-nox)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split the runs into one small table per plotted series.
awk -v dir="$tmp" '
function get(line, key,    v) {
	if (!match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)"))
		return ""
	v = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
	gsub(/"/, "", v)
	return v == "null" ? "" : v
}
# The text of the object "key":{...} (no nesting inside it).
function obj(line, key) {
	if (!match(line, "\"" key "\":\\{[^}]*\\}"))
		return ""
	return substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
}
function slug(s) { gsub(/[^A-Za-z0-9]+/, "_", s); return s }
/^\{"meta"/ {
	printf "%s\n", get($0, "date") > (dir "/date")
	printf "%s\n", get($0, "emulated") > (dir "/emulated")
	printf "%s\n", get($0, "vcpus") > (dir "/vcpus")
	next
}
/^\{"tool"/ {
	xp = get($0, "experiment")
	if (get($0, "ok") != "true")
		next
	if (xp == "matrix") {
		q = get($0, "queues") == 1 ? "1q" : "allq"
		f = dir "/m_" slug(get($0, "label")) "_" get($0, "rw") "_" q "_" slug(get($0, "backend"))
		print get($0, "iodepth"), get($0, "iops"), get($0, "lat_mean_us"), \
		      get($0, "be_cpu_us_per_req") >> f
		if (get($0, "backend") == "vhost-blk") {
			f = dir "/r_" slug(get($0, "label")) "_" get($0, "rw") "_" q
			vu = get(obj($0, "vs_vhost_user"), "iops")
			raw = get(obj($0, "vs_io_uring"), "iops")
			print get($0, "iodepth"), vu == "" ? "NaN" : vu, \
			      raw == "" ? "NaN" : raw >> f
		}
	} else if (xp == "notify") {
		be = get($0, "backend") == "vhost-user" ? "qsd" : "vhost-blk"
		k = be "\\nqd" get($0, "iodepth") " x" get($0, "queues") "q"
		e = get($0, "event_idx") == "true" ? "on" : "off"
		notif[k, e] = get($0, "notif_per_req")
		lat[k, e] = get($0, "lat_mean_us")
		if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
	} else if (xp == "poll") {
		p = get($0, "poll_us")
		if (get($0, "poll_adaptive") == "true")
			p = "a" p
		f = dir "/poll_" slug(get($0, "label"))
		print ++np[f], "\"" p "\"", get($0, "iops"), get($0, "be_cpu_us_per_req"), \
		      get($0, "kicks_per_req"), get($0, "lat_mean_us") >> f
	}
}
END {
	for (i = 1; i <= nk; i++)
		printf "\"%s\" %s %s %s %s\n", keys[i], notif[keys[i], "on"] + 0, \
			notif[keys[i], "off"] + 0, lat[keys[i], "on"] + 0, \
			lat[keys[i], "off"] + 0 >> (dir "/notify")
}' "$in"

date=$(cat "$tmp/date" 2>/dev/null || echo "?")
vcpus=$(cat "$tmp/vcpus" 2>/dev/null || echo "?")
if [ "$(cat "$tmp/emulated" 2>/dev/null)" = true ]; then
	title="vhost-blk-bench $date -- UNDER QEMU TCG EMULATION ($vcpus vCPUs): not hardware figures; compare ratios and per-request counts only"
else
	title="vhost-blk-bench $date ($vcpus vCPUs)"
fi

series() {	# file title style
	[ -s "$tmp/$1" ] && printf "'%s' using 1:2 with linespoints %s title '%s', " \
		"$tmp/$1" "$3" "$2"
	return 0
}

p1=$(series m_null_blk_280us_randread_1q_vhost_blk "vhost-blk" "lc 1 pt 7"
     series m_null_blk_280us_randread_1q_vhost_user "qemu-storage-daemon" "lc 2 pt 5"
     series m_null_blk_280us_randread_1q_io_uring "io_uring (raw)" "lc 3 pt 9"
     series m_null_blk_280us_randread_allq_vhost_blk "vhost-blk, all queues" "lc 1 dt 2 pt 6"
     series m_null_blk_280us_randread_allq_vhost_user "qsd, all queues" "lc 2 dt 2 pt 4"
     series m_null_blk_280us_randread_allq_io_uring "io_uring, all queues" "lc 3 dt 2 pt 8")
p2=$(series m_brd_randread_1q_vhost_blk "vhost-blk" "lc 1 pt 7"
     series m_brd_randread_1q_vhost_user "qemu-storage-daemon" "lc 2 pt 5"
     series m_brd_randread_1q_io_uring "io_uring (raw)" "lc 3 pt 9"
     series m_brd_randread_allq_vhost_blk "vhost-blk, all queues" "lc 1 dt 2 pt 6"
     series m_brd_randread_allq_vhost_user "qsd, all queues" "lc 2 dt 2 pt 4"
     series m_brd_randread_allq_io_uring "io_uring, all queues" "lc 3 dt 2 pt 8")
p3=
n=1
for d in null_blk_0us null_blk_280us brd; do
	for rw in randread randwrite; do
		f=$tmp/r_${d}_${rw}_1q
		[ -s "$f" ] || continue
		dt=1
		[ "$rw" = randwrite ] && dt=2
		p3+="'$f' using 1:2 with linespoints lc $n dt $dt pt 7 title '${d//_/ } $rw', "
	done
	n=$((n + 1))
done

{
	cat <<EOF
set terminal pngcairo size 1800,1050 font 'sans,10' noenhanced
set output '$png'
set multiplot layout 2,3 title "$title" font 'sans,12'
set grid
set key top left font 'sans,8'
set logscale x 2
set xrange [0.8:160]
set xtics (1, 8, 32, 128)
set xlabel 'iodepth per queue'
set ylabel 'IOPS'
set title '4k randread, null_blk irqmode=2 completion_nsec=280000'
EOF
	[ -n "$p1" ] && echo "plot ${p1%, }" || echo "plot 0 notitle"
	echo "set title '4k randread, brd'"
	[ -n "$p2" ] && echo "plot ${p2%, }" || echo "plot 0 notitle"
	cat <<EOF
set title 'vhost-blk IOPS / qemu-storage-daemon IOPS, 1 queue'
set ylabel 'ratio'
set logscale y 2
EOF
	[ -n "$p3" ] && echo "plot ${p3%, }, 1 with lines lc 'black' notitle" || echo "plot 1 notitle"
	cat <<EOF
unset logscale
set xtics auto
set autoscale x
set title 'notification policy (null_blk 280us, randread): notifications per request (labels: mean latency)'
set xlabel ''
set ylabel 'notifications / request'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.6 border -1
set boxwidth 0.9
set key top center horizontal
set yrange [0:1.3]
set bmargin 4
EOF
	if [ -s "$tmp/notify" ]; then
		echo "plot '$tmp/notify' using 2:xtic(1) title 'EVENT_IDX on' lc 1, '' using 3 title 'EVENT_IDX off' lc 2, '' using 0:(\$2):(sprintf('%.0f us', \$4)) with labels offset -3,0.7 font 'sans,7' notitle, '' using 0:(\$3):(sprintf('%.0f us', \$5)) with labels offset 3,0.7 font 'sans,7' notitle"
	else
		echo "plot 0 notitle"
	fi
	cat <<EOF
set style data linespoints
set bmargin
set yrange [0:*]
set title 'vhost-blk busy polling, randread qd1: IOPS (solid), CPU us/req (dashed)'
set xlabel 'busyloop timeout (us; aN = adaptive, at most N us)'
set ylabel 'IOPS'
set y2label 'back-end CPU us / request'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key top left
EOF
	p5=
	p6=
	n=1
	for d in null_blk_0us brd; do
		f=$tmp/poll_$d
		[ -s "$f" ] || continue
		p5+="'$f' using 1:3:xtic(2) with linespoints lc $n pt 7 title '${d//_/ } IOPS', "
		p5+="'$f' using 1:4 axes x1y2 with linespoints lc $n dt 2 pt 5 title '${d//_/ } CPU us/req', "
		p6+="'$f' using 1:5:xtic(2) with linespoints lc $n pt 7 title '${d//_/ }', "
		n=$((n + 1))
	done
	[ -n "$p5" ] && echo "plot ${p5%, }" || echo "plot 0 notitle"
	cat <<EOF
unset y2tics
unset y2label
set ytics mirror
set title 'vhost-blk busy polling: guest kicks per request'
set ylabel 'kicks / request'
set yrange [0:*]
EOF
	[ -n "$p6" ] && echo "plot ${p6%, }" || echo "plot 0 notitle"
	echo "unset multiplot"
} >"$tmp/plot.gp"

gnuplot "$tmp/plot.gp" 2>"$tmp/gnuplot.err" || {
	sed 's/^/  /' "$tmp/gnuplot.err" >&2
	echo "$me: gnuplot failed" >&2
	exit 1
}
