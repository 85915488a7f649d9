# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# TAP for the project's own test scripts (the CI, the bridge's end-to-end
# tests, the benchmark's): sourced, never run.  The selftests posted with
# the driver use the kernel's kselftest/ktap_helpers.sh instead.
#
#   tap_start [--quiet] [FILE]
#                         "TAP version 13"; every line also goes to FILE
#                         when one is given (truncated first), and only
#                         there with --quiet
#   tap_plan N            "1..N" before the results
#   tap_ok DESC           "ok N - DESC"
#   tap_not_ok DESC [DIAG...]
#                         "not ok N - DESC", then each DIAG as a "# " line
#   tap_result STATUS DESC [DIAG...]
#                         tap_ok if STATUS is 0, else tap_not_ok
#   tap_skip DESC REASON  "ok N - DESC # SKIP REASON"
#   tap_diag [TEXT...]    TEXT, or standard input, as "# " lines
#   tap_bail REASON       "Bail out! REASON"
#   tap_end               "1..N" if no plan came first, "# ran N tests,
#                         planned M" if the count is short; status 0 only
#                         if every test ran and none failed
#   tap_results FILE      each line of FILE, as the bridge's end-to-end
#                         tests write them: "pass NAME [DETAIL]" and
#                         "fail NAME [DETAIL]" a result each, "time NAME
#                         SECONDS" a comment
#   tap_file FILE ok|not_ok DESC [DIAG...]
#                         FILE holds a whole TAP stream of that one
#                         result, each DIAG after it as "# " lines
#
# The state is in tap_n (results so far), tap_failed, tap_planned,
# tap_out and tap_quiet.

tap_n=0
tap_failed=0
tap_planned=
tap_out=
tap_quiet=0

tap_emit() {
	[ "$tap_quiet" = 1 ] || printf '%s\n' "$@"
	[ -z "$tap_out" ] || printf '%s\n' "$@" >>"$tap_out"
}

tap_start() {
	tap_quiet=0
	if [ "${1:-}" = --quiet ]; then
		tap_quiet=1
		shift
	fi
	tap_n=0 tap_failed=0 tap_planned= tap_out=${1:-}
	[ -z "$tap_out" ] || : >"$tap_out"
	tap_emit "TAP version 13"
}

tap_plan() {
	tap_planned=$1
	tap_emit "1..$1"
}

# (No bare 'return' here: in a function an EXIT trap calls, it returns
# the status the script was exiting with.)
tap_diag() {
	local line

	if [ $# -gt 0 ]; then
		printf '%s\n' "$@" | tap_diag
	else
		while IFS= read -r line; do
			tap_emit "# ${line#\# }"
		done
	fi
}

tap_ok() {
	tap_n=$((tap_n + 1))
	tap_emit "ok $tap_n - $1"
}

tap_not_ok() {
	tap_n=$((tap_n + 1))
	tap_failed=$((tap_failed + 1))
	tap_emit "not ok $tap_n - $1"
	shift
	[ $# -eq 0 ] || tap_diag "$@"
}

tap_result() {
	local st=$1

	shift
	if [ "$st" = 0 ]; then
		tap_ok "$1"
	else
		tap_not_ok "$@"
	fi
}

tap_skip() {
	tap_n=$((tap_n + 1))
	tap_emit "ok $tap_n - $1 # SKIP $2"
}

tap_bail() {
	tap_emit "Bail out! $1"
}

tap_end() {
	if [ -z "$tap_planned" ]; then
		tap_emit "1..$tap_n"
	elif [ "$tap_n" != "$tap_planned" ]; then
		tap_emit "# ran $tap_n tests, planned $tap_planned"
		return 1
	fi
	[ "$tap_failed" = 0 ]
}

tap_results() {
	local status name detail

	[ -f "$1" ] || return 0
	while read -r status name detail; do
		case "$status" in
		pass)	tap_ok "$name${detail:+ - $detail}" ;;
		fail)	tap_not_ok "$name${detail:+ - $detail}" ;;
		time)	tap_emit "# time $name ${detail}s" ;;
		esac
	done <"$1"
}

tap_file() {
	local file=$1 res=$2 desc=$3 d

	shift 3
	{
		printf 'TAP version 13\n1..1\n'
		if [ "$res" = ok ]; then
			printf 'ok 1 - %s\n' "$desc"
		else
			printf 'not ok 1 - %s\n' "$desc"
		fi
		for d in "$@"; do
			[ -z "$d" ] || printf '%s\n' "$d"
		done | sed 's/^#* \{0,1\}/# /'
	} >"$file"
}
