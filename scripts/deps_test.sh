#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The release picker of scripts/deps.sh (deps.sh --pick-release) against a
# fake apt-cache, with the deb-src entries a developer's sources.list often
# has: 'apt-cache madison' then lists source packages too ("... Sources"),
# and enough of them that a reader which stops early (grep -q, head)
# kills apt-cache with SIGPIPE, which set -o pipefail turns into a failure.
# Prints TAP.  No root, no network, nothing installed.
#
# Usage: deps_test.sh [-h|--help]

set -u

case "${1:-}" in
-h|--help)
	sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 0 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

# The fake: FAKE_APT (a directory) holds one file per package name with
# the lines 'madison' prints for it, and 'pkgnames' with every name.
# Each answer is followed by 4000 Sources lines of noise (about 300 KB,
# more than a pipe holds).
cat >"$tmp/bin/apt-cache" <<'EOT'
#!/bin/bash
noise() {
	local i
	for ((i = 0; i < 4000; i++)); do
		echo "  linux-signed-amd64 | 6.12.$i-1~deb12u1 | http://deb.debian.org/debian bookworm-backports/main Sources"
	done
}
case "$1" in
pkgnames) grep "^$2" "$FAKE_APT/pkgnames"; noise | sed 's/ |.*//' ;;
madison)  [ -f "$FAKE_APT/$2" ] && cat "$FAKE_APT/$2"; noise ;;
*)        echo "fake apt-cache: $*" >&2; exit 2 ;;
esac
EOT
chmod +x "$tmp/bin/apt-cache"

n=0
failed=0
tap() {		# tap ok|not ok NAME [DIAG]
	n=$((n + 1))
	echo "$1 $n - $2"
	[ "$1" = ok ] || { failed=1; [ -n "${3:-}" ] && echo "# $3"; }
}

pkg() {		# pkg DIR NAME VERSION KIND(Packages|Sources)
	printf ' %s | %s | http://deb.debian.org/debian bookworm-backports/main amd64 %s\n' \
		"$2" "$3" "$4" >>"$1/$2"
	grep -qx "$2" "$1/pkgnames" 2>/dev/null || echo "$2" >>"$1/pkgnames"
}

# run NAME WANT: deps.sh --pick-release against $tmp/NAME
run() {
	local got rc

	got=$(FAKE_APT=$tmp/$1 PATH=$tmp/bin:$PATH BUILD=$tmp/build \
		VHOST_BLK_KREL= VHOST_BLK_KREL_61= \
		bash "$here/deps.sh" --pick-release "${3:-6.12}" 2>"$tmp/$1.err")
	rc=$?
	if [ "$rc" = 0 ] && [ "$got" = "$2" ]; then
		tap ok "$1: picks '$2'"
	else
		tap "not ok" "$1: picks '$2'" \
			"got '$got', status $rc: $(tr '\n' ' ' <"$tmp/$1.err")"
	fi
}

# 1. Everything for 6.12.118 is served, each also as a source (deb-src),
#    the source entry of the image listed first.
d=$tmp/all-served
mkdir -p "$d"
pkg "$d" linux-image-6.12.118+deb12-amd64-unsigned 6.12.118-9~src Sources
pkg "$d" linux-image-6.12.118+deb12-amd64-unsigned 6.12.118-1~deb12u1 Packages
pkg "$d" linux-headers-6.12.118+deb12-amd64 6.12.118-1~deb12u1 Packages
pkg "$d" linux-headers-6.12.118+deb12-amd64 6.12.118-1~deb12u1 Sources
pkg "$d" linux-source-6.12 6.12.118-1~deb12u1 Packages
pkg "$d" linux-source-6.12 6.12.118-1~deb12u1 Sources
run all-served 6.12.118+deb12-amd64

# 2. 6.12.119 has an image, but its headers only as a source: take 118.
d=$tmp/headers-only-as-source
mkdir -p "$d"
cp "$tmp/all-served"/* "$d/"
pkg "$d" linux-image-6.12.119+deb12-amd64-unsigned 6.12.119-1~deb12u1 Packages
pkg "$d" linux-headers-6.12.119+deb12-amd64 6.12.119-1~deb12u1 Sources
pkg "$d" linux-source-6.12 6.12.119-1~deb12u1 Packages
run headers-only-as-source 6.12.118+deb12-amd64

# 3. 6.12.119's source package is only there as a deb-src version that
#    differs: take 118.
d=$tmp/source-version-differs
mkdir -p "$d"
cp "$tmp/all-served"/* "$d/"
pkg "$d" linux-image-6.12.119+deb12-amd64-unsigned 6.12.119-1~deb12u1 Packages
pkg "$d" linux-headers-6.12.119+deb12-amd64 6.12.119-1~deb12u1 Packages
pkg "$d" linux-source-6.12 6.12.119-2~src Sources
run source-version-differs 6.12.118+deb12-amd64

# 4. Nothing complete: no release, and deps.sh says so (empty answer).
d=$tmp/nothing
mkdir -p "$d"
pkg "$d" linux-image-6.12.118+deb12-amd64-unsigned 6.12.118-1~deb12u1 Packages
run nothing ""

# 5. The 6.1 series, beside 6.12 and the cloud and rt flavours: the newest
#    6.1.0-N whose source is served, never a 6.12 release.
d=$tmp/series-6.1
mkdir -p "$d"
cp "$tmp/all-served"/* "$d/"
pkg "$d" linux-image-6.1.0-56-amd64-unsigned 6.1.192-2 Packages
pkg "$d" linux-headers-6.1.0-56-amd64 6.1.192-2 Packages
pkg "$d" linux-image-6.1.0-57-amd64-unsigned 6.1.192-3 Packages
pkg "$d" linux-headers-6.1.0-57-amd64 6.1.192-3 Packages
pkg "$d" linux-image-6.1.0-58-cloud-amd64-unsigned 6.1.193-1 Packages
pkg "$d" linux-headers-6.1.0-58-cloud-amd64 6.1.193-1 Packages
pkg "$d" linux-source-6.1 6.1.192-2 Packages
pkg "$d" linux-source-6.1 6.1.193-1 Packages
pkg "$d" linux-source-6.1 6.1.192-3 Sources
run series-6.1 6.1.0-56-amd64 6.1
cp -r "$d" "$tmp/series-6.1-keeps-6.12"
run series-6.1-keeps-6.12 6.12.118+deb12-amd64 6.12

echo "1..$n"
exit $failed
