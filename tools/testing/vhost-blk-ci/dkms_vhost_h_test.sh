#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# debian/dkms-vhost-h.sh, the DKMS package's PRE_BUILD, against the real
# linux-source tarballs of 6.1, 6.12 and 7.3: for each, the header it
# extracts is the one a full read of the archive gives, and it took the
# fast path (a few xz blocks, not all 1.5 GB: under TCG that is 20 s
# instead of 4 min of each DKMS build); and with the tarball missing it
# refuses, saying what to install.  TAP on stdout.
#
# Usage: dkms_vhost_h_test.sh DEB...   (linux-source-X.Y_*_all.deb files)
set -u

script=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/debian/dkms-vhost-h.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dkms-vhost-h.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }

echo "TAP version 13"
for deb in "$@"; do
	series=$(basename "$deb" | sed -n 's/^linux-source-\([0-9]*\.[0-9]*\)_.*/\1/p')
	if [ -z "$series" ]; then
		not_ok "$deb: not a linux-source-X.Y deb"
		continue
	fi
	src=$tmp/src-$series
	mkdir -p "$src" "$tmp/b-$series"
	if ! dpkg-deb --fsys-tarfile "$deb" |
	     tar -x -C "$src" --strip-components=3 \
		 "./usr/src/linux-source-$series.tar.xz"; then
		not_ok "$series: cannot unpack $deb"
		continue
	fi
	tarball=$src/linux-source-$series.tar.xz
	log=$tmp/b-$series.log
	if ! (cd "$tmp/b-$series" &&
	      VHOST_BLK_SRC_DIR=$src bash "$script" "$series.0-1-amd64") \
		>"$log" 2>&1; then
		not_ok "$series: dkms-vhost-h.sh failed: $(tr '\n' ' ' <"$log")"
		continue
	fi
	got=$tmp/b-$series/linux-source/drivers/vhost/vhost.h
	want=$tmp/want-$series.h
	xz -dc "$tarball" |
		tar -xO --occurrence=1 "linux-source-$series/drivers/vhost/vhost.h" >"$want"
	if [ -s "$want" ] && cmp -s "$got" "$want"; then
		ok "$series: vhost.h as a full read of the archive gives it ($(wc -c <"$want") bytes)"
	else
		not_ok "$series: vhost.h differs from the archive's, or is missing"
	fi
	how=$(grep -o 'from xz block(s) [0-9-]* of [0-9]*' "$log")
	if [ -n "$how" ]; then
		ok "$series: the fast path: $how"
	else
		not_ok "$series: the whole archive was read (no 'from xz block' line): $(tr '\n' ' ' <"$log")"
	fi
	rm -rf "$src" "$tmp/b-$series"
done

# No source of the kernel's series: a refusal that says what to install,
# at the top of make.log too, and nothing extracted.
mkdir -p "$tmp/none" "$tmp/empty"
if (cd "$tmp/none" && VHOST_BLK_SRC_DIR=$tmp/empty bash "$script" 9.9.1-amd64) \
	>"$tmp/none.log" 2>&1; then
	not_ok "no source: dkms-vhost-h.sh succeeded"
elif grep -q 'install linux-source-9.9' "$tmp/none.log" &&
     grep -q 'install linux-source-9.9' "$tmp/none/make.log" &&
     [ ! -e "$tmp/none/linux-source/drivers/vhost/vhost.h" ]; then
	ok "no source: refused, naming linux-source-9.9, in make.log too"
else
	not_ok "no source: no clear refusal: $(tr '\n' ' ' <"$tmp/none.log")"
fi
echo "1..$n"
exit "$failed"
