#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# PRE_BUILD of vhost-blk-dkms: put the private drivers/vhost/vhost.h of
# the kernel DKMS builds for into ./linux-source/drivers/vhost/ (the
# dkms.conf passes KSRC=<build dir>/linux-source to Kbuild, as the
# repository's Makefile passes build/linux-source-6.12).  linux-headers
# does not ship that header; linux-source-<major.minor> does, in
# /usr/src/linux-source-<major.minor>.tar.xz.  The header must be of the
# kernel's series: with none installed this refuses, and says so on stderr
# and at the top of make.log (dkms carries on to make, which then fails).
#
# Usage: dkms-vhost-h.sh KERNELRELEASE   (run by dkms in its build dir)
#
# VHOST_BLK_SRC_DIR: where the linux-source tarballs are (default
# /usr/src; the repository's test of this script sets it).
set -euo pipefail
# Byte order, for the archive's own (path_le).
export LC_ALL=C

kver=${1:?usage: dkms-vhost-h.sh KERNELRELEASE}

fail() {
	local line

	for line in "$@"; do
		printf 'vhost-blk: %s\n' "$line" >&2
		printf 'vhost-blk: %s\n' "$line" >>make.log
	done
	exit 1
}

# A path's place in the archive: Debian's linux-source tarball is made
# with tar --sort=name, each directory's entries in byte order, so that
# paths compare a component at a time (drivers/dma-buf/ comes before
# drivers/dma/).  True when $1 sorts before $2 or is $2.
path_le() {
	local -a a b
	local i

	IFS=/ read -r -a a <<<"$1"
	IFS=/ read -r -a b <<<"$2"
	for ((i = 0; i < ${#a[@]} && i < ${#b[@]}; i++)); do
		[ "${a[i]}" = "${b[i]}" ] && continue
		[[ ${a[i]} < ${b[i]} ]]
		return
	done
	[ "${#a[@]}" -le "${#b[@]}" ]
}

# block_data TARBALL N [BYTES]: block N's data, decompressed on its own
# (each of the tarball's xz blocks is: xz -T packs them so), all of it or
# its first BYTES.  From the fields of xz --robot --list -vv: compressed
# offset, header size, compressed size, filter chain.
block_data() {
	local line co hs cs filters

	line=$(printf '%s\n' "${blocks[@]}" | awk -F'\t' -v n="$2" '$4 == n')
	IFS=$'\t' read -r _ _ _ _ co _ _ _ _ _ _ hs _ cs _ filters <<<"$line"
	[[ $co =~ ^[0-9]+$ && $hs =~ ^[0-9]+$ && $cs =~ ^[0-9]+$ &&
	   $filters == --lzma2=* ]] || return 1
	tail -c +$((co + hs + 1)) "$1" | head -c "$cs" |
		xz -dc --format=raw "$filters" 2>/dev/null |
		head -c "${3:-$((1 << 40))}"
}

# first_path TARBALL N: the path of the first archive member that starts
# in block N.  A member's header starts on a 512-byte record, with its
# path; every path starts with the tarball's top directory.  Blocks are
# 24 MiB, a multiple of the record: the records' offsets hold in each.
first_path() {
	local off bytes

	for bytes in $((1 << 20)) ""; do
		off=$(block_data "$1" "$2" $bytes |
		      grep -obaF -- "linux-source-$series/" |
		      awk -F: '$1 % 512 == 0 { print $1; exit }')
		[ -n "$off" ] || continue
		block_data "$1" "$2" $((off + 100)) | tail -c 100 | tr -d '\0'
		return 0
	done
	return 1
}

# extract_from_block TARBALL MEMBER DIR: MEMBER into DIR without reading
# the whole archive (1.5 GB decompressed; under emulation, or on a slow
# board, minutes): a binary search over the xz blocks by each one's first
# member, then the block the member starts in and the one after it, read
# as a tar stream from the member's header.  False, with nothing
# extracted, when the tarball is not laid out so; the caller then reads
# it all.
extract_from_block() {
	local tarball=$1 member=$2 dir=$3 lo hi mid n path off st last i

	mapfile -t blocks < <(xz --robot --list -vv "$tarball" 2>/dev/null |
			      awk -F'\t' '$1 == "block"')
	n=${#blocks[@]}
	[ "$n" -ge 2 ] || return 1
	# The last block whose first member is MEMBER or before it.
	lo=1
	hi=$n
	path=$(first_path "$tarball" 1) || return 1
	path_le "$path" "$member" || return 1
	while [ "$lo" -lt "$hi" ]; do
		mid=$(((lo + hi + 1) / 2))
		path=$(first_path "$tarball" "$mid") || return 1
		if path_le "$path" "$member"; then
			lo=$mid
		else
			hi=$((mid - 1))
		fi
	done
	# The block the member starts in; the next one too when its data
	# goes on there (a try that fails, or one whose header is there).
	for last in "$lo" $((lo + 1)); do
		[ "$last" -le "$n" ] || break
		for ((i = lo; i <= last; i++)); do
			block_data "$tarball" "$i"
		done >blocks.tar
		off=$(grep -obaF -- "$member" blocks.tar |
		      awk -F: '$1 % 512 == 0 { print $1; exit }')
		[ -n "$off" ] || continue
		# tar's status, not tail's: tar stops at the member, and
		# tail then meets a closed pipe.
		tail -c +$((off + 1)) blocks.tar 2>/dev/null |
			tar -x -C "$dir" --strip-components=1 --occurrence=1 \
			    "$member" 2>/dev/null
		st=${PIPESTATUS[1]}
		[ "$st" = 0 ] && [ -s "$dir/${member#*/}" ] && break
		rm -rf "${dir:?}"/*
	done
	rm -f blocks.tar
	[ -s "$dir/${member#*/}" ] || return 1
	[ "$last" = "$lo" ] || lo="$lo-$last"
	echo "vhost-blk: $member from xz block(s) $lo of $n of $tarball"
}

if ! [[ $kver =~ ^([0-9]+)\.([0-9]+)[.+~-] ]]; then
	fail "cannot read a major.minor version from kernel release '$kver'"
fi
series=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
src_dir=${VHOST_BLK_SRC_DIR:-/usr/src}
tarball=$src_dir/linux-source-$series.tar.xz

if [ ! -f "$tarball" ]; then
	shopt -s nullglob
	have=("$src_dir"/linux-source-*.tar.xz)
	fail "kernel $kver needs drivers/vhost/vhost.h of Linux $series," \
	     "which linux-headers does not ship; it is taken from $tarball," \
	     "which is missing: install linux-source-$series (apt-get install linux-source-$series)." \
	     "Installed kernel sources: ${have[*]:-none}.  The header must be of the kernel's own series."
fi

# Same series; a different stable update usually has the same vhost.h.
src_ver=$(dpkg-query -W -f='${Version}' "linux-source-$series" 2>/dev/null || true)
hdr_ver=$(dpkg-query -W -f='${Version}' "linux-headers-$kver" 2>/dev/null || true)
if [ -n "$src_ver" ] && [ -n "$hdr_ver" ] && [ "$src_ver" != "$hdr_ver" ]; then
	printf 'vhost-blk: warning: linux-source-%s is %s, linux-headers-%s is %s: vhost.h taken from a different %s update\n' \
		"$series" "$src_ver" "$kver" "$hdr_ver" "$series" >&2
fi

rm -rf linux-source
mkdir -p linux-source
member=linux-source-$series/drivers/vhost/vhost.h
if ! extract_from_block "$tarball" "$member" linux-source; then
	# --occurrence: stop reading the archive once the header is out.
	if ! tar -xJf "$tarball" -C linux-source --strip-components=1 \
		--occurrence=1 "$member"; then
		fail "cannot extract $member from $tarball"
	fi
fi
[ -f linux-source/drivers/vhost/vhost.h ] ||
	fail "$tarball has no linux-source-$series/drivers/vhost/vhost.h"
echo "vhost-blk: drivers/vhost/vhost.h of Linux $series from $tarball"
