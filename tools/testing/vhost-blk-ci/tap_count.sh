#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The counting of 'make check' (run_check.sh), kept apart so that
# tap_count_test.sh can check it without a VM.  See --help.

set -u

me=tap_count.sh

usage() {
	cat <<EOF
Usage: $me [--name NAME] [--fail-skip REGEX] [--allow-skips LIST] FILE...
       $me --list-skips FILE...
       $me --vm-result NAME STATUS OUTDIR TIMEOUT

Count the TAP results in FILE... and print, on stdout, why anything
failed (a line per problem and per 'not ok' result, at most five of those
per file, prefixed NAME:), every skip with its reason, and last exactly

  N passed, N failed[, N skipped]

A result is counted as failed when it is 'not ok', and so are:
  - each result a file's plan (1..N) has but the file does not;
  - a file with no plan, with more than one, with more results than its
    plan, with a test number outside the plan or twice, or with
    'Bail out!' (one failure each);
  - a skip whose reason matches --fail-skip (an extended regular
    expression, case-insensitive): something that must be there was not;
  - with --allow-skips, a skip that LIST does not expect;
  - no FILE at all, or a FILE that cannot be read (one failure);
  - no failure and no pass either: "no test ran" (one failure).
A plan of '1..0 # SKIP reason' with no results is one skip.  Lines that
start with '#' or white space (comments, subtests) are not counted.

LIST has a line per expected skip: the TAP file's name, white space, and
the result's description (the text after 'ok N', a leading '- ' dropped,
up to ' # SKIP'), or '(all)' for a file that skipped as a whole
('1..0 # SKIP'); '*' in either matches any text.  '#' starts a comment.
--list-skips prints the skips of FILE... in that form, each with its
reason as a comment: the start of a LIST.

--vm-result prints a TAP document of one result, test NAME, for a
vm/run-vm.sh exit STATUS: ok for 0; not ok for anything else, saying why
(3: a kernel warning, see OUTDIR/dmesg.log; 124: timed out after TIMEOUT
s; 125: the VM could not be set up or died; 2: run-vm.sh refused to run;
130: interrupted; N: the command exited with status N).

Options:
  --name NAME        prefix of the explanatory lines (default tap_count)
  --fail-skip REGEX  count skips whose reason matches REGEX as failures
  --allow-skips LIST count skips that LIST does not expect as failures
  --list-skips       print the skips of FILE... as lines of a LIST
  -h, --help         this text

Exit status: 0 if nothing failed and something passed, 1 otherwise, 2 for
usage errors.
EOF
}

die() {
	echo "$me: $*" >&2
	exit 2
}

# vm_result NAME STATUS OUTDIR TIMEOUT
vm_result() {
	local name=$1 rc=$2 dir=$3 timeout=$4 why=

	case $rc in
	0)	;;
	3)	why="the kernel log shows a warning, see $dir/dmesg.log" ;;
	124)	why="the VM timed out after $timeout s, see $dir/console.log" ;;
	125)	why="the VM could not be set up or died (a panic?), see $dir/console.log" ;;
	2)	why="run-vm.sh refused to run (usage or configuration error, see its messages)" ;;
	130)	why="the VM run was interrupted" ;;
	*)	why="the command in the VM exited with status $rc, see $dir/console.log" ;;
	esac
	echo "TAP version 13"
	echo "1..1"
	if [ -z "$why" ]; then
		echo "ok 1 $name"
	else
		echo "not ok 1 $name - $why"
	fi
}

# The whole count in one awk program: per-file checks, then the totals.
# (Files are read with getline from BEGIN, so that an empty or unreadable
# file is noticed, and no file at all does not mean stdin.)
count() {
	local name=$1 fail_skip=$2 allow=$3 list=$4

	shift 4
	awk -v name="$name" -v fail_skip="$fail_skip" -v allow="$allow" \
	    -v list="$list" '
	function fname(f,   n, parts) { n = split(f, parts, "/"); return parts[n] }
	function problem(text) { problems[++nproblems] = name ": " text; return 1 }
	# At most 5 failed results listed per file, so that every file that
	# failed shows.
	function fail_line(text) {
		if (++file_fails <= 5)
			fails[++nfails] = name ": failed: " text
	}
	function skip_line(text) { skips[++nskips] = name ": skipped: " text }
	# The SKIP directive of a line ("SKIP reason"), or "".
	function skip_reason(line,   i, d) {
		i = index(line, " # ")
		while (i > 0) {
			d = substr(line, i + 3)
			if (toupper(substr(d, 1, 4)) == "SKIP")
				return d
			line = d
			i = index(line, " # ")
		}
		return ""
	}
	function skip_refused(reason) {
		return fail_skip != "" && tolower(reason) ~ tolower(fail_skip)
	}
	# A LIST pattern as an anchored regular expression: "*" any text,
	# everything else literal.
	function glob_re(g,   out, i, c) {
		out = "^"
		for (i = 1; i <= length(g); i++) {
			c = substr(g, i, 1)
			if (c == "*")
				out = out ".*"
			else if (c ~ /[][\\.^$+?(){}|]/)
				out = out "\\" c
			else
				out = out c
		}
		return out "$"
	}
	function read_allow(path,   line, rc, f, id) {
		nallow = 0
		while ((rc = (getline line < path)) > 0) {
			sub(/#.*/, "", line)
			if (!match(line, /[^ \t]/))
				continue
			line = substr(line, RSTART)
			sub(/[ \t]+$/, "", line)
			f = line
			sub(/[ \t].*/, "", f)
			id = substr(line, length(f) + 1)
			sub(/^[ \t]+/, "", id)
			allow_file[++nallow] = glob_re(f)
			allow_id[nallow] = glob_re(id)
		}
		if (rc < 0) {
			problem(path ": the skip list cannot be read")
			failed++
		}
		close(path)
	}
	# The description of a result line: after "ok N" and "- ", up to " # ".
	function result_id(line,   rest, i) {
		rest = line
		sub(/^ok[ \t]*[0-9]*[ \t]*/, "", rest)
		sub(/^- /, "", rest)
		i = index(rest, " # ")
		return i ? substr(rest, 1, i - 1) : rest
	}
	function skip_expected(id,   i) {
		if (allow == "")
			return 1
		for (i = 1; i <= nallow; i++)
			if (file ~ allow_file[i] && id ~ allow_id[i])
				return 1
		return 0
	}
	# One skip: listed (--list-skips), expected, or a failure.
	function skip(text, id, reason) {
		if (list != "") {
			listed[++nlisted] = file " " id "\t# " reason
			skipped++
		} else if (skip_expected(id)) {
			skip_line(file ": " text)
			skipped++
		} else {
			fail_line(file ": " text " (not an expected skip: " \
				  "not in " fname(allow) ")")
			failed++
		}
	}
	function result(line,   rest, num, reason) {
		nres++
		rest = line
		sub(/^(not )?ok[ \t]*/, "", rest)
		if (match(rest, /^[0-9]+/))
			num = substr(rest, 1, RLENGTH) + 0
		else
			num = nres
		seen[num]++
		if (line ~ /^not ok/) {
			fail_line(file ": " line)
			failed++
			return
		}
		reason = skip_reason(line)
		if (reason == "") {
			passed++
		} else if (skip_refused(reason)) {
			fail_line(file ": " line " (make check does not accept this skip)")
			failed++
		} else {
			skip(line, result_id(line), reason)
		}
	}
	function count_file(path,   line, rc, plans, plan, plan_skip, num, dups, outside, bad) {
		file = fname(path)
		plans = 0; plan = -1; plan_skip = ""; nres = 0; bail = 0
		file_fails = 0
		split("", seen)
		while ((rc = (getline line < path)) > 0) {
			if (line ~ /^1\.\.[0-9]+/) {
				if (++plans == 1) {
					match(line, /^1\.\.[0-9]+/)
					plan = substr(line, 4, RLENGTH - 3) + 0
					plan_skip = skip_reason(line)
					if (plan_skip == "")
						plan_skip = "SKIP (no reason given)"
				}
			} else if (line ~ /^Bail out!/) {
				bail = 1
			} else if (line ~ /^(not )?ok([ \t]|$)/) {
				result(line)
			}
		}
		close(path)
		if (file_fails > 5)
			fails[++nfails] = name ": failed: " file ": ... and " file_fails - 5 " more"
		if (rc < 0) {
			problem(path ": cannot be read")
			failed++
			return
		}
		# However malformed, a file is one failure (each reason listed),
		# plus one for each result missing from its plan.
		bad = 0
		if (plans == 0)
			bad = problem(file ": no TAP plan")
		else if (plans > 1)
			bad = problem(file ": " plans " TAP plans")
		if (bail)
			bad = problem(file ": bailed out")
		if (plans > 0 && plan == 0 && nres == 0) {
			# The program skipped as a whole.
			if (skip_refused(plan_skip)) {
				fail_line(file ": 1..0 # " plan_skip " (make check does not accept this skip)")
				failed++
			} else {
				skip("1..0 # " plan_skip, "(all)", plan_skip)
			}
		}
		if (plans > 0 && nres > plan)
			bad = problem(file ": " nres " results, more than its plan of " plan)
		else if (plans > 0 && nres < plan) {
			problem(file ": " plan - nres " of " plan " results missing")
			failed += plan - nres
		}
		dups = ""; outside = ""
		for (num in seen) {
			if (seen[num] > 1)
				dups = dups " " num
			if (plans > 0 && (num + 0 < 1 || num + 0 > plan))
				outside = outside " " num
		}
		if (dups != "")
			bad = problem(file ": test numbers used more than once:" dups)
		if (outside != "")
			bad = problem(file ": test numbers outside its plan 1.." plan ":" outside)
		failed += bad
	}
	BEGIN {
		passed = failed = skipped = 0
		if (allow != "")
			read_allow(allow)
		for (i = 1; i < ARGC; i++)
			count_file(ARGV[i])
		if (list != "") {
			for (i = 1; i <= nlisted; i++)
				print listed[i]
			exit 0
		}
		if (ARGC <= 1) {
			problem("no TAP files")
			failed++
		}
		if (passed == 0 && failed == 0) {
			problem("no test ran")
			failed++
		}
		# Failures last, beside the count: the tail of a log shows them.
		for (i = 1; i <= nskips && i <= 40; i++)
			print skips[i]
		if (nskips > 40)
			print name ": skipped: ... and " nskips - 40 " more"
		for (i = 1; i <= nproblems; i++)
			print problems[i]
		for (i = 1; i <= nfails; i++)
			print fails[i]
		line = passed " passed, " failed " failed"
		if (skipped > 0)
			line = line ", " skipped " skipped"
		print line
		exit !(failed == 0 && passed > 0)
	}' "$@"
}

main() {
	local name=tap_count fail_skip='' allow='' list='' files=()

	while [ $# -gt 0 ]; do
		case "$1" in
		--name)		[ $# -ge 2 ] || die "$1 needs an argument"
				name=$2; shift 2 ;;
		--fail-skip)	[ $# -ge 2 ] || die "$1 needs an argument"
				fail_skip=$2; shift 2 ;;
		--allow-skips)	[ $# -ge 2 ] || die "$1 needs an argument"
				allow=$2; shift 2 ;;
		--list-skips)	list=1; shift ;;
		--vm-result)	[ $# -eq 5 ] ||
					die "usage: $me --vm-result NAME STATUS OUTDIR TIMEOUT"
				vm_result "$2" "$3" "$4" "$5"
				return 0 ;;
		-h|--help)	usage; return 0 ;;
		--)		shift; files+=("$@"); break ;;
		-*)		die "unknown option $1 (see --help)" ;;
		*)		files+=("$1"); shift ;;
		esac
	done
	count "$name" "$fail_skip" "$allow" "$list" "${files[@]}"
}

main "$@"
