#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Line and branch coverage of drivers/vhost/blk.c from the debug VM's
# gcov counts.  make module-debug builds the module with GCOV_PROFILE
# (Kbuild's VHOST_BLK_GCOV) for the debug kernel, which has
# CONFIG_GCOV_KERNEL; in_vm.sh --pass debug copies the module's blk.gcda
# out of /sys/kernel/debug/gcov before it unloads the module.
#
# Writes, in OUT_DIR:
#   blk.c.gcov      the source annotated by gcov -b (counts per line and
#                   branch)
#   uncovered.txt   every line never run: "LINE<TAB>FUNCTION<TAB>SOURCE"
#   summary.txt     the figures
# and one TAP result with the figures (not ok only if there are no
# counts to read: a coverage below any goal is a figure, not a failure).
#
# Usage: kernel_coverage.sh [--tap FILE] GCDA_DIR MODULE_DIR OUT_DIR
#   GCDA_DIR    where in_vm.sh put blk.gcda (e.g. vm-out/check/debug/gcov)
#   MODULE_DIR  the module's build directory (build/module-debug), which
#               holds drivers/vhost/blk.gcno and the source it was built
#               from

set -u
me=kernel_coverage.sh
tap=

usage() {
	sed -n '3,/^$/s/^# \{0,1\}//p' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--tap) [ $# -ge 2 ] || { echo "$me: --tap needs a file" >&2; exit 2; }
	       tap=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	-*) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 3 ] || { usage >&2; exit 2; }
gcda_dir=$1 mod=$2 out=$3
obj=$mod/drivers/vhost
desc="coverage of drivers/vhost/blk.c on the debug kernel"

result() {	# result ok|not_ok TEXT
	[ -n "$tap" ] || return 0
	{
		echo "TAP version 13"
		echo "1..1"
		if [ "$1" = ok ]; then
			echo "ok 1 - $desc: $2"
		else
			echo "not ok 1 - $desc"
			echo "# $2"
		fi
	} >"$tap"
}

fail() {
	echo "$me: $*" >&2
	result not_ok "$*"
	exit 1
}

command -v gcov >/dev/null || fail "no gcov (Debian's gcc package has it)"
[ -f "$obj/blk.gcno" ] || fail "no $obj/blk.gcno: make module-debug builds the module for gcov"
[ -s "$gcda_dir/blk.gcda" ] || fail "no $gcda_dir/blk.gcda: the debug VM did not copy the counts out (see its notes)"
mkdir -p "$out" || fail "cannot create $out"
tmp=$(mktemp -d) || fail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
cp "$obj/blk.gcno" "$gcda_dir/blk.gcda" "$tmp/" || fail "cannot copy the counts"

# gcov -b: branch figures too; -o: the notes and counts.  The notes name
# the source as Kbuild compiled it, drivers/vhost/blk.c under the module's
# directory: run from there, with the annotated copy written to $tmp.
mkdir "$tmp/gcov" || fail "mkdir failed"
(cd "$mod" && gcov -b -o "$tmp" drivers/vhost/blk.c >"$tmp/gcov.out" 2>&1 &&
	mv -f blk.c.gcov "$tmp/gcov/" 2>>"$tmp/gcov.out"; rm -f ./*.gcov) ||
	fail "gcov failed: $(tail -n 3 "$tmp/gcov.out" | tr '\n' ' ')"
[ -f "$tmp/gcov/blk.c.gcov" ] || fail "gcov wrote no blk.c.gcov: $(tail -n 3 "$tmp/gcov.out" | tr '\n' ' ')"
grep -q '^ *[0-9#=-]*: *1:' "$tmp/gcov/blk.c.gcov" ||
	fail "gcov found no source for blk.c in $mod"
cp "$tmp/gcov/blk.c.gcov" "$out/blk.c.gcov"

# The figures of blk.c itself, not of the headers it includes.
figures=$(awk '/^File / { f = ($2 ~ /\/blk\.c.$/) }
	       f && /^(Lines executed|Branches executed|Taken at least once)/' \
	      "$tmp/gcov.out")
lines=$(sed -n 's/^Lines executed:\(.*\)$/\1/p' <<<"$figures")
taken=$(sed -n 's/^Taken at least once:\(.*\)$/\1/p' <<<"$figures")
[ -n "$lines" ] || fail "no line figures for blk.c in gcov's output"

# Lines never run ("#####"), with the function they are in.
awk -F: '
	/^function / { fn = $0; sub(/^function /, "", fn); sub(/ .*/, "", fn); next }
	$1 ~ /#####/ {
		n = $2 + 0; src = $0; sub(/^[^:]*:[^:]*:/, "", src)
		printf "%d\t%s\t%s\n", n, fn, src
	}' "$out/blk.c.gcov" >"$out/uncovered.txt"

{
	echo "lines: $lines"
	echo "branches taken at least once: ${taken:-none}"
	echo "uncovered lines: $(wc -l <"$out/uncovered.txt") ($out/uncovered.txt)"
} >"$out/summary.txt"
cat "$out/summary.txt"
result ok "lines $lines, branches taken ${taken:-none}"
