#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run a command inside the Debian 13 build root of scripts/mainline.sh,
# with a directory of the host bind-mounted at /build in it: the root's
# own compiler, kbuild and headers run on the root's own glibc, in a
# private mount namespace, so nothing is left mounted and concurrent runs
# (several clones) do not see each other.
set -euo pipefail

usage() {
	cat <<EOF2
Usage: ${0##*/} ROOT DIR [--] COMMAND [ARGS...]

Run COMMAND (as root, in a private mount namespace) chrooted into ROOT,
with DIR bind-mounted at /build and /proc mounted.  Example, as
'make module-7.3' does it:

  ${0##*/} \$KROOT_73 build -- make -C /usr/src/linux-headers-\$KREL_73 \\
	M=/build/module-7.3 KSRC=/build/linux-source-7.3 modules
EOF2
}

case "${1:-}" in
-h|--help) usage; exit 0 ;;
esac
[ $# -ge 3 ] || { usage >&2; exit 2; }
root=$1 dir=$2
shift 2
[ "${1:-}" = -- ] && shift
[ -f "$root/.complete" ] || { echo "in-root: $root is not a complete build root: run 'make deps'" >&2; exit 1; }
[ -d "$dir" ] || { echo "in-root: $dir: no such directory" >&2; exit 1; }
dir=$(cd "$dir" && pwd -P)
mkdir -p "$root/build"
exec unshare -m --propagation private -- bash -c '
	mount --bind "$2" "$1/build" && mount -t proc proc "$1/proc" || exit 1
	root=$1
	shift 2
	exec chroot "$root" "$@"' in-root "$root" "$dir" "$@"
