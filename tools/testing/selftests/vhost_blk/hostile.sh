#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The hostile-guest suite against one or more backends, inside the test VM:
# vhost_blk_hostile_test (every case of the malformed-request contract),
# vhost_blk_fuzz (seeded hostile guest) and vhost_blk_fuzz --stress (data
# integrity at full queue depth).  Prints one TAP document on stdout:
#
#   ok N - NAME: hostile.CASE        one line per kselftest case
#   ok N - NAME: fuzz (SEED)         the fuzzer, its statistics as comments
#   ok N - NAME: stress (SEED)
#
# and the plan last.  Full outputs go to the log directory.  The backends'
# contents are destroyed.
#
# Usage: hostile.sh [OPTIONS] NAME=PATH...

set -u

me=hostile.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)

usage() {
	cat <<EOF
Usage: $me [OPTIONS] NAME=PATH...

Run the vhost-blk hostile-guest suite against each backend PATH (a block
device or a regular file, overwritten), named NAME in the results, and
print the results as one TAP document.  Needs /dev/vhost-blk (run it in
the test VM, e.g. from in_vm.sh).

Options:
  --bindir DIR          the programs (default \$BUILD/selftests, BUILD
                        defaulting to $repo/build)
  --requests N          fuzzer requests per backend (default 40000 on a
                        block device, 20000 on a file: 100000 for brd,
                        null_blk and a file together)
  --stress-requests N   stress requests per backend (default 6000)
  --seed N              seed of the fuzzer and the stress run (default:
                        a new one each run; printed in the TAP line)
  --log DIR             where the full outputs go (default
                        \$VHOST_BLK_VM_OUT, else /tmp)
  -h, --help            this text

Environment:
  VHOST_BLK_TEST_STRICT   set and not 0 (make check): a program that
                          would skip for want of /dev/vhost-blk or of the
                          backend fails instead

Exit status: 0 if every test passed (or was skipped), 1 otherwise, 2 for
usage errors.
EOF
}

die() {
	echo "$me: $*" >&2
	exit 2
}

bindir=${BUILD:-$repo/build}/selftests
requests=
stress_requests=6000
seed=
logdir=${VHOST_BLK_VM_OUT:-/tmp}
backends=()
strict=
[ "${VHOST_BLK_TEST_STRICT:-0}" = 0 ] || strict=1

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
	case "$1" in
	--bindir)		[ $# -ge 2 ] || die "$1 needs an argument"
				bindir=$2; shift 2 ;;
	--requests)		[ $# -ge 2 ] || die "$1 needs an argument"
				requests=$2; shift 2 ;;
	--stress-requests)	[ $# -ge 2 ] || die "$1 needs an argument"
				stress_requests=$2; shift 2 ;;
	--seed)			[ $# -ge 2 ] || die "$1 needs an argument"
				seed=$2; shift 2 ;;
	--log)			[ $# -ge 2 ] || die "$1 needs an argument"
				logdir=$2; shift 2 ;;
	-h|--help)		usage; exit 0 ;;
	-*)			die "unknown option $1 (see --help)" ;;
	*=*)			backends+=("$1"); shift ;;
	*)			die "'$1' is not NAME=PATH (see --help)" ;;
	esac
done
[ ${#backends[@]} -gt 0 ] || die "no backend given (usage: $me [OPTIONS] NAME=PATH...)"
[ -z "$requests" ] || is_uint "$requests" || die "--requests: '$requests' is not a number"
is_uint "$stress_requests" || die "--stress-requests: '$stress_requests' is not a number"
[ -z "$seed" ] || is_uint "$seed" || die "--seed: '$seed' is not a number"
for prog in vhost_blk_hostile_test vhost_blk_fuzz; do
	[ -x "$bindir/$prog" ] || die "$bindir/$prog not found: run 'make tools'"
done
mkdir -p "$logdir" || die "cannot create $logdir"

n=0
failed=0

tap() {		# tap ok|not ok DESCRIPTION [DIRECTIVE]
	n=$((n + 1))
	printf '%s %d - %s%s\n' "$1" "$n" "$2" "${3:+ # $3}"
	[ "$1" = ok ] || failed=1
}

comment() { sed 's/^#* \{0,1\}/# /'; }

# The kselftest program: its result lines, renumbered and named.
run_hostile() {
	local name=$1 path=$2 log line desc plan got=0 rc msg

	log=$logdir/$name.hostile_test.log
	VHOST_BLK_TEST_DEV=$path "$bindir/vhost_blk_hostile_test" >"$log" 2>&1
	rc=$?
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
	# (No process substitution: the test VM has no /dev/fd.)
	grep -E '^(not )?ok [0-9]+ ' "$log" >"$log.results"
	while IFS= read -r line; do
		got=$((got + 1))
		desc=${line#* [0-9]* }
		case "$line" in
		ok\ *\#\ SKIP*)
			tap ok "$name: ${desc%% \# SKIP*}" "SKIP${desc#* \# SKIP}" ;;
		ok\ *)	tap ok "$name: $desc" ;;
		*)	tap "not ok" "$name: $desc"
			# The failing case's messages.
			awk -v t="${desc%% *}" '
				$0 ~ "RUN +" t " " { on = 1 }
				on { print }
				on && / (OK|FAIL|SKIP) +/ { exit }' "$log" |
				head -n 30 | comment ;;
		esac
	done <"$log.results"
	rm -f "$log.results"
	if [ -z "$plan" ] || [ "$got" -lt "$plan" ]; then
		msg="vhost_blk_hostile_test stopped after $got of ${plan:-?} cases"
		tap "not ok" "$name: $msg (status $rc, see $log)"
		tail -n 20 "$log" | comment
	fi
}

# One fuzzer run: a TAP line with the seed, the statistics as comments.
run_fuzz() {
	local name=$1 path=$2 what=$3 count=$4 log s rc start end why msg

	shift 4
	log=$logdir/$name.$what.log
	s=${seed:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	start=$(date +%s)
	"$bindir/vhost_blk_fuzz" --backend "$path" --seed "$s" \
		--requests "$count" "$@" >"$log" 2>&1
	rc=$?
	end=$(date +%s)
	case $rc in
	0)	tap ok "$name: $what (seed $s, $count requests, $((end - start)) s)" ;;
	4)	# No /dev/vhost-blk, or no backend.
		why=$(grep -m1 -e SKIP -e 'cannot open' "$log" | sed 's/^# SKIP: //')
		if [ -n "$strict" ]; then
			msg="skipped, which VHOST_BLK_TEST_STRICT does not allow"
			tap "not ok" "$name: $what (seed $s): $msg: ${why:-status 4}"
		else
			tap ok "$name: $what" "SKIP ${why:-status 4}"
		fi ;;
	*)	tap "not ok" "$name: $what (seed $s, $count requests, status $rc)" ;;
	esac
	grep -v "^# vhost_blk_fuzz: seed" "$log" | tail -n 25 | comment
}

echo "TAP version 13"
for b in "${backends[@]}"; do
	name=${b%%=*}
	path=${b#*=}
	if [ ! -b "$path" ] && [ ! -f "$path" ]; then
		tap "not ok" "$name: $path is neither a block device nor a file"
		continue
	fi
	count=$requests
	if [ -z "$count" ]; then
		count=20000
		[ -b "$path" ] && count=40000
	fi
	run_hostile "$name" "$path"
	run_fuzz "$name" "$path" fuzz "$count"
	run_fuzz "$name" "$path" stress "$stress_requests" --stress
done
echo "1..$n"
exit $failed
