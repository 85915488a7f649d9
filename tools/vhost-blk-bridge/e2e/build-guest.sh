#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build what the nested guest of the end-to-end test boots, on the host,
# into $BUILD/bridge-e2e (never committed):
#
#   bzImage    a minimal kernel: 'make tinyconfig' + guest-kernel.config,
#              from the linux-source-6.12 package scripts/deps.sh fetched
#              (unpacked once, about 20 s; built once, about 7 min on 2 CPUs)
#   tools.img  a read-only ext4 root: busybox, fio, mke2fs, e2fsck and the
#              shared libraries ldd lists, the fio job files and
#              guest-init.sh as /init (rebuilt in seconds when one of them
#              changes)
#
# Each is rebuilt only when its inputs change.  Prints the two paths.
#
# The kernel is also kept in a cache shared by every clone on the machine,
# named by the hash of its inputs: $VHOST_BLK_CACHE (default
# /var/cache/vhost-blk) if it can be written, else nothing is shared.
set -euo pipefail

e2e_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$e2e_dir/../../.." && pwd)
BUILD=${BUILD:-$repo/build}
out=$BUILD/bridge-e2e
me=build-guest

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { msg "error: $*"; exit 1; }

mkdir -p "$out"
# One build at a time: make check's end-to-end test and its Debian 13
# machine both ask for the guest, in streams that start together.
exec {lock_fd}>"$out/.lock"
flock "$lock_fd"
for tool in make gcc flex bison bc mke2fs busybox ldd sha256sum fio e2fsck; do
	command -v "$tool" >/dev/null ||
		die "$tool not found (packages: build-essential flex bison bc libelf-dev busybox-static fio e2fsprogs)"
done
[ -f /usr/include/libelf.h ] || die "libelf.h not found: install libelf-dev"

# ------------------------------------------------------------------ kernel

deb=$(ls "$BUILD"/dl/linux-source-6.12_*_all.deb 2>/dev/null | sort -V | tail -n 1)
[ -n "$deb" ] || die "no $BUILD/dl/linux-source-6.12_*_all.deb: run 'make deps'"
src=$out/linux-source-6.12
kbuild=$out/kbuild
bzimage=$out/bzImage
key=$( { echo "format 1"; basename "$deb"; cat "$e2e_dir/guest-kernel.config"; } |
	sha256sum | cut -d' ' -f1)

cache=${VHOST_BLK_CACHE:-/var/cache/vhost-blk}/guest-kernel
if mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ]; then
	cached=$cache/bzImage-$key
else
	cached=
fi
if { [ ! -f "$bzimage" ] || [ "$(cat "$bzimage.key" 2>/dev/null)" != "$key" ]; } &&
   [ -n "$cached" ] && [ -f "$cached" ]; then
	msg "guest kernel from $cached"
	cp "$cached" "$bzimage.tmp" && mv "$bzimage.tmp" "$bzimage" &&
		echo "$key" >"$bzimage.key" || die "cannot copy $cached"
fi

if [ ! -f "$bzimage" ] || [ "$(cat "$bzimage.key" 2>/dev/null)" != "$key" ]; then
	if [ ! -f "$src/Makefile" ] || [ "$(cat "$src/.deb" 2>/dev/null)" != "$(basename "$deb")" ]; then
		msg "unpacking $(basename "$deb") into $src"
		rm -rf "$src" "$kbuild"
		(cd "$out" && dpkg-deb --fsys-tarfile "$deb" |
			tar -xO ./usr/src/linux-source-6.12.tar.xz | tar -xJ) ||
			die "cannot unpack the kernel source from $deb"
		basename "$deb" >"$src/.deb"
	fi
	msg "configuring the guest kernel (tinyconfig + guest-kernel.config)"
	mkdir -p "$kbuild"
	make -s -C "$src" O="$kbuild" ARCH=x86_64 tinyconfig >"$out/kconfig.log" 2>&1 ||
		die "make tinyconfig failed, see $out/kconfig.log"
	"$src/scripts/kconfig/merge_config.sh" -m -O "$kbuild" "$kbuild/.config" \
		"$e2e_dir/guest-kernel.config" >>"$out/kconfig.log" 2>&1 ||
		die "merge_config.sh failed, see $out/kconfig.log"
	make -s -C "$src" O="$kbuild" ARCH=x86_64 olddefconfig >>"$out/kconfig.log" 2>&1 ||
		die "make olddefconfig failed, see $out/kconfig.log"
	missing=
	while read -r line; do
		case "$line" in CONFIG_*=y) ;; *) continue ;; esac
		grep -qx "$line" "$kbuild/.config" || missing+=" ${line%=y}"
	done <"$e2e_dir/guest-kernel.config"
	[ -z "$missing" ] || die "the guest kernel config lacks:$missing"
	msg "building the guest kernel (a few minutes; log in $out/kbuild.log)"
	start=$(date +%s)
	make -C "$src" O="$kbuild" ARCH=x86_64 -j"$(nproc)" bzImage >"$out/kbuild.log" 2>&1 ||
		die "the guest kernel build failed, see $out/kbuild.log"
	cp "$kbuild/arch/x86/boot/bzImage" "$bzimage"
	echo "$key" >"$bzimage.key"
	msg "guest kernel built in $(( $(date +%s) - start )) s"
fi
if [ -n "$cached" ] && [ ! -f "$cached" ]; then
	{ cp "$bzimage" "$cached.tmp.$$" && mv "$cached.tmp.$$" "$cached"; } ||
		msg "warning: cannot keep a copy in $cache"
fi

# ------------------------------------------------------------------ tools

img=$out/tools.img
fio=/usr/bin/fio
bins="$fio /sbin/mke2fs /sbin/e2fsck"
busybox=$(command -v busybox)
ldd_paths() { awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }'; }
libs=$(ldd $bins 2>/dev/null | ldd_paths | sort -u)
[ -n "$libs" ] || die "ldd found no libraries for $bins"
# shellcheck disable=SC2086
key=$( { echo "format 2"; sha256sum "$e2e_dir/guest-init.sh" "$e2e_dir/fio.job" \
	"$e2e_dir/fio-demo.job" "$e2e_dir/fio-bench.job" "$busybox" $bins \
	/etc/mke2fs.conf $libs; } |
	sha256sum | cut -d' ' -f1)

# Debian's fio links the libraries of its ceph, glusterfs, RDMA, NBD and
# PMEM engines, which pull in 50 more (boost, ICU, gnutls, krb5...): under
# TCG in TCG, loading and relocating them makes every fio start take 30-45
# s.  The guest only uses libaio, so it gets a stub in place of each of
# those libraries: every symbol fio imports from it, with its version, as a
# function that aborts.  fio's own code is unchanged.  If anything in this
# does not work out, the guest gets the real libraries.
keep_libs=" libc.so.6 libm.so.6 libz.so.1 libnuma.so.1 libaio.so.1 "
fio_stubs() {	# fio_stubs DIR: make the stubs in DIR, print "stub real" pairs
	local dir=$1 soname path ver vers defs name opt

	rm -rf "$dir"
	mkdir -p "$dir" || return
	readelf --dyn-syms -W "$fio" |
		awk '$7 == "UND" && $4 == "FUNC" && $5 == "GLOBAL" { print $8 }' \
		>"$dir/imports" || return
	for soname in $(readelf -dW "$fio" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
		case "$keep_libs" in *" $soname "*) continue ;; esac
		path=$(ldd "$fio" | awk -v s="$soname" '$1 == s { print $3 }')
		[ -f "$path" ] || return 1
		# The versions fio needs from this file, the names it defines.
		vers=" $(readelf -VW "$fio" | awk -v s="$soname" '
			/^Version needs/ { n = 1 }
			n && / File: / { f = ($5 == s) }
			n && f && / Name: / { print $3 }' | tr '\n' ' ') "
		defs=" $(readelf --dyn-syms -W "$path" |
			awk '$7 != "UND" && $8 != "" { sub(/@.*/, "", $8); print $8 }' |
			tr '\n' ' ') "
		: >"$dir/$soname.syms"
		while read -r name; do
			ver=
			case "$name" in *@*) ver=${name#*@}; name=${name%%@*} ;; esac
			case "$vers $defs" in *" ${ver:-$name} "*) ;; *) continue ;; esac
			echo "$name ${ver:--}" >>"$dir/$soname.syms"
		done <"$dir/imports"
		{
			printf '#include <stdio.h>\n#include <stdlib.h>\n\n'
			printf 'static void stub(const char *f)\n{\n'
			printf '\tfprintf(stderr, "%%s: a stub in the test guest (%s)\\n", f);\n' "$soname"
			printf '\tabort();\n}\n\n'
			awk '{ printf "void %s(void) { stub(\"%s\"); }\n", $1, $1 }' \
				"$dir/$soname.syms"
		} >"$dir/$soname.c"
		awk '$2 != "-" { s[$2] = s[$2] " " $1 ";" }
			END { for (v in s) printf "%s {%s };\n", v, s[v] }' \
			"$dir/$soname.syms" >"$dir/$soname.map"
		opt=
		[ -s "$dir/$soname.map" ] && opt=-Wl,--version-script="$dir/$soname.map"
		gcc -shared -fPIC -O2 -Wl,-soname,"$soname" $opt \
			-o "$dir/$soname" "$dir/$soname.c" >&2 || return
		echo "$dir/$soname $path"
	done
	# fio must start with them.
	LD_LIBRARY_PATH=$dir "$fio" --version >/dev/null
}

if [ ! -f "$img" ] || [ "$(cat "$img.key" 2>/dev/null)" != "$key" ]; then
	msg "building $img"
	stage=$(mktemp -d "$out/stage.XXXXXX")
	trap 'rm -rf "$stage"' EXIT
	mkdir -p "$stage"/{bin,sbin,usr/bin,etc,proc,sys,dev,tmp,mnt,lib64}
	cp "$busybox" "$stage/bin/busybox"
	# Applets, except where a real tool of ours has the name (busybox has
	# its own mke2fs).
	real=" $(for b in $bins; do basename "$b"; done | tr '\n' ' ') "
	for applet in $("$busybox" --list); do
		case "$real" in *" $applet "*) continue ;; esac
		case "$applet" in mkfs.ext*|mke2fs|e2fsck|fsck.ext*) continue ;; esac
		[ -e "$stage/bin/$applet" ] || ln -s busybox "$stage/bin/$applet"
	done
	stubs=$out/fio-stubs
	if pairs=$(fio_stubs "$stubs" 2>"$out/fio-stubs.log"); then
		# The libraries of fio with the stubs, of mke2fs and of e2fsck.
		libs=$( { LD_LIBRARY_PATH=$stubs ldd "$fio" | ldd_paths |
			grep -v "^$stubs/"; ldd /sbin/mke2fs /sbin/e2fsck | ldd_paths; } |
			sort -u)
		while read -r stub path; do
			mkdir -p "$stage$(dirname "$path")"
			cp "$stub" "$stage$path"
		done <<<"$pairs"
		msg "fio gets $(wc -l <<<"$pairs") stub libraries (see $out/fio-stubs.log)"
	else
		msg "warning: no stub libraries for fio (see $out/fio-stubs.log): it will start slowly"
	fi
	for f in $bins $libs /etc/mke2fs.conf; do
		mkdir -p "$stage$(dirname "$f")"
		cp -L "$f" "$stage$f"
	done
	# Debian's /lib is a symlink to usr/lib.
	[ -L /lib ] && [ ! -e "$stage/lib" ] && ln -s usr/lib "$stage/lib"
	cp "$e2e_dir/guest-init.sh" "$stage/init"
	cp "$e2e_dir/fio.job" "$e2e_dir/fio-demo.job" "$e2e_dir/fio-bench.job" \
		"$stage/etc/"
	chmod 755 "$stage/init"
	size_kb=$(( $(du -sk "$stage" | cut -f1) * 12 / 10 + 16384 ))
	rm -f "$img.tmp"
	mke2fs -q -t ext4 -L vbbtools -d "$stage" -E root_owner=0:0 \
		"$img.tmp" "${size_kb}k" >&2 || die "mke2fs -d failed"
	mv "$img.tmp" "$img"
	echo "$key" >"$img.key"
fi

echo "$bzimage"
echo "$img"
