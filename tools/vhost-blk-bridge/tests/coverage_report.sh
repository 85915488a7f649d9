#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Line coverage of the bridge's sources from the gcov counts in DIR (make
# coverage): a line per source, then "bridge: P% of N lines".
#
# Usage: coverage_report.sh DIR SOURCE...   (a source under tools/lib is
# counted from DIR/lib)

set -u
[ $# -ge 2 ] || { echo "usage: coverage_report.sh DIR SOURCE..." >&2; exit 2; }
dir=$1
shift
total=0
hit=0
for src in "$@"; do
	obj=$dir
	case "$src" in */lib/*) obj=$dir/lib ;; esac
	name=${src##*/}
	# gcov -n: the figures only, no .gcov file.
	line=$(cd "$obj" && gcov -n -o "$obj" "$(realpath "$src")" 2>/dev/null |
	       awk -v f="$name" '/^File/ { cur = $2; gsub("\047", "", cur);
				 n = split(cur, p, "/"); cur = p[n] }
				/^Lines executed/ && cur == f { print; exit }')
	if [ -z "$line" ]; then
		echo "coverage_report.sh: no counts for $src in $obj" >&2
		exit 1
	fi
	pct=${line#Lines executed:}
	pct=${pct%%%*}
	lines=${line##* of }
	printf '%-14s %6s%% of %s lines\n' "$name" "$pct" "$lines"
	total=$((total + lines))
	hit=$(awk -v h="$hit" -v p="$pct" -v n="$lines" 'BEGIN { printf "%.2f", h + p * n / 100 }')
done
awk -v h="$hit" -v t="$total" 'BEGIN { printf "bridge: %.1f%% of %d lines\n", 100 * h / t, t }'
