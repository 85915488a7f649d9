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
set -euo pipefail

kver=${1:?usage: dkms-vhost-h.sh KERNELRELEASE}

fail() {
	local line

	for line in "$@"; do
		printf 'vhost-blk: %s\n' "$line" >&2
		printf 'vhost-blk: %s\n' "$line" >>make.log
	done
	exit 1
}

if ! [[ $kver =~ ^([0-9]+)\.([0-9]+)[.+~-] ]]; then
	fail "cannot read a major.minor version from kernel release '$kver'"
fi
series=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
tarball=/usr/src/linux-source-$series.tar.xz

if [ ! -f "$tarball" ]; then
	shopt -s nullglob
	have=(/usr/src/linux-source-*.tar.xz)
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
# --occurrence: stop reading the 150 MB archive once the header is out.
if ! tar -xJf "$tarball" -C linux-source --strip-components=1 \
	--occurrence=1 "linux-source-$series/drivers/vhost/vhost.h"; then
	fail "cannot extract linux-source-$series/drivers/vhost/vhost.h from $tarball"
fi
[ -f linux-source/drivers/vhost/vhost.h ] ||
	fail "$tarball has no linux-source-$series/drivers/vhost/vhost.h"
echo "vhost-blk: drivers/vhost/vhost.h of Linux $series from $tarball"
