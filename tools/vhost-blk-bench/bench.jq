# SPDX-License-Identifier: GPL-2.0
#
# jq functions over a vhost-blk-bench result document ({meta, runs}):
# medians of repeated runs, the goals of issue 12, and the lookups the
# summary (summary.sh) and the chart (plot.sh) share.  Use:
#
#   jq -L tools/vhost-blk-bench 'include "bench"; with_summary' RESULT.json
#
# Every figure is taken from the runs; nothing is measured here.

# A run's outcome; documents before format 2 have only "ok".
def status: .status // (if .ok then "ok" else "failed" end);

# What makes runs repeats of one another: everything but the round.
def point_key:
	{experiment, "label": .label, backend, peer, uring_mode, rw, iodepth,
	 queues, event_idx, polling, poll_completions, workers};

# A vhost-user peer's version as numbers ("qsd 10.0" -> [10, 0]), to sort
# by; [] for none (documents before peers).
def peer_rank: [(.peer // "") | scan("[0-9]+") | tonumber];

def median:
	sort as $s | ($s | length) as $n |
	if $n == 0 then null
	elif $n % 2 == 1 then $s[($n - 1) / 2]
	else ($s[$n / 2 - 1] + $s[$n / 2]) / 2 end;

# {median, min, max, n} of the numbers f gives over the array.
def spread(f):
	[.[] | f | select(type == "number")] |
	{median: median, min: min, max: max, n: length};

# One entry per point: its key, how its runs went, and the spread of
# IOPS, latency and CPU per request over its successful runs.
def medians:
	[.runs | group_by(point_key | tojson)[] |
	 (.[0] | point_key) +
	 {runs: length,
	  ok_runs: ([.[] | select(status == "ok")] | length),
	  status: (if all(.[]; status == "unsupported") then "unsupported"
		   elif any(.[]; status == "ok") then "ok" else "failed" end)} +
	 ([.[] | select(status == "ok")] |
	  {iops: spread(.iops), lat_mean_us: spread(.lat_mean_us),
	   cpu_us_per_req: spread(.cpu_us_per_req // .be_cpu_us_per_req),
	   be_cpu_us_per_req: spread(.be_cpu_us_per_req),
	   irq_cpu_us_per_req: spread(.irq_cpu_us_per_req),
	   be_ctxsw_per_req: spread(.be_ctxsw_per_req),
	   be_syscalls_per_req: spread(.be_syscalls_per_req),
	   notif_per_req: spread(.notif_per_req),
	   kicks_per_req: spread(.kicks_per_req),
	   poll_hits: spread(.vhost_blk_stats.poll_hits),
	   polls: spread(.vhost_blk_stats.polls)})];

# A sort key that reads as the tables should: by workload, then vhost-blk,
# qsd, io_uring, then polling off before fixed windows (by length) before
# adaptive ones.
def poll_rank:
	(.polling // "off") as $p |
	if $p == "off" then 0
	elif ($p | startswith("fixed:")) then ($p | ltrimstr("fixed:") | tonumber)
	elif ($p | startswith("adaptive:")) then 1000000 + ($p | ltrimstr("adaptive:") | tonumber)
	else 2000000 end;
def table_order:
	[.rw, .iodepth, .queues,
	 ({"vhost-blk": 0, "vhost-user": 1, "io_uring": 2}[.backend] // 3),
	 peer_rank,
	 ({"plain": 0, "sqpoll": 1, "iopoll": 2}[.uring_mode // "plain"] // 3),
	 (if .workers == "per-queue" then 1 else 0 end),
	 poll_rank, (if .poll_completions then 1 else 0 end)];

# The entry of $m matching every field of $sel, or null.
def pick($m; $sel):
	[$m[] | select(. as $e | all($sel | to_entries[]; $e[.key] == .value))] |
	first // null;

# The entry with the highest median IOPS among those matching $sel.
def best($m; $sel):
	[$m[] | select(. as $e | all($sel | to_entries[]; $e[.key] == .value)) |
	 select(.status == "ok")] |
	max_by(.iops.median) // null;

def row_name:
	if . == null then null else
	"\(.backend)\(if .peer then " (" + .peer + ")" else "" end)" +
	"\(if .uring_mode then " " + .uring_mode else "" end)" +
	" \(.rw) qd\(.iodepth) x\(.queues)q polling=\(.polling)" +
	"\(if .workers != "" and .workers != null then " workers=" + .workers else "" end)" +
	"\(if .poll_completions then " +completion polling" else "" end)"
	end;

# A goal: the ratio of the medians of field $f of $num and $den, its range
# (the extremes of the two spreads) and whether it meets $target ($op:
# ">=" or "<=").
def goal($name; $f; $num; $den; $op; $target):
	{goal: $name, op: $op, target: $target,
	 numerator: ($num | row_name), denominator: ($den | row_name)} +
	if $num == null or $den == null then
		{status: "not measured", ratio: null, met: null}
	elif $num.status == "unsupported" or $den.status == "unsupported" then
		{status: "unsupported", ratio: null, met: null}
	elif ($num[$f].median | type) != "number" or
	     ($den[$f].median | type) != "number" or $den[$f].median == 0 then
		{status: "failed", ratio: null, met: null}
	else
		($num[$f].median / $den[$f].median) as $r |
		{status: "ok", ratio: $r,
		 ratio_min: (if $den[$f].max > 0 then $num[$f].min / $den[$f].max else null end),
		 ratio_max: (if $den[$f].min > 0 then $num[$f].max / $den[$f].min else null end),
		 runs: [$num[$f].n, $den[$f].n],
		 met: (if $op == ">=" then $r >= $target else $r <= $target end)}
	end;

def goals($m):
	($m | map(select(.experiment == "headline"))) as $h |
	($m | map(select(.experiment == "cpoll"))) as $c |
	{rw: "randread", iodepth: 1, queues: 1} as $qd1 |
	{rw: "randread", iodepth: 32, queues: 2} as $qd32 |
	# vhost-blk at iodepth 32: the better of its two polling settings,
	# against the best io_uring set-up (each side its best).
	best($h; $qd32 + {backend: "vhost-blk"}) as $vb32 |
	"adaptive:\(.meta.poll_max_us // 32)" as $ap |
	# Every qsd peer (one, unnamed, in documents before peers).  Against
	# Debian 12's 7.2, issue 12's goals (2x at iodepth 1, 3x at 32 x 2);
	# against a newer one, issue 20's (2x at both).
	[(.meta.qsd_peers // [{peer: null}])[] | .peer as $p |
	 (if $p == null or ($p | startswith("qsd 7.")) then 3.0 else 2.0 end) as $t32 |
	 goal("IOPS vs \($p // "qsd"), iodepth 1, both polling"; "iops";
	      pick($h; $qd1 + {backend: "vhost-blk", polling: $ap});
	      pick($h; $qd1 + {backend: "vhost-user", peer: $p, polling: $ap});
	      ">="; 2.0),
	 goal("IOPS vs \($p // "qsd"), iodepth 32 x 2 queues, both polling"; "iops";
	      pick($h; $qd32 + {backend: "vhost-blk", polling: $ap});
	      pick($h; $qd32 + {backend: "vhost-user", peer: $p, polling: $ap});
	      ">="; $t32)] +
	[goal("IOPS vs best io_uring, iodepth 32 x 2 queues, a worker each"; "iops";
	      $vb32; best($h; $qd32 + {backend: "io_uring"}); ">="; 0.8),
	 goal("back-end CPU per request vs plain io_uring, iodepth 32 x 2 queues, polling off"; "cpu_us_per_req";
	      pick($h; $qd32 + {backend: "vhost-blk", polling: "off"});
	      pick($h; $qd32 + {backend: "io_uring", uring_mode: "plain"});
	      "<="; 1.0),
	 goal("IOPS with completion polling vs without, iodepth 1 (null_blk poll queues)"; "iops";
	      pick($c; $qd1 + {backend: "vhost-blk", poll_completions: true});
	      pick($c; $qd1 + {backend: "vhost-blk", poll_completions: false});
	      ">="; 1.3)];

# The document with its medians and goals added.
def with_summary:
	(medians | sort_by(table_order)) as $m | . + {medians: $m, goals: goals($m)};
