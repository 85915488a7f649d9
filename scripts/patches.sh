#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make patches: vhost-blk as the patch series that would be posted, a
# 'git format-patch' series with a cover letter against pristine
# linux-source-7.3, and its check: every patch applies with 'git am',
# builds drivers/vhost/ with W=1 and sparse (C=1) with no warning in our
# files, passes checkpatch --strict with 0 errors and 0 warnings and
# kernel-doc -none on the C files it touches.  See --help.
set -euo pipefail

me=patches
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$top/build}
base=$BUILD/patches
series_dir=$top/scripts/series

usage() {
	cat <<EOF
Usage: ${0##*/} [--check] [--tap FILE] [-j N]
       ${0##*/} --stages | --save-strips

Write the vhost-blk series into $base/series:

  0000-cover-letter.patch   why, what, the numbers (scripts/series/cover.txt)
  0001 the core: IN, OUT, FLUSH and GET_ID on a block device, one queue;
       its uapi, Kconfig and Makefile, a MAINTAINERS entry
  0002 a raw image file as the backend, and the sync task
  0003 DISCARD, WRITE_ZEROES and SECURE_ERASE
  0004 multiple queues and the vhost worker ioctls
  0005 bounded busy polling of an idle queue
  0006 completion polling
  0007 dirty logging for live migration
  0008 tracepoints
  0009 the guest's memory pinned once per memory table
  0010 Documentation/virt/vhost-blk: the ABI and the data path
  0011 selftests: tools/testing/selftests/vhost_blk

against a git tree of the pristine linux-source-7.3 that 'make deps'
downloaded ($base/linux; a tag 'base').  Each patch adds its paths to
the MAINTAINERS entry.  Commit messages come from scripts/series/NN-*.txt.

The repository's driver (blk.c, blk_trace.h, the uapi header) is what
0009 leaves.  scripts/series/strip/NN-*.diff takes stage NN back to
NN-1, removing that patch's feature; applied newest first, they give
every stage.  A change outside a feature's lines flows into every stage
on its own.  When a strip diff no longer applies (the change touched
that feature), refresh the strips:

  ${0##*/} --stages        write every stage into $base/stages/NN
                           (with the strips as they are: first fix what
                           fails, by hand, from the previous good state)
  (edit $base/stages/NN/..., stage 09 being the repository's files)
  ${0##*/} --save-strips   write scripts/series/strip/ from the stages

With --check, then: apply the series with 'git am' to a fresh branch from
'base', and for each patch build drivers/vhost/ with W=1 C=1 (x86_64
defconfig plus the selftests' config fragment, O=$base/obj), run
checkpatch.pl --strict on it, and kernel-doc -none on the C files it
touches.  One TAP result per patch and step (--tap FILE, default stdout).

Options:
  --check     also check the series as described
  --stages    only write the driver's stages (see above)
  --save-strips  only write the strip diffs from $base/stages
  --tap FILE  write the check's TAP there
  -j N        make jobs (default: nproc)
  -h, --help  this text
EOF
}

log() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { log "error: $*"; exit 1; }

check=0
mode=series
tap=/dev/stdout
jobs=$(nproc)
while [ $# -gt 0 ]; do
	case "$1" in
	--check)	check=1; shift ;;
	--stages)	mode=stages; shift ;;
	--save-strips)	mode=save-strips; shift ;;
	--tap)		[ $# -ge 2 ] || die "--tap needs a file"; tap=$2; shift 2 ;;
	-j)		[ $# -ge 2 ] || die "-j needs a number"; jobs=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	*)		log "unknown option $1 (see --help)"; exit 2 ;;
	esac
done

# The driver's stages.  The repository holds the driver as the last patch
# leaves it; scripts/series/strip/NN-*.diff takes it one patch back (stage
# NN to NN-1), removing that patch's feature.  Applied newest first to a
# copy of our files they give every stage, and the series is the stages'
# differences.  A change to code outside a feature flows into every stage;
# one that touches a strip diff's lines makes it fail to apply: refresh it
# (--stages, edit, --save-strips: see --help).
stage_files="drivers/vhost/blk.c drivers/vhost/blk_trace.h include/uapi/linux/vhost_blk.h"
stages=$base/stages
make_stages() {
	local k prev strip
	rm -rf "$stages"
	mkdir -p "$stages/$last_stage"
	for f in $stage_files; do
		mkdir -p "$stages/$last_stage/$(dirname "$f")"
		cp "$top/$f" "$stages/$last_stage/$f"
	done
	for ((k = 10#$last_stage; k > 1; k--)); do
		prev=$(printf '%02d' $((k - 1)))
		strip=$(find "$series_dir/strip" -name "$(printf '%02d' "$k")-*.diff")
		[ -n "$strip" ] || die "no scripts/series/strip/$(printf '%02d' "$k")-*.diff"
		cp -r "$stages/$(printf '%02d' "$k")" "$stages/$prev"
		patch -s -p1 -F 0 -d "$stages/$prev" --no-backup-if-mismatch -r - \
			<"$strip" >"$base/strip.log" 2>&1 ||
			die "$(basename "$strip") does not apply to stage $k ($(head -n 3 "$base/strip.log" | tr '\n' ' ')): refresh it (--help)"
	done
}
last_stage=09
[ -d "$series_dir/strip" ] || die "no $series_dir/strip"

if [ "$mode" = save-strips ]; then
	[ -d "$stages" ] || die "no $stages: run --stages first"
	for ((k = 10#$last_stage; k > 1; k--)); do
		cur=$(printf '%02d' "$k")
		prev=$(printf '%02d' $((k - 1)))
		strip=$(find "$series_dir/strip" -name "$cur-*.diff")
		[ -n "$strip" ] || strip=$series_dir/strip/$cur-stage.diff
		(cd "$stages" && for f in $stage_files; do
			[ -f "$cur/$f" ] || continue
			if [ -f "$prev/$f" ]; then
				diff -u --label "a/$f" --label "b/$f" "$cur/$f" "$prev/$f"
			else
				diff -u --label "a/$f" --label /dev/null "$cur/$f" /dev/null
			fi
			# diff's 1 is "they differ"; 2 is trouble.
			[ $? -le 1 ] || exit 2
		done) >"$strip.tmp" || die "diff of stage $cur and $prev failed"
		[ -s "$strip.tmp" ] || die "stage $cur is stage $prev: nothing to strip"
		mv "$strip.tmp" "$strip"
		log "wrote $(basename "$strip")"
	done
	exit 0
fi
if [ "$mode" = stages ]; then
	make_stages
	log "stages 01 to $last_stage in $stages: edit them, then --save-strips"
	exit 0
fi

env_file=$BUILD/kernel.env
[ -f "$env_file" ] || die "$env_file not found: run 'make deps'"
KVER_73=
# shellcheck source=/dev/null
. "$env_file"
[ -n "$KVER_73" ] || die "$env_file has no KVER_73: run 'make deps'"
deb=$BUILD/dl/linux-source-7.3_${KVER_73//:/%3a}_all.deb
[ -f "$deb" ] || die "$deb not found: run 'make deps'"
stamp=$(basename "$deb")
tree=$base/linux
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
GIT_AUTHOR_NAME=$(git -C "$top" log -1 --format=%an 2>/dev/null || echo vhost-blk)
GIT_AUTHOR_EMAIL=$(git -C "$top" log -1 --format=%ae 2>/dev/null || echo vhost-blk@invalid)
GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME
GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
g() { git -C "$tree" -c core.autocrlf=false -c advice.detachedHead=false "$@"; }

# ------------------------------------------------------ the pristine tree

# The pristine source committed once per machine, as a bare repository in
# $VHOST_BLK_CACHE/series-base (like the kernels; $BUILD/series-base when
# that cannot be written), tag 'base'; each clone's tree is a shared clone
# of it, which only checks the files out.
cache=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}/series-base
mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache=$BUILD/series-base
pristine=$cache/${stamp%.deb}.git
if ! git --git-dir="$pristine" rev-parse -q --verify base >/dev/null 2>&1; then
	log "unpacking $stamp and committing it into $pristine (once a machine; about 2 min)"
	mkdir -p "$cache"
	unpack=$(mktemp -d "$cache/unpack.XXXXXX")
	dpkg-deb --fsys-tarfile "$deb" |
		tar -xO ./usr/src/linux-source-7.3.tar.xz | tar -xJ -C "$unpack" ||
		die "cannot unpack the kernel source from $deb"
	u() { git -C "$unpack/linux-source-7.3" -c core.autocrlf=false "$@"; }
	u init -q && u add -A -f &&
		u commit -q -m "Linux $KVER_73 (Debian linux-source-7.3)" &&
		u tag base && u config core.bare true ||
		die "cannot commit the kernel source in $unpack"
	rm -rf "$pristine"
	mv "$unpack/linux-source-7.3/.git" "$pristine"
	rm -rf "$unpack"
fi
if [ "$(cat "$base/.base" 2>/dev/null)" != "$stamp" ] ||
   ! g rev-parse -q --verify base >/dev/null 2>&1; then
	log "checking $stamp out into $tree"
	rm -rf "$tree" "$base/obj" "$base/.base"
	mkdir -p "$base"
	git clone -q --shared --no-checkout "$pristine" "$tree" &&
		g checkout -q -f -B vhost-blk base ||
		die "cannot clone $pristine into $tree"
	echo "$stamp" >"$base/.base"
fi

# ------------------------------------------------------ the series

# A clean branch from base; our commits on it.
g checkout -q -f -B vhost-blk base
g clean -q -fdx

# maintainers_add LINE...: F: lines into our entry, which the first call
# creates between VIRTIO HOST (VHOST) and VIRTIO HOST (VHOST-SCSI).
maintainers_add() {
	local f=$tree/MAINTAINERS
	if ! grep -q '^VIRTIO HOST (VHOST-BLK)$' "$f"; then
		awk -v name="$GIT_AUTHOR_NAME" -v mail="$GIT_AUTHOR_EMAIL" '
			$0 == "VIRTIO HOST (VHOST-SCSI)" {
				print "VIRTIO HOST (VHOST-BLK)"
				print "M:\t" name " <" mail ">"
				print "L:\tkvm@vger.kernel.org"
				print "L:\tvirtualization@lists.linux.dev"
				print "S:\tMaintained"
				print ""
			}
			{ print }' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
	fi
	# The entry's F: lines, old and new, in the order checkpatch wants.
	printf '%s\n' "$@" >"$base/maintainers.add"
	awk -v add="$base/maintainers.add" '
		$0 == "VIRTIO HOST (VHOST-BLK)" { in_entry = 1 }
		in_entry && /^F:\t/ { files[++n] = $0; next }
		in_entry && $0 == "" {
			while ((getline l < add) > 0)
				files[++n] = l
			fflush()
			for (i = 1; i <= n; i++)
				print files[i] | "LC_ALL=C sort"
			close("LC_ALL=C sort")
			in_entry = 0
		}
		{ print }' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
}

commit() {	# commit MSGFILE
	g add -A -f
	g commit -q -s -F "$1"
}

put() {		# put REPO-PATH [TREE-PATH]
	mkdir -p "$(dirname "$tree/${2:-$1}")"
	cp "$top/$1" "$tree/${2:-$1}"
}

make_stages

# put_stage K: the driver's files as stage K has them.
put_stage() {
	for f in $stage_files; do
		if [ -f "$stages/$1/$f" ]; then
			mkdir -p "$(dirname "$tree/$f")"
			cp "$stages/$1/$f" "$tree/$f"
		fi
	done
}

# 01: the core, with the uapi and what builds it, so that every patch
# of the series builds the driver.
put_stage 01
frag() { awk 'on || !/^(#.*)?$/ { on = 1; print }' "$top/$1"; }
kc=$tree/drivers/vhost/Kconfig
grep -qx 'config VHOST_CROSS_ENDIAN_LEGACY' "$kc" ||
	die "no 'config VHOST_CROSS_ENDIAN_LEGACY' in drivers/vhost/Kconfig"
frag drivers/vhost/Kconfig >"$base/kconfig.frag"
awk -v frag="$base/kconfig.frag" '
	$0 == "config VHOST_CROSS_ENDIAN_LEGACY" {
		while ((getline l < frag) > 0)
			print l
		print ""
	}
	{ print }' "$kc" >"$kc.tmp" && mv "$kc.tmp" "$kc"
mk=$tree/drivers/vhost/Makefile
grep -qxF 'vhost_vdpa-y := vdpa.o' "$mk" ||
	die "no 'vhost_vdpa-y := vdpa.o' in drivers/vhost/Makefile"
# The tracepoints' include path comes with them (patch 08).
# insert_after FILE LINE FRAGMENT: FRAGMENT's lines after LINE of FILE.
insert_after() {
	awk -v line="$2" -v frag="$3" '
		{ print }
		$0 == line {
			while ((getline l < frag) > 0)
				print l
		}' "$1" >"$1.tmp" && mv "$1.tmp" "$1"
}
{
	echo
	frag drivers/vhost/Makefile | sed '/^# blk.c defines its tracepoints/,$d'
} >"$base/makefile.frag"
insert_after "$mk" 'vhost_vdpa-y := vdpa.o' "$base/makefile.frag"
maintainers_add "F:	drivers/vhost/blk.c" "F:	include/uapi/linux/vhost_blk.h"
commit "$series_dir/01-core.txt"

# 02 to 09: a feature each.
for ((k = 2; k <= 10#$last_stage; k++)); do
	cur=$(printf '%02d' "$k")
	put_stage "$cur"
	if [ -f "$tree/drivers/vhost/blk_trace.h" ] &&
	   ! grep -q 'blk_trace.h' "$tree/MAINTAINERS"; then
		frag drivers/vhost/Makefile |
			sed -n '/^# blk.c defines its tracepoints/,$p' >"$base/makefile.frag"
		insert_after "$mk" 'vhost_blk-y := blk.o' "$base/makefile.frag"
		maintainers_add "F:	drivers/vhost/blk_trace.h"
	fi
	msg=$(find "$series_dir" -maxdepth 1 -name "$cur-*.txt")
	[ -n "$msg" ] || die "no scripts/series/$cur-*.txt"
	commit "$msg"
done
# 10. Documentation: the ABI and the data path (the rest of our pages are
# about this repository: packages, the bridge, the benchmark, CI).
mkdir -p "$tree/Documentation/virt/vhost-blk"
put Documentation/virt/vhost-blk/uapi.rst
put Documentation/virt/vhost-blk/datapath.rst
awk '
	/^\.\. toctree::/ { toc = 1 }
	toc && /^   [a-z]/ { if ($1 != "uapi" && $1 != "datapath") next }
	toc && /^[^ ]/ && !/^\.\. toctree::/ { toc = 0 }
	{ print }' "$top/Documentation/virt/vhost-blk/index.rst" \
	>"$tree/Documentation/virt/vhost-blk/index.rst"
vi=$tree/Documentation/virt/index.rst
grep -q '^   hyperv/index$' "$vi" || die "no '   hyperv/index' in Documentation/virt/index.rst"
awk '{ print } $0 == "   hyperv/index" { print "   vhost-blk/index" }' "$vi" >"$vi.tmp" &&
	mv "$vi.tmp" "$vi"
maintainers_add "F:	Documentation/virt/vhost-blk/"
commit "$series_dir/10-docs.txt"

# 11. the selftests: the programs and their library, not this
# repository's CI (tools/testing/vhost-blk-ci).
st=tools/testing/selftests/vhost_blk
for f in Makefile config settings hostile.mk hostile.sh perf_check.sh \
	 nvme_tcp.sh nvme_tcp_pathfail.sh; do
	put "$st/$f"
done
for f in "$top/$st"/*.c "$top/$st"/*.h; do
	put "$st/${f##*/}"
done
sm=$tree/tools/testing/selftests/Makefile
grep -q '^TARGETS += user_events$' "$sm" ||
	die "no 'TARGETS += user_events' in tools/testing/selftests/Makefile"
awk '{ print } $0 == "TARGETS += user_events" { print "TARGETS += vhost_blk" }' "$sm" \
	>"$sm.tmp" && mv "$sm.tmp" "$sm"
maintainers_add "F:	tools/testing/selftests/vhost_blk/"
commit "$series_dir/11-selftests.txt"

# The series and its cover letter.
rm -rf "$base/series"
g format-patch -q --cover-letter -o "$base/series" base..vhost-blk
cover=$base/series/0000-cover-letter.patch
subject=$(sed -n '1p' "$series_dir/cover.txt")
awk -v subject="$subject" -v body="$series_dir/cover.txt" '
	/\*\*\* SUBJECT HERE \*\*\*/ { sub(/\*\*\* SUBJECT HERE \*\*\*/, subject) }
	/^\*\*\* BLURB HERE \*\*\*$/ {
		n = 0
		while ((getline l < body) > 0)
			if (n++ >= 2)
				print l
		next
	}
	{ print }' "$cover" >"$cover.tmp" && mv "$cover.tmp" "$cover"
log "series: $(find "$base/series" -name '*.patch' | wc -l) files in $base/series"

[ "$check" = 1 ] || exit 0

# ------------------------------------------------------ the check

# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$top/tools/testing/vhost-blk-ci/tap.sh"
tap_start --quiet "$base/check.tap"
result() {	# result OK|FAIL DESCRIPTION
	if [ "$1" = OK ]; then
		tap_ok "$2"
	else
		tap_not_ok "$2"
	fi
}

obj=$base/obj
mkdir -p "$obj"
g checkout -q -f -B check base
g clean -q -fdx
patches=()
for p in "$base"/series/[0-9][0-9][0-9][0-9]-*.patch; do
	[ "${p##*/}" = 0000-cover-letter.patch ] || patches+=("$p")
done
if g am -q "${patches[@]}" >"$base/am.log" 2>&1; then
	result OK "the series (${#patches[@]} patches) applies to linux-source-7.3 with git am"
else
	g am --abort >/dev/null 2>&1 || true
	result FAIL "git am of the series (see $base/am.log)"
fi

commits=$(g rev-list --reverse base..check)
i=0
for c in $commits; do
	i=$((i + 1))
	patch=$(find "$base/series" -name "$(printf '%04d' "$i")-*.patch")
	name=$(basename "$patch" .patch)
	g checkout -q -f "$c"
	# Configure at the first patch: defconfig with the selftests' fragment
	# (CONFIG_VHOST and CONFIG_VHOST_BLK as modules).
	if [ ! -f "$obj/.config" ] || [ "$i" = 1 ]; then
		make -s -C "$tree" O="$obj" x86_64_defconfig >"$base/config.log" 2>&1 &&
		"$tree/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" \
			"$top/tools/testing/selftests/vhost_blk/config" >>"$base/config.log" 2>&1 &&
		make -s -C "$tree" O="$obj" olddefconfig >>"$base/config.log" 2>&1 &&
		make -s -C "$tree" O="$obj" -j"$jobs" modules_prepare >>"$base/config.log" 2>&1 ||
			die "configuring $obj failed (see $base/config.log)"
	fi
	blog=$base/build-$i.log
	if make -C "$tree" O="$obj" -j"$jobs" W=1 C=1 drivers/vhost/ >"$blog" 2>&1; then
		warn=$(grep -E '(drivers/vhost/blk|vhost_blk\.h).*(warning|error):' "$blog" | head -n 5 || true)
		if [ -z "$warn" ]; then
			result OK "$name: builds drivers/vhost/ with W=1 C=1, no warning in its files"
		else
			result FAIL "$name: warnings with W=1 C=1: ${warn//$'\n'/; }"
		fi
	else
		result FAIL "$name: drivers/vhost/ does not build (see $blog)"
	fi
	if ((i <= 10#$last_stage)) && ! grep -qx 'CONFIG_VHOST_BLK=m' "$obj/.config"; then
		result FAIL "$name: CONFIG_VHOST_BLK is not set in $obj/.config"
	fi
	clog=$base/checkpatch-$i.log
	(cd "$tree" && perl scripts/checkpatch.pl --strict "$patch") >"$clog" 2>&1 || true
	if grep -q '^total: 0 errors, 0 warnings' "$clog"; then
		result OK "$name: checkpatch --strict: $(grep '^total:' "$clog")"
	else
		result FAIL "$name: checkpatch --strict: $(grep '^total:' "$clog" || echo 'no total') (see $clog)"
	fi
	files=$(g diff --name-only "$c~1" "$c" -- '*.c' '*.h')
	klog=$base/kernel-doc-$i.log
	if [ -z "$files" ]; then
		: >"$klog"
	elif (cd "$tree" && scripts/kernel-doc -none $files) >"$klog" 2>&1 &&
	     ! grep -qiE 'warning|error' "$klog"; then
		result OK "$name: kernel-doc -none on $(echo $files | wc -w) files"
	else
		result FAIL "$name: kernel-doc -none: $(head -n 1 "$klog") (see $klog)"
	fi
done
g checkout -q -f vhost-blk

# The plan first: the results as they came, after it.
{
	printf 'TAP version 13\n1..%d\n' "$tap_n"
	tail -n +2 "$base/check.tap"
} >"$tap"
[ "$tap_failed" = 0 ]
