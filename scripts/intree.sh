#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# vhost-blk as part of a 7.3 kernel tree, the way a patch series would
# put it there: unpack linux-source-7.3 (the package scripts/deps.sh
# downloaded) into $BUILD/intree, apply our files, configure a defconfig
# with the selftests' config fragment, build drivers/vhost/ with O= and in
# the source tree, build the selftests with kselftest's own Makefile and
# run them in the test VM with 'make -C tools/testing/selftests
# TARGETS=vhost_blk run_tests'.  See --help.
set -euo pipefail

me=intree
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$top/build}
export BUILD
base=$BUILD/intree

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS]

Build vhost-blk inside the Debian linux-source-7.3 tree and run its
kselftests there:

  1. unpack the kernel source from \$BUILD/dl/linux-source-7.3_*.deb
     (make deps downloads it) twice under $base, once
     kept clean for O= builds (src/, objects in obj/) and once for a
     build in the source tree (tree/); later runs reuse them;
  2. apply our files: drivers/vhost/blk.c, blk_trace.h and
     include/uapi/linux/vhost_blk.h copied, the drivers/vhost/Kconfig and
     drivers/vhost/Makefile fragments merged into the kernel's;
  3. x86_64 defconfig + tools/testing/selftests/vhost_blk/config +
     CONFIG_WERROR=y, checking that every option of the fragment is set;
  4. build drivers/vhost/vhost_blk.ko (and vhost.ko, vhost_iotlb.ko) with
     O=obj and in tree/, and check that the module has its tracepoints;
  5. make headers, copy tools/testing/selftests/vhost_blk into tree/ and
     'make -C tools/testing/selftests TARGETS=vhost_blk' (USERCFLAGS=-Werror);
  6. unless --no-vm: boot the test VM on Debian's 7.3 kernel (vm/run-vm.sh
     --kernel 7.3, which loads the out-of-tree vhost_blk.ko of 'make
     module-7.3': the Debian kernel cannot load a module of another
     configuration) and run 'make -C
     tools/testing/selftests TARGETS=vhost_blk run_tests' there, as anyone
     would, with no VHOST_BLK_TEST_DEV (each program makes its own
     null_blk backend) but VHOST_BLK_TEST_STRICT=1; every program must be
     'ok', none skipped.

Logs: $base/*.log.  The last line is "intree: ok (N s)" or
"intree: error: WHAT (see LOG)".

Options:
  --no-vm       stop after step 5
  -j N          make jobs (default: nproc)
  -h, --help    this text

Exit status: 0 if every step passed, 1 if one failed, 2 for usage errors.
EOF
}

log() { printf '%s: %s\n' "$me" "$*" >&2; }
# die WHAT [LOG]
die() {
	if [ -n "${2:-}" ] && [ -f "$2" ]; then
		log "the last lines of $2:"
		tail -n 25 "$2" | sed 's/^/  /' >&2
	fi
	log "error: $1${2:+ (see $2)}"
	exit 1
}

vm=1
jobs=$(nproc)
while [ $# -gt 0 ]; do
	case "$1" in
	--no-vm)	vm=0; shift ;;
	-j)		[ $# -ge 2 ] || { log "-j needs a number"; exit 2; }
			jobs=$2; shift 2 ;;
	-j[0-9]*)	jobs=${1#-j}; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		log "unknown option $1 (see --help)"; exit 2 ;;
	esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { log "-j: '$jobs' is not a number"; exit 2; }

for tool in make gcc flex bison bc nm dpkg-deb tar xz perl; do
	command -v "$tool" >/dev/null || die "$tool not found: run 'make deps'"
done
[ -f /usr/include/libelf.h ] || die "libelf.h not found: run 'make deps' (libelf-dev)"

mkdir -p "$base" || die "cannot create $base"
t_start=$(date +%s)
# step NAME: say what comes next, and how long the run has taken so far.
step() { log "[$(( $(date +%s) - t_start )) s] $1"; }

# ------------------------------------------------------------ 1. unpack

shopt -s nullglob
debs=("$BUILD"/dl/linux-source-7.3_*_all.deb)
shopt -u nullglob
[ "${#debs[@]}" -gt 0 ] || die "no $BUILD/dl/linux-source-7.3_*_all.deb: run 'make deps'"
deb=$(printf '%s\n' "${debs[@]}" | sort -V | tail -n 1)
stamp=$(basename "$deb")
src=$base/src
obj=$base/obj
tree=$base/tree
pristine=$base/pristine

# A tree is current if it was unpacked from this package.
current() { [ -f "$1/Makefile" ] && [ "$(cat "$1/.vhost-blk-deb" 2>/dev/null)" = "$stamp" ]; }

if ! current "$src"; then
	step "unpacking $stamp into $src"
	rm -rf "$src" "$obj" "$tree" "$pristine" "$base/unpack"
	mkdir -p "$base/unpack"
	(cd "$base/unpack" && dpkg-deb --fsys-tarfile "$deb" |
		tar -xO ./usr/src/linux-source-7.3.tar.xz | tar -xJ) ||
		die "cannot unpack the kernel source from $deb"
	[ -f "$base/unpack/linux-source-7.3/Makefile" ] ||
		die "$deb holds no linux-source-7.3/Makefile"
	mv "$base/unpack/linux-source-7.3" "$src"
	rmdir "$base/unpack"
	# The files we merge into, as shipped.
	mkdir -p "$pristine"
	cp "$src/drivers/vhost/Kconfig" "$pristine/Kconfig"
	cp "$src/drivers/vhost/Makefile" "$pristine/Makefile"
	echo "$stamp" >"$src/.vhost-blk-deb"
fi
if ! current "$tree"; then
	step "copying $src to $tree"
	rm -rf "$tree" "$tree.tmp"
	cp -a "$src" "$tree.tmp" || die "cannot copy $src to $tree.tmp"
	mv "$tree.tmp" "$tree"
fi

# ------------------------------------------------------------ 2. apply

# put SRC DEST: copy, leaving DEST (and its time stamp) alone if equal.
put() {
	cmp -s "$1" "$2" && return 0
	cp "$1" "$2" || die "cannot copy $1 to $2"
}

# The fragment without its leading comment block (the SPDX line, "merge
# me") and the blank lines after it.
fragment() { awk 'on || !/^(#.*)?$/ { on = 1; print }' "$1"; }

# merge_kconfig DEST: the kernel's Kconfig with our entry after
# VHOST_VDPA's, inside 'if VHOST_MENU' with the other vhost drivers.
merge_kconfig() {
	local frag=$top/drivers/vhost/Kconfig anchor='config VHOST_CROSS_ENDIAN_LEGACY'

	grep -qx "$anchor" "$pristine/Kconfig" ||
		die "no line '$anchor' in $pristine/Kconfig to put our entry before"
	fragment "$frag" >"$base/kconfig.frag"
	awk -v anchor="$anchor" -v frag="$base/kconfig.frag" '
		$0 == anchor {
			while ((getline l < frag) > 0)
				print l
			print ""
		}
		{ print }' "$pristine/Kconfig" >"$1.tmp"
	put "$1.tmp" "$1"
	rm -f "$1.tmp"
}

# merge_makefile DEST: our lines after vhost_vdpa's.
merge_makefile() {
	local frag=$top/drivers/vhost/Makefile anchor='vhost_vdpa-y := vdpa.o'

	grep -qxF "$anchor" "$pristine/Makefile" ||
		die "no line '$anchor' in $pristine/Makefile to put our lines after"
	fragment "$frag" >"$base/makefile.frag"
	awk -v anchor="$anchor" -v frag="$base/makefile.frag" '
		{ print }
		$0 == anchor {
			print ""
			while ((getline l < frag) > 0)
				print l
		}' "$pristine/Makefile" >"$1.tmp"
	put "$1.tmp" "$1"
	rm -f "$1.tmp"
}

apply() {
	local t=$1

	put "$top/drivers/vhost/blk.c" "$t/drivers/vhost/blk.c"
	put "$top/drivers/vhost/blk_trace.h" "$t/drivers/vhost/blk_trace.h"
	put "$top/include/uapi/linux/vhost_blk.h" "$t/include/uapi/linux/vhost_blk.h"
	merge_kconfig "$t/drivers/vhost/Kconfig"
	merge_makefile "$t/drivers/vhost/Makefile"
}

step "applying our files to $src and $tree"
apply "$src"
apply "$tree"

# ------------------------------------------------------------ 3. configure

config_frag=$top/tools/testing/selftests/vhost_blk/config
{
	cat "$config_frag"
	# Not what the tests need, but what this build insists on.
	echo "CONFIG_WERROR=y"
} >"$base/intree.config"

# configure CONFDIR MAKEDIR [MAKE-ARGS...]: defconfig + the fragment in
# CONFDIR (the tree, or O=), redone only when the fragment changes.
configure() {
	local dir=$1 mdir=$2 key line missing='' cfglog

	shift 2
	cfglog=$base/kconfig-${dir##*/}.log
	key=$(cat "$base/intree.config" "$top/drivers/vhost/Kconfig" | sha256sum | cut -d' ' -f1)
	if [ -f "$dir/.config" ] && [ "$(cat "$dir/.vhost-blk-config" 2>/dev/null)" = "$key" ]; then
		return 0
	fi
	mkdir -p "$dir"
	make -C "$mdir" "$@" ARCH=x86_64 defconfig >"$cfglog" 2>&1 ||
		die "make defconfig in $dir failed" "$cfglog"
	"$mdir/scripts/kconfig/merge_config.sh" -m -O "$dir" "$dir/.config" \
		"$base/intree.config" >>"$cfglog" 2>&1 ||
		die "merge_config.sh in $dir failed" "$cfglog"
	make -C "$mdir" "$@" ARCH=x86_64 olddefconfig >>"$cfglog" 2>&1 ||
		die "make olddefconfig in $dir failed" "$cfglog"
	while read -r line; do
		case "$line" in CONFIG_*=*) ;; *) continue ;; esac
		grep -qxF "$line" "$dir/.config" || missing+=" $line"
	done <"$base/intree.config"
	[ -z "$missing" ] ||
		die "$dir/.config lacks:$missing (from $config_frag)" "$cfglog"
	echo "$key" >"$dir/.vhost-blk-config"
}

# ------------------------------------------------------------ 4. build

kos="drivers/vhost/vhost_blk.ko drivers/vhost/vhost.ko drivers/vhost/vhost_iotlb.ko"

# build_vhost OUTDIR MAKEDIR LABEL [MAKE-ARGS...]
build_vhost() {
	local out=$1 mdir=$2 label=$3 blog ko

	shift 3
	blog=$base/build-$label.log
	step "building drivers/vhost/ ($label, log $blog)"
	# There is no vmlinux.o (building one would take most of an hour
	# here), so modpost cannot resolve the core kernel's symbols: let it
	# warn.  The out-of-tree build (make module) checks every symbol
	# against the Debian kernel's Module.symvers.
	# shellcheck disable=SC2086
	make -C "$mdir" "$@" ARCH=x86_64 -j"$jobs" KBUILD_MODPOST_WARN=1 $kos \
		>"$blog" 2>&1 ||
		die "building drivers/vhost/ ($label) failed" "$blog"
	for ko in $kos; do
		[ -f "$out/$ko" ] || die "$out/$ko was not built" "$blog"
	done
	# CREATE_TRACE_POINTS went through blk_trace.h: the tracepoints exist.
	nm "$out/drivers/vhost/vhost_blk.ko" >"$base/nm-$label.txt" ||
		die "nm $out/drivers/vhost/vhost_blk.ko failed"
	grep -q ' __tracepoint_vhost_blk_req_submit$' "$base/nm-$label.txt" ||
		die "$out/drivers/vhost/vhost_blk.ko has no vhost_blk tracepoints"
	log "$label: $out/drivers/vhost/vhost_blk.ko built"
}

step "configuring $obj"
configure "$obj" "$src" O="$obj"
build_vhost "$obj" "$src" O O="$obj"

step "configuring $tree"
configure "$tree" "$tree"
build_vhost "$tree" "$tree" srctree

# ------------------------------------------------------------ 5. kselftest

step "make headers and the vhost_blk kselftests in $tree"
klog=$base/kselftest-build.log
make -C "$tree" ARCH=x86_64 headers >"$klog" 2>&1 || die "make headers failed" "$klog"
[ -f "$tree/usr/include/linux/vhost_blk.h" ] ||
	die "make headers did not install $tree/usr/include/linux/vhost_blk.h" "$klog"
ksel=$tree/tools/testing/selftests
rm -rf "$ksel/vhost_blk"
cp -a "$top/tools/testing/selftests/vhost_blk" "$ksel/vhost_blk" ||
	die "cannot copy tools/testing/selftests/vhost_blk to $ksel"
make -C "$ksel" TARGETS=vhost_blk USERCFLAGS=-Werror >>"$klog" 2>&1 ||
	die "make -C $ksel TARGETS=vhost_blk failed" "$klog"
progs=$(make -s --no-print-directory -C "$ksel/vhost_blk" OUTPUT="$ksel/vhost_blk" \
	emit_tests COLLECTION=vhost_blk 2>>"$klog") ||
	die "make emit_tests in $ksel/vhost_blk failed" "$klog"
nprogs=0
for p in $progs; do
	[ -x "$ksel/vhost_blk/${p#vhost_blk:}" ] ||
		die "$ksel/vhost_blk/${p#vhost_blk:} was not built" "$klog"
	nprogs=$((nprogs + 1))
done
[ "$nprogs" -gt 0 ] || die "emit_tests lists no vhost_blk test" "$klog"
log "kselftest: $nprogs programs built: ${progs//$'\n'/ }"

# ------------------------------------------------------------ 6. run_tests

if [ "$vm" = 1 ]; then
	step "make run_tests in the test VM"
	[ -f "$BUILD/module-7.3/vhost_blk.ko" ] ||
		die "$BUILD/module-7.3/vhost_blk.ko not found: run 'make module-7.3'"
	vmout=$base/vm-out
	rlog=$vmout/run_tests.log
	mkdir -p "$vmout"
	rm -f "$rlog"
	vmrc=0
	VHOST_BLK_TEST_DEV= VHOST_BLK_TEST_STRICT=1 \
		bash "$top/tools/testing/vhost-blk-ci/vm/run-vm.sh" \
		--kernel 7.3 --out "$vmout" --tcg-threads single --timeout 1800 -- \
		bash -c '
			# kselftest/runner.sh writes the programs'"'"' output to
			# /dev/stdout: the VM'"'"'s devtmpfs has no such link.
			for i in 0:stdin 1:stdout 2:stderr; do
				[ -e "/dev/${i#*:}" ] || ln -s "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"
			done
			[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
			make -C "$1" TARGETS=vhost_blk run_tests >"$2" 2>&1' \
		run_tests "$ksel" "$rlog" >"$base/vm.log" 2>&1 || vmrc=$?
	if [ "$vmrc" != 0 ]; then
		why=$(bash "$top/tools/testing/vhost-blk-ci/tap_count.sh" \
			--vm-result vm "$vmrc" "$vmout" 1800 | sed -n 's/^not ok 1 vm - //p')
		die "run_tests in the VM: $why" "$base/vm.log"
	fi
	[ -f "$rlog" ] || die "run_tests left no log" "$base/vm.log"
	grep '^# # Totals:' "$rlog" | sed 's/^# # /  /' >&2 || true
	# The runner's own TAP lines (the programs' are indented with '# ').
	grep -E '^(TAP version|1\.\.|(not )?ok [0-9]|Bail out)' "$rlog" >"$base/run_tests.tap" ||
		die "no TAP in $rlog" "$rlog"
	# 7.3's runner prints no header or plan of its own when run by
	# make run_tests: the plan is the programs built, every one must run.
	if ! grep -q '^1\.\.' "$base/run_tests.tap"; then
		{ printf 'TAP version 13\n1..%s\n' "$nprogs"
		  grep -v '^TAP version' "$base/run_tests.tap"; } >"$base/run_tests.tap.new"
		mv "$base/run_tests.tap.new" "$base/run_tests.tap"
	fi
	summary=$(bash "$top/tools/testing/vhost-blk-ci/tap_count.sh" \
		--name run_tests "$base/run_tests.tap") || true
	printf '%s\n' "$summary" | sed 's/^/  /' >&2
	[ "${summary##*$'\n'}" = "$nprogs passed, 0 failed" ] ||
		die "run_tests: '${summary##*$'\n'}', expected '$nprogs passed, 0 failed'" "$rlog"
fi

echo "$me: ok ($(( $(date +%s) - t_start )) s)"
