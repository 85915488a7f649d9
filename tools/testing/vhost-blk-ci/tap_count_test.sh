#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The self-test of tap_count.sh, the counting of 'make check': fabricated
# TAP files and run-vm.sh statuses in, the exact last line (and the lines
# that explain it) checked.  Runs on the host in a second; run_check.sh
# runs it before anything else.  See --help.

set -u

me=tap_count_test.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
counter=${TAP_COUNT:-$here/tap_count.sh}

usage() {
	cat <<EOF
Usage: $me

Feed tap_count.sh (\$TAP_COUNT, default $here/tap_count.sh)
fabricated TAP files and run-vm.sh statuses and check the summary line it
prints last, its exit status and the lines before it that say why.
Prints TAP.  Exit status: 0 if every case passed, 1 otherwise.
EOF
}

case "${1:-}" in
-h|--help)	usage; exit 0 ;;
"")		;;
*)		echo "$me: no arguments expected (see --help)" >&2; exit 2 ;;
esac
[ -r "$counter" ] || { echo "$me: $counter not found" >&2; exit 2; }

tmp=$(mktemp -d) || { echo "$me: mktemp -d failed" >&2; exit 2; }
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
dir=

# new_case: an empty directory for the next case's files.
new_case() {
	dir=$tmp/case$((n + 1))
	mkdir -p "$dir"
}

# file NAME LINE...: a TAP file of these lines in the case's directory.
file() {
	local name=$1

	shift
	printf '%s\n' "$@" >"$dir/$name"
}

# expect DESCRIPTION WANT_LAST WANT_RC [WANT_LINE...] -- COUNTER_ARGS...
# Runs the counter; WANT_LINE are fixed strings that must each be a line
# of its output before the last.
expect() {
	local desc=$1 want_last=$2 want_rc=$3 wants=() out rc last body w why=

	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		wants+=("$1")
		shift
	done
	[ "${1:-}" = -- ] && shift
	out=$(bash "$counter" --name tc "$@" 2>&1)
	rc=$?
	last=${out##*$'\n'}
	body=${out%"$last"}
	if [ "$last" != "$want_last" ]; then
		why="last line '$last', expected '$want_last'"
	elif [ "$rc" != "$want_rc" ]; then
		why="exit status $rc, expected $want_rc"
	else
		for w in "${wants[@]}"; do
			if ! grep -qxF -e "$w" <<<"$body"; then
				why="no line '$w' before the last"
				break
			fi
		done
	fi
	n=$((n + 1))
	if [ -z "$why" ]; then
		echo "ok $n $desc"
	else
		echo "not ok $n $desc"
		echo "# $why; the output was:"
		sed 's/^/#   /' <<<"$out"
		failed=1
	fi
}

echo "TAP version 13"

new_case
file a.tap "TAP version 13" "1..2" "# a comment" "ok 1 one" "ok 2 two"
file b.tap "TAP version 13" "ok 1 - one" "ok 2 - two" "ok 3 - three" "1..3"
expect "every result passes, plan first or last" "5 passed, 0 failed" 0 \
	-- "$dir"/a.tap "$dir"/b.tap

new_case
file a.tap "1..3" "ok 1 one" "not ok 2 two" "ok 3 three"
expect "a not ok result is a failure, named" "2 passed, 1 failed" 1 \
	"tc: failed: a.tap: not ok 2 two" -- "$dir"/a.tap

new_case
file a.tap "1..5" "ok 1" "ok 2" "ok 3"
expect "results missing from the plan count as failed" "3 passed, 2 failed" 1 \
	"tc: a.tap: 2 of 5 results missing" -- "$dir"/a.tap

new_case
file a.tap "1..2" "ok 1" "ok 2" "ok 3"
expect "more results than the plan is a failure" "3 passed, 1 failed" 1 \
	"tc: a.tap: 3 results, more than its plan of 2" \
	"tc: a.tap: test numbers outside its plan 1..2: 3" -- "$dir"/a.tap

new_case
file a.tap "1..3" "ok 1" "ok 2" "ok 2"
expect "a test number used twice is a failure" "3 passed, 1 failed" 1 \
	"tc: a.tap: test numbers used more than once: 2" -- "$dir"/a.tap

new_case
file a.tap "1..2" "ok 1" "ok 5"
expect "a test number outside the plan is a failure" "2 passed, 1 failed" 1 \
	"tc: a.tap: test numbers outside its plan 1..2: 5" -- "$dir"/a.tap

new_case
file a.tap "TAP version 13" "ok 1 one"
expect "a file without a plan is a failure" "1 passed, 1 failed" 1 \
	"tc: a.tap: no TAP plan" -- "$dir"/a.tap

new_case
file a.tap "1..1" "ok 1 one" "1..1"
expect "a file with two plans is a failure" "1 passed, 1 failed" 1 \
	"tc: a.tap: 2 TAP plans" -- "$dir"/a.tap

new_case
file a.tap "1..1" "ok 1 one"
: >"$dir/empty.tap"
expect "an empty file is a failure" "1 passed, 1 failed" 1 \
	"tc: empty.tap: no TAP plan" -- "$dir"/a.tap "$dir"/empty.tap

new_case
file a.tap "1..1" "ok 1 one"
expect "a file that cannot be read is a failure" "1 passed, 1 failed" 1 \
	"tc: $dir/gone.tap: cannot be read" -- "$dir"/a.tap "$dir"/gone.tap

new_case
expect "no file at all is a failure" "0 passed, 1 failed" 1 \
	"tc: no TAP files" --

new_case
file a.tap "1..3" "ok 1 one" "ok 2 two # SKIP not a block device" \
	"ok 3 three # skip no tracefs"
expect "a skip is counted and listed with its reason" \
	"1 passed, 0 failed, 2 skipped" 0 \
	"tc: skipped: a.tap: ok 2 two # SKIP not a block device" \
	"tc: skipped: a.tap: ok 3 three # skip no tracefs" -- "$dir"/a.tap

new_case
file a.tap "1..3" "ok 1 one" \
	"ok 2 two # SKIP /dev/vhost-blk does not exist (is vhost_blk loaded?)" \
	"ok 3 three # SKIP the backend is not a block device"
expect "a skip --fail-skip refuses is a failure" \
	"1 passed, 1 failed, 1 skipped" 1 \
	"tc: failed: a.tap: ok 2 two # SKIP /dev/vhost-blk does not exist (is vhost_blk loaded?) (make check does not accept this skip)" \
	"tc: skipped: a.tap: ok 3 three # SKIP the backend is not a block device" \
	-- --fail-skip '/dev/vhost-blk|VHOST_BLK_TEST_DEV' "$dir"/a.tap

new_case
file a.tap "1..2" "ok 1 one # SKIP VHOST_BLK_TEST_DEV is not set" \
	"ok 2 two # SKIP VHOST_BLK_TEST_DEV is not set"
expect "only skips: no test ran, a failure" "0 passed, 1 failed, 2 skipped" 1 \
	"tc: no test ran" -- "$dir"/a.tap

new_case
file a.tap "1..1" "ok 1 one"
file b.tap "TAP version 13" "1..0 # SKIP no null_blk"
expect "a plan of 1..0 is one skip" "1 passed, 0 failed, 1 skipped" 0 \
	"tc: skipped: b.tap: 1..0 # SKIP no null_blk" -- "$dir"/a.tap "$dir"/b.tap

new_case
file a.tap "1..1" "ok 1 one"
file b.tap "1..0 # SKIP /dev/vhost-blk does not exist"
expect "a plan of 1..0 for a refused reason is a failure" "1 passed, 1 failed" 1 \
	-- --fail-skip /dev/vhost-blk "$dir"/a.tap "$dir"/b.tap

new_case
file a.tap "1..2" "ok 1 one" "Bail out! the device went away"
expect "Bail out! is a failure, and so are the results it cut off" \
	"1 passed, 2 failed" 1 "tc: a.tap: bailed out" \
	"tc: a.tap: 1 of 2 results missing" -- "$dir"/a.tap

new_case
file a.tap "TAP version 13" "1..1" "# ok 2 commented" "    not ok 1 a subtest" \
	"  1..4" "ok 1 one" "#not ok 3"
expect "comments and indented subtests are not counted" "1 passed, 0 failed" 0 \
	-- "$dir"/a.tap

new_case
file a.tap "1..2" "not ok 1 one # SKIP why not" "not ok 2 two # TODO later"
expect "not ok with a SKIP or TODO directive is still a failure" \
	"0 passed, 2 failed" 1 -- "$dir"/a.tap

new_case
file a.tap "1..8" "ok 1" "not ok 2 b" "not ok 3 c" "not ok 4 d" "not ok 5 e" \
	"not ok 6 f" "not ok 7 g" "not ok 8 h"
file b.tap "1..1" "not ok 1 z"
expect "at most 5 failures listed per file, every failed file named" \
	"1 passed, 8 failed" 1 "tc: failed: a.tap: not ok 6 f" \
	"tc: failed: a.tap: ... and 2 more" "tc: failed: b.tap: not ok 1 z" \
	-- "$dir"/a.tap "$dir"/b.tap

new_case
file a.tap "1..2" "ok" "ok"
expect "results without numbers are numbered in order" "2 passed, 0 failed" 0 \
	-- "$dir"/a.tap

new_case
file a.tap "1..1" "ok 1 one"
bash "$counter" --vm-result test-vm 0 /out 1800 >"$dir/vm.tap"
expect "a VM that ran cleanly is a pass" "2 passed, 0 failed" 0 \
	-- "$dir"/a.tap "$dir"/vm.tap

# A failed VM after which every result present passed.
for case in "3|the kernel log shows a warning, see /out/dmesg.log" \
	    "124|the VM timed out after 1800 s, see /out/console.log" \
	    "125|the VM could not be set up or died (a panic?), see /out/console.log" \
	    "2|run-vm.sh refused to run (usage or configuration error, see its messages)" \
	    "130|the VM run was interrupted" \
	    "1|the command in the VM exited with status 1, see /out/console.log"; do
	new_case
	file a.tap "1..2" "ok 1 one" "ok 2 two"
	rc=${case%%|*}
	bash "$counter" --vm-result test-vm "$rc" /out 1800 >"$dir/vm.tap"
	expect "run-vm.sh status $rc is a failure that says why" "2 passed, 1 failed" 1 \
		"tc: failed: vm.tap: not ok 1 test-vm - ${case#*|}" \
		-- "$dir"/a.tap "$dir"/vm.tap
done

# --allow-skips: the skips a pass may have, by file and description.
new_case
file 6.1.brd.io.tap "1..4" "ok 1 - one" "ok 2 - two # SKIP brd has no discard" \
	"ok 3 three # SKIP not here" "ok 4 - four # SKIP other"
file 6.1.cpoll.tap "1..0 # SKIP no poll queues"
printf '%s\n' "# expected on 6.1" "6.1.brd.io.tap two" "*.io.tap three" \
	"6.1.cpoll.tap (all)" >"$dir/allow"
expect "--allow-skips: a skip the list does not expect is a failure" \
	"1 passed, 1 failed, 3 skipped" 1 \
	"tc: skipped: 6.1.brd.io.tap: ok 2 - two # SKIP brd has no discard" \
	"tc: failed: 6.1.brd.io.tap: ok 4 - four # SKIP other (not an expected skip: not in allow)" \
	-- --allow-skips "$dir/allow" "$dir"/6.1.brd.io.tap "$dir"/6.1.cpoll.tap
expect "--list-skips: the skips as lines of a list" \
	"6.1.cpoll.tap (all)	# SKIP no poll queues" 0 \
	"6.1.brd.io.tap two	# SKIP brd has no discard" \
	"6.1.brd.io.tap three	# SKIP not here" \
	-- --list-skips "$dir"/6.1.brd.io.tap "$dir"/6.1.cpoll.tap

echo "1..$n"
exit "$failed"
