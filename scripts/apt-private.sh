# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# A private apt state for suites of another release (trixie, or
# bookworm-backports), so that their packages can be downloaded and
# unpacked without touching the host's own sources or packages: a sources
# list, lists, status and cache of its own under the machine cache.
# Sourced by scripts/mainline.sh and scripts/qemu10.sh, which define log
# and die:
#
#   apt_private_setup DIR MIRROR KEYRING SUITE...
#                        set it up in DIR (main of each SUITE), refresh its
#                        lists once a day at most; sets apt_opts
#   apt_private ARGS...        apt-get with it
#   apt_private_cache ARGS...  apt-cache with it
#   apt_private_versions PKG   the versions of binary package PKG it serves

apt_opts=()

apt_private_setup() {
	local dir=$1 mirror=$2 keyring=$3 suite newest

	shift 3
	apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list"
		  -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$dir/lists"
		  -o "Dir::State::status=$dir/status" -o "Dir::Cache=$dir/cache"
		  -o APT::Sandbox::User=root)
	[ -f "$keyring" ] || die "$keyring not found (debian-archive-keyring)"
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" ||
		die "mkdir $dir failed"
	touch "$dir/status"
	for suite in "$@"; do
		echo "deb [signed-by=$keyring] $mirror $suite main"
	done >"$dir/sources.list.new"
	mv "$dir/sources.list.new" "$dir/sources.list"
	# The last suite's Release file stands for all: refreshed together.
	for suite in "$@"; do newest=$suite; done
	if [ -z "$(find "$dir/lists" -maxdepth 1 -name "*_${newest}_InRelease" -mmin -1440)" ]; then
		log "apt-get update ($*)"
		apt_private update -qq >/dev/null ||
			die "apt-get update of $dir failed"
	fi
}

apt_private() { apt-get "${apt_opts[@]}" "$@"; }
apt_private_cache() { apt-cache "${apt_opts[@]}" "$@"; }

apt_private_versions() {
	apt_private_cache madison "$1" |
		awk -F'|' '$3 ~ / Packages[[:space:]]*$/ { gsub(/[[:space:]]/, "", $2); print $2 }'
}
