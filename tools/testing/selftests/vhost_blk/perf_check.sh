#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The vhost_blk tracepoints seen through perf, inside the test VM:
# 'perf stat' and 'perf record' on one selftest that issues exactly 16
# reads must count 16 submissions and 16 completions.  Writes TAP to
# stdout.  Usage: perf_check.sh BINDIR BACKEND
set -u

bindir=${1:?usage: perf_check.sh BINDIR BACKEND}
dev=${2:?usage: perf_check.sh BINDIR BACKEND}
test=fastpath.inflight_high_water_mark_counts_posted_requests
want=16
tmp=$(mktemp -d)
n=0

tap() {			# tap OK|FAIL NAME [DIAG]
	n=$((n + 1))
	if [ "$1" = OK ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		[ -n "${3:-}" ] && printf '# %s\n' "$3"
	fi
}

run_test() {
	VHOST_BLK_TEST_DEV=$dev "$bindir/vhost_blk_fastpath_test" -r "$test" \
		>"$tmp/test.log" 2>&1
}

echo "TAP version 13"
echo "1..4"
if ! command -v perf >/dev/null; then
	for t in perf_list perf_stat_submit perf_stat_complete perf_record; do
		tap FAIL "$t" "perf is not installed (make deps installs linux-perf)"
	done
	exit 0
fi

events=$(perf list 'vhost_blk:*' 2>/dev/null | grep -c 'vhost_blk:')
if [ "$events" -ge 6 ]; then
	tap OK perf_list_shows_the_six_tracepoints
else
	tap FAIL perf_list_shows_the_six_tracepoints "perf list shows $events"
fi

# -x, gives "count,,event,...": pick the counts by event name.
perf stat -a -x, -o "$tmp/stat" -e vhost_blk:vhost_blk_req_submit \
	-e vhost_blk:vhost_blk_req_complete -- \
	env VHOST_BLK_TEST_DEV="$dev" "$bindir/vhost_blk_fastpath_test" \
	-r "$test" >"$tmp/test.log" 2>&1
for ev in submit complete; do
	got=$(awk -F, -v e="vhost_blk:vhost_blk_req_$ev" '$3 == e {print $1}' \
		"$tmp/stat")
	if [ "$got" = "$want" ]; then
		tap OK "perf_stat_counts_${want}_req_$ev"
	else
		tap FAIL "perf_stat_counts_${want}_req_$ev" \
			"got '${got}': $(tr '\n' ' ' <"$tmp/stat")"
	fi
done

perf record -q -a -o "$tmp/perf.data" -e 'vhost_blk:*' -- \
	env VHOST_BLK_TEST_DEV="$dev" "$bindir/vhost_blk_fastpath_test" \
	-r "$test" >"$tmp/test.log" 2>&1
got=$(perf script -i "$tmp/perf.data" 2>/dev/null |
	grep -c 'vhost_blk_req_complete:.*len=4096 status=0')
if [ "$got" = "$want" ]; then
	tap OK "perf_record_sees_${want}_completions"
else
	tap FAIL "perf_record_sees_${want}_completions" "got $got"
fi
rm -rf "$tmp"
