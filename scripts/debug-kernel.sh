#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the debug kernel of the test VM (KASAN, lockdep, UBSAN, DEBUG_LIST,
# DEBUG_OBJECTS_WORK, kmemleak) from linux-source-7.3, the release of the
# stock 7.3 kernel the tests boot (scripts/mainline.sh), and keep it in a
# cache shared by every clone on the machine.  The host's gcc builds it:
# only Debian's own 7.3 build needs Debian 13's toolchain.
# See Documentation/virt/vhost-blk/testing.rst.
set -euo pipefail

me=debug-kernel
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$top/build}
fragment=$top/tools/testing/vhost-blk-ci/vm/debug-kernel.config
# The base configuration the fragment is merged into.  tinyconfig builds
# in a fraction of defconfig's time and, with the fragment, boots the
# test VM.
base=tinyconfig
# Bump when the layout of a cache entry or the build steps change.
format=1

usage() {
	cat <<EOF
Usage: ${0##*/} [--path] [-h|--help]

Build the vhost-blk debug kernel ('make $base' plus the fragment
${fragment#"$top"/})
from the linux-source-7.3 package that 'make deps' downloaded, unless the
cache already has it, and print the cache entry's directory:

  DIR/bzImage          the kernel
  DIR/kernelrelease    its release (7.3.N-vhost-blk-debug)
  DIR/config           its .config
  DIR/modules/lib/modules/RELEASE/
                       its modules, with depmod run
  DIR/src, DIR/obj     the source tree and the O= build tree (objects
                       pruned): what an external module build needs,
                       e.g. make -C DIR/src O=DIR/obj M=...
  DIR/build.log        the build's output; DIR/build-seconds its time

The cache is \$VHOST_BLK_CACHE/debug-kernel (default
/var/cache/vhost-blk/debug-kernel), or \$BUILD/debug-kernel when that
cannot be written.  An entry is named by a hash of this script's format
version, the linux-source .deb's file name, the base config and the
fragment's settings (not its comments): a change to any of them builds a
new kernel.  Only the first run on a machine pays for the build (20 to 40
min on 2 cores); entries appear atomically, and concurrent runs wait for
each other.

Options:
  --path      print the directory if the kernel is already built, else
              fail (status 1); never build
  -h, --help  this text

Environment: BUILD (default $top/build), VHOST_BLK_CACHE.
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { msg "error: $*"; exit 1; }

path_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--path)		path_only=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	*)		msg "unknown argument '$1' (see --help)"; exit 2 ;;
	esac
done

env_file=$BUILD/kernel.env
[ -f "$env_file" ] || die "$env_file not found: run 'make deps' first"
KVER_73=
# shellcheck source=/dev/null
. "$env_file"
[ -n "$KVER_73" ] || die "$env_file does not set KVER_73: run 'make deps'"
series=7.3
deb=$BUILD/dl/linux-source-${series}_${KVER_73//:/%3a}_all.deb
[ -f "$deb" ] || die "$deb not found: run 'make deps'"
[ -f "$fragment" ] || die "$fragment not found"

# The fragment's settings, without its comments: rewording a comment
# does not rebuild the kernel.
settings() {
	grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set$)' "$fragment"
}
key=$( { echo "format $format"; echo "base $base"; basename "$deb"
	 settings; } | sha256sum | cut -c1-16)

root=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}/debug-kernel
if ! { mkdir -p "$root" 2>/dev/null && [ -w "$root" ]; }; then
	root=$BUILD/debug-kernel
	mkdir -p "$root" || die "cannot create $root"
fi
dir=$root/$key

complete() {
	[ -f "$dir/bzImage" ] && [ -f "$dir/kernelrelease" ] &&
		[ -f "$dir/obj/Module.symvers" ] &&
		[ -f "$dir/modules/lib/modules/$(cat "$dir/kernelrelease")/modules.dep" ]
}

if complete; then
	echo "$dir"
	exit 0
fi
if [ "$path_only" = 1 ]; then
	msg "the debug kernel for $(basename "$deb") is not built ($dir): run 'make debug-kernel'"
	exit 1
fi

for tool in make gcc flex bison bc perl dpkg-deb tar xz depmod flock sha256sum; do
	command -v "$tool" >/dev/null || die "$tool not found: run 'make deps'"
done
[ -f /usr/include/libelf.h ] || die "libelf.h not found: run 'make deps' (libelf-dev)"

# One build of an entry at a time, machine-wide; whoever gets the lock
# second finds the entry complete.
exec {lock_fd}>"$root/.lock-$key"
if ! flock -n "$lock_fd"; then
	msg "waiting for another build of $dir"
	flock "$lock_fd"
fi
if complete; then
	echo "$dir"
	exit 0
fi

# Leftovers of an interrupted build of this entry (we hold its lock).
rm -rf "$dir" "$dir".tmp.*
tmp=$dir.tmp.$$
# shellcheck disable=SC2317  # (called by the trap)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$tmp"
log=$tmp/build.log
kmake() { make -C "$tmp/src" O="$tmp/obj" ARCH=x86_64 "$@"; }
fail() {
	mkdir -p "$BUILD"
	cp "$log" "$BUILD/debug-kernel.log" 2>/dev/null || true
	die "$* (log: $BUILD/debug-kernel.log)"
}

start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
msg "building the debug kernel into $dir (first run on this machine: 20 to 40 min on 2 cores; log: $log)"
msg "unpacking $(basename "$deb")"
{ dpkg-deb --fsys-tarfile "$deb" |
	tar -xO "./usr/src/linux-source-$series.tar.xz" | tar -xJ -C "$tmp"; } ||
	die "cannot unpack the kernel source from $deb into $tmp"
mv "$tmp/linux-source-$series" "$tmp/src"
mkdir "$tmp/obj"

msg "configuring ($base + ${fragment#"$top"/})"
{ kmake -s "$base" &&
  "$tmp/src/scripts/kconfig/merge_config.sh" -m -O "$tmp/obj" \
	"$tmp/obj/.config" "$fragment" &&
  kmake -s olddefconfig; } >>"$log" 2>&1 ||
	fail "configuring the debug kernel failed"
# Every line of the fragment must have survived: a dependency that is not
# met drops an option silently.
missing=
while read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qxF "$line" "$tmp/obj/.config" || missing+=" $line" ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		! grep -q "^$opt=" "$tmp/obj/.config" || missing+=" $opt=n" ;;
	esac
done < <(settings)
[ -z "$missing" ] || fail "the debug kernel's .config does not have:$missing"

msg "compiling with $(nproc) jobs"
kmake -j"$(nproc)" all >>"$log" 2>&1 || fail "the debug kernel build failed"
# Under make check MAKEFLAGS has -w: its "Entering directory" lines
# would become part of the release.
krel=$(kmake -s --no-print-directory kernelrelease 2>>"$log") || fail "make kernelrelease failed"
kmake INSTALL_MOD_PATH="$tmp/modules" modules_install >>"$log" 2>&1 ||
	fail "make modules_install failed"
moddir=$tmp/modules/lib/modules/$krel
[ -f "$moddir/modules.dep" ] || fail "modules_install left no $moddir/modules.dep"

cp "$tmp/obj/arch/x86/boot/bzImage" "$tmp/bzImage"
cp "$tmp/obj/.config" "$tmp/config"
echo "$krel" >"$tmp/kernelrelease"

# What external module builds need stays in obj (.config, include/,
# arch/x86/include/generated, scripts/, tools/objtool, Module.symvers);
# the kernel's own objects go.
find "$tmp/obj" \( -path "$tmp/obj/scripts" -o -path "$tmp/obj/tools" \) -prune -o \
	-type f \( -name '*.o' -o -name '*.a' -o -name '*.ko' -o -name '*.mod.c' \) \
	-print0 | xargs -0 rm -f
rm -f "$tmp/obj/vmlinux" "$tmp/obj"/.tmp_vmlinux*

# Paths that name the temporary directory: point them at the entry.
ln -sfn ../../../../obj "$moddir/build"
ln -sfn ../src "$tmp/obj/source"
cat >"$tmp/obj/Makefile" <<EOF
# Written by scripts/debug-kernel.sh for the cache entry $dir
export KBUILD_OUTPUT = $dir/obj
include $dir/src/Makefile
EOF

end=$(date +%s)
echo $((end - start)) >"$tmp/build-seconds"
{
	echo "deb $(basename "$deb")"
	echo "base $base"
	echo "release $krel"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((end - start)) s with $(nproc) jobs"
	echo "load average at the start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$tmp/info"
mv -T "$tmp" "$dir" || die "cannot rename $tmp to $dir"
trap - EXIT
msg "debug kernel $krel built in $((end - start)) s: $dir"
echo "$dir"
